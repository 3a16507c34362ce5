"""Dots whose operands go through rings of two local-memory slots (``num_stages=3``,
`naiad.codegen.gpu.operand_rings`) run on the OpenCL device against numpy: an operand loaded
before the loop, two dots a trip (attention's shape), loops inside loops, odd trip counts, a
loop whose step is not 1, and a dot under a branch in the loop (no ring: it may skip trips)."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.usefixtures("opencl")


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)


@naiad.jit
def fixed_a_kernel(a, b, c, K, M: tl.constexpr, N: tl.constexpr, BK: tl.constexpr):
    """C = A[:, :BK] @ (sum over K steps of B's row blocks): A read once, before the loop."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, BK)
    x = tl.load(a + rm[:, None] * BK + rk[None, :])
    acc = tl.zeros((M, N), tl.float32)
    for k in range(0, K, BK):
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk)[:, None] < K, other=0)
        acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("depth", [16, 48, 70])          # 1, 3 and 5 trips, the last one masked
def test_an_operand_loaded_before_the_loop(depth):
    rng = np.random.default_rng(depth)
    m, n, bk = 32, 32, 16
    a = rng.standard_normal((m, bk)).astype(np.float32)
    b = rng.standard_normal((depth, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    fixed_a_kernel[(1,)](a, b, c, depth, M=m, N=n, BK=bk, num_stages=3)
    padded = np.zeros((-(-depth // bk) * bk, n), np.float32)
    padded[:depth] = b
    _close(c, a.astype(np.float64) @ padded.reshape(-1, bk, n).sum(0))


@naiad.jit
def two_dots_kernel(q, k, v, o, L, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """O = (Q K^T) V without the softmax: two dots a trip, the second on the first's result."""
    rm, rn, rd = tl.program_id(0) * BM + tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, D)
    x = tl.load(q + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((BM, D), tl.float32)
    for start in range(0, L, BN):
        kt = tl.load(k + (start + rn)[None, :] * D + rd[:, None])
        s = tl.dot(x, kt)
        vv = tl.load(v + (start + rn)[:, None] * D + rd[None, :])
        acc = tl.dot(s, vv, acc)
    tl.store(o + rm[:, None] * D + rd[None, :], acc)


@pytest.mark.parametrize("length", [16, 64, 80])
def test_two_dots_a_trip(length):
    rng = np.random.default_rng(length)
    m, d = 32, 16
    q, k, v = (rng.standard_normal(shape).astype(np.float32) / 4 for shape in ((m, d), (length, d), (length, d)))
    o = np.zeros((m, d), np.float32)
    two_dots_kernel[(2,)](q, k, v, o, length, D=d, BM=16, BN=16, num_stages=3)
    _close(o, (q.astype(np.float64) @ k.T) @ v)


@naiad.jit
def nested_kernel(a, b, c, K, R, N: tl.constexpr, BK: tl.constexpr):
    """C = sum over R rounds of round-scaled A @ B: a dot's loop inside another loop."""
    rm, rn, rk = tl.arange(0, N), tl.arange(0, N), tl.arange(0, BK)
    total = tl.zeros((N, N), tl.float32)
    for r in range(R):
        acc = tl.zeros((N, N), tl.float32)
        for k in range(0, K, BK):
            x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
            y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(x, y, acc)
        total += acc * (r + 1)
    tl.store(c + rm[:, None] * N + rn[None, :], total)


@pytest.mark.parametrize("rounds", [1, 3])
def test_a_dot_loop_inside_another_loop(rounds):
    rng = np.random.default_rng(rounds)
    n, depth = 32, 48
    a = rng.standard_normal((n, depth)).astype(np.float32)
    b = rng.standard_normal((depth, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    nested_kernel[(1,)](a, b, c, depth, rounds, N=n, BK=16, num_stages=3)
    _close(c, (a.astype(np.float64) @ b) * sum(range(1, rounds + 1)))


@naiad.jit
def strided_kernel(a, b, c, K, START, N: tl.constexpr, BK: tl.constexpr, EVERY: tl.constexpr):
    """The trips from START on, BK * EVERY apart (a step other than 1); with EVERY 2 the
    dot sits under a branch taken on every other trip (no ring there)."""
    rm, rn, rk = tl.arange(0, N), tl.arange(0, N), tl.arange(0, BK)
    acc = tl.zeros((N, N), tl.float32)
    for k in range(START, K, BK * (3 - EVERY)):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        if EVERY == 2:
            if (k // BK) % 2 == 0:
                acc = tl.dot(x, y, acc)
        else:
            acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("every", [1, 2])
@pytest.mark.parametrize("start", [0, 16])
def test_steps_other_than_one_and_a_dot_under_a_branch(every, start):
    rng = np.random.default_rng(every + start)
    n, depth, bk = 32, 128, 16
    a = rng.standard_normal((n, depth)).astype(np.float32)
    b = rng.standard_normal((depth, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    strided_kernel[(1,)](a, b, c, depth, start, N=n, BK=bk, EVERY=every, num_stages=3)
    step = bk * (3 - every)
    taken = [k for k in range(start, depth, step) if every == 1 or (k // bk) % 2 == 0]
    want = sum(a[:, k:k + bk].astype(np.float64) @ b[k:k + bk] for k in taken)
    _close(c, want)
