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

pytestmark = pytest.mark.shipped_backends

torch = pytest.importorskip("torch")

PAIRS = "+avx512bf16" in host_features().split(",")


@naiad.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


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
    (33, 96, 64, 16, 32, 64), (16, 16, 16, 16, 16, 16), (40, 48, 200, 32, 16, 64)])
def test_bf16_matmul_matches_numpy(m, n, k, bm, bn, bk):
    rng = np.random.default_rng(m * n + k)
    a, b = _bf16(rng, m, k), _bf16(rng, k, n)
    c = torch.full((m, n), float("nan"))
    matmul[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](a, b, c, m, n, k, BM=bm, BN=bn, BK=bk)
    np.testing.assert_allclose(c.numpy(), _reference(a, b), rtol=1e-5, atol=1e-4)


def test_batched_bf16_dot_matches_numpy():
    rng = np.random.default_rng(7)
    a, b = _bf16(rng, 2, 16, 32), _bf16(rng, 2, 32, 16)
    c = torch.full((2, 16, 16), float("nan"))
    batched[(1,)](a, b, c, B=2, M=16, N=16, K=32)
    np.testing.assert_allclose(c.numpy(), np.stack([_reference(a[i], b[i]) for i in range(2)]),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(not PAIRS, reason="this processor has no AVX-512 BF16")
def test_bf16_dots_multiply_pairs_where_the_processor_can():
    a, b, c = torch.zeros(64, 64).bfloat16(), torch.zeros(64, 64).bfloat16(), torch.zeros(64, 64)
    compiled = matmul.warmup(a, b, c, 64, 64, 64, BM=64, BN=64, BK=32, grid=(1, 1))
    assert "llvm.x86.avx512bf16.dpbf16ps.512" in compiled.asm["llir"]
    fp32 = matmul.warmup(a.float(), b.float(), c, 64, 64, 64, BM=64, BN=64, BK=32, grid=(1, 1))
    assert "dpbf16ps" not in fp32.asm["llir"]
