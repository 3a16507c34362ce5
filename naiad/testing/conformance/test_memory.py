"""Loads and stores (masks, ``other``, scalars, gathers, block pointers) and launch grids."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .reference import DTYPES, assert_close, empty, from_kernel, random, to_kernel



@naiad.jit
def masked_copy_kernel(x, out, n, OTHER: tl.constexpr, BLOCK: tl.constexpr):
    """Every program copies one block; lanes past ``n`` read ``OTHER`` and are stored anyway."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n, other=OTHER))


@pytest.mark.parametrize("name", DTYPES)
def test_masked_load_fills_masked_off_lanes_with_other(name):
    rng = np.random.default_rng(0)
    n, block = 37, 16
    total = naiad.cdiv(n, block) * block
    x = random(name, n, rng, 0, 100)
    out = empty(total, name)
    masked_copy_kernel[(naiad.cdiv(n, block),)](to_kernel(x, name), out, n, OTHER=7, BLOCK=block)
    expected = np.concatenate([x, np.full(total - n, 7, x.dtype)])
    assert_close(from_kernel(out), expected, name, rtol=0, atol=0)


@naiad.jit
def default_other_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    tl.store(out + offs, tl.where(offs < n, v, 0.0) + v * 0)


@naiad.jit
def strided_kernel(x, out, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    """Gather every STRIDE-th element, scatter in reverse order, both masked."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs * STRIDE, mask=m, other=-1.0)
    tl.store(out + (n - 1 - offs), v, mask=m)


@pytest.mark.parametrize("stride", [1, 3])
def test_gather_and_reverse_scatter(stride):
    n, block = 203, 64
    x = np.arange(n * stride, dtype=np.float32)
    out = np.full(n + 8, np.nan, np.float32)
    strided_kernel[(naiad.cdiv(n, block),)](x, out, n, STRIDE=stride, BLOCK=block)
    np.testing.assert_array_equal(out[:n], x[::stride][:n][::-1])
    assert np.isnan(out[n:]).all()     # masked-off lanes wrote nothing


@naiad.jit
def scalar_memory_kernel(x, out, flags, n):
    """Scalar loads and stores: one element per program, masked by a scalar condition."""
    pid = tl.program_id(0)
    first = tl.load(x)
    mine = tl.load(x + pid, mask=pid < n, other=-5.0)
    tl.store(out + pid, mine * 2 + first)
    tl.store(flags + pid, mine > 3.0, mask=pid % 2 == 0)


def test_scalar_loads_and_stores():
    n, grid = 10, 13
    x = np.arange(1, n + 1, dtype=np.float32)
    out = np.zeros(grid, np.float32)
    flags = np.full(grid, 2, np.uint8).view(bool)
    scalar_memory_kernel[(grid,)](x, out, flags, n)
    mine = np.concatenate([x, np.full(grid - n, -5.0, np.float32)])
    np.testing.assert_array_equal(out, mine * 2 + x[0])
    expected_flags = np.where(np.arange(grid) % 2 == 0, mine > 3, 2).astype(np.uint8)
    np.testing.assert_array_equal(flags.view(np.uint8), expected_flags)


@naiad.jit
def bool_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    tl.store(out + offs, (a ^ b) | (a & ~b), mask=m)


def test_bool_arrays_are_one_byte_per_element():
    rng = np.random.default_rng(1)
    n = 45
    a, b = rng.integers(0, 2, n).astype(bool), rng.integers(0, 2, n).astype(bool)
    out = np.zeros(n, bool)
    bool_kernel[(1,)](a, b, out, n, BLOCK=64)
    np.testing.assert_array_equal(out, (a ^ b) | (a & ~b))
    assert set(out.view(np.uint8).tolist()) <= {0, 1}


@naiad.jit
def int64_offsets_kernel(x, out, base, BLOCK: tl.constexpr):
    """``base`` does not fit in 32 bits (an i64 argument); the offsets are computed in 64 bits."""
    offs = (base - 2**33) + tl.arange(0, BLOCK).to(tl.int64)
    tl.store(out + tl.arange(0, BLOCK), tl.load(x + offs))
    tl.store(out + BLOCK, (base >> 32).to(tl.int16))


def test_64_bit_offsets():
    x = np.arange(300, dtype=np.int16)
    out = np.zeros(33, np.int16)
    int64_offsets_kernel[(1,)](x, out, 2**33 + 200, BLOCK=32)
    np.testing.assert_array_equal(out[:32], x[200:232])
    assert out[32] == 2


# -- grids ---------------------------------------------------------------------------------------
@naiad.jit
def grid_kernel(out, BLOCK: tl.constexpr):
    """Each program writes its ids and the grid size to its own row of 6 (x, y, z, nx, ny, nz)."""
    px, py, pz = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    nx, ny, nz = tl.num_programs(0), tl.num_programs(1), tl.num_programs(2)
    row = (pz * ny + py) * nx + px
    cols = tl.arange(0, BLOCK)
    values = tl.where(cols == 0, px, tl.where(cols == 1, py, tl.where(cols == 2, pz,
             tl.where(cols == 3, nx, tl.where(cols == 4, ny, nz)))))
    tl.store(out + row * 6 + cols, values, mask=cols < 6)


@pytest.mark.parametrize("grid", [(1,), (7,), (3, 5), (2, 3, 4), (4096,), (16, 16, 16), (1, 1, 3)])
def test_program_ids_and_grid_sizes(grid):
    full = tuple(grid) + (1,) * (3 - len(grid))
    out = np.full((full[2], full[1], full[0], 6), -1, np.int32)
    grid_kernel[grid](out, BLOCK=8)
    z, y, x = np.meshgrid(np.arange(full[2]), np.arange(full[1]), np.arange(full[0]), indexing="ij")
    np.testing.assert_array_equal(out[..., 0], x)
    np.testing.assert_array_equal(out[..., 1], y)
    np.testing.assert_array_equal(out[..., 2], z)
    np.testing.assert_array_equal(out[..., 3:], np.broadcast_to(full, out[..., 3:].shape))


def test_large_grid_runs_on_several_threads():
    naiad.knobs.cpu.threads = 3
    n, block = 4096 * 64 - 5, 64
    x = np.random.default_rng(2).normal(size=n).astype(np.float32)
    y = np.random.default_rng(3).normal(size=n).astype(np.float32)
    out = np.zeros(n, np.float32)
    from naiad.tools.gallery import add_kernel

    add_kernel[(naiad.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    np.testing.assert_array_equal(out, x + y)


# -- block pointers --------------------------------------------------------------------------------
@naiad.jit
def block_copy_kernel(x, out, M, N, stride_m, stride_n, out_m, out_n,
                      BM: tl.constexpr, BN: tl.constexpr, PAD: tl.constexpr):
    """Copy block (pid0, pid1) of an M x N view of ``x`` through block pointers; the padded
    block (BM x BN, beyond the view) is stored whole into ``out`` (a padded M x N array)."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    src = tl.make_block_ptr(x, shape=(M, N), strides=(stride_m, stride_n), offsets=(pm * BM, pn * BN),
                            block_shape=(BM, BN), order=(1, 0))
    dst = tl.make_block_ptr(out, shape=(out_m, out_n), strides=(out_n, 1), offsets=(pm * BM, pn * BN),
                            block_shape=(BM, BN), order=(1, 0))
    if PAD == "zero":
        v = tl.load(src, boundary_check=(0, 1), padding_option="zero")
    else:
        v = tl.load(src, boundary_check=(0, 1), padding_option="nan")
    tl.store(dst, v)


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("transposed", [False, True])
def test_block_pointer_load_pads_outside_the_view(pad, transposed):
    m, n, bm, bn = 37, 21, 16, 8
    base = np.random.default_rng(4).normal(size=(n, m) if transposed else (m, n)).astype(np.float32)
    view = base.T if transposed else base
    strides = (1, m) if transposed else (n, 1)
    gm, gn = naiad.cdiv(m, bm), naiad.cdiv(n, bn)
    out = np.full((gm * bm, gn * bn), 99, np.float32)
    block_copy_kernel[(gm, gn)](base, out, m, n, *strides, gm * bm, gn * bn, BM=bm, BN=bn, PAD=pad)
    expected = np.full(out.shape, 0.0 if pad == "zero" else np.nan, np.float32)
    expected[:m, :n] = view
    np.testing.assert_array_equal(out, expected)


@naiad.jit
def block_advance_kernel(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """Row sums of an M x N matrix: one program per BM rows, a loop over column blocks with
    tl.advance; the sums are stored through a 1-D block pointer with boundary_check."""
    pm = tl.program_id(0)
    src = tl.make_block_ptr(x, shape=(M, N), strides=(N, 1), offsets=(pm * BM, 0),
                            block_shape=(BM, BN), order=(1, 0))
    acc = tl.zeros((BM,), dtype=tl.float32)
    for _ in range(0, N, BN):
        acc += tl.sum(tl.load(src, boundary_check=(0, 1)), axis=1)
        src = tl.advance(src, (0, BN))
    dst = tl.make_block_ptr(out, shape=(M,), strides=(1,), offsets=(pm * BM,), block_shape=(BM,),
                            order=(0,))
    tl.store(dst, acc, boundary_check=(0,))


def test_block_pointer_advance_in_a_loop_and_boundary_checked_store():
    m, n = 45, 70
    x = np.random.default_rng(5).normal(size=(m, n)).astype(np.float32)
    out = np.full(m + 3, 7.0, np.float32)
    block_advance_kernel[(naiad.cdiv(m, 16),)](x, out, m, n, BM=16, BN=32)
    np.testing.assert_allclose(out[:m], x.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[m:], 7.0)


@naiad.jit
def shift_kernel(x, y, n, BLOCK: tl.constexpr):
    """x[i + 1] = x[i] and y[i + 1] += y[i]: the loads must complete before the writes."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x + offs + 1, tl.load(x + offs, mask=m) * 2, mask=m)
    tl.atomic_add(y + offs + 1, tl.load(y + offs, mask=m), mask=m)


def test_shifted_in_place_update_reads_before_writing():
    n = 45
    x, y = np.arange(n + 1, dtype=np.float32), np.arange(n + 1, dtype=np.int32)
    ex, ey = x.copy(), y.copy()
    ex[1:] = x[:-1] * 2
    ey[1:] += y[:-1]
    shift_kernel[(1,)](x, y, n, BLOCK=64)
    np.testing.assert_array_equal(x, ex)
    np.testing.assert_array_equal(y, ey)
