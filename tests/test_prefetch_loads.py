"""`naiad.passes.prefetch_loads` (the hip backend's ``num_stages`` >= 2): loads that feed dots
issued one iteration ahead.  The pass is target-neutral, so its rewrite is checked where it can
run: inserted into the CPU backend's pipeline (a stages hook), every kernel's results are
compared with numpy -- K loops of one, several and zero trips, sizes off the blocks, pointers
computed from the induction variable or carried and stepped, attention's two dots -- and the
loops that must stay as they are do.  On hip, the TTGIR carries the tiles from one iteration to
the next with ``num_stages=2`` and not with ``num_stages=1``."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.ir import tt
from naiad.passes.prefetch_loads import prefetch_loads
from naiad.tools import gallery
from tests.hip.test_mfma import MATMUL, _compile

pytestmark = pytest.mark.shipped_backends


@pytest.fixture
def prefetching(tmp_path, monkeypatch):
    """The CPU backend with the pass after its ttir stage; the list of whether each kernel
    compiled since changed."""
    from naiad.compiler import cache

    monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path))
    cache._managers.clear()
    changed: list[bool] = []

    def hook(*args):
        if not args:
            return "prefetch-loads-test", "1"
        stages = args[1]
        ttir = stages["ttir"]

        def with_prefetch(module, metadata):
            module = ttir(module, metadata)
            changed.append(any([prefetch_loads(f) for f in tt.public_functions(module)]))
            module.verify()
            return module
        stages["ttir"] = with_prefetch

    monkeypatch.setattr(naiad.knobs.runtime, "add_stages_inspection_hook", hook)
    for kernel in (gallery.matmul_kernel, gallery.matmul_tutorial_kernel, gallery.attention_kernel,
                   dot_of_loaded_pointer, dot_and_sum):
        kernel.cache.clear()
    return changed


@pytest.mark.parametrize("m, n, k", [(64, 64, 64), (33, 50, 47), (16, 16, 16), (40, 24, 200), (8, 8, 0)])
def test_matmuls_prefetched_match_numpy(prefetching, m, n, k):
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    want = a.astype(np.float64) @ b
    np.testing.assert_allclose(gallery.matmul(a, b, 32, 32, 16), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gallery.matmul_tutorial(a, b, 32, 32, 16, 2), want, rtol=1e-4, atol=1e-4)
    assert prefetching and all(prefetching)


@pytest.mark.parametrize("n_ctx", [64, 192])
def test_attention_prefetched_matches_torch(prefetching, n_ctx):
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(n_ctx)
    q, k, v = (torch.randn(1, 2, n_ctx, 32, generator=gen) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    gallery.attention(q, k, v, out)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    assert prefetching == [True]


@naiad.jit
def dot_of_loaded_pointer(a_ptr, b_ptr, c_ptr, offsets_ptr, K, B: tl.constexpr):
    """A's rows start where an array says: the pointer depends on a load, so no prefetch."""
    r = tl.arange(0, B)
    acc = tl.zeros((B, B), dtype=tl.float32)
    for kk in range(0, K, B):
        start = tl.load(offsets_ptr + kk // B)
        a = tl.load(a_ptr + start + r[:, None] * K + (kk + r)[None, :])
        b = tl.load(b_ptr + (kk + r)[:, None] * B + r[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + r[:, None] * B + r[None, :], acc)


@naiad.jit
def dot_and_sum(a_ptr, b_ptr, c_ptr, s_ptr, K, B: tl.constexpr):
    """A is also summed: a load used by something else than a dot stays where it is."""
    r = tl.arange(0, B)
    acc = tl.zeros((B, B), dtype=tl.float32)
    total = tl.zeros((B,), dtype=tl.float32)
    for kk in range(0, K, B):
        a = tl.load(a_ptr + r[:, None] * K + (kk + r)[None, :])
        b = tl.load(b_ptr + (kk + r)[:, None] * B + r[None, :])
        acc = tl.dot(a, b, acc)
        total += tl.sum(a, axis=1)
    tl.store(c_ptr + r[:, None] * B + r[None, :], acc)
    tl.store(s_ptr + r, total)


def test_loads_that_do_not_qualify_stay(prefetching):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 64)).astype(np.float32)
    b = rng.standard_normal((64, 16)).astype(np.float32)
    c, s = np.empty((16, 16), np.float32), np.empty(16, np.float32)
    dot_and_sum[(1,)](a, b, c, s, 64, B=16)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    padded = np.zeros((16 + 4, 64), np.float32)
    padded[:16] = a
    offsets = np.zeros(4, np.int32)
    dot_of_loaded_pointer[(1,)](padded.ravel(), b, c, offsets, 64, B=16)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert prefetching == [True, True]          # B is prefetched in both; A is not (checked below)


def test_only_the_qualifying_load_moves():
    """In `dot_and_sum` B's load is prefetched (one load result carried) and A's is not."""
    kernel = _compile(dot_and_sum, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "s_ptr": "*fp32",
                                    "K": "i32"}, {"B": 32}, num_stages=2)
    loop = kernel.asm["ttgir"].split("scf.for")[1]
    assert loop.count("tt.load") == 2            # A's, and B's for the next iteration


@pytest.mark.parametrize("num_stages, carried", [(1, False), (2, True)])
def test_hip_carries_the_tiles_with_num_stages(num_stages, carried):
    constexprs = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
    kernel = _compile(gallery.matmul_tutorial_kernel, MATMUL, constexprs, mfma=True, num_stages=num_stages)
    ttgir = kernel.asm["ttgir"]
    loop = ttgir[ttgir.index("scf.for"):ttgir.index("scf.yield")]
    assert ("tensor<64x32xf16" in loop.split("{")[0]) == carried      # A's tile among the iter_args
    assert ".amdhsa_private_segment_fixed_size 0" in kernel.asm["amdgcn"]
    assert kernel.asm["amdgcn"].count("v_mfma_f32_32x32x8") == 4
