"""Loops that update several blocks element by element, as Inductor's Welford reductions do
(``if roffset == 0: first values else: update``): the first trip runs apart
(naiad/passes/peel_first_iteration.py), other small branches become selects on the CPU
(naiad/passes/speculate_ifs.py), the yields are written in one pass over their chunks
(`control._write_fused`), and masked accumulator updates are stored without x86 masked stores
(`ChunkEmitter.store_chunk`).  Results against numpy for sizes, masks and dtypes; the TTGIR
shows which branches were turned into selects and which were kept (integer division, memory
accesses, an untaken branch that would divide by zero)."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def welford_rows(x_ptr, mean_ptr, m2_ptr, count_ptr, rows, cols, XBLOCK: tl.constexpr,
                 RBLOCK: tl.constexpr):
    """Mean, sum of squared deviations and count of each row, Inductor's Welford form."""
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < rows
    rbase = tl.arange(0, RBLOCK)[None, :]
    mean = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    m2 = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    weight = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    for roffset in range(0, cols, RBLOCK):
        rindex = roffset + rbase
        mask = (rindex < cols) & xmask
        v = tl.load(x_ptr + xindex * cols + rindex, mask, other=0.0).to(tl.float32)
        if roffset == 0:
            new_mean, new_m2, new_weight = v, tl.zeros_like(v), tl.full(v.shape, 1.0, tl.float32)
        else:
            delta = v - mean
            new_weight = weight + 1.0
            new_mean = mean + delta / new_weight
            new_m2 = m2 + delta * (v - new_mean)
        mean = tl.where(mask, new_mean, mean)
        m2 = tl.where(mask, new_m2, m2)
        weight = tl.where(mask, new_weight, weight)
    total = tl.sum(weight, 1)
    row_mean = tl.sum(mean * weight, 1) / total
    spread = tl.sum(m2 + weight * (mean - row_mean[:, None]) * (mean - row_mean[:, None]), 1)
    tl.store(mean_ptr + xindex, row_mean[:, None], xmask)
    tl.store(m2_ptr + xindex, spread[:, None], xmask)
    tl.store(count_ptr + xindex, total[:, None], xmask)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("rows,cols,xblock,rblock", [
    (16, 256, 4, 32), (7, 100, 4, 16), (33, 65, 8, 64), (1, 1, 1, 8), (5, 3000, 2, 128),
])
def test_welford_matches_numpy(dtype, rows, cols, xblock, rblock):
    x = (np.random.default_rng(rows * cols).standard_normal((rows, cols)) * 3 + 1).astype(dtype)
    mean, m2, count = (np.zeros(rows, np.float32) for _ in range(3))
    kernel = welford_rows[(naiad.cdiv(rows, xblock),)](x, mean, m2, count, rows, cols,
                                                      XBLOCK=xblock, RBLOCK=rblock)
    wide = x.astype(np.float64)
    np.testing.assert_array_equal(count, np.full(rows, cols, np.float32))
    np.testing.assert_allclose(mean, wide.mean(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(m2, ((wide - wide.mean(1, keepdims=True)) ** 2).sum(1),
                               rtol=1e-3, atol=1e-3)
    ttgir = kernel.asm["ttgir"]
    # the first trip runs apart (behind ``if 0 < cols``), the loop has neither branch nor test
    loop = ttgir[ttgir.index("scf.for"):] if "scf.for" in ttgir else ""   # cols=1: no loop left
    assert "scf.if" not in loop and "arith.cmpi eq" not in ttgir


@naiad.jit
def guarded_divide(x_ptr, out_ptr, d, BLOCK: tl.constexpr):
    """A branch that must stay a branch: integer division by ``d`` runs only when ``d`` is
    not zero (running it regardless would divide by zero)."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if d != 0:
        q = x // d
    else:
        q = tl.zeros_like(x)
    tl.store(out_ptr + offs, q)


@pytest.mark.parametrize("d", [0, 3, -7])
def test_branches_that_could_trap_stay_branches(d):
    x = np.arange(-32, 32, dtype=np.int32)
    out = np.full(64, 99, np.int32)
    kernel = guarded_divide[(1,)](x, out, d, BLOCK=64)
    expected = np.zeros(64, np.int32) if d == 0 else np.trunc(x / d).astype(np.int32)
    np.testing.assert_array_equal(out, expected)
    assert "scf.if" in kernel.asm["ttgir"]


@naiad.jit
def branch_with_load(x_ptr, y_ptr, out_ptr, flag, BLOCK: tl.constexpr):
    """A branch that reads memory stays a branch (the untaken side's pointer may be invalid)."""
    offs = tl.arange(0, BLOCK)
    if flag > 0:
        v = tl.load(x_ptr + offs)
    else:
        v = tl.load(y_ptr + offs) * 2.0
    tl.store(out_ptr + offs, v)


@naiad.jit
def selected_blocks(x_ptr, out_ptr, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if flag > 0:
        y = x * 2.0 + 1.0
    else:
        y = tl.sqrt(tl.abs(x)) - x
    tl.store(out_ptr + offs, y)


@pytest.mark.parametrize("flag", [3, -1])         # not 1: an argument of 1 is specialized
def test_pure_branches_become_selects_and_others_stay(flag):
    x = np.random.default_rng(abs(flag)).standard_normal(32).astype(np.float32)
    out = np.zeros(32, np.float32)
    kernel = selected_blocks[(1,)](x, out, flag, BLOCK=32)
    expected = x * 2 + 1 if flag > 0 else np.sqrt(np.abs(x)) - x
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    assert "scf.if" not in kernel.asm["ttgir"]

    y = np.random.default_rng(5).standard_normal(32).astype(np.float32)
    kernel = branch_with_load[(1,)](x, y, out, flag, BLOCK=32)
    np.testing.assert_allclose(out, x if flag > 0 else y * 2, rtol=1e-6)
    assert "scf.if" in kernel.asm["ttgir"]


@naiad.jit
def running_pair(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Two carried blocks updated from each other (a parallel assignment) under a mask: the
    fused yields must read each old value before either is overwritten."""
    offs = tl.arange(0, BLOCK)
    a = tl.zeros([BLOCK], tl.float32)
    b = tl.full([BLOCK], 1.0, tl.float32)
    for start in range(0, n, BLOCK):
        mask = start + offs < n
        v = tl.load(x_ptr + start + offs, mask, other=0.0)
        a, b = tl.where(mask, b + v, a), tl.where(mask, a * 0.5 + b, b)
    tl.store(out_ptr + offs, a)
    tl.store(out_ptr + BLOCK + offs, b)


@pytest.mark.parametrize("n", [16, 50, 128])
def test_fused_yields_are_a_parallel_assignment(n):
    block = 16
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    out = np.zeros(2 * block, np.float32)
    running_pair[(1,)](x, out, n, BLOCK=block)
    a, b = np.zeros(block, np.float32), np.ones(block, np.float32)
    for start in range(0, n, block):
        v = np.zeros(block, np.float32)
        valid = min(block, n - start)
        v[:valid] = x[start:start + valid]
        mask = np.arange(block) < valid
        a, b = np.where(mask, b + v, a), np.where(mask, a * np.float32(0.5) + b, b)
    np.testing.assert_allclose(out[:block], a, rtol=1e-6)
    np.testing.assert_allclose(out[block:], b, rtol=1e-6)
