"""Kernels whose 2-D blocks lie along memory's first axis are turned over for the CPU
(`naiad.backends.cpu.transpose_blocks`): the values stay the same -- reductions, scans,
broadcasts, masks, atomics and transposes along either axis -- and the TTGIR shows which kernels
were turned over and which were left alone."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


def _turned(kernel, rows: int, cols: int) -> bool:
    """Whether the kernel's first load of a [rows, cols] block loads [cols, rows] in its TTGIR."""
    load = next(line for line in kernel.asm["ttgir"].splitlines() if "tt.load" in line)
    assert f"tensor<{rows}x{cols}x!tt.ptr" in load or f"tensor<{cols}x{rows}x!tt.ptr" in load, load
    return f"tensor<{cols}x{rows}x!tt.ptr" in load


@naiad.jit
def channel_stats(x_ptr, sum_ptr, sq_ptr, min_ptr, xnumel, rnumel, C: tl.constexpr,
                  XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    """Per-channel sum, sum of squares and minimum of channels-last [B, R, C] data: program
    blocks are [channels, positions], consecutive along the channels."""
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    channel = xindex % C
    batch = xindex // C
    rbase = tl.arange(0, RBLOCK)[None, :]
    total = tl.zeros([XBLOCK, RBLOCK], x_ptr.dtype.element_ty)
    squares = tl.zeros([XBLOCK, RBLOCK], x_ptr.dtype.element_ty)
    low = tl.full([XBLOCK, RBLOCK], float("inf"), tl.float32)
    for start in range(0, rnumel, RBLOCK):
        rindex = start + rbase
        mask = (rindex < rnumel) & xmask
        v = tl.load(x_ptr + (channel + C * rindex + C * rnumel * batch), mask, other=0)
        total += v
        squares += v * v
        low = tl.where(mask, tl.minimum(low, v.to(tl.float32)), low)
    tl.store(sum_ptr + xindex, tl.sum(total, 1)[:, None], xmask)
    tl.store(sq_ptr + xindex, tl.sum(squares, 1)[:, None], xmask)
    tl.store(min_ptr + xindex, tl.min(low, 1)[:, None], xmask)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("batch,positions,channels,xblock,rblock", [
    (4, 256, 64, 16, 32),       # whole blocks
    (3, 100, 32, 8, 64),        # positions not a multiple of RBLOCK
    (5, 37, 24, 16, 16),        # channels not a multiple of XBLOCK: blocks span batches, masks
    (2, 64, 16, 64, 8),         # XBLOCK larger than the channels
])
def test_channels_last_statistics_match_numpy(dtype, batch, positions, channels, xblock, rblock):
    rng = np.random.default_rng(positions * channels)
    if dtype == np.int32:
        x = rng.integers(-50, 50, (batch, positions, channels)).astype(dtype)
    else:
        x = rng.standard_normal((batch, positions, channels)).astype(dtype)
    n = batch * channels
    total, squares, low = np.zeros(n, dtype), np.zeros(n, dtype), np.zeros(n, np.float32)
    kernel = channel_stats[(naiad.cdiv(n, xblock),)](x, total, squares, low, n, positions,
                                                     C=channels, XBLOCK=xblock, RBLOCK=rblock)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(total, x.sum(1).reshape(-1), rtol=rtol, atol=rtol * positions)
    np.testing.assert_allclose(squares, (x * x).sum(1).reshape(-1), rtol=rtol, atol=rtol * positions)
    np.testing.assert_array_equal(low, x.min(1).reshape(-1).astype(np.float32))
    if channels % xblock == 0 or xblock > channels:
        assert _turned(kernel, xblock, rblock)


@naiad.jit
def column_cumsum(x_ptr, out_ptr, rows, C: tl.constexpr, XBLOCK: tl.constexpr,
                  RBLOCK: tl.constexpr):
    """Running sums down the rows of a [rows, C] array, a block of columns per program."""
    cols = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r = tl.arange(0, RBLOCK)[None, :]
    mask = (r < rows) & (cols < C)
    v = tl.load(x_ptr + cols + C * r, mask, other=0)
    tl.store(out_ptr + cols + C * r, tl.cumsum(v, 1), mask)


@pytest.mark.parametrize("rows,columns", [(16, 32), (13, 40), (1, 16)])
def test_a_scan_along_the_turned_axis(rows, columns):
    x = np.random.default_rng(rows).integers(-9, 9, (rows, columns)).astype(np.int32)
    out = np.zeros_like(x)
    kernel = column_cumsum[(naiad.cdiv(columns, 16),)](x, out, rows, C=columns, XBLOCK=16, RBLOCK=32)
    np.testing.assert_array_equal(out, np.cumsum(x, 0))
    assert _turned(kernel, 16, 32)


@naiad.jit
def scaled_columns(x_ptr, w_ptr, out_ptr, acc_ptr, C: tl.constexpr, R: tl.constexpr):
    """A column-major block times a row vector, its transpose reduced, and atomic adds of the
    block into per-channel totals: every kind of op the pass remaps, in one kernel."""
    c = tl.arange(0, C)[:, None]
    r = tl.arange(0, R)[None, :]
    v = tl.load(x_ptr + c + C * r)                     # [C, R], consecutive along C
    w = tl.load(w_ptr + r)                             # [1, R], consecutive along R
    scaled = v * w + tl.where(v > 0, 1.0, -1.0)
    tl.store(out_ptr + c + C * r, scaled)
    flipped = tl.trans(scaled)                         # [R, C]
    tl.store(out_ptr + C * R + tl.arange(0, C), tl.sum(flipped, 0))
    tl.atomic_add(acc_ptr + c + 0 * r, v)


def test_broadcasts_transposes_and_atomics_in_a_turned_kernel():
    C, R = 32, 16
    rng = np.random.default_rng(7)
    x = rng.standard_normal((R, C)).astype(np.float32)
    w = rng.standard_normal(R).astype(np.float32)
    out = np.zeros(C * R + C, np.float32)
    acc = np.zeros(C, np.float32)
    kernel = scaled_columns[(1,)](x, w, out, acc, C=C, R=R)
    scaled = x * w[:, None] + np.where(x > 0, 1.0, -1.0).astype(np.float32)
    np.testing.assert_allclose(out[:C * R].reshape(R, C), scaled, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out[C * R:], scaled.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(acc, x.sum(0), rtol=1e-5, atol=1e-5)
    assert _turned(kernel, C, R)


@naiad.jit
def row_sums(x_ptr, out_ptr, N: tl.constexpr, BLOCK_M: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    v = tl.load(x_ptr + rows * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + rows, tl.sum(v, 1)[:, None])


def test_row_major_kernels_are_left_alone():
    x = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)
    out = np.zeros(32, np.float32)
    kernel = row_sums[(4,)](x, out, N=64, BLOCK_M=8)
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5, atol=1e-5)
    assert not _turned(kernel, 8, 64)


@naiad.jit
def column_reshape(x_ptr, out_ptr, C: tl.constexpr, R: tl.constexpr):
    """Column-major loads, but a reshape of the 2-D block: its element order matters, so the
    kernel must not be turned over."""
    c = tl.arange(0, C)[:, None]
    r = tl.arange(0, R)[None, :]
    v = tl.load(x_ptr + c + C * r)
    tl.store(out_ptr + tl.arange(0, C * R), tl.reshape(v, [C * R]))


@naiad.jit
def column_dot(a_ptr, b_ptr, out_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, M)[:, None]
    k = tl.arange(0, K)
    a = tl.load(a_ptr + i + M * k[None, :])            # [M, K] read from a K x M array
    b = tl.load(b_ptr + k[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + i * N + tl.arange(0, N)[None, :], tl.dot(a, b))


def test_order_dependent_kernels_are_left_alone():
    C, R = 16, 8
    x = np.arange(C * R, dtype=np.float32).reshape(R, C)
    out = np.zeros(C * R, np.float32)
    kernel = column_reshape[(1,)](x, out, C=C, R=R)
    np.testing.assert_array_equal(out, x.T.reshape(-1))
    assert not _turned(kernel, C, R)

    M, K, N = 16, 32, 16
    a = np.random.default_rng(2).standard_normal((K, M)).astype(np.float32)
    b = np.random.default_rng(3).standard_normal((K, N)).astype(np.float32)
    product = np.zeros((M, N), np.float32)
    kernel = column_dot[(1,)](a, b, product, M=M, K=K, N=N)
    np.testing.assert_allclose(product, a.T @ b, rtol=1e-4, atol=1e-4)
    assert not _turned(kernel, M, K)
