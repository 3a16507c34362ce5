"""Pointer tensors advanced through loops (``ptrs += step``), which the CPU backend rewrites into
a loop-invariant base plus a carried offset: Triton's tutorial matmul (masks on K, ``% M`` and
``% N`` on the rows and columns, odd sizes, transposed operands, 1024^3), a while loop
advancing by a runtime stride and nested loops, against numpy; the loops carry offsets, not
pointers, and the while loop's loads are vector loads, not gathers."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.tools import gallery

pytestmark = pytest.mark.shipped_backends


def _operands(m: int, n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k), dtype=np.float32),
            rng.standard_normal((k, n), dtype=np.float32))


@pytest.mark.parametrize("m,n,k,blocks", [
    (70, 50, 90, (32, 32, 16, 2)),
    (70, 50, 90, (64, 64, 32, 8)),
    (1, 17, 3, (16, 16, 16, 1)),
    (128, 64, 256, (32, 64, 32, 4)),
])
def test_tutorial_matmul(m, n, k, blocks):
    a, b = _operands(m, n, k)
    c = gallery.matmul_tutorial(a, b, *blocks)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4,
                               atol=1e-4 * k)


def test_tutorial_matmul_of_transposed_operands():
    """Strides other than 1 along the lanes: the loads cannot be vector loads."""
    a, b = _operands(48, 40, 72, seed=1)
    at, bt = np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T
    c = gallery.matmul_tutorial(at, bt, 32, 32, 16, 2)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4,
                               atol=1e-2)


def test_tutorial_matmul_1024():
    a, b = _operands(1024, 1024, 1024, seed=2)
    c = gallery.matmul_tutorial(a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)


def test_the_loop_carries_offsets_not_pointers():
    a, b = _operands(70, 50, 90)
    kernel = gallery.matmul_tutorial_kernel.warmup(
        a, b, a, 70, 50, 90, 90, 1, 50, 1, 50, 1, BLOCK_SIZE_M=32, BLOCK_SIZE_N=32,
        BLOCK_SIZE_K=16, GROUP_SIZE_M=2, grid=(1,))
    loop_header = next(line for line in kernel.asm["ttir"].splitlines() if "scf.for" in line)
    assert "-> (i64, i64, tensor<32x32xf32>)" in loop_header


@naiad.jit
def sum_rows_while(x_ptr, out_ptr, n_rows, stride, BLOCK: tl.constexpr):
    """out[j] = sum of x[r, j] over rows r (``stride`` elements apart) below n_rows."""
    cols = tl.arange(0, BLOCK)
    ptrs = x_ptr + tl.program_id(0) * BLOCK + cols
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    row = 0
    while row < n_rows:
        acc += tl.load(ptrs)
        ptrs += stride
        row += 1
    tl.store(out_ptr + tl.program_id(0) * BLOCK + cols, acc)
    tl.store(out_ptr + tl.program_id(0) * BLOCK + cols + 2 * BLOCK, tl.load(ptrs - stride))


@pytest.mark.parametrize("rows,cols", [(1, 64), (7, 64), (33, 96)])
def test_while_loop_advancing_by_a_runtime_stride(rows, cols):
    x = np.random.default_rng(rows).standard_normal((rows, cols), dtype=np.float32)
    out = np.zeros(4 * 32, np.float32)
    sum_rows_while[(2,)](x, out, rows, cols, BLOCK=32)
    np.testing.assert_allclose(out[:64], x[:, :64].sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[64:], x[rows - 1, :64])     # the pointers after the loop
    for kernel in sum_rows_while.cache.values():
        assert "masked.gather" not in kernel.asm["llir"]


@naiad.jit
def sum_tiles_nested(x_ptr, out_ptr, row_blocks, col_blocks, stride, BLOCK: tl.constexpr):
    """out = the sum of the row_blocks x col_blocks tiles of BLOCK x BLOCK elements of x; the
    inner loop starts from the pointers the outer loop carries."""
    r = tl.arange(0, BLOCK)
    row_ptrs = x_ptr + r[:, None] * stride + r[None, :]
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for i in range(row_blocks):
        ptrs = row_ptrs
        for j in range(col_blocks):
            acc += tl.load(ptrs)
            ptrs += BLOCK
        row_ptrs += BLOCK * stride
    tl.store(out_ptr + r[:, None] * BLOCK + r[None, :], acc)


def test_nested_loops_advancing_pointers():
    x = np.random.default_rng(3).standard_normal((3 * 16, 5 * 16 + 7), dtype=np.float32)
    out = np.zeros((16, 16), np.float32)
    sum_tiles_nested[(1,)](x, out, 3, 5, x.shape[1], BLOCK=16)
    tiles = x[:, :5 * 16].reshape(3, 16, 5, 16).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(out, tiles.sum(axis=(0, 1)), rtol=1e-5, atol=1e-5)
    kernel = next(iter(sum_tiles_nested.cache.values()))
    loops = [line for line in kernel.asm["ttir"].splitlines() if "scf.for" in line]
    assert len(loops) == 2 and not any("!tt.ptr" in line for line in loops)
