"""GPU rules for ops that move elements between positions: join, split, cat, gather, and the
histogram.  Each goes through shared memory: the inputs are written at their row-major index,
then every thread reads the elements of its own layout from where they come from."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import GPUKernel, numel, rule, shape_of
from naiad.ir import tt


def _stage(k: GPUKernel, values: list[Any]) -> None:
    """Write each input (one after the other, row-major) to shared memory."""
    total = sum(numel(shape_of(v)) for v in values)
    k.need_shared(total * lt.byte_size(lt.memory_type(values[0].type)))
    k.hooks.barrier(k.b)
    start = 0
    for value in values:
        dist = k.tensor(value)
        shape = dist.shape
        for v, coords in zip(dist.values, k.coordinates(dist.layout, shape)):
            k.write_shared(k.b.add(k.linear(coords, shape), ir.Constant(lt.I32, start)), v)
        start += numel(shape)
    k.hooks.barrier(k.b)


@rule(tt.JoinOp)
def _join(k: GPUKernel, op: Any) -> None:
    """``result[..., j]`` is ``lhs[...]`` for j = 0 and ``rhs[...]`` for j = 1."""
    result = op.results[0]
    storage, shape, in_shape = lt.scalar(result.type), shape_of(result), shape_of(op.lhs)
    _stage(k, [op.lhs, op.rhs])
    values = []
    for coords in k.coordinates(k.layout_of(result), shape):
        half = k.b.mul(coords[-1], ir.Constant(lt.I32, numel(in_shape)))
        values.append(k.read_shared(k.b.add(half, k.linear(coords[:-1], in_shape)), storage))
    k.define(result, values)


@rule(tt.SplitOp)
def _split(k: GPUKernel, op: Any) -> None:
    """``outLHS[...]`` is ``src[..., 0]``, ``outRHS[...]`` is ``src[..., 1]``."""
    storage, src_shape = lt.scalar(op.src.type), shape_of(op.src)
    _stage(k, [op.src])
    for j, result in enumerate(op.results):
        values = []
        for coords in k.coordinates(k.layout_of(result), shape_of(result)):
            values.append(k.read_shared(k.linear(list(coords) + [ir.Constant(lt.I32, j)], src_shape),
                                        storage))
        k.define(result, values)


@rule(tt.CatOp)
def _cat(k: GPUKernel, op: Any) -> None:
    """``lhs`` then ``rhs`` along the first dimension: in row-major order, the result is the two
    inputs one after the other."""
    result = op.results[0]
    storage, shape = lt.scalar(result.type), shape_of(result)
    _stage(k, [op.lhs, op.rhs])
    k.define(result, [k.read_shared(k.linear(c, shape), storage)
                      for c in k.coordinates(k.layout_of(result), shape)])


@rule(tt.GatherOp)
def _gather(k: GPUKernel, op: Any) -> None:
    """``result[i]`` is ``src`` at ``i`` with the ``axis`` coordinate replaced by ``indices[i]``."""
    result = op.results[0]
    layout, shape = k.layout_of(result), shape_of(result)
    axis = op.axis.value.data
    storage, src_shape = lt.scalar(op.src.type), shape_of(op.src)
    indices = k.tensor(op.indices, layout).values
    _stage(k, [op.src])
    values = []
    for index, coords in zip(indices, k.coordinates(layout, shape)):
        width = index.type.width
        chosen = k.b.trunc(index, lt.I32) if width > 32 else k.b.sext(index, lt.I32) if width < 32 else index
        source = list(coords)
        source[axis] = chosen
        values.append(k.read_shared(k.linear(source, src_shape), storage))
    k.define(result, values)


@rule(tt.HistogramOp)
def _histogram(k: GPUKernel, op: Any) -> None:
    """Counts of the values ``0 .. bins-1`` (others are not counted): each element's owner adds
    one to its bin in shared memory with an atomic, then every thread reads its bins.  The
    increment is the constant 1 behind a branch, which ptxas turns into a warp-aggregated
    ``ATOMS.POPC.INC`` (as Triton's histogram gets)."""
    result = op.results[0]
    bins = numel(shape_of(result))
    count_type = lt.scalar(result.type)
    src = k.tensor(op.src)
    k.need_shared(bins * lt.byte_size(count_type))
    k.hooks.barrier(k.b)
    zero_layout = L.default_blocked((bins,), k.num_warps, k.warp_size, 1)
    for coords in k.coordinates(zero_layout, (bins,)):
        k.b.store(ir.Constant(count_type, 0), k.shared_pointer(coords[0], count_type))
    k.hooks.barrier(k.b)
    owners = k.owner(src.layout, src.shape)
    for value, own in zip(src.values, owners):
        wide = k.b.sext(value, lt.I64) if value.type.width < 64 else value
        inside = k.b.and_(own, k.b.icmp_unsigned("<", wide, ir.Constant(lt.I64, bins)))
        where = k.b.trunc(wide, lt.I32)
        k.when(inside, lambda where=where: k.b.atomic_rmw(
            "add", k.shared_pointer(where, count_type), ir.Constant(count_type, 1), "monotonic"))
    k.hooks.barrier(k.b)
    k.define(result, [k.b.load(k.shared_pointer(c[0], count_type), typ=count_type)
                      for c in k.coordinates(k.layout_of(result), (bins,))])
