"""``tt.reduce`` and ``tt.scan`` on the CPU, with the combine region applied to whole vectors.

The combine region holds scalar element-wise ops; the shared rules apply them to vectors as
well, so the region combines ``lanes`` independent accumulators at once.

Reduce: along the last axis (contiguous), each output element keeps a vector of partial results
that is folded at the end by halving shuffles; along another axis, ``lanes`` consecutive output
elements are reduced side by side.  Both rely on the combine being associative, as Triton's
reductions do.  Scan walks its axis sequentially, ``lanes`` rows side by side when the axis is not
the last one.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from xdsl.dialects.builtin import TensorType

from naiad.backends.cpu.lowering.tiles import Buffer, numel, shape_of, strides
from naiad.codegen import elementwise, llvm_types as lt


def _input_index(kernel: Any, out_index: ir.Value, k: ir.Value, shape: list[int], axis: int) -> ir.Value:
    """Linear input index of output element ``out_index`` at position ``k`` along ``axis``."""
    out_shape = shape[:axis] + shape[axis + 1:]
    parts = kernel.chunks.split_index(out_index, out_shape) if out_shape else []
    parts.insert(axis, k)
    return kernel.chunks.join_index(parts, shape, out_index)


def _horizontal(kernel: Any, region: Any, values: list[ir.Value], lanes: int) -> list[ir.Value]:
    """Fold the lanes of each vector into lane 0 by combining halves."""
    b = kernel.b
    while lanes > 1:
        half = lanes // 2
        low = [b.shuffle_vector(v, v, ir.Constant(ir.VectorType(lt.I32, half), list(range(half))))
               for v in values]
        high = [b.shuffle_vector(v, v, ir.Constant(ir.VectorType(lt.I32, half), list(range(half, lanes))))
                for v in values]
        if half == 1:   # <1 x T> halves: combine as scalars
            low = [b.extract_element(v, ir.Constant(lt.I32, 0)) for v in low]
            high = [b.extract_element(v, ir.Constant(lt.I32, 0)) for v in high]
        values = elementwise.apply_region(kernel.ctx(half), region, low + high)
        lanes = half
    return values


def lower_reduce(kernel: Any, op: Any) -> None:
    inputs = list(op.operands)
    shape = shape_of(inputs[0].type)
    axis = op.axis.value.data
    n = shape[axis]
    region = op.regions[0]
    results = list(op.results)
    scalar_result = not isinstance(results[0].type, TensorType)
    targets = None if scalar_result else [kernel.buffer(r.type) for r in results]
    out_count = max(1, numel(results[0].type) if not scalar_result else 1)
    along_last = axis == len(shape) - 1
    # across the axis: one chunk is a run of the last dimension (`Kernel.row_lanes`)
    lanes = kernel.chunk_lanes(n) if along_last else min(kernel.chunk_lanes(out_count), shape[-1])
    collected: list[ir.Value] = []

    def reduce_one(out_index: ir.Value) -> list[ir.Value]:
        """The reduced values of output element(s) starting at ``out_index``."""
        if along_last:
            base = _input_index(kernel, out_index, ir.Constant(lt.I32, 0), shape, axis)
            acc = [kernel.chunks.value_at(v, base, lanes) for v in inputs]
            acc = _accumulate(kernel, region, inputs, acc, lambda k: kernel.b.add(base, k), lanes,
                              lanes, n)
            return _horizontal(kernel, region, acc, lanes)
        first = _input_index(kernel, out_index, ir.Constant(lt.I32, 0), shape, axis)
        acc = [kernel.chunks.value_at(v, first, lanes) for v in inputs]
        step = strides(shape)[axis]
        return _accumulate(kernel, region, inputs, acc,
                           lambda k: kernel.b.add(first, kernel.b.mul(k, ir.Constant(lt.I32, step))),
                           1, lanes, n)

    def chunk(i: ir.Value) -> None:
        out_index = kernel.b.mul(i, ir.Constant(lt.I32, 1 if along_last else lanes))
        values = reduce_one(out_index)
        if scalar_result:
            collected.extend(values)
            return
        for target, value in zip(targets, values):
            kernel.chunks.store_chunk(target, out_index, value)

    trips = out_count if along_last else out_count // lanes
    kernel.counted_loop(trips, chunk)
    for result, target in zip(results, targets or collected):
        kernel.env[result] = target


def _accumulate(kernel: Any, region: Any, inputs: list, acc: list[ir.Value], index_of: Any,
                step: int, lanes: int, n: int) -> list[ir.Value]:
    """Fold positions ``step, 2*step, .. < n`` along the axis into ``acc`` with a loop."""
    if n <= step:
        return acc

    def fold(k: ir.Value, current: list[ir.Value]) -> list[ir.Value]:
        index = index_of(k)
        following = [kernel.chunks.value_at(v, index, lanes) for v in inputs]
        return elementwise.apply_region(kernel.ctx(lanes), region, current + following)

    return kernel.carried_loop(step, n, step, acc, fold)


def lower_scan(kernel: Any, op: Any) -> None:
    inputs = list(op.operands)
    shape = shape_of(inputs[0].type)
    axis = op.axis.value.data
    reverse = bool(op.reverse.value.data)
    n = shape[axis]
    region = op.regions[0]
    targets = [kernel.buffer(r.type) for r in op.results]
    line_shape = shape[:axis] + shape[axis + 1:]
    lines = 1
    for d in line_shape:
        lines *= d
    along_last = axis == len(shape) - 1
    lanes = 1 if along_last else min(kernel.chunk_lanes(lines), shape[-1])
    step = strides(shape)[axis]

    def line(i: ir.Value) -> None:
        out_index = kernel.b.mul(i, ir.Constant(lt.I32, lanes))
        start = n - 1 if reverse else 0
        first = _input_index(kernel, out_index, ir.Constant(lt.I32, start), shape, axis)
        acc = [kernel.chunks.value_at(v, first, lanes) for v in inputs]
        for target, value in zip(targets, acc):
            kernel.chunks.store_chunk(target, first, value)
        _scan_loop(kernel, region, inputs, targets, acc, first, step, n, lanes, reverse)

    kernel.counted_loop(lines // lanes, line)
    for result, target in zip(op.results, targets):
        kernel.env[result] = target


def _scan_loop(kernel: Any, region: Any, inputs: list, targets: list[Buffer], acc: list[ir.Value],
               first: ir.Value, step: int, n: int, lanes: int, reverse: bool) -> None:
    """Positions 1 .. n-1 along the axis: combine with the running value and store it."""
    def advance(k: ir.Value, current: list[ir.Value]) -> list[ir.Value]:
        offset = kernel.b.mul(k, ir.Constant(lt.I32, step))
        index = kernel.b.sub(first, offset) if reverse else kernel.b.add(first, offset)
        following = [kernel.chunks.value_at(v, index, lanes) for v in inputs]
        combined = elementwise.apply_region(kernel.ctx(lanes), region, current + following)
        for target, value in zip(targets, combined):
            kernel.chunks.store_chunk(target, index, value)
        return combined

    if n > 1:
        kernel.carried_loop(1, n, 1, acc, advance)
