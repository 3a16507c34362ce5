"""Which loads and stores the CPU backend makes vector accesses: a chunk of lanes whose pointers
the axis information (naiad/codegen/axis_info.py, shared with the GPU lowering) proves
consecutive is one vector load or store, any other a gather or scatter.  Each kernel is checked
in its LLVM IR and against numpy, with a masked tail (sizes that are not a multiple of the
block)."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends

BLOCK = 64


def _gathers(kernel) -> bool:
    """Whether the kernel's loads include a gather; its (masked) stores are vector ones."""
    llir = kernel.asm["llir"]
    assert "masked.store" in llir and "masked.scatter" not in llir
    return "masked.gather" in llir


@naiad.jit
def wrapped_copy(x, out, n, N, BLOCK: tl.constexpr):
    """``out[i] = x[i % N]``: the runs of ``i`` stay consecutive through ``% N`` for as many
    elements as both are known to be multiples of (N's ``tt.divisibility`` of 16)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs % N, mask=mask), mask=mask)


@pytest.mark.parametrize("wrap,vector", [(1024, True), (1000, False)])
def test_remainder_by_a_multiple_of_16_keeps_vector_loads(wrap, vector):
    x = np.random.default_rng(0).standard_normal(wrap, dtype=np.float32)
    n = 3 * wrap + 37
    out = np.zeros(n, np.float32)
    wrapped_copy[(naiad.cdiv(n, BLOCK),)](x, out, n, wrap, BLOCK=BLOCK)
    np.testing.assert_array_equal(out, x[np.arange(n) % wrap])
    kernel = wrapped_copy.warmup(x, out, n, wrap, BLOCK=BLOCK, grid=(1,))
    # 1000 is a multiple of 8 only, which the specialization does not say: gathers, still right.
    assert _gathers(kernel) == (not vector)


@naiad.jit
def indirect_copy(x, index, out, n, BLOCK: tl.constexpr, HINT: tl.constexpr):
    """``out[i] = x[index[i]]``, the indices said to run in consecutive blocks (or not)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    rows = tl.load(index + offs, mask=mask)
    if HINT:
        rows = tl.max_contiguous(tl.multiple_of(rows, BLOCK), BLOCK)
    tl.store(out + offs, tl.load(x + rows, mask=mask), mask=mask)


@pytest.mark.parametrize("hint", [True, False])
def test_contiguity_hint_makes_loaded_indices_a_vector_load(hint):
    """A block table (block b of the result reads block ``order[b]`` of x): consecutive only
    as ``tl.max_contiguous`` says, since the indices are loaded."""
    blocks, n = 8, 7 * BLOCK + 5
    order = np.random.default_rng(1).permutation(blocks)
    index = (order[np.arange(n) // BLOCK] * BLOCK + np.arange(n) % BLOCK).astype(np.int32)
    x = np.random.default_rng(2).standard_normal(blocks * BLOCK, dtype=np.float32)
    out = np.zeros(n, np.float32)
    indirect_copy[(naiad.cdiv(n, BLOCK),)](x, index, out, n, BLOCK=BLOCK, HINT=hint)
    np.testing.assert_array_equal(out, x[index])
    kernel = indirect_copy.warmup(x, index, out, n, BLOCK=BLOCK, HINT=hint, grid=(1,))
    assert _gathers(kernel) == (not hint)


@naiad.jit(noinline=True)
def copy_block(x, out, offs, mask):
    tl.store(out + offs, tl.load(x + offs, mask=mask) + 1, mask=mask)


@naiad.jit
def copy_through_a_call(x, out, n, BLOCK: tl.constexpr):
    """The offsets are made here and used in a function the CPU backend inlines as it lowers
    the call: what is known of them comes with the call's operands."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    copy_block(x, out, offs, offs < n)


@naiad.jit
def reshaped_copy(x, out, n, BLOCK: tl.constexpr):
    """Offsets made 2-D by a reshape: each row of the result is a run of the range."""
    offs = tl.program_id(0) * 2 * BLOCK + tl.reshape(tl.arange(0, 2 * BLOCK), (2, BLOCK))
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + 1, mask=mask)


@pytest.mark.parametrize("kernel,per_program", [(copy_through_a_call, BLOCK),
                                                 (reshaped_copy, 2 * BLOCK)])
def test_offsets_through_a_call_or_a_reshape_stay_vector_accesses(kernel, per_program):
    n = 5 * per_program - 3
    x = np.random.default_rng(3).standard_normal(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    kernel[(naiad.cdiv(n, per_program),)](x, out, n, BLOCK=BLOCK)
    np.testing.assert_array_equal(out, x + 1)
    assert not _gathers(kernel.warmup(x, out, n, BLOCK=BLOCK, grid=(1,)))
