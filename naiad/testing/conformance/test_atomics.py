"""Atomics from many programs on the same addresses, run on several threads: the totals must
be exact (every update counted once), whatever order the threads interleave them in."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .reference import from_kernel, to_kernel


PROGRAMS, BLOCK, SLOTS = 64, 64, 16
N = PROGRAMS * BLOCK - 13          # the last program is partly masked


@pytest.fixture(autouse=True)
def _threads():
    naiad.knobs.cpu.threads = 4     # more threads than cores: interleavings of every kind


@naiad.jit
def atomic_kernel(values, add, mx, mn, band, bor, bxor, xchg, olds, counter, count_olds, n,
                  INT: tl.constexpr, BLOCK: tl.constexpr, SLOTS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(values + offs, mask=m)
    slot = offs % SLOTS
    tl.atomic_add(add + slot, v, mask=m)
    tl.atomic_max(mx + slot, v, mask=m)
    tl.atomic_min(mn + slot, v, mask=m)
    if INT:
        tl.atomic_and(band + slot, v, mask=m)
        tl.atomic_or(bor + slot, v, mask=m)
        tl.atomic_xor(bxor + slot, v, mask=m)
    tl.store(olds + offs, tl.atomic_xchg(xchg + slot, v, mask=m), mask=m)
    one = tl.full((BLOCK,), 1, counter.dtype.element_ty)
    tl.store(count_olds + offs, tl.atomic_add(counter + slot, one, mask=m), mask=m)


@pytest.mark.parametrize("name", ["int32", "int64", "uint32", "float32"])
def test_atomic_rmw_totals_are_exact(name):
    rng = np.random.default_rng(0)
    integer = name != "float32"
    if integer:
        info = np.iinfo(name)
        values = rng.integers(max(info.min, -2**20), min(info.max, 2**20), N).astype(name)
    else:   # small integers and halves: float sums are exact in any order
        values = (rng.integers(-64, 64, N) / 2).astype(name)
    slot = np.arange(N) % SLOTS
    start = rng.integers(0, 100, SLOTS).astype(name)
    targets = {k: start.copy() for k in ("add", "max", "min", "and", "or", "xor", "xchg")}
    olds = np.zeros(N, name)
    counter, count_olds = np.zeros(SLOTS, np.int32), np.full(N, -1, np.int32)
    atomic_kernel[(PROGRAMS,)](values, *targets.values(), olds, counter, count_olds, N,
                               INT=integer, BLOCK=BLOCK, SLOTS=SLOTS)
    for s in range(SLOTS):
        mine = values[slot == s]
        with np.errstate(over="ignore"):
            assert targets["add"][s] == (start[s] + mine.sum(dtype=name)).astype(name), f"add, slot {s}"
        assert targets["max"][s] == max(start[s], mine.max()), f"max, slot {s}"
        assert targets["min"][s] == min(start[s], mine.min()), f"min, slot {s}"
        if integer:
            assert targets["and"][s] == np.bitwise_and.reduce(np.append(mine, start[s])), f"and, slot {s}"
            assert targets["or"][s] == np.bitwise_or.reduce(np.append(mine, start[s])), f"or, slot {s}"
            assert targets["xor"][s] == np.bitwise_xor.reduce(np.append(mine, start[s])), f"xor, slot {s}"
        # xchg: the values read plus the one left form the values written plus the start
        seen = np.sort(np.append(olds[slot == s], targets["xchg"][s]))
        np.testing.assert_array_equal(seen, np.sort(np.append(mine, start[s])))
        # an atomic add of 1 returns each count 0 .. k-1 exactly once
        np.testing.assert_array_equal(np.sort(count_olds[slot == s]), np.arange((slot == s).sum()))
    assert (counter == np.bincount(slot, minlength=SLOTS)).all()


@naiad.jit
def float_minmax_kernel(values, mx, mn, n, BLOCK: tl.constexpr, SLOTS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(values + offs, mask=m)
    tl.atomic_max(mx + offs % SLOTS, v, mask=m)
    tl.atomic_min(mn + offs % SLOTS, v, mask=m)


def test_float_atomic_max_min_with_both_signs():
    rng = np.random.default_rng(1)
    values = rng.normal(size=N).astype(np.float32)
    values[:SLOTS] = -0.0
    slot = np.arange(N) % SLOTS
    mx, mn = np.full(SLOTS, -np.inf, np.float32), np.full(SLOTS, np.inf, np.float32)
    float_minmax_kernel[(PROGRAMS,)](values, mx, mn, N, BLOCK=BLOCK, SLOTS=SLOTS)
    np.testing.assert_array_equal(mx, [values[slot == s].max() for s in range(SLOTS)])
    np.testing.assert_array_equal(mn, [values[slot == s].min() for s in range(SLOTS)])


@naiad.jit
def cas_kernel(locks, owners, won, SLOTS: tl.constexpr):
    """Every program tries to take every lock (0 -> its id + 1); exactly one must win each."""
    pid = tl.program_id(0)
    slots = tl.arange(0, SLOTS)
    mine = tl.full((SLOTS,), 1, locks.dtype.element_ty) * (pid + 1)
    zero = tl.zeros((SLOTS,), locks.dtype.element_ty)
    old = tl.atomic_cas(locks + slots, zero, mine)
    tl.store(won + pid * SLOTS + slots, old == zero)
    first = tl.atomic_cas(owners + pid, 0, 0)
    tl.store(owners + pid, first + 1)


@pytest.mark.parametrize("name", ["int32", "int64", "float32"])
def test_atomic_cas_has_one_winner_per_address(name):
    locks = np.zeros(SLOTS, name)
    owners = np.full(PROGRAMS, 41, name)
    won = np.zeros((PROGRAMS, SLOTS), bool)
    cas_kernel[(PROGRAMS,)](locks, owners, won, SLOTS=SLOTS)
    np.testing.assert_array_equal(won.sum(axis=0), 1)
    np.testing.assert_array_equal(locks, np.argmax(won, axis=0) + 1)
    np.testing.assert_array_equal(owners, 42)       # a scalar cas that fails returns the value


@naiad.jit
def scalar_atomic_kernel(total, hits):
    tl.atomic_add(total, 2)
    tl.atomic_max(hits, tl.program_id(0))


def test_scalar_atomics_from_a_large_grid():
    total, hits = np.zeros(1, np.int64), np.zeros(1, np.int32)
    scalar_atomic_kernel[(4096,)](total, hits)
    assert total[0] == 2 * 4096 and hits[0] == 4095


@naiad.jit
def half_add_kernel(values, total, n, BLOCK: tl.constexpr, SLOTS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(total + offs % SLOTS, tl.load(values + offs, mask=m), mask=m)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_half_precision_atomic_add(name):
    """Sums of small integers stay exact in fp16/bf16 (up to 256), in any order."""
    n = 1000
    values = np.random.default_rng(2).integers(-2, 3, n).astype(np.float32)
    slot = np.arange(n) % SLOTS
    total = to_kernel(np.zeros(SLOTS, np.float32), name)
    half_add_kernel[(naiad.cdiv(n, BLOCK),)](to_kernel(values, name), total, n, BLOCK=BLOCK, SLOTS=SLOTS)
    expected = [values[slot == s].sum() for s in range(SLOTS)]
    np.testing.assert_array_equal(from_kernel(total), expected)
