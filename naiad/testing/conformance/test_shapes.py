"""2-D and 3-D tiles: broadcasting, transposes, reshapes, join/split/interleave, cat, gather,
histogram -- against numpy's equivalents."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .staging import Staged, needs_staging



@naiad.jit
def outer_kernel(x, y, add, mul, where, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """Broadcast a column against a row, with masks on both (M, N not multiples of the block)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    a = tl.load(x + rm, mask=rm < M, other=0.0)
    b = tl.load(y + rn, mask=rn < N, other=0.0)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    tl.store(add + offs, a[:, None] + b[None, :], mask=mask)
    tl.store(mul + offs, tl.expand_dims(a, 1) * tl.expand_dims(b, 0), mask=mask)
    tl.store(where + offs, tl.where(a[:, None] > b[None, :], a[:, None], 2.0), mask=mask)


@pytest.mark.parametrize("bm,bn", [(16, 32), (64, 4), (2, 128), (1, 8)])
def test_broadcasting_rows_and_columns(bm, bn):
    m, n = 37, 45
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=m).astype(np.float32), rng.normal(size=n).astype(np.float32)
    outs = [np.full((m, n), np.nan, np.float32) for _ in range(3)]
    outer_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](x, y, *outs, m, n, BM=bm, BN=bn)
    np.testing.assert_allclose(outs[0], x[:, None] + y[None, :], rtol=1e-6)
    np.testing.assert_allclose(outs[1], x[:, None] * y[None, :], rtol=1e-6)
    np.testing.assert_array_equal(outs[2], np.where(x[:, None] > y[None, :], x[:, None], 2.0))


@naiad.jit
def rearrange_kernel(x, trans, permuted, reshaped, flipped, broadcast,
                     A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    """A 3-D tile of shape (A, B, C) loaded from a contiguous array, rearranged five ways."""
    ia = tl.arange(0, A)[:, None, None]
    ib = tl.arange(0, B)[None, :, None]
    ic = tl.arange(0, C)[None, None, :]
    t = tl.load(x + ia * B * C + ib * C + ic)
    # trans of the last two dims of each (B, C) slice: shape (A, C, B)
    ja = tl.arange(0, A)[:, None, None]
    jc = tl.arange(0, C)[None, :, None]
    jb = tl.arange(0, B)[None, None, :]
    tl.store(trans + ja * C * B + jc * B + jb, tl.trans(t, 0, 2, 1))
    # permute (2, 0, 1): shape (C, A, B)
    kc = tl.arange(0, C)[:, None, None]
    ka = tl.arange(0, A)[None, :, None]
    kb = tl.arange(0, B)[None, None, :]
    tl.store(permuted + kc * A * B + ka * B + kb, tl.permute(t, (2, 0, 1)))
    # reshape to (A * B, C), then a 2-D transpose: shape (C, A * B)
    flat = tl.reshape(t, (A * B, C))
    rows = tl.arange(0, C)[:, None]
    cols = tl.arange(0, A * B)[None, :]
    tl.store(reshaped + rows * (A * B) + cols, flat.T)
    tl.store(flipped + rows * (A * B) + cols, tl.flip(flat.T, 1))
    # broadcast_to a leading dimension of size 2
    lead = tl.broadcast_to(tl.reshape(t, (1, A * B * C)), (2, A * B * C))
    tl.store(broadcast + tl.arange(0, 2)[:, None] * (A * B * C) + tl.arange(0, A * B * C)[None, :], lead)


@pytest.mark.parametrize("shape", [(2, 4, 8), (4, 16, 2), (8, 8, 8), (1, 32, 4)])
def test_transposes_permutes_reshapes(shape):
    a, b, c = shape
    x = np.arange(a * b * c, dtype=np.int32).reshape(shape) * 3 - 7
    outs = [np.zeros(a * b * c, np.int32) for _ in range(4)] + [np.zeros((2, a * b * c), np.int32)]
    rearrange_kernel[(1,)](x, *outs, A=a, B=b, C=c)
    np.testing.assert_array_equal(outs[0].reshape(a, c, b), x.transpose(0, 2, 1))
    np.testing.assert_array_equal(outs[1].reshape(c, a, b), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(outs[2].reshape(c, a * b), x.reshape(a * b, c).T)
    np.testing.assert_array_equal(outs[3].reshape(c, a * b), x.reshape(a * b, c).T[:, ::-1])
    np.testing.assert_array_equal(outs[4], np.broadcast_to(x.reshape(1, -1), (2, a * b * c)))


@naiad.jit
def join_split_kernel(x, y, joined, interleaved, first, second, catted, M: tl.constexpr,
                      N: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    a = tl.load(x + rm * N + rn)
    b = tl.load(y + rm * N + rn)
    j = tl.join(a, b)                                           # (M, N, 2)
    tl.store(joined + (rm * N + rn)[:, :, None] * 2 + tl.arange(0, 2)[None, None, :], j)
    tl.store(interleaved + rm * 2 * N + tl.arange(0, 2 * N)[None, :], tl.interleave(a, b))
    u, v = tl.split(tl.join(b * 2, a))                          # (b * 2, a)
    tl.store(first + rm * N + rn, u)
    tl.store(second + rm * N + rn, v)
    tl.store(catted + tl.arange(0, 2 * M)[:, None] * N + rn, tl.cat(a, b, can_reorder=True))


@pytest.mark.parametrize("m,n", [(4, 8), (1, 2), (16, 16), (2, 1)])
def test_join_split_interleave_cat(m, n):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(m, n)).astype(np.float32)
    y = rng.normal(size=(m, n)).astype(np.float32)
    joined, interleaved = np.zeros((m, n, 2), np.float32), np.zeros((m, 2 * n), np.float32)
    first, second = np.zeros((m, n), np.float32), np.zeros((m, n), np.float32)
    catted = np.zeros((2 * m, n), np.float32)
    join_split_kernel[(1,)](x, y, joined, interleaved, first, second, catted, M=m, N=n)
    np.testing.assert_array_equal(joined, np.stack([x, y], axis=-1))
    np.testing.assert_array_equal(interleaved, np.stack([x, y], axis=-1).reshape(m, 2 * n))
    np.testing.assert_array_equal(first, y * 2)
    np.testing.assert_array_equal(second, x)
    # can_reorder=True lets Triton permute the rows; the CPU keeps them in order.
    np.testing.assert_array_equal(np.sort(catted, axis=None), np.sort(np.concatenate([x, y]), axis=None))
    np.testing.assert_array_equal(catted, np.concatenate([x, y]))


@naiad.jit
def gather_kernel(x, idx, out, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    src = tl.load(x + rm * N + rn) * 2
    index = tl.load(idx + rm * N + rn)
    tl.store(out + rm * N + rn, tl.gather(src, index, AXIS))


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_along_each_axis(axis):
    m, n = 8, 16
    rng = np.random.default_rng(2)
    x = rng.normal(size=(m, n)).astype(np.float32)
    idx = rng.integers(0, (m, n)[axis], size=(m, n)).astype(np.int32)
    out = np.zeros((m, n), np.float32)
    gather_kernel[(1,)](x, idx, out, M=m, N=n, AXIS=axis)
    np.testing.assert_array_equal(out, np.take_along_axis(x * 2, idx, axis=axis))


@naiad.jit
def histogram_kernel(x, out, n, BLOCK: tl.constexpr, BINS: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    values = tl.load(x + offs, mask=offs < n, other=-1)
    tl.store(out + tl.arange(0, BINS), tl.histogram(values, BINS))


def test_histogram_counts_values_in_range():
    rng = np.random.default_rng(3)
    n = 200
    x = rng.integers(-5, 21, n).astype(np.int32)       # some below 0 and above the last bin
    out = np.zeros(16, np.int32)
    histogram_kernel[(1,)](x, out, n, BLOCK=256, BINS=16)
    np.testing.assert_array_equal(out, np.bincount(x[(x >= 0) & (x < 16)], minlength=16))


DENSE_TTIR = """
builtin.module {
  tt.func public @dense(%arg0: !tt.ptr<i32>, %arg1: !tt.ptr<f32>) {
    %0 = arith.constant dense<[5, -1, 7, 2, 0, 9, -8, 3]> : tensor<8xi32>
    %1 = arith.constant dense<[1.5, 2.5, 1.5, 0.0, -1.0, 3.0, 1.0, 2.0]> : tensor<8xf32>
    %2 = arith.constant dense<[true, false, true, true, false, false, true, false]> : tensor<8xi1>
    %3 = arith.constant dense<-2.0> : tensor<8xf32>
    %r = tt.make_range {end = 8 : i32, start = 0 : i32} : tensor<8xi32>
    %4 = arith.addi %0, %r : tensor<8xi32>
    %5 = tt.splat %arg0 : !tt.ptr<i32> -> tensor<8x!tt.ptr<i32>>
    %6 = tt.addptr %5, %r : tensor<8x!tt.ptr<i32>>, tensor<8xi32>
    tt.store %6, %4 : tensor<8x!tt.ptr<i32>>
    %7 = arith.mulf %1, %3 : tensor<8xf32>
    %8 = arith.select %2, %1, %7 : tensor<8xi1>, tensor<8xf32>
    %9 = tt.splat %arg1 : !tt.ptr<f32> -> tensor<8x!tt.ptr<f32>>
    %10 = tt.addptr %9, %r : tensor<8x!tt.ptr<f32>>, tensor<8xi32>
    tt.store %10, %8 : tensor<8x!tt.ptr<f32>>
    tt.return
  }
}
"""


def test_dense_constants_of_distinct_values(tmp_path):
    """Non-splat constants (from a .ttir file: the frontend folds only splats)."""
    from naiad.backends import selection

    path = tmp_path / "dense.ttir"
    path.write_text(DENSE_TTIR)
    kernel = naiad.compile(str(path))
    ints, floats = np.zeros(8, np.int32), np.zeros(8, np.float32)
    driver = selection.active_driver()

    def launch(*arrays):
        kernel.launch(driver, (1, 1, 1), list(arrays))

    if needs_staging(type(driver)):           # a compiled kernel's launch, not kernel[grid]
        launch = Staged(launch, driver.get_active_torch_device())
    launch(ints, floats)
    np.testing.assert_array_equal(ints, np.array([5, -1, 7, 2, 0, 9, -8, 3]) + np.arange(8))
    values = np.array([1.5, 2.5, 1.5, 0.0, -1.0, 3.0, 1.0, 2.0], np.float32)
    chosen = np.array([1, 0, 1, 1, 0, 0, 1, 0], bool)
    np.testing.assert_array_equal(floats, np.where(chosen, values, values * -2))
