"""fp32 atomic adds to consecutive, 16-byte aligned elements whose result is unused go four
elements at a time through one 16-byte compare-and-swap on x86 (`lowering.memory`); every
other atomic add goes element by element.  Scatter-adds with repeated rows, split across
threads, masks that cut groups of four, misaligned pointers and used results all match numpy."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends.cpu.target import host_features

pytestmark = pytest.mark.shipped_backends

WIDE = "+cx16" in host_features().split(",")


def _wide(kernel) -> bool:
    """Whether the kernel's LLVM IR holds a 16-byte compare-and-swap."""
    return any("cmpxchg" in line and "i128" in line for line in kernel.asm["llir"].splitlines())


@naiad.jit
def scatter_rows(ids_ptr, grad_ptr, table_ptr, n_rows, N, BLOCK_R: tl.constexpr,
                 BLOCK_N: tl.constexpr, SHIFT: tl.constexpr):
    """table[ids[r], SHIFT + c] += grad[r, c]: an embedding's backward."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < n_rows) & (cols < N)
    ids = tl.load(ids_ptr + rows, rows < n_rows, other=0)
    grad = tl.load(grad_ptr + rows * N + cols, mask, other=0.0)
    tl.atomic_add(table_ptr + ids * (N + SHIFT) + SHIFT + cols, grad, mask, sem="relaxed")


def _scatter(n_rows, n, block_n, shift=0, split=False, dtype=np.float32):
    rng = np.random.default_rng(n_rows * 7 + n)
    ids = rng.integers(0, 40, n_rows).astype(np.int64)           # many repeated rows
    grad = rng.standard_normal((n_rows, n)).astype(dtype)
    table = np.zeros((40, n + shift), dtype)
    grid = (naiad.cdiv(n_rows, 4),)
    kernel = scatter_rows[grid](ids, grad, table, n_rows, n, BLOCK_R=4, BLOCK_N=block_n, SHIFT=shift)
    if split:                                   # run the rest split across threads, contending
        kernel.launcher.work.program_s = 1.0
        scatter_rows[grid](ids, grad, table, n_rows, n, BLOCK_R=4, BLOCK_N=block_n, SHIFT=shift)
    expected = np.zeros((40, n + shift), np.float64)
    np.add.at(expected, (ids[:, None], shift + np.arange(n)[None, :]), grad.astype(np.float64))
    return kernel, table, expected * (2 if split else 1)


@pytest.mark.parametrize("n_rows", [1, 37, 256])
@pytest.mark.parametrize("split", [False, True])
def test_scatter_add_with_repeated_rows_matches_numpy(n_rows, split):
    kernel, table, expected = _scatter(n_rows, 128, 128, split=split)
    np.testing.assert_allclose(table, expected, rtol=1e-5, atol=1e-4)
    if WIDE:
        assert _wide(kernel)


@pytest.mark.parametrize("n", [100, 3, 66])
def test_masks_that_cut_groups_of_four(n):
    kernel, table, expected = _scatter(50, n, 128, split=True)
    np.testing.assert_allclose(table, expected, rtol=1e-5, atol=1e-4)


def test_misaligned_rows_go_element_by_element():
    kernel, table, expected = _scatter(64, 64, 64, shift=1)
    np.testing.assert_allclose(table, expected, rtol=1e-5, atol=1e-4)
    assert not _wide(kernel)


def test_other_types_go_element_by_element():
    kernel, table, expected = _scatter(64, 64, 64, dtype=np.float64)
    np.testing.assert_allclose(table, expected, rtol=1e-12, atol=1e-12)
    assert not _wide(kernel)


@naiad.jit
def add_and_return(x_ptr, old_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_add(x_ptr + offs, tl.full([BLOCK], 1.5, tl.float32))
    tl.store(old_ptr + offs, old)


def test_adds_whose_result_is_read_return_the_old_values():
    x = np.arange(64, dtype=np.float32)
    old = np.zeros(64, np.float32)
    kernel = add_and_return[(3,)](x, old, BLOCK=64)
    np.testing.assert_array_equal(x, np.arange(64, dtype=np.float32) + 4.5)
    assert set(old.tolist()) <= set((np.arange(64)[:, None] + np.array([0, 1.5, 3.0])).ravel().tolist())
    assert not _wide(kernel)


@naiad.jit
def shifted_rows_add(x_ptr, val_ptr, NUM: tl.constexpr, ROW_STEP: tl.constexpr):
    """Row r adds into ``x[r * ROW_STEP : r * ROW_STEP + NUM]``: with ROW_STEP 1 the second row
    starts one element past an aligned address (Triton's test_tensor_atomic_add_shift_1)."""
    rows = tl.arange(0, 2)
    cols = tl.arange(0, NUM)
    values = tl.load(val_ptr + rows[:, None] * NUM + cols[None, :])
    tl.atomic_add(x_ptr + rows[:, None] * ROW_STEP + cols[None, :], values)


@pytest.mark.parametrize("num", [2, 4, 8, 32, 128])
@pytest.mark.parametrize("row_step,wide", [(1, False), (4, True), (2, False), (128, True)])
def test_rows_starting_off_alignment_add_lane_by_lane(num, row_step, wide):
    """A row that starts off a 16-byte boundary must not take the 16-byte compare-and-swap
    (a misaligned ``cmpxchg16b`` faults and killed the process)."""
    rng = np.random.default_rng(num + row_step)
    val = rng.standard_normal((2, num)).astype(np.float32)
    x = np.zeros(row_step + num + 128, np.float32)
    kernel = shifted_rows_add[(1,)](x, val, NUM=num, ROW_STEP=row_step)
    expected = np.zeros_like(x, np.float64)
    for r in range(2):
        expected[r * row_step:r * row_step + num] += val[r]
    np.testing.assert_allclose(x, expected, rtol=1e-6, atol=1e-6)
    if WIDE:
        assert _wide(kernel) == (wide and num >= 4)


@naiad.jit
def hinted_add(x_ptr, val_ptr, offset, BLOCK: tl.constexpr):
    """An add whose offset the kernel claims (wrongly, for odd offsets) is a multiple of 16."""
    cols = tl.max_contiguous(tl.multiple_of(offset + tl.arange(0, BLOCK), 16), BLOCK)
    tl.atomic_add(x_ptr + cols, tl.load(val_ptr + tl.arange(0, BLOCK)))


@pytest.mark.parametrize("offset", [0, 16, 3, 5])
def test_a_wrong_alignment_hint_still_adds_right(offset):
    """The four-wide add checks each group's address at run time: a lying ``tl.multiple_of``
    gives the right sums, not a fault."""
    val = np.arange(1, 33, dtype=np.float32)
    x = np.zeros(64, np.float32)
    kernel = hinted_add[(1,)](x, val, offset, BLOCK=32)
    expected = np.zeros(64, np.float32)
    expected[offset:offset + 32] = val
    np.testing.assert_array_equal(x, expected)
    if WIDE:
        assert _wide(kernel)
