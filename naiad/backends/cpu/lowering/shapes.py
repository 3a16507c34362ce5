"""Ops that combine or rearrange whole tensors: join, split, cat, gather, histogram.

join, split and cat only move elements, so they stay lazy like the remaps of `tiles`: a chunk
of the result is assembled from chunks of the operands with vector shuffles -- join interleaves
two half chunks, split keeps the even or the odd lanes of a double chunk, cat takes the chunk
of the operand that holds it (shapes are powers of two, so a chunk never straddles the two
unless the whole result is one chunk).  gather reads its source at data-dependent positions,
so the source is materialized first and each chunk gathers from that buffer.  histogram
counts into a buffer, one increment per input element.
"""

from __future__ import annotations

from typing import Any, Callable

import llvmlite.ir as ir

from naiad.backends.cpu.lowering.tiles import Lazy, numel, shape_of
from naiad.codegen import llvm_types as lt
from naiad.ir import tt


def _vector(kernel: Any, value: ir.Value) -> ir.Value:
    """A chunk as a vector (one-lane chunks are scalars: make them ``<1 x T>``)."""
    if isinstance(value.type, ir.VectorType):
        return value
    undef = ir.Constant(ir.VectorType(value.type, 1), ir.Undefined)
    return kernel.b.insert_element(undef, value, ir.Constant(lt.I32, 0))


def _shuffle(kernel: Any, first: ir.Value, second: ir.Value, lanes: list[int]) -> ir.Value:
    """Lanes of ``first`` then ``second`` (numbered as one vector), picked by ``lanes``."""
    mask = ir.Constant(ir.VectorType(lt.I32, len(lanes)), lanes)
    picked = kernel.b.shuffle_vector(_vector(kernel, first), _vector(kernel, second), mask)
    return picked if len(lanes) > 1 else kernel.b.extract_element(picked, ir.Constant(lt.I32, 0))


def _join(kernel: Any, op: tt.JoinOp, result: int, index: ir.Value, lanes: int) -> ir.Value:
    """Element ``2i + k`` of the result is element ``i`` of operand ``k``."""
    b, at = kernel.b, kernel.chunks.value_at
    source = b.lshr(index, ir.Constant(index.type, 1))
    if lanes == 1:
        odd = b.trunc(index, lt.I1)
        return b.select(odd, at(op.rhs, source, 1), at(op.lhs, source, 1))
    half = lanes // 2
    order = [k // 2 + (half if k % 2 else 0) for k in range(lanes)]
    return _shuffle(kernel, at(op.lhs, source, half), at(op.rhs, source, half), order)


def _split(kernel: Any, op: tt.SplitOp, result: int, index: ir.Value, lanes: int) -> ir.Value:
    """Element ``i`` of result ``k`` is element ``2i + k`` of the operand."""
    both = kernel.chunks.value_at(op.src, kernel.b.shl(index, ir.Constant(index.type, 1)), 2 * lanes)
    return _shuffle(kernel, both, both, [2 * k + result for k in range(lanes)])


def _cat(kernel: Any, op: tt.CatOp, result: int, index: ir.Value, lanes: int) -> ir.Value:
    """Row-major concatenation along dimension 0: the lhs's elements, then the rhs's."""
    b, at = kernel.b, kernel.chunks.value_at
    count = numel(op.lhs.type)
    if lanes > count:                     # the whole result is this one chunk
        return _shuffle(kernel, at(op.lhs, index, count), at(op.rhs, index, count), list(range(lanes)))
    local = b.and_(index, ir.Constant(index.type, count - 1))
    first = b.icmp_unsigned("<", index, ir.Constant(index.type, count))
    return b.select(first, at(op.lhs, local, lanes), at(op.rhs, local, lanes))


def _gather(kernel: Any, op: tt.GatherOp, result: int, index: ir.Value, lanes: int) -> ir.Value:
    """``result[i] = src[i with indices[i] along axis]``, read from the materialized source."""
    b, ctx = kernel.b, kernel.ctx(lanes)
    lane_index = ctx.splat(index)
    if lanes > 1:
        lane_index = b.add(lane_index, ir.Constant(ir.VectorType(lt.I32, lanes), list(range(lanes))))
    parts = kernel.chunks.split_index(lane_index, shape_of(op.result.type))
    chosen = kernel.chunks.value_at(op.indices, index, lanes)
    width = lt.scalar_of(chosen.type).width
    i32 = lt.vector(lt.I32, lanes)
    parts[op.axis.value.data] = b.trunc(chosen, i32) if width > 32 else (   # valid indices
        b.zext(chosen, i32) if width < 32 else chosen)                       # are >= 0
    source = kernel.chunks.join_index(parts, shape_of(op.src.type), lane_index)
    return kernel.chunks.load_lanes(kernel.lookup(op.src), source, lanes)


#: Chunk rules of the lazy ops here: ``rule(kernel, op, result number, index, lanes)``.
CHUNK_RULES: dict[type, Callable[..., ir.Value]] = {
    tt.JoinOp: _join, tt.SplitOp: _split, tt.CatOp: _cat, tt.GatherOp: _gather,
}


def lower_split(kernel: Any, op: tt.SplitOp) -> None:
    for k, result in enumerate(op.results):
        kernel.env[result] = Lazy(op, k)
        if kernel._must_materialize(result):
            kernel.materialize(result)


def lower_gather(kernel: Any, op: tt.GatherOp) -> None:
    kernel.materialize(op.src)
    kernel.env[op.result] = Lazy(op)
    if kernel._must_materialize(op.result):
        kernel.materialize(op.result)


def lower_histogram(kernel: Any, op: tt.HistogramOp) -> None:
    """Counts of the values ``0 .. bins-1``; other values are not counted."""
    counts = kernel.buffer(op.result.type)
    bins = numel(op.result.type)
    count_type = lt.scalar(op.result.type)
    kernel.for_each_chunk(op.result.type, lambda index, lanes: kernel.chunks.store_chunk(
        counts, index, kernel.ctx(lanes).const(count_type, 0)))
    b = kernel.b

    def chunk(index: ir.Value, lanes: int) -> None:
        values = kernel.chunks.value_at(op.src, index, lanes)
        for k in range(lanes):
            value = values if lanes == 1 else b.extract_element(values, ir.Constant(lt.I32, k))
            if value.type.width < 64:
                value = b.sext(value, lt.I64)
            inside = b.icmp_unsigned("<", value, ir.Constant(lt.I64, bins))   # negatives too
            bin_index = b.trunc(b.select(inside, value, ir.Constant(lt.I64, 0)), lt.I32)
            pointer = kernel.chunks.element_pointer(counts, bin_index)
            old = b.load(pointer, typ=count_type, align=lt.byte_size(count_type))
            b.store(b.add(old, b.zext(inside, count_type)), pointer, align=lt.byte_size(count_type))

    kernel.for_each_chunk(op.src.type, chunk)
    kernel.env[op.result] = counts
