"""The warm launch path of `JITFunction.run`: a launch whose arguments, options and global
state match an earlier one skips selection, specialization and the cache key, and every change
that can alter the compiled kernel or its launch still takes the full path."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad import knobs

pytestmark = pytest.mark.shipped_backends

SCALE = tl.constexpr(2)


@naiad.jit
def scaled_add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask)
    b = tl.load(y + offs, mask=mask)
    tl.store(out + offs, (a + b) * SCALE, mask=mask)


@naiad.jit
def store_n(out, n):
    tl.store(out + tl.arange(0, 1), (tl.zeros((1,), tl.int64) + n))


@naiad.jit
def tuple_sum(out, pair):
    a, b = pair
    tl.store(out + tl.arange(0, 1), tl.zeros((1,), tl.int64) + a + b)


@pytest.fixture(autouse=True)
def _cold():
    """Each test starts with no warm launch remembered."""
    for kernel in (scaled_add, store_n, tuple_sum):
        kernel._fast.clear()


def _arrays(dtype=np.float32, n=64):
    x = np.arange(n).astype(dtype)
    y = np.ones(n, dtype)
    return x, y, np.zeros(n, dtype)


def test_warm_launches_take_the_fast_path(slow):
    x, y, o = _arrays()
    for _ in range(5):
        o[:] = 0
        scaled_add[(1,)](x, y, o, 64, BLOCK=64)
        np.testing.assert_array_equal(o, (x + y) * 2)
    assert len(slow) == 1


def test_new_arrays_of_the_same_kind_stay_fast(slow):
    for _ in range(3):
        x, y, o = _arrays()
        scaled_add[(1,)](x, y, o, 64, BLOCK=64)
        np.testing.assert_array_equal(o, (x + y) * 2)
    assert len(slow) <= 1


def test_dtype_change_recompiles(slow):
    x, y, o = _arrays(np.float32)
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    x, y, o = _arrays(np.float64)
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    np.testing.assert_array_equal(o, (x + y) * 2)
    assert len(slow) == 2
    assert any("*fp64" in k for k in scaled_add.cache) and any("*fp32" in k for k in scaled_add.cache)


def test_alignment_change_takes_the_full_path(slow):
    base = np.zeros(80, np.float32)
    aligned = base[(-base.ctypes.data % 16) // 4:][:64]
    assert aligned.ctypes.data % 16 == 0
    x, y, _ = _arrays()
    scaled_add[(1,)](x, y, aligned, 64, BLOCK=64)
    unaligned = aligned[1:]
    scaled_add[(1,)](x, y, unaligned, 63, BLOCK=64)
    np.testing.assert_array_equal(unaligned, (x[:63] + y[:63]) * 2)
    assert len(slow) == 2
    scaled_add[(1,)](x, y, unaligned, 63, BLOCK=64)
    assert len(slow) == 2


@pytest.mark.parametrize("values", [(1, 2, 2**40), (2**40, 2, 1), (2, 32, 1)])
def test_int_bucket_changes_take_the_full_path(slow, values):
    out = np.zeros(1, np.int64)
    for n in values:
        store_n[(1,)](out, n)
        assert out[0] == n
    assert len(slow) == len(values)
    for n in values:
        store_n[(1,)](out, n)
        assert out[0] == n
    assert len(slow) == len(values)
    store_n[(1,)](out, 3)           # same bucket as 2 (i32, not divisible by 16)
    assert out[0] == 3
    if 2 in values:
        assert len(slow) == len(values)


def test_constexpr_value_change_recompiles(slow):
    x, y, o = _arrays()
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    o[:] = 0
    scaled_add[(2,)](x, y, o, 64, BLOCK=32)
    np.testing.assert_array_equal(o, (x + y) * 2)
    assert len(slow) == 2


def test_global_change_recompiles(slow, monkeypatch):
    x, y, o = _arrays()
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    import sys

    monkeypatch.setattr(sys.modules[__name__], "SCALE", tl.constexpr(3))
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    np.testing.assert_array_equal(o, (x + y) * 3)
    assert len(slow) == 2


def test_options_change_takes_the_full_path(slow):
    x, y, o = _arrays()
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    scaled_add[(1,)](x, y, o, 64, BLOCK=64, num_warps=8)
    scaled_add[(1,)](x, y, o, 64, BLOCK=64, num_warps=8)
    assert len(slow) == 2
    assert any("num_warps" in k for k in scaled_add.cache)


def test_debug_knob_change_recompiles(slow):
    x, y, o = _arrays()
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    kernel = scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    assert not kernel.metadata["debug"]
    with knobs.runtime.scope():
        knobs.runtime.debug = True
        kernel = scaled_add[(1,)](x, y, o, 64, BLOCK=64)
        assert kernel.metadata["debug"]
    kernel = scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    assert not kernel.metadata["debug"]
    assert len(slow) == 2           # the first kernel's warm launch is still remembered


def test_fp_fusion_knob_change_takes_the_full_path(slow):
    # The knob is an option default a backend reads when compiling (cuda: fma or not), so a
    # warm launch prepared under one value must not serve the other.
    x, y, o = _arrays()
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    with knobs.language.scope():
        knobs.language.default_fp_fusion = False
        scaled_add[(1,)](x, y, o, 64, BLOCK=64)
        assert len(slow) == 2
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    assert len(slow) == 2
    np.testing.assert_array_equal(o, (x + y) * 2)


def test_debug_bounds_checks_still_raise_on_the_warm_path():
    from naiad.errors import NaiadError

    x, y, o = _arrays(n=16)
    with knobs.runtime.scope():
        knobs.runtime.debug = True
        for _ in range(2):
            with pytest.raises(NaiadError, match="out-of-bounds"):
                scaled_add[(1,)](x, y, o, 64, BLOCK=64)


def test_backend_selection_change_takes_the_full_path(slow, monkeypatch):
    x, y, o = _arrays()
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    with naiad.set_backend("cpu"):
        scaled_add[(1,)](x, y, o, 64, BLOCK=64)
        assert len(slow) == 2
        scaled_add[(1,)](x, y, o, 64, BLOCK=64)
        assert len(slow) == 2
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "cpu")
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    assert len(slow) == 3
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "nosuchbackend")
    with pytest.raises(naiad.errors.BackendSelectionError):
        scaled_add[(1,)](x, y, o, 64, BLOCK=64)


def test_cleared_cache_recompiles(slow):
    x, y, o = _arrays()
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    scaled_add.cache.clear()
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)
    assert len(slow) == 2


def test_hooks_and_grid_callables_run_on_the_warm_path(slow):
    x, y, o = _arrays()
    seen, grids = [], []
    scaled_add.add_pre_run_hook(lambda *a, **k: seen.append("pre"))
    try:
        enter = lambda metadata: seen.append(("enter", metadata["grid"]))  # noqa: E731
        with knobs.runtime.scope():
            knobs.runtime.launch_enter_hook = enter
            for _ in range(2):
                scaled_add[lambda meta: grids.append(meta["BLOCK"]) or (1,)](x, y, o, 64, BLOCK=64)
    finally:
        scaled_add.pre_run_hooks.clear()
    assert seen == ["pre", ("enter", (1, 1, 1))] * 2
    assert grids == [64, 64]
    assert len(slow) == 1


def test_tuple_arguments(slow):
    out = np.zeros(1, np.int64)
    for pair, calls in [((2, 3), 1), ((2, 3), 1), ((5, 7), 1), ((1, 3), 2), ((2, 2**40), 3)]:
        tuple_sum[(1,)](out, pair)
        assert out[0] == sum(pair)
        assert len(slow) == calls


def test_wrapper_and_torch_arguments(slow):
    torch = pytest.importorskip("torch")
    from naiad.runtime.jit import reinterpret

    x, y, o = (torch.from_numpy(a) for a in _arrays(np.int32))
    for _ in range(2):
        scaled_add[(1,)](*(reinterpret(a, tl.uint32) for a in (x, y, o)), 64, BLOCK=64)
        assert torch.equal(o, (x + y) * 2)
    assert len(slow) == 1
    o.zero_()
    scaled_add[(1,)](x, y, o, 64, BLOCK=64)          # the same tensors, unwrapped: int32
    assert torch.equal(o, (x + y) * 2)
    assert len(slow) == 2
    assert any("*u32" in k for k in scaled_add.cache) and any("*i32" in k for k in scaled_add.cache)


def test_torch_tensors_are_keyed_by_dtype_device_and_alignment(slow):
    """A torch tensor's address is read once by the launch entry and handed to the launcher;
    the key still separates dtypes and alignments (a view 4 bytes in is not 16-byte aligned)."""
    torch = pytest.importorskip("torch")
    base = torch.arange(80, dtype=torch.float32)
    y, o = torch.ones(64), torch.empty(64)
    for _ in range(2):
        scaled_add[(1,)](base[:64], y, o, 64, BLOCK=64)
        assert torch.equal(o, (base[:64] + 1) * 2)
    assert len(slow) == 1
    for _ in range(2):
        scaled_add[(1,)](base[1:65], y, o, 64, BLOCK=64)
        assert torch.equal(o, (base[1:65] + 1) * 2)
    assert len(slow) == 2
    scaled_add[(1,)](base.double()[:64], y.double(), o.double(), 64, BLOCK=64)
    assert len(slow) == 3
    assert sum("*fp64" in k for k in scaled_add.cache) == 1


@naiad.jit
def axpy(x, out, n, alpha=2.0, BLOCK: tl.constexpr = 64):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * alpha, mask=mask)


@naiad.jit
def named_like_the_binder(_naiad_grid, n):
    tl.store(_naiad_grid + tl.arange(0, 1), tl.zeros((1,), tl.int64) + n)


@pytest.mark.parametrize("call", [
    lambda x, o: axpy[(1,)](x, o, 40),
    lambda x, o: axpy[(1,)](x, o, 40, 2.0),
    lambda x, o: axpy[(1,)](x, out=o, n=40),
    lambda x, o: axpy[(1,)](n=40, out=o, x=x, BLOCK=64),
    lambda x, o: axpy[lambda meta: (meta["BLOCK"] // 64,)](x, o, 40, alpha=2.0),
])
def test_keywords_and_defaults_take_the_fast_path(slow, call):
    x = np.arange(64, dtype=np.float32)
    for _ in range(3):
        o = np.zeros(64, np.float32)
        call(x, o)
        np.testing.assert_array_equal(o, np.where(np.arange(64) < 40, x * 2, 0))
    assert len(slow) == 1


def test_a_parameter_named_like_the_binders_names_still_launches(slow):
    out = np.zeros(1, np.int64)
    for n in (5, 6):
        named_like_the_binder[(1,)](out, n)
        assert out[0] == n
    assert len(slow) == 2


def test_wrong_arguments_on_a_warm_kernel_still_get_the_launch_error():
    x = np.arange(64, dtype=np.float32)
    o = np.zeros(64, np.float32)
    axpy[(1,)](x, o, 40)
    with pytest.raises(naiad.errors.NaiadError, match="missing a value for parameter 'n'"):
        axpy[(1,)](x, o)
    with pytest.raises(naiad.errors.NaiadError, match="got two values for parameter 'x'"):
        axpy[(1,)](x, o, 40, x=x)
    with pytest.raises(naiad.errors.NaiadError, match="got two values for parameter 'n'"):
        axpy[(1,)](x, o, 40, BLOCK=64, n=40)
    with pytest.raises(naiad.errors.NaiadError, match="takes 5 arguments but 6 were given"):
        axpy[(1,)](x, o, 40, 2.0, 64, 7)
    with pytest.raises(naiad.errors.NaiadError, match="missing a value for parameter 'out'"):
        axpy.run(x, n=40, grid=(1,), warmup=False)


def test_numpy_addresses_read_directly_match_ctypes():
    from naiad.runtime.array_address import numpy_address

    base = np.arange(97, dtype=np.float64)
    arrays = [base, base[5:], base[::3], base[90:2:-2], np.zeros((4, 6), np.int8).T[1:],
              np.empty(0, np.float16), np.frombuffer(b"abcdefgh", np.uint8)[3:], np.ones(())]
    for a in arrays:
        assert numpy_address(a) == a.ctypes.data


@naiad.jit
def no_parameters():
    pass


def test_a_kernel_without_parameters_launches_and_says_what_is_wrong(slow):
    for _ in range(2):
        no_parameters[(1,)]()
    assert len(slow) == 1
    with pytest.raises(naiad.errors.NaiadError, match="takes 0 arguments but 1 were given"):
        no_parameters[(1,)](5)


@naiad.jit
def shadowing_builtins(out, type: tl.constexpr, len, tuple, int, callable, dict):
    tl.store(out + tl.arange(0, 1), tl.zeros((1,), tl.int64) + type + len + tuple + int + callable + dict)


def test_parameters_named_like_builtins_launch(slow):
    """The generated launch code must not see a parameter called `type` (Triton's test_call has
    one) as the builtin."""
    out = np.zeros(1, np.int64)
    for _ in range(2):
        shadowing_builtins[(1,)](out, 1, 2, 3, 4, 5, 6)
        assert out[0] == 21
    assert len(slow) == 1
