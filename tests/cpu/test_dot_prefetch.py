"""A dot's operands loaded in a loop are fetched one trip ahead when the loop moves their pointers
by the same number of elements everywhere: pointers computed from the induction variable (``a_ptr
+ (k + rk) * stride``, the gallery's and most users' form), carried and stepped (``ptrs +=
BLOCK_K``), or stepped backwards.  Pointers that move unevenly get no prefetch.  The results are
checked against numpy in every form (a prefetch changes no value, but the address it computes
must be emitted without breaking the kernel), and the LLVM IR says whether a prefetch is there."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def from_induction(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@naiad.jit
def stepped(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        left = K - k * BK
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < left), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@naiad.jit
def backwards(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """K's blocks from the last to the first (K a multiple of BK)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        start = K - BK - k
        a = tl.load(a_ptr + rm[:, None] * K + (start + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + (start + rk)[:, None] * N + rn[None, :], mask=rn[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@naiad.jit
def uneven(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """K's blocks in the order 1, 0, 3, 2, 5, 4... (the last alone when their number is odd):
    the pointers do not move by one amount per trip."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    blocks = K // BK
    for i in range(0, blocks):
        j = tl.where((i ^ 1) < blocks, i ^ 1, i)
        a = tl.load(a_ptr + rm[:, None] * K + (j * BK + rk)[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + (j * BK + rk)[:, None] * N + rn[None, :], mask=rn[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _run(kernel, m, n, k, tile):
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    compiled = kernel[(naiad.cdiv(m, tile), naiad.cdiv(n, tile))](a, b, c, m, n, k, BM=tile, BN=tile, BK=16)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    return compiled.asm["llir"]


@pytest.mark.parametrize("kernel", [from_induction, stepped], ids=["induction", "stepped"])
@pytest.mark.parametrize("m, n, k", [(64, 64, 64), (33, 50, 47), (16, 16, 16), (80, 16, 17)])
def test_operands_moving_evenly_are_prefetched(kernel, m, n, k):
    assert "@llvm.prefetch" in _run(kernel, m, n, k, 32)


@pytest.mark.parametrize("m, n, k", [(64, 64, 64), (40, 24, 96)])
def test_operands_moving_backwards_are_prefetched(m, n, k):
    assert "@llvm.prefetch" in _run(backwards, m, n, k, 16)


@pytest.mark.parametrize("m, n, k", [(32, 32, 64), (48, 16, 80)])
def test_operands_moving_unevenly_are_not_prefetched(m, n, k):
    assert "@llvm.prefetch" not in _run(uneven, m, n, k, 16)
