"""Dot operands copied as plain strided rows where the load tests whole at run time
(`naiad.backends.cpu.lowering.affine_tiles`): rows one stride apart, columns one element apart,
the mask true everywhere; the chunk-by-chunk copy elsewhere.  Each case is checked against numpy
over dtypes and shapes whose edge blocks are masked (those fall back), with rows read through a
gather, flipped, strided or transposed, and offsets that only fit their width together."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.tools.gallery import matmul_kernel

from .matmuls import check_product, operands, result

pytestmark = pytest.mark.shipped_backends

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("m, n, k, block", [(128, 128, 128, 64), (100, 70, 90, 32), (64, 200, 256, 64),
                                            (33, 65, 130, 32)])
def test_gallery_matmul_with_whole_and_masked_blocks(dtype, m, n, k, block):
    """Interior blocks take the strided copy, edge blocks (masked along M, N or K) the other."""
    rng = np.random.default_rng(m * n + k)
    a, b = operands(dtype, (m, k), rng), operands(dtype, (k, n), rng)
    c = result(dtype, m, n)
    bk = 64 if dtype == "int8" else 32
    matmul_kernel[(naiad.cdiv(m, block), naiad.cdiv(n, block))](
        a, b, c, m, n, k, k, 1, n, 1, n, 1, BLOCK_M=block, BLOCK_N=block, BLOCK_K=bk)
    check_product(c, a, b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_operands_read_through_transposed_views(dtype):
    """Columns a row apart (A and B given transposed, strides swapped): consecutive down the
    columns, so tested that way and copied a column at a time (`column_blocks`);
    the values are the same."""
    rng = np.random.default_rng(3)
    at, bt = operands(dtype, (96, 64), rng), operands(dtype, (80, 96), rng)
    a, b = at.t(), bt.t()                         # [64, 96] and [96, 80], column-major
    c = result(dtype, 64, 80)
    matmul_kernel[(2, 3)](a, b, c, 64, 80, 96, a.stride(0), a.stride(1), b.stride(0), b.stride(1), 80, 1,
                          BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    check_product(c, a, b)


@naiad.jit
def rows_by_index(a_ptr, b_ptr, c_ptr, index_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """``c = a[index] @ b``: A's rows read through a gather of row numbers."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    rows = tl.load(index_ptr + rm)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rows[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("order", ["every third", "flipped", "shuffled", "repeated"])
def test_rows_through_an_index(dtype, order):
    """Rows one stride apart (every third, or flipped: a negative stride) take the strided copy;
    shuffled or repeated rows fail the test at run time and are copied chunk by chunk."""
    rng = np.random.default_rng(11)
    a, b = operands(dtype, (200, 64), rng), operands(dtype, (64, 32), rng)
    index = {"every third": np.arange(32) * 3 + 5, "flipped": 150 - np.arange(32),
             "shuffled": rng.permutation(200)[:32], "repeated": np.full(32, 7)}[order]
    index = torch.from_numpy(index.astype(np.int32))
    c = torch.full((32, 32), float("nan"))
    rows_by_index[(1,)](a, b, c, index, 64, BM=32, BN=32, BK=32)
    check_product(c, a[index.long()], b)


@naiad.jit
def offsets_that_cancel(a_ptr, b_ptr, c_ptr, BIG, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """``c = a @ b`` with A's offsets as ``(row * K + BIG) + (column - BIG)``: each part alone
    is most of int32's range, the sum is not."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + (rm[:, None] * K + BIG) + (rk[None, :] - BIG))
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


@pytest.mark.parametrize("big", [0, 1 << 20, (1 << 31) - 1024])
def test_offsets_far_apart_that_cancel(big):
    rng = np.random.default_rng(5)
    a, b = operands("float32", (32, 32), rng), operands("float32", (32, 32), rng)
    c = torch.full((32, 32), float("nan"))
    offsets_that_cancel[(1,)](a, b, c, big, M=32, N=32, K=32)
    check_product(c, a, b)


@naiad.jit
def times_diagonal_shift(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """A read as ``a[i, (i + j) % K]``: its address varies along both axes together."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + (rm[:, None] + rk[None, :]) % K)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


def test_which_loads_separate(tested_tiles):
    """The gallery kernel's bf16 loads (masked, strides given at run time) separate into row and
    column terms; a load whose address mixes the two does not (and is copied as before); fp32
    loads through pointer tensors are not tested at all (one mask compare a chunk: cheaper as it
    was)."""
    a, c = torch.zeros(64, 64).bfloat16(), torch.zeros(64, 64)
    naiad.jit(matmul_kernel.fn).warmup(a, a, c, 64, 64, 64, 64, 1, 64, 1, 64, 1, BLOCK_M=32, BLOCK_N=32,
                                       BLOCK_K=32, grid=(2, 2))
    assert tested_tiles == [False, False]           # both tested as rows
    tested_tiles.clear()
    naiad.jit(matmul_kernel.fn).warmup(a.float(), a.float(), c, 64, 64, 64, 64, 1, 64, 1, 64, 1,
                                       BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, grid=(2, 2))
    assert tested_tiles == []
    rng = np.random.default_rng(2)
    a, b = operands("bfloat16", (32, 32), rng), operands("bfloat16", (32, 32), rng)
    c = torch.full((32, 32), float("nan"))
    naiad.jit(times_diagonal_shift.fn)[(1,)](a, b, c, M=32, N=32, K=32)
    assert tested_tiles.count(None) == 1 and tested_tiles.count(False) == 1     # A does not separate, B does
    shifted = a.double().numpy()[np.arange(32)[:, None], (np.arange(32)[:, None] + np.arange(32)[None, :]) % 32]
    np.testing.assert_allclose(c.numpy(), shifted @ b.double().numpy(), rtol=1e-5, atol=1e-4)


@naiad.jit
def rows_then_overwritten(a_ptr, b_ptr, c_ptr, index_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The row numbers are read, then overwritten, then A is loaded through them: the load uses
    the numbers read before the store."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    rows = tl.load(index_ptr + rm)
    a_ptrs = a_ptr + rows[:, None] * BK + rk[None, :]
    tl.store(index_ptr + rm, rows * 0)
    a = tl.load(a_ptrs)
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b))


def test_rows_read_before_a_store_to_them():
    rng = np.random.default_rng(8)
    a, b = operands("float32", (64, 32), rng), operands("float32", (32, 32), rng)
    index = torch.arange(32, dtype=torch.int32) * 2 + 1
    want_rows = index.long().clone()
    c = torch.full((32, 32), float("nan"))
    rows_then_overwritten[(1,)](a, b, c, index, BM=32, BN=32, BK=32)
    assert int(index.abs().sum()) == 0
    check_product(c, a[want_rows], b)


@naiad.jit
def block_pointer_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, CHECK: tl.constexpr):
    """``c = a @ b`` through block pointers advanced along K (with bounds checks on both
    dimensions, or with none where the blocks divide the matrices)."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, (M, K), (stride_am, stride_ak), (pid_m * BM, 0), (BM, BK), (1, 0))
    b_block = tl.make_block_ptr(b_ptr, (K, N), (stride_bk, stride_bn), (0, pid_n * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.int32 if a_ptr.dtype.element_ty == tl.int8 else tl.float32)
    for _ in range(0, K, BK):
        if CHECK:
            a = tl.load(a_block, boundary_check=(0, 1))
            b = tl.load(b_block, boundary_check=(0, 1))
        else:
            a = tl.load(a_block)
            b = tl.load(b_block)
        acc = tl.dot(a, b, acc)
        a_block = tl.advance(a_block, (0, BK))
        b_block = tl.advance(b_block, (BK, 0))
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("m, n, k, block, check", [(128, 128, 256, 64, False), (128, 128, 256, 64, True),
                                                   (100, 70, 90, 32, True), (33, 200, 130, 32, True)])
def test_block_pointer_matmul(dtype, m, n, k, block, check):
    """Whole blocks (inside both dimensions' bounds) take the strided copy, blocks over an edge
    are read with their padding as before."""
    rng = np.random.default_rng(m + n + k)
    a, b = operands(dtype, (m, k), rng), operands(dtype, (k, n), rng)
    c = result(dtype, m, n)
    bk = 64 if dtype == "int8" else 32
    block_pointer_matmul[(naiad.cdiv(m, block), naiad.cdiv(n, block))](
        a, b, c, m, n, k, k, 1, n, 1, BM=block, BN=block, BK=bk, CHECK=check)
    check_product(c, a, b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("m, n, k, block, check", [(64, 64, 96, 32, True), (128, 128, 256, 64, False),
                                                   (100, 70, 90, 32, True), (33, 200, 130, 32, True)])
def test_block_pointer_over_a_transposed_view(dtype, m, n, k, block, check):
    """B's block pointer over a column-major view (``wᵀ``, strides ``(1, K)``): its innermost
    stride is not 1, its other one is at run time, so whole blocks are copied a column at a
    time; blocks over an edge are read with their padding as before."""
    rng = np.random.default_rng(m + n + k + 4)
    a, bt = operands(dtype, (m, k), rng), operands(dtype, (n, k), rng)
    b = bt.t()                                     # [k, n], column-major
    c = result(dtype, m, n)
    block_pointer_matmul[(naiad.cdiv(m, block), naiad.cdiv(n, block))](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        BM=block, BN=block, BK=64 if dtype == "int8" else 32, CHECK=check)
    check_product(c, a, b)


def test_block_pointer_strided_both_ways():
    """Neither stride 1 (every other column of a column-major view): tested down the columns,
    found not whole at run time, read element by element; the values are the same."""
    rng = np.random.default_rng(5)
    a, wide = operands("float32", (64, 96), rng), operands("float32", (128, 96), rng)
    b = wide.t()[::2, :]                           # [48, 128] of a [96, 128] view, strides (2, 96)
    a = a[:, :48]
    c = result("float32", 64, 128)
    block_pointer_matmul[(2, 4)](a, b, c, 64, 128, 48, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                 BM=32, BN=32, BK=16, CHECK=True)
    check_product(c, a, b)


def test_a_block_pointer_over_a_transposed_view_is_tested_down_its_columns(tested_tiles):
    """A's block pointer (innermost stride 1) is tested as rows, B's over ``wᵀ`` down its
    columns."""
    a, c = torch.zeros(64, 64), torch.zeros(64, 64)
    naiad.jit(block_pointer_matmul.fn).warmup(a, a.t(), c, 64, 64, 64, 64, 1, 1, 64, BM=32, BN=32, BK=32,
                                              CHECK=True, grid=(2, 2))
    assert sorted(tested_tiles) == [False, True]
