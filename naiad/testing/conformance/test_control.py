"""Loops (runtime bounds, carried tensors, nesting, while, static_range) and runtime if/else
with tensor results, against plain Python/numpy."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .reference import assert_dot_close



@naiad.jit
def loops_kernel(x, out, start, stop, step, BLOCK: tl.constexpr):
    """acc = sum over i in range(start, stop, step) of x * i + (i % 3); each program adds its id."""
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    count = 0
    for i in range(start, stop, step):
        acc += v * i + (i % 3)
        count += 1
    tl.store(out + tl.program_id(0) * BLOCK + offs, acc + count * 1000 + tl.program_id(0))


@pytest.mark.parametrize("start,stop,step", [(0, 10, 1), (3, 17, 4), (5, 5, 1), (7, 2, 1), (-4, 9, 3)])
def test_range_with_runtime_bounds(start, stop, step):
    x = np.random.default_rng(0).normal(size=32).astype(np.float32)
    out = np.zeros(3 * 32, np.float32)
    loops_kernel[(3,)](x, out, start, stop, step, BLOCK=32)
    steps = list(range(start, stop, step))
    acc = sum((x * i + int(np.fmod(i, 3)) for i in steps), np.zeros(32, np.float32))  # C's %
    expected = np.concatenate([acc + len(steps) * 1000 + p for p in range(3)])
    np.testing.assert_allclose(out, expected, rtol=1e-5)


@naiad.jit
def nested_kernel(x, out, rows, cols, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    """Nested loops over a matrix in column blocks, a static_range inside, a shift-register of
    two carried tensors (prev/cur swap each step)."""
    offs = tl.arange(0, BLOCK)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    prev = tl.zeros((BLOCK,), dtype=tl.float32)
    cur = tl.full((BLOCK,), 1.0, dtype=tl.float32)
    for r in range(rows):
        for c0 in range(0, cols, BLOCK):
            v = tl.load(x + r * cols + c0 + offs, mask=c0 + offs < cols, other=0.0)
            for k in tl.static_range(UNROLL):
                total += v * (k + 1)
        prev, cur = cur, prev + cur
    tl.store(out + offs, total)
    tl.store(out + BLOCK + offs, cur)


def test_nested_loops_and_static_range():
    rows, cols, block = 5, 70, 32
    x = np.random.default_rng(1).normal(size=(rows, cols)).astype(np.float32)
    out = np.zeros(2 * block, np.float32)
    nested_kernel[(1,)](x, out, rows, cols, BLOCK=block, UNROLL=3)
    padded = np.zeros((rows, 3 * block), np.float32)
    padded[:, :cols] = x
    total = padded.reshape(rows, 3, block).sum(axis=(0, 1)) * (1 + 2 + 3)
    np.testing.assert_allclose(out[:block], total, rtol=1e-5, atol=1e-5)
    fib = [0.0, 1.0]
    for _ in range(rows):
        fib = [fib[1], fib[0] + fib[1]]
    np.testing.assert_array_equal(out[block:], fib[1])


@naiad.jit
def while_kernel(x, out, steps, limit, BLOCK: tl.constexpr):
    """Collatz-like iteration of a whole tile until its max passes ``limit`` (or 50 rounds)."""
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    n = 0
    while (tl.max(v, axis=0) < limit) & (n < 50):
        v = tl.where(v % 2 == 0, v // 2 + 7, 3 * v + 1)
        n += 1
    tl.store(out + offs, v)
    tl.store(steps, n)


def test_while_loop_with_a_tensor_condition():
    x = np.arange(1, 17, dtype=np.int32)
    out, steps = np.zeros(16, np.int32), np.zeros(1, np.int32)
    while_kernel[(1,)](x, out, steps, 200, BLOCK=16)
    v, n = x.copy(), 0
    while v.max() < 200 and n < 50:
        v = np.where(v % 2 == 0, v // 2 + 7, 3 * v + 1)
        n += 1
    np.testing.assert_array_equal(out, v)
    assert steps[0] == n


@naiad.jit
def branch_kernel(x, out, flags, BLOCK: tl.constexpr):
    """A runtime if/else per program choosing tensors of different kinds (a loaded one, a
    transposed one, a broadcast) and a scalar."""
    pid = tl.program_id(0)
    rows = tl.arange(0, BLOCK)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    tile = tl.load(x + rows * BLOCK + cols)
    flag = tl.load(flags + pid)
    if flag > 0:
        result = tl.trans(tile) * 2
        extra = 1.5
    elif flag == 0:
        result = tl.broadcast_to(tl.sum(tile, axis=0)[None, :], (BLOCK, BLOCK))
        extra = -1.0
    else:
        result = tile
        extra = 0.0
    tl.store(out + pid * BLOCK * BLOCK + rows * BLOCK + cols, result + extra)


def test_if_else_with_tensor_results():
    block = 16
    x = np.random.default_rng(2).normal(size=(block, block)).astype(np.float32)
    flags = np.array([1, 0, -3, 5], np.int32)
    out = np.zeros((4, block, block), np.float32)
    branch_kernel[(4,)](x, out, flags, BLOCK=block)
    expected = {1: x.T * 2 + 1.5, 0: np.broadcast_to(x.sum(axis=0), (block, block)) - 1.0, -1: x}
    for p, f in enumerate(flags):
        np.testing.assert_allclose(out[p], expected[int(np.sign(f))], rtol=1e-5, atol=1e-5)


@naiad.jit
def carried_transpose_kernel(x, out, steps, BLOCK: tl.constexpr):
    """A carried tile replaced by a transpose of itself: computing in place would read
    elements already overwritten."""
    rows = tl.arange(0, BLOCK)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    tile = tl.load(x + rows * BLOCK + cols)
    for _ in range(steps):
        tile = tl.trans(tile + 1) * 2
    tl.store(out + rows * BLOCK + cols, tile)


def test_loop_carried_tensor_rearranged_each_step():
    block = 16
    x = np.arange(block * block, dtype=np.float32).reshape(block, block)
    out = np.zeros_like(x)
    carried_transpose_kernel[(1,)](x, out, 3, BLOCK=block)
    expected = x
    for _ in range(3):
        expected = (expected + 1).T * 2
    np.testing.assert_array_equal(out, expected)


@naiad.jit
def pointer_loop_kernel(x, out, n, BLOCK: tl.constexpr):
    """Carried pointer tensors advanced each step, and an early-exit-free masked tail."""
    offs = tl.arange(0, BLOCK)
    ptrs = x + offs
    acc = tl.zeros((BLOCK,), dtype=tl.int64)
    for start in range(0, n, BLOCK):
        acc += tl.load(ptrs, mask=start + offs < n, other=0)
        ptrs += BLOCK
    tl.store(out + offs, acc)


def test_loop_carried_pointers():
    n, block = 1000, 64
    x = np.arange(n, dtype=np.int64) ** 2
    out = np.zeros(block, np.int64)
    pointer_loop_kernel[(1,)](x, out, n, BLOCK=block)
    padded = np.zeros(naiad.cdiv(n, block) * block, np.int64)
    padded[:n] = x
    np.testing.assert_array_equal(out, padded.reshape(-1, block).sum(axis=0))


@naiad.jit(noinline=True)
def _scaled_store(ptr, values, scale):
    """A function kept as a call: it stores, and returns a tensor and a scalar."""
    offs = tl.arange(0, 16)
    tl.store(ptr + offs, values * scale)
    return values + scale, tl.sum(values, axis=0)


@naiad.jit
def noinline_kernel(x, out):
    offs = tl.arange(0, 16)
    v = tl.load(x + offs)
    first, total = _scaled_store(x, v, 2.0)         # overwrites x: v was read before
    second, _ = _scaled_store(out, first, 3.0)
    tl.store(out + 16 + offs, v + second + total)


def test_noinline_functions_are_called():
    x = np.arange(16, dtype=np.float32)
    original = x.copy()
    out = np.zeros(32, np.float32)
    noinline_kernel[(1,)](x, out)
    first = original + 2
    np.testing.assert_array_equal(x, original * 2)
    np.testing.assert_array_equal(out[:16], first * 3)
    np.testing.assert_array_equal(out[16:], original + (first + 3) + original.sum())


# -- a tensor computed before a loop or branch, first needed in a buffer inside it -------------
# The CPU keeps such a tensor (a constant accumulator) lazy and fills a buffer where a dot first
# needs it.  When that is a
# loop that runs zero times or a branch not taken, later uses must not read the unfilled buffer.

@naiad.jit
def _online_softmax_block(acc, l_i, m_i, q, K, V, lo, hi, BLOCK: tl.constexpr):
    """Flash attention's inner loop (Triton's tutorial 06): running max, sum and a dot."""
    r = tl.arange(0, BLOCK)
    cols = tl.arange(0, 64)
    for start in tl.range(lo, hi, BLOCK):
        k = tl.load(K + (start + r)[:, None] * 64 + cols[None, :])
        qk = tl.dot(q, tl.trans(k))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        v = tl.load(V + (start + r)[:, None] * 64 + cols[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_ij
    return acc, l_i, m_i


@naiad.jit
def _two_calls(Q, K, V, Out, zero, BLOCK: tl.constexpr, FIRST: tl.constexpr):
    r = tl.arange(0, BLOCK)
    cols = tl.arange(0, 64)
    q = tl.load(Q + r[:, None] * 64 + cols[None, :])
    acc = tl.zeros([BLOCK, 64], tl.float32)
    l_i = tl.zeros([BLOCK], tl.float32) + 1.0
    m_i = tl.zeros([BLOCK], tl.float32) - float("inf")
    if FIRST:     # a call whose loop runs zero times must change nothing
        acc, l_i, m_i = _online_softmax_block(acc, l_i, m_i, q, K, V, 0, zero, BLOCK)
    acc, l_i, m_i = _online_softmax_block(acc, l_i, m_i, q, K, V, zero, zero + BLOCK, BLOCK)
    tl.store(Out + r[:, None] * 64 + cols[None, :], acc / l_i[:, None])


@pytest.mark.parametrize("first", [False, True])
def test_a_zero_trip_loop_before_the_same_loop_changes_nothing(first):
    rng = np.random.default_rng(0)
    q, k, v = [(rng.standard_normal((64, 64)) * 0.5).astype(np.float16) for _ in range(3)]
    qk = q.astype(np.float32) @ k.astype(np.float32).T
    p = np.exp2(qk - qk.max(axis=1, keepdims=True))
    ref = (p.astype(np.float16).astype(np.float32) @ v.astype(np.float32)) / p.sum(axis=1, keepdims=True)
    out = np.zeros((64, 64), np.float32)
    _two_calls[(1,)](q, k, v, out, 0, BLOCK=64, FIRST=first)
    np.testing.assert_allclose(out, ref, rtol=1e-2, atol=1e-2)


@naiad.jit
def _dot_in_a_branch(A, B, Out, take):
    r = tl.arange(0, 16)
    tile = r[:, None] * 16 + r[None, :]
    a = tl.load(A + tile)
    b = tl.load(B + tile)
    ones = tl.full([16, 16], 1.0, tl.float32)
    if take != 0:
        tl.store(Out + 256 + tile, tl.dot(a, b, ones))
    tl.store(Out + tile, tl.dot(a, b * 2.0, ones))


@pytest.mark.parametrize("take", [0, 1])
def test_a_branch_not_taken_leaves_later_uses_right(take):
    rng = np.random.default_rng(1)
    a, b = [rng.standard_normal((16, 16)).astype(np.float32) for _ in range(2)]
    out = np.zeros((2, 16, 16), np.float32)
    _dot_in_a_branch[(1,)](a, b, out, take)
    assert_dot_close(out[0], 2 * (a.astype(np.float64) @ b) + 1, a, 2 * b, rtol=1e-5)
    assert_dot_close(out[1], take * (a.astype(np.float64) @ b + 1), a, take * b, rtol=1e-5)


@naiad.jit
def _scale_by(x, K: tl.constexpr):
    return x * K


@naiad.jit
def _runtime_value_to_constexpr_parameter(X, Out, n):
    offs = tl.arange(0, 16)
    tl.store(Out + offs, _scale_by(tl.load(X + offs), n) + _scale_by(1.0, 3))


def test_a_device_function_constexpr_parameter_takes_a_runtime_value():
    """Triton specializes a device function on its arguments, not its annotations: a runtime
    value passed to a tl.constexpr-annotated parameter stays a runtime value."""
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    _runtime_value_to_constexpr_parameter[(1,)](x, out, 5)
    np.testing.assert_array_equal(out, x * 5 + 3)


@naiad.jit
def _backwards(X, Out, K: tl.constexpr, lo, STEP: tl.constexpr):
    acc = tl.zeros((16,), tl.float32)
    r = tl.arange(0, 16)
    for i in range(K - 1, lo, STEP):
        acc = acc * 0.5 + tl.load(X + i * 16 + r)
    tl.store(Out + r, acc)


@pytest.mark.parametrize("step,lo", [(-1, -1), (-2, -1), (-3, 2), (-1, 5), (-1, 9)])
def test_range_with_a_negative_step_counts_down(step, lo):
    """Triton runs a constant negative step over the mirrored range; the order matters here
    (each step halves what came before)."""
    x = np.random.default_rng(3).random((8, 16)).astype(np.float32)
    out = np.zeros(16, np.float32)
    _backwards[(1,)](x, out, K=8, lo=lo, STEP=step)
    ref = np.zeros(16, np.float32)
    for i in range(7, lo, step):
        ref = ref * 0.5 + x[i]
    np.testing.assert_allclose(out, ref, rtol=1e-6)
