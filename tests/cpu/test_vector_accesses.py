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


@naiad.jit
def embedding_mean(out, ids, table, n, V, W: tl.constexpr, T: tl.constexpr, XBLOCK: tl.constexpr,
                   SHIFT: tl.constexpr):
    """Inductor's embedding-bag mean, transposed so that the embedding's columns run along the
    tile's inner dimension: ``out[b, c] = mean_t(table[ids[b, t] mod V, c])`` with ``b, c`` from
    ``xindex // W`` and ``xindex % W`` (or ``>>``, ``&``), a token id loaded once per row and
    wrapped by ``where(i < 0, i + V, i)``."""
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    tokens = tl.arange(0, T)[:, None]
    mask = xindex < n
    if SHIFT:
        row, col = xindex >> 6, xindex & 63
    else:
        row, col = xindex // W, xindex % W
    token = tl.load(ids + (tokens + T * row), mask, other=0)
    token = tl.where(token < 0, token + V, token)
    values = tl.load(table + (col + W * token), mask, other=0.0)
    tl.store(out + xindex, tl.sum(values, 0)[None, :] / T, mask)


@pytest.mark.parametrize("width,shift", [(64, False), (64, True), (48, False)])
def test_an_embedding_row_gathered_by_a_loaded_id_is_a_vector_load(width, shift):
    """Index arithmetic through //, >>, %, & and where, and an id loaded once per row: the
    table's row is consecutive along the columns (Triton's analysis says so too), so the table
    is read by vector loads, not gathers (each of the three failed before the rules for them)."""
    rng = np.random.default_rng(3)
    vocabulary, batch, tokens = 100, 37, 8
    table = rng.standard_normal((vocabulary, width), dtype=np.float32)
    ids = rng.integers(-vocabulary, vocabulary, (batch, tokens)).astype(np.int64)
    out = np.zeros((batch, width), np.float32)
    n = batch * width
    args = (out, ids, table, n, vocabulary)
    meta = dict(W=width, T=tokens, XBLOCK=64, SHIFT=shift)
    embedding_mean[(naiad.cdiv(n, 64),)](*args, **meta)
    np.testing.assert_allclose(out, table[ids % vocabulary].mean(1), rtol=1e-6, atol=1e-6)
    llir = embedding_mean.warmup(*args, **meta, grid=(1,)).asm["llir"]
    gathers = [line for line in llir.splitlines() if "call" in line and "masked.gather" in line]
    assert not [line for line in gathers if "f32" in line]       # the ids' (i64) only


@naiad.jit
def narrow_rows(x, out, col_sums, row_prefix, rows, stride, COLS: tl.constexpr, ROWS: tl.constexpr):
    """Blocks of ``ROWS`` rows of ``COLS`` (fewer than a vector holds) out of wider rows, the way
    Inductor's channels-last reductions pick 4 channels of 32: each row is consecutive, one row
    does not follow the other in memory."""
    r = tl.arange(0, ROWS)[:, None]
    c = tl.program_id(0) * COLS + tl.arange(0, COLS)[None, :]
    mask = (r < rows) & (c < stride)
    values = tl.load(x + r * stride + c, mask=mask, other=0.0)
    tl.store(out + r * stride + c, values * 2.0 + 1.0, mask=mask)
    tl.store(col_sums + c, tl.sum(values, 0)[None, :], c < stride)
    tl.store(row_prefix + r * stride + c, tl.cumsum(values, 0), mask=mask)


@pytest.mark.parametrize("cols", [2, 4])
@pytest.mark.parametrize("rows,block_rows", [(64, 64), (50, 64), (7, 8)])
def test_rows_narrower_than_a_vector_are_vector_accesses(cols, rows, block_rows):
    """A chunk never spans two rows (`Kernel.row_lanes`): loads and stores of narrow rows are
    vector ones, not gathers and scatters, and sums and prefix sums across rows stay right."""
    stride = 32
    x = np.random.default_rng(cols * rows).standard_normal((rows, stride), dtype=np.float32)
    out, prefix = np.zeros_like(x), np.zeros_like(x)
    sums = np.zeros(stride, np.float32)
    kernel = narrow_rows[(stride // cols,)](x, out, sums, prefix, rows, stride, COLS=cols,
                                             ROWS=block_rows)
    np.testing.assert_allclose(out, x * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(sums, x.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(prefix, np.cumsum(x, 0), rtol=1e-5, atol=1e-5)
    assert not _gathers(kernel)
