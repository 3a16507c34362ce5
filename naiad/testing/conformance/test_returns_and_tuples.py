"""Early returns inside runtime ifs, conditional expressions without a value, one-element
conditions, and tuple / namedtuple kernel arguments (flattened at the launch), run on the CPU
against plain Python."""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import pytest

import naiad
import naiad.language as tl



@naiad.jit
def nested_return_kernel(conds, vals, out):
    """out[pid] = the value picked by three runtime conditions, or left alone (early return)."""
    pid = tl.program_id(0)
    val = 0
    if tl.load(conds + 3 * pid) != 0:
        if tl.load(conds + 3 * pid + 1) != 0:
            val = tl.load(vals)
        else:
            return
    else:
        if tl.load(conds + 3 * pid + 2) != 0:
            val = tl.load(vals + 1)
        else:
            val = tl.load(vals + 2)
    tl.store(out + pid, val)


def test_nested_ifs_with_an_early_return():
    cases = list(itertools.product([0, 1], repeat=3))
    conds = np.array(cases, np.int32).reshape(-1)
    vals = np.array([10, 20, 30], np.int32)
    out = np.full(len(cases), -1, np.int32)
    nested_return_kernel[(len(cases),)](conds, vals, out)
    expected = [(-1 if not c2 else 10) if c1 else (20 if c3 else 30) for c1, c2, c3 in cases]
    np.testing.assert_array_equal(out, expected)


@naiad.jit
def clamp_or_scale(x, limit):
    """Returns from both branches of a nested if, and from the end."""
    if x > limit:
        if x > 2 * limit:
            return limit * 2
        return limit
    return x * 3


@naiad.jit
def first_above(x, BLOCK: tl.constexpr, threshold):
    """The index of the first element above ``threshold`` (unrolled), or BLOCK."""
    for i in tl.static_range(BLOCK):
        if tl.load(x + i) > threshold:
            return i
    return BLOCK


@naiad.jit
def helpers_kernel(x, out, limit, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    v = tl.load(x + pid)
    if pid % 2 == 0:                       # a returning helper called inside a runtime if
        v = clamp_or_scale(v, limit)
    tl.store(out + pid, v)
    tl.store(out + BLOCK + pid, first_above(x, BLOCK, tl.load(x + pid)))


def test_helpers_that_return_early_compute_their_value_on_every_path():
    x = np.array([5, 1, 12, 30, 3, 7, 25, 2], np.int32)
    out = np.zeros(16, np.int32)
    limit = 10
    helpers_kernel[(8,)](x, out, limit, BLOCK=8)

    def clamp(v):
        return (2 * limit if v > 2 * limit else limit) if v > limit else 3 * v

    def first(t):
        return next((i for i, v in enumerate(x) if v > t), 8)

    np.testing.assert_array_equal(out[:8], [clamp(v) if p % 2 == 0 else v for p, v in enumerate(x)])
    np.testing.assert_array_equal(out[8:], [first(t) for t in x])


@naiad.jit
def void_conditional_kernel(a, b, out):
    pid = tl.program_id(0)
    tl.store(out + pid, tl.load(a + pid)) if pid % 2 == 0 else tl.store(out + pid, tl.load(b + pid))


def test_a_conditional_expression_of_two_stores_runs_one():
    a, b = np.arange(6, dtype=np.float32), -np.arange(6, dtype=np.float32)
    out = np.zeros(6, np.float32)
    void_conditional_kernel[(6,)](a, b, out)
    np.testing.assert_array_equal(out, np.where(np.arange(6) % 2 == 0, a, b))


@naiad.jit
def one_element_kernel(x, EXPLICIT: tl.constexpr):
    condition = tl.load(x + tl.arange(0, 1)) > 42
    if EXPLICIT:
        condition = condition.item()
    if condition:
        tl.store(x, 42)


@pytest.mark.filterwarnings("ignore:the condition")
@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("start,expected", [(41, 41), (43, 42)])
def test_a_one_element_block_is_a_condition(explicit, start, expected):
    x = np.array([start], np.int32)
    one_element_kernel[(1,)](x, explicit)
    assert x[0] == expected


class Strided(NamedTuple):
    ptr: object
    stride: object


@naiad.jit
def tuple_arguments_kernel(pointers, scalars, view: Strided, out):
    """``pointers`` = (a, (b, c)), ``scalars`` = (2.5, None, 7): elements reach the kernel as
    separate arguments; None and 1 stay compile-time."""
    a, (b, c) = pointers
    scale, nothing, offset = scalars
    tl.static_assert(nothing is None)
    i = tl.arange(0, 4)
    total = tl.load(a + i) * scale + tl.load(b + i) + tl.load(c + i) + offset
    tl.store(out + i, total + tl.load(view.ptr + i * view.stride))


def test_tuple_and_namedtuple_arguments_are_flattened_at_the_launch():
    a, b, c = (np.arange(4, dtype=np.float32) * k for k in (1, 10, 100))
    strided = np.arange(12, dtype=np.float32)
    out = np.zeros(4, np.float32)
    tuple_arguments_kernel[(1,)]((a, (b, c)), (2.5, None, 7), Strided(strided, 3), out)
    np.testing.assert_allclose(out, a * 2.5 + b + c + 7 + strided[::3])


@naiad.jit
def tuple_values_kernel(out):
    pair = tl.tuple((4, 5)) + (6, 7)
    for i in tl.static_range(4):
        tl.store(out + i, pair[i])
    tl.store(out + 4, tl.tuple((1, 2)) == (1, 2))
    tl.store(out + 5, tl.tuple((1, 2)) == (1, 3))


def test_tl_tuple_is_a_tuple():
    out = np.zeros(6, np.int32)
    tuple_values_kernel[(1,)](out)
    np.testing.assert_array_equal(out, [4, 5, 6, 7, 1, 0])
