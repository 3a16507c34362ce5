"""Loops that test for their first trip (``i == start``, ``i != start``) run it apart on the CPU
(naiad/passes/peel_first_iteration.py): results against a Python reference over bounds that
run the loop zero, one and many times, constant and runtime bounds, both predicates, a test
inside an inner loop; the TTGIR shows the test left the loop, and stays where the step is not
a constant."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def first_then_decay(x_ptr, out_ptr, start, end, BLOCK: tl.constexpr, STEP: tl.constexpr):
    """acc = x[start] on the first trip, then acc * 0.5 + x[i]; -1 when the loop never runs."""
    offs = tl.arange(0, BLOCK)
    acc = tl.full([BLOCK], -1.0, tl.float32)
    for i in range(start, end, STEP):
        x = tl.load(x_ptr + i * BLOCK + offs)
        if i == start:
            acc = x
        else:
            acc = acc * 0.5 + x
    tl.store(out_ptr + offs, acc)


def first_then_decay_reference(x, start, end, step):
    acc = np.full(x.shape[1], -1.0, np.float32)
    for i in range(start, end, step):
        acc = x[i].copy() if i == start else acc * np.float32(0.5) + x[i]
    return acc


@pytest.mark.parametrize("start,end,step", [
    (0, 10, 1), (0, 10, 3), (2, 3, 1), (4, 4, 1), (7, 2, 2), (1, 16, 5), (0, 1, 4), (3, 15, 4),
])
def test_runtime_bounds(start, end, step):
    x = np.random.default_rng(start * 31 + end).standard_normal((16, 32)).astype(np.float32)
    out = np.zeros(32, np.float32)
    kernel = first_then_decay[(1,)](x, out, start, end, BLOCK=32, STEP=step)
    np.testing.assert_allclose(out, first_then_decay_reference(x, start, end, step), rtol=1e-6)
    loop = kernel.asm["ttgir"]
    loop = loop[loop.index("scf.for"):] if "scf.for" in loop else ""
    assert "arith.cmpi eq" not in loop


@naiad.jit
def first_then_decay_constant(x_ptr, out_ptr, BLOCK: tl.constexpr, START: tl.constexpr,
                              END: tl.constexpr, STEP: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.full([BLOCK], -1.0, tl.float32)
    for i in range(START, END, STEP):
        x = tl.load(x_ptr + i * BLOCK + offs)
        acc = tl.where(i == START, x, acc * 0.5 + x)
    tl.store(out_ptr + offs, acc)


@pytest.mark.parametrize("start,end,step", [(0, 16, 1), (1, 16, 4), (5, 6, 1), (6, 6, 1), (0, 2, 1)])
def test_constant_bounds(start, end, step):
    x = np.random.default_rng(end).standard_normal((16, 8)).astype(np.float32)
    out = np.zeros(8, np.float32)
    kernel = first_then_decay_constant[(1,)](x, out, BLOCK=8, START=start, END=end, STEP=step)
    np.testing.assert_allclose(out, first_then_decay_reference(x, start, end, step), rtol=1e-6)
    assert "arith.cmpi eq" not in kernel.asm["ttgir"]


@naiad.jit
def skip_first(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """The sum of every row but the first, with ``i != 0`` inside an inner loop."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(0, n):
        for half in range(0, 2):
            if i != 0:
                acc += tl.load(x_ptr + i * 2 * BLOCK + half * BLOCK + offs)
    tl.store(out_ptr + offs, acc)


@pytest.mark.parametrize("n", [0, 1, 2, 9])
def test_not_equal_inside_an_inner_loop(n):
    x = np.random.default_rng(n).standard_normal((max(n, 1), 2 * 16)).astype(np.float32)
    out = np.full(16, 7.0, np.float32)
    kernel = skip_first[(1,)](x, out, n, BLOCK=16)
    expected = x[1:n].reshape(-1, 2, 16).sum((0, 1)) if n > 1 else np.zeros(16, np.float32)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert "arith.cmpi ne" not in kernel.asm["ttgir"]


@naiad.jit
def runtime_step(x_ptr, out_ptr, end, step, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.full([BLOCK], -1.0, tl.float32)
    for i in range(0, end, step):
        x = tl.load(x_ptr + i * BLOCK + offs)
        acc = tl.where(i == 0, x, acc * 0.5 + x)
    tl.store(out_ptr + offs, acc)


@pytest.mark.parametrize("end,step", [(10, 3), (1, 2), (0, 1)])
def test_a_runtime_step_keeps_the_test(end, step):
    """A step not known to be positive: later trips are not known to differ from the first."""
    x = np.random.default_rng(end).standard_normal((10, 8)).astype(np.float32)
    out = np.zeros(8, np.float32)
    kernel = runtime_step[(1,)](x, out, end, step, BLOCK=8)
    np.testing.assert_allclose(out, first_then_decay_reference(x, 0, end, step), rtol=1e-6)
    if step != 1:                                   # 1 is specialized: then a constant
        assert "arith.cmpi eq" in kernel.asm["ttgir"]
