"""GPU rules for values made in registers: constants, ranges, splats, element-wise ops, shapes."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import elementwise, llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import _ELEMENTWISE, Dist, GPUKernel, is_tensor, numel, rule, shape_of
from naiad.ir import arith, gpu, tt


@rule(_ELEMENTWISE)
def _elementwise(k: GPUKernel, op: Any) -> None:
    """One shared element-wise rule applied to each element a thread holds."""
    ctx = k.ctx()
    if not is_tensor(op.results[0]):
        k.env[op.results[0]] = elementwise.lower(ctx, op, [k.scalar(v) for v in op.operands])
        return
    layout = k.layout_of(op.results[0])
    operands = [k.tensor(v, layout).values if is_tensor(v) else None for v in op.operands]
    values: list[ir.Value] = []
    for i, same in enumerate(_first_equal(k, op.results[0], layout)):
        if same < i:
            values.append(values[same])
            continue
        args = [vals[i] if vals is not None else k.scalar(v) for vals, v in zip(operands, op.operands)]
        values.append(elementwise.lower(ctx, op, args))
    k.define(op.results[0], values)


def _first_equal(k: GPUKernel, value: Any, layout: L.Layout) -> list[int]:
    """Per element a thread holds of ``value``, the first of them known equal to it: by the
    value's constancy (axis info: aligned runs of equal elements), elements whose coordinates
    lie in one run are computed once (a mask ``cols < N`` with N a multiple of 16: one compare
    per 8-element run, not per element).  A run counts only as far as it stays within one
    thread: up to the smallest step between threads' elements along the dimension."""
    shape = shape_of(value)
    constancy = k.info(value).constancy
    placed = L.thread_runs(layout, shape) if any(c > 1 for c in constancy) else None
    if placed is None:
        return list(range(L.element_count(layout, shape)))
    offsets, steps = placed
    runs = [min(c & -c, step) for c, step in zip(constancy, steps)]
    first: dict[tuple[int, ...], int] = {}
    return [first.setdefault(tuple(o & ~(r - 1) for o, r in zip(offset, runs)), i)
            for i, offset in enumerate(offsets)]


@rule(arith.ConstantOp)
def _constant(k: GPUKernel, op: Any) -> None:
    result = op.results[0]
    attr = op.value
    if not is_tensor(result):
        k.env[result] = elementwise.scalar_constant(k.ctx(), attr.value.data, result.type)
        return
    data = attr.get_values() if hasattr(attr, "get_values") else [attr.value.data]
    layout = k.layout_of(result)
    shape = shape_of(result)
    if len(set(data)) == 1:
        value = elementwise.scalar_constant(k.ctx(), data[0], result.type)
        k.define(result, [value] * L.element_count(layout, shape))
        return
    # distinct elements: a constant table in global memory, read at each element's index
    storage, stored = lt.scalar(result.type), lt.memory_type(result.type)
    items = [elementwise.scalar_constant(k.ctx(), v, result.type) for v in data]
    if stored != storage:
        items = [ir.Constant(stored, int(v.constant)) for v in items]
    table_type = ir.ArrayType(stored, len(items))
    table = ir.GlobalVariable(k.llmod, table_type, k.llmod.get_unique_name("constant"),
                              addrspace=k.hooks.constant_addrspace)
    table.initializer = ir.Constant(table_type, items)
    table.global_constant = True
    table.linkage = "private"
    values = []
    for coords in k.coordinates(layout, shape):
        ptr = k.b.gep(table, [ir.Constant(lt.I32, 0), k.linear(coords, shape)])
        v = k.b.load(ptr, typ=stored)
        values.append(k.b.trunc(v, lt.I1) if stored != storage else v)
    k.define(result, values)


@rule(tt.MakeRangeOp)
def _make_range(k: GPUKernel, op: Any) -> None:
    result = op.results[0]
    start = op.start.value.data
    coords = k.coordinates(k.layout_of(result), shape_of(result))
    k.define(result, [k.b.add(c[0], ir.Constant(lt.I32, start)) if start else c[0] for c in coords])


@rule(tt.SplatOp)
def _splat(k: GPUKernel, op: Any) -> None:
    result = op.results[0]
    value = k.scalar(op.src)
    k.define(result, [value] * L.element_count(k.layout_of(result), shape_of(result)))


@rule(tt.GetProgramIdOp)
def _program_id(k: GPUKernel, op: Any) -> None:
    k.env[op.results[0]] = k.hooks.program_id(k.b, op.axis_index)


@rule(tt.GetNumProgramsOp)
def _num_programs(k: GPUKernel, op: Any) -> None:
    k.env[op.results[0]] = k.hooks.num_programs(k.b, op.axis_index)


@rule(gpu.BarrierOp)
def _barrier(k: GPUKernel, op: Any) -> None:
    """``tl.debug_barrier()``: every thread of the program waits for the others."""
    k.hooks.barrier(k.b)


@rule(tt.AssumeOp)
def _assume(k: GPUKernel, op: Any) -> None:
    """``tl.assume(cond)``: a fact LLVM may use (``llvm.assume``), no code."""
    assume = lt.function(k.b.module, "llvm.assume", lt.VOID, [lt.I1])
    k.b.call(assume, [k.scalar(op.condition)])


@rule(tt.ReturnOp)
def _return(k: GPUKernel, op: Any) -> None:
    k.b.ret_void()
    k.b.position_at_end(k.b.append_basic_block("after.return"))


@rule(tt.BroadcastOp)
def _broadcast(k: GPUKernel, op: Any) -> None:
    """Free in registers when the operand has the result's layout: a thread's output element
    reads its operand element at the same position along the dimensions that are not
    broadcast (position 0 along those that are)."""
    result = op.results[0]
    layout = k.layout_of(result)
    src = k.tensor(op.src, layout)
    src_elements = L.elements(layout, shape_of(op.src))
    index = {e: i for i, e in enumerate(src_elements)}
    src_shape = shape_of(op.src)
    values = []
    for element in L.elements(layout, shape_of(result)):
        key = tuple((0, 0) if _broadcast_dim(layout, src_shape, d) else item
                    for d, item in enumerate(element))
        values.append(src.values[index[key]])
    k.define(result, values)


def _broadcast_dim(layout: L.Layout, src_shape: tuple, d: int) -> bool:
    return L.parent_shape(layout, src_shape)[d] == 1


@rule(tt.ExpandDimsOp)
def _expand_dims(k: GPUKernel, op: Any) -> None:
    """Free from the slice of the result's layout: the same elements, one more dimension."""
    result = op.results[0]
    layout = k.layout_of(result)
    k.define(result, k.tensor(op.src, L.Slice(op.axis.value.data, layout)).values)


@rule(tt.ReshapeOp, tt.TransOp)
def _remap(k: GPUKernel, op: Any) -> None:
    """Through shared memory: each output element reads the input element it comes from."""
    result = op.results[0]
    src = k.tensor(op.src)
    in_shape, out_shape = shape_of(op.src), shape_of(result)
    if isinstance(op, tt.TransOp):
        order = [o.data if hasattr(o, "data") else o for o in op.order.get_values()] \
            if hasattr(op.order, "get_values") else list(op.order)
        mapping = lambda coords: _transpose_source(coords, order, in_shape)      # noqa: E731
    else:
        mapping = lambda coords: [_flat(k, coords, out_shape)]                   # noqa: E731
        in_shape = (numel(in_shape),)
    values = k.gather_through_shared(Dist(src.layout, shape_of(op.src), src.values), op.src.type,
                                     k.layout_of(result), out_shape, mapping, in_shape)
    k.define(result, values)


def _transpose_source(coords: list, order: list[int], in_shape: tuple) -> list:
    source = [None] * len(order)
    for out_dim, in_dim in enumerate(order):
        source[in_dim] = coords[out_dim]
    return source


def _flat(k: GPUKernel, coords: list, shape: tuple) -> ir.Value:
    return k.linear(coords, shape)

