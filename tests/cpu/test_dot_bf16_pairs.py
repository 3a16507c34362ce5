"""bf16 ``tl.dot`` on the CPU: on a processor with AVX-512 BF16 the micro-kernel multiplies
pairs of k at once (``vdpbf16ps``) from a copy of B whose rows are interleaved in pairs; elsewhere
the operands are widened to fp32.  Either way the results are the fp32 products of the bf16
inputs, summed in fp32: checked against numpy over tile shapes, masked edges, an accumulator
carried through the K loop and batched (3-D) dots."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends.cpu.target import host_features
from naiad.tools.gallery import matmul_kernel

pytestmark = pytest.mark.shipped_backends

torch = pytest.importorskip("torch")

PAIRS = "+avx512bf16" in host_features().split(",")


@naiad.jit
def batched(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    i = tl.arange(0, B)[:, None, None]
    a = tl.load(a_ptr + i * M * K + tl.arange(0, M)[None, :, None] * K + tl.arange(0, K)[None, None, :])
    b = tl.load(b_ptr + i * K * N + tl.arange(0, K)[None, :, None] * N + tl.arange(0, N)[None, None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + i * M * N + tl.arange(0, M)[None, :, None] * N + tl.arange(0, N)[None, None, :], c)


def _bf16(rng, *shape):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).bfloat16()


def _reference(a, b):
    return a.float().numpy().astype(np.float64) @ b.float().numpy().astype(np.float64)


@pytest.mark.parametrize("m, n, k, bm, bn, bk", [
    (64, 64, 64, 32, 32, 32), (100, 70, 50, 32, 32, 16), (128, 128, 128, 64, 64, 32),
    (33, 96, 64, 16, 32, 64), (16, 16, 16, 16, 16, 16), (40, 48, 200, 32, 16, 64),
    (70, 90, 45, 64, 64, 32), (129, 65, 97, 32, 64, 64), (24, 200, 40, 16, 128, 32)])
def test_bf16_matmul_matches_numpy(m, n, k, bm, bn, bk):
    rng = np.random.default_rng(m * n + k)
    a, b = _bf16(rng, m, k), _bf16(rng, k, n)
    c = torch.full((m, n), float("nan"))
    matmul_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](a, b, c, m, n, k, k, 1, n, 1, n, 1,
                                                          BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    np.testing.assert_allclose(c.numpy(), _reference(a, b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("m, n, k, bm, bn, bk", [(70, 90, 45, 64, 64, 32), (50, 33, 80, 32, 32, 32)])
def test_fp16_matmul_matches_numpy(m, n, k, bm, bn, bk):
    """fp16 operands are copied 32 at a time as bf16's are (rows of 32 or more), then widened."""
    rng = np.random.default_rng(m + n * k)
    a = torch.from_numpy(rng.standard_normal((m, k)).astype(np.float16))
    b = torch.from_numpy(rng.standard_normal((k, n)).astype(np.float16))
    c = torch.full((m, n), float("nan"))
    matmul_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](a, b, c, m, n, k, k, 1, n, 1, n, 1,
                                                          BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    np.testing.assert_allclose(c.numpy(), _reference(a, b), rtol=1e-5, atol=1e-4)


def test_batched_bf16_dot_matches_numpy():
    rng = np.random.default_rng(7)
    a, b = _bf16(rng, 2, 16, 32), _bf16(rng, 2, 32, 16)
    c = torch.full((2, 16, 16), float("nan"))
    batched[(1,)](a, b, c, B=2, M=16, N=16, K=32)
    np.testing.assert_allclose(c.numpy(), np.stack([_reference(a[i], b[i]) for i in range(2)]),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(not PAIRS, reason="this processor has no AVX-512 BF16")
def test_bf16_dots_multiply_pairs_where_the_processor_can(monkeypatch):
    monkeypatch.setenv("NAIAD_CPU_AMX", "0")             # tiles, where there are any, take them
    a, b, c = torch.zeros(64, 64).bfloat16(), torch.zeros(64, 64).bfloat16(), torch.zeros(64, 64)
    args = (64, 64, 64, 64, 1, 64, 1, 64, 1)
    compiled = matmul_kernel.warmup(a, b, c, *args, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, grid=(1, 1))
    assert "llvm.x86.avx512bf16.dpbf16ps.512" in compiled.asm["llir"]
    fp32 = matmul_kernel.warmup(a.float(), b.float(), c, *args, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
                                grid=(1, 1))
    assert "dpbf16ps" not in fp32.asm["llir"]


@naiad.jit
def dot_and_copy_of_b(a_ptr, b_ptr, c_ptr, b_out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """B is also copied out: read once for both uses, not loaded straight into pairs."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=rn[None, :] < N - 3, other=0.0)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))
    tl.store(b_out_ptr + rk[:, None] * N + rn[None, :], b)


@pytest.mark.parametrize("m, n, k", [(16, 16, 16), (32, 64, 32), (64, 32, 128)])
def test_b_used_elsewhere_too(m, n, k):
    rng = np.random.default_rng(m * n + k)
    a, b = _bf16(rng, m, k), _bf16(rng, k, n)
    c, b_out = torch.empty(m, n), torch.empty(k, n, dtype=torch.bfloat16)
    dot_and_copy_of_b[(1,)](a, b, c, b_out, M=m, N=n, K=k)
    masked = b.clone()
    masked[:, n - 3:] = 0
    np.testing.assert_array_equal(b_out.float().numpy(), masked.float().numpy())
    np.testing.assert_allclose(c.numpy(), _reference(a, masked), rtol=1e-5, atol=1e-4)
