"""The native launch entry (`naiad.runtime.native_entry`): warm launches on the CPU backend
run as machine code, give the same results as numpy, and everything the builtin does not
recognize -- a new kind of argument, a changed global or knob, a hook, a bad grid -- reaches
the Python path, which launches it or says what is wrong."""

from __future__ import annotations

import ctypes
import sys
import threading

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad import knobs
from naiad.errors import LaunchError
from naiad.runtime import native_code
from naiad.runtime.jit import JITFunction

pytestmark = [pytest.mark.shipped_backends,
              pytest.mark.skipif(not native_code.available(), reason="no native entries here")]

OFFSET = tl.constexpr(0)


@naiad.jit
def axpy(x, y, out, alpha, n, BLOCK: tl.constexpr, SQUARE: tl.constexpr = False):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask)
    if SQUARE:
        a = a * a
    tl.store(out + offs, alpha * a + tl.load(y + offs, mask=mask) + OFFSET, mask=mask)


@naiad.jit
def scalars(out, i, big: tl.int64, f, flag, dtype: tl.constexpr):
    value = tl.zeros((1,), dtype) + i + big + f
    if flag:
        value = -value
    tl.store(out + tl.arange(0, 1), value.to(out.dtype.element_ty))


@naiad.jit
def checked_gather(x, index, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    i = tl.load(index + offs, mask=offs < n, other=0)
    tl.device_assert(i < n, "index out of range")
    tl.store(out + offs, tl.load(x + i, mask=offs < n), mask=offs < n)


@pytest.fixture(autouse=True)
def _fresh():
    for kernel in (axpy, scalars, checked_gather):
        kernel.cache.clear()
        kernel._fast.clear()
    yield


@pytest.fixture
def native_only(monkeypatch):
    """After it is called, a launch that leaves the native entry fails the test."""
    def forbid():
        def fell_back(self, *args, **kwargs):
            raise AssertionError(f"{self.__name__}: the launch took the Python path")
        for kernel in (axpy, scalars, checked_gather):
            kernel._fast.clear()                # the Python entry's warm path is gone too
        monkeypatch.setattr(JITFunction, "_run_slow", fell_back)
    return forbid


def _axpy_reference(x, y, alpha, n, square=False):
    a = x[:n].astype(np.float64)
    return (alpha * (a * a if square else a) + y[:n]).astype(x.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
@pytest.mark.parametrize("n", [1, 17, 64, 1000])
def test_warm_launches_run_natively_and_match_numpy(native_only, dtype, n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 10).astype(dtype)
    y = (rng.standard_normal(n) * 10).astype(dtype)
    out = np.zeros_like(x)
    alpha = 3 if dtype == np.int32 else 0.5
    launch = axpy[(naiad.cdiv(n, 64),)]
    launch(x, y, out, alpha, n, BLOCK=64)
    launch(x, y, out, alpha, n, BLOCK=64)        # the first repetition compiles the variant
    assert axpy._native.entry is not None and axpy._native.error is None
    native_only()
    for _ in range(3):
        out[:] = 0
        launch(x, y, out, alpha, n, BLOCK=64)
        np.testing.assert_allclose(out, _axpy_reference(x, y, alpha, n), rtol=2e-3)


def test_keywords_defaults_options_and_grid_callables_stay_native(native_only):
    n = 300
    x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    out = np.zeros_like(x)
    grid = lambda meta: (naiad.cdiv(meta["n"], meta["BLOCK"]),)  # noqa: E731
    calls = [lambda: axpy[grid](x, y, out, 2.0, n, BLOCK=128, SQUARE=True, num_warps=2),
             lambda: axpy[grid](x, y, out, n=n, alpha=2.0, BLOCK=128, SQUARE=True, num_warps=2),
             lambda: axpy[grid](x, y, out, 2.0, n, 128, True, num_warps=2),
             lambda: axpy[(3,)](x, y, out, 2.0, n, BLOCK=128)]
    for call in calls + calls:
        call()
    native_only()
    expected = {True: _axpy_reference(x, y, 2.0, n, square=True), False: _axpy_reference(x, y, 2.0, n)}
    for call, square in zip(calls, (True, True, True, False)):
        out[:] = 0
        assert call() is not None
        np.testing.assert_allclose(out, expected[square])


def test_every_scalar_kind(native_only):
    out = np.zeros(1, np.float32)
    values = [(5, 2**40, 0.25, False), (-7, -(2**40), 1.5, True), (32, 2**33, -2.0, False)]
    for i, big, f, flag in values + values:               # prepare, then compile each
        scalars[(1,)](out, i, big, f, flag, tl.float64)
    native_only()
    for i, big, f, flag in values:
        scalars[(1,)](out, i, big, f, flag, tl.float64)
        expected = np.float32((i + big + f) * (-1 if flag else 1))
        assert out[0] == expected, (i, big, f, flag)


def test_unrecognized_arguments_take_the_python_path_and_its_errors():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    axpy[(1,)](x, x, out, 1.0, 64, BLOCK=64)
    axpy[(1,)](x, x, out, 1.0, 64, BLOCK=64)
    assert axpy._native.entry is not None
    frozen = out.copy()
    frozen.flags.writeable = False
    with pytest.raises(LaunchError, match="read-only"):
        axpy[(1,)](x, x, frozen, 1.0, 64, BLOCK=64)
    with pytest.raises(LaunchError, match="missing a value for parameter 'n'"):
        axpy[(1,)](x, x, out, 1.0, BLOCK=64)
    with pytest.raises(LaunchError, match="got two values for parameter 'n'"):
        axpy[(1,)](x, x, out, 1.0, 64, n=64, BLOCK=64)
    with pytest.raises(LaunchError, match="unknown keyword argument 'BLOK'"):
        axpy[(1,)](x, x, out, 1.0, 64, BLOCK=64, BLOK=64)
    view = x[1:]                                          # unaligned: another specialization
    axpy[(1,)](view, view, out, 1.0, 63, BLOCK=64)
    np.testing.assert_allclose(out[:63], view * 2)
    with pytest.raises(OverflowError):                    # fp32 scalar out of range
        axpy[(1,)](x, x, out, 1e300, 64, BLOCK=64)


@pytest.mark.parametrize("grid, message", [
    ((-1,), "grid dimension 0 is -1"), ((2**40,), "grid dimension 0 is 1099511627776"),
    ((1.5,), "grid dimension 0 is 1.5"), ([1, 2, 3, 4], "with 4 dimensions"),
    (lambda meta: 4.0, "the grid callable returned 4.0")])
def test_bad_grids_get_the_python_paths_errors(grid, message):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    for _ in range(2):
        axpy[(1,)](x, x, out, 1.0, 64, BLOCK=64)
    with pytest.raises(LaunchError, match=message.replace("(", "\\(").replace(")", "\\)")):
        axpy[grid](x, x, out, 1.0, 64, BLOCK=64)


def test_an_empty_grid_runs_nothing_and_a_grid_callables_error_propagates():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    for _ in range(2):
        axpy[(1,)](x, x, out, 1.0, 64, BLOCK=64)
    out[:] = 7
    axpy[(0,)](x, x, out, 1.0, 64, BLOCK=64)
    assert (out == 7).all()

    def broken(meta):
        raise KeyError("no such meta-parameter")
    with pytest.raises(KeyError, match="no such meta-parameter"):
        axpy[broken](x, x, out, 1.0, 64, BLOCK=64)


def test_a_failed_assertion_is_reported_from_the_native_path(native_only):
    """``debug=True`` compiles the assertions in without bounds checks (Inductor's way): the
    launch stays native and its report is raised."""
    x = np.arange(16, dtype=np.float32)
    out = np.zeros_like(x)
    good, bad = np.arange(16, dtype=np.int32)[::-1].copy(), np.arange(16, dtype=np.int32)
    bad[5] = 99
    checked_gather[(1,)](x, good, out, 16, BLOCK=16, debug=True)
    checked_gather[(1,)](x, good, out, 16, BLOCK=16, debug=True)
    native_only()
    checked_gather[(1,)](x, good, out, 16, BLOCK=16, debug=True)
    np.testing.assert_array_equal(out, x[::-1])
    with pytest.raises(Exception, match="device assertion failed in kernel 'checked_gather'.*index "
                                        "out of range"):
        checked_gather[(1,)](x, bad, out, 16, BLOCK=16, debug=True)
    checked_gather[(1,)](x, good, out, 16, BLOCK=16, debug=True)      # and runs on


def test_changes_of_state_reach_the_python_path(monkeypatch, slow):
    """A global, a knob, a hook: each makes the builtin step aside, for the full path."""
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    run = lambda: axpy[(1,)](x, x, out, 1.0, 64, BLOCK=64)  # noqa: E731

    def full_paths(change=lambda: None):
        before = len(slow)
        change()
        run()
        return len(slow) - before
    first = run()
    assert full_paths() == 0 and axpy._native.entry is not None
    offset = OFFSET
    monkeypatch.setitem(axpy.__globals__, "OFFSET", tl.constexpr(100))
    assert full_paths() == 1 and out[3] == 106 and full_paths() == 0
    monkeypatch.setitem(axpy.__globals__, "OFFSET", offset)
    assert full_paths() == 1 and out[3] == 6 and run() is first
    with knobs.language.scope():
        assert full_paths(lambda: setattr(knobs.language, "default_fp_fusion", False)) == 1
        assert full_paths() == 0
    assert full_paths(lambda: monkeypatch.setenv("NAIAD_DEFAULT_FP_FUSION", "0")) == 1
    monkeypatch.delenv("NAIAD_DEFAULT_FP_FUSION")
    with naiad.set_backend("cpu"):
        assert full_paths() == 1 and full_paths() == 0
    seen = []
    hook = lambda metadata: seen.append("enter")  # noqa: E731
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        run()
        run()
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert seen == ["enter", "enter"]
    axpy.add_pre_run_hook(lambda *args, **kwargs: seen.append("pre"))
    try:
        run()
        assert seen == ["enter", "enter", "pre"]
    finally:
        axpy.pre_run_hooks.clear()
    assert out[3] == 6


def test_a_launch_entry_held_since_before_the_first_launch_goes_native(native_only):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    launch = axpy[(1,)]                      # the Python entry: no builtin yet
    launch(x, x, out, 1.0, 64, BLOCK=64)
    launch(x, x, out, 1.0, 64, BLOCK=64)
    native_only()
    out[:] = 0
    launch(x, x, out, 1.0, 64, BLOCK=64)
    np.testing.assert_array_equal(out, 2 * x)


def test_threads_launch_concurrently():
    n = 256
    xs = [np.full(n, i, np.float32) for i in range(4)]
    outs = [np.zeros(n, np.float32) for _ in range(4)]
    axpy[(4,)](xs[0], xs[0], outs[0], 1.0, n, BLOCK=64)
    errors = []

    def work(i):
        try:
            for _ in range(200):
                axpy[(4,)](xs[i], xs[i], outs[i], 2.0, n, BLOCK=64)
                assert (outs[i] == 3 * i).all()
        except Exception as e:       # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_no_references_leak():
    torch = pytest.importorskip("torch")
    arrays = [np.arange(64, dtype=np.float32), torch.arange(64, dtype=torch.float32)]
    grid = lambda meta: (1,)  # noqa: E731
    for x in arrays:
        out = x * 0
        for g in ((1,), grid):
            launch = axpy[g]
            launch(x, x, out, 1.0, 64, BLOCK=64)
            kernel = launch(x, x, out, 1.0, 64, BLOCK=64)
            counts = [sys.getrefcount(o) for o in (x, out, g, kernel)]
            for _ in range(2000):
                launch(x, x, out, 1.0, 64, BLOCK=64)
            assert [sys.getrefcount(o) for o in (x, out, g, kernel)] == counts


def test_torch_tensors_run_natively(native_only):
    torch = pytest.importorskip("torch")
    x = torch.linspace(-3, 3, 100)
    out = torch.zeros(100)
    axpy[(2,)](x, x, out, 0.5, 100, BLOCK=64)
    axpy[(2,)](x, x, out, 0.5, 100, BLOCK=64)
    native_only()
    out.zero_()
    axpy[(2,)](x, x, out, 0.5, 100, BLOCK=64)
    torch.testing.assert_close(out, 1.5 * x)


# -- the builder itself: guards and arguments, with a recording fallback -----------------------
class _Launch:
    """A native launch that launches nothing: stores the first slot and the grid where the
    test reads them, and returns the code in ``code[0]``."""
    def __init__(self, slots):
        self.slots = slots
        self.seen = (ctypes.c_int64 * 4)()
        self.code = (ctypes.c_int64 * 1)()
        self.errors = []

    def emit(self, f, slots, gx, gy, gz, not_here):
        values = [f.load("i64", slots)] if self.slots else ["0"]
        for i, value in enumerate(values + [gx, gy, gz]):
            f(f"store i64 {value}, ptr inttoptr (i64 {ctypes.addressof(self.seen) + 8 * i} to ptr)")
        return f.load("i64", f"inttoptr (i64 {ctypes.addressof(self.code)} to ptr)")

    def error(self, code, grid):
        self.errors.append((code, grid))
        raise RuntimeError(f"launch failed with {code} on {grid}")


def _entry(params, variants_params, guards=(), defaults=None, options=()):
    from naiad.runtime.native_entry import Guard, Variant, VariantTable, dispatcher, variant_function

    calls = []
    launch = _Launch([(0, "i64")] if any(e[0] == "int" for e in variants_params[0]) else [])
    kernel = object()
    variants = [Variant((), tuple(p), tuple(options), tuple(Guard(*g) for g in guards),
                        (2**31 - 1, 65535, 65535), None, launch, kernel) for p in variants_params]
    compiled = [variant_function(params, v) for v in variants]
    table = VariantTable(4)
    table.set([address for _, address in compiled])
    entry = dispatcher("k", params, defaults or {}, _MISSING_MARK, table,
                       lambda *args, **kwargs: calls.append((args, kwargs)) or "fell back")
    return entry, (compiled, table), calls, launch, kernel


_MISSING_MARK = object()


def test_guards_of_every_kind_make_the_builder_fall_back():
    state = {"key": "value", "n": 3}

    class Holder:
        items = []
        flag = None
    holder = Holder()
    guards = [(state, (("item", "key"),), "eq", "value"), (state, (("item", "absent"),), "missing"),
              (holder, (("attr", "items"),), "empty"), (holder, (("attr", "flag"),), "is", None),
              (lambda: False, (("call",),), "is", False)]
    entry, keep, calls, launch, kernel = _entry(["n"], [[("int", 32, False, "i64")]], guards)
    assert entry((2,), False, 7) is kernel and calls == [] and list(launch.seen) == [7, 2, 1, 1]
    for change, undo in [(lambda: state.update(key="other"), lambda: state.update(key="value")),
                         (lambda: state.update(absent=1), lambda: state.pop("absent")),
                         (lambda: holder.items.append(1), lambda: holder.items.clear()),
                         (lambda: setattr(holder, "flag", 0), lambda: setattr(holder, "flag", None))]:
        change()
        assert entry((2,), False, 7) == "fell back"
        undo()
        assert entry((2,), False, 7) is kernel
    assert len(calls) == 4


def test_arguments_the_builder_does_not_recognize_fall_back():
    entry, keep, calls, launch, kernel = _entry(["n", "B"], [[("int", 32, False, "i64"), ("value", 64)]],
                                                defaults={1: 64})
    assert entry((1,), False, 5) is kernel and entry((1,), False, 5, B=64) is kernel
    assert entry((1,), False, B=64, n=5) is kernel and entry((1,), False, 5, _MISSING_MARK, B=64) is kernel
    for args, kwargs in [((16,), {}), ((1,), {}), ((5.0,), {}), ((True,), {}), ((2**40,), {}),
                         ((5, 32), {}), ((5,), {"B": 64.0}), ((5,), {"C": 1}), ((5, 64), {"B": 64}),
                         ((5, 64, 1), {}), ((), {"B": 64})]:
        calls.clear()
        assert entry((1,), False, *args, **kwargs) == "fell back", (args, kwargs)
        assert calls == [(((1,), False) + args, kwargs)]
    assert entry((1,), True, 5) == "fell back"            # pre-run hooks already ran: Python's


def test_a_launch_error_is_raised_through_the_launchs_error():
    entry, keep, calls, launch, kernel = _entry(["n"], [[("int", 32, False, "i64")]])
    launch.code[0] = 710
    with pytest.raises(RuntimeError, match="launch failed with 710 on \\(3, 2, 1\\)"):
        entry((3, 2), False, 7)
    assert launch.errors == [(710, (3, 2, 1))] and calls == []


def test_the_knob_turns_native_launches_off(monkeypatch):
    monkeypatch.setenv("NAIAD_NATIVE_LAUNCH", "0")
    kernel = JITFunction(axpy.fn)
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    for _ in range(3):
        kernel[(1,)](x, x, out, 2.0, 64, BLOCK=64)
    assert kernel._native.entry is None and kernel._native.variants == []
    np.testing.assert_array_equal(out, 3 * x)
    monkeypatch.delenv("NAIAD_NATIVE_LAUNCH")
    kernel[(1,)](x, x, out, 2.0, 64, BLOCK=64)
    kernel[(1,)](x, x, out, 2.0, 64, BLOCK=64)
    assert kernel._native.entry is not None and len(kernel._native.variants) == 1


def test_a_kernel_without_a_work_estimate_is_split_by_the_python_path(monkeypatch):
    """Several programs on several threads with no estimate yet (`WorkEstimate.program_s`
    None): the builtin steps aside cleanly, with no error left pending."""
    monkeypatch.setenv("NAIAD_CPU_THREADS", "2")
    kernel = JITFunction(axpy.fn)                      # loaded anew, with two threads
    x = np.arange(256, dtype=np.float32)
    out = np.zeros_like(x)
    launched = kernel[(4,)](x, x, out, 1.0, 256, BLOCK=64)
    kernel[(4,)](x, x, out, 1.0, 256, BLOCK=64)
    assert kernel._native.entry is not None
    launched.launcher.work.program_s = None
    out[:] = 0
    kernel[(4,)](x, x, out, 2.0, 256, BLOCK=64)
    np.testing.assert_array_equal(out, 3 * x)
    assert launched.launcher.work.program_s is not None          # the Python path timed it
