"""GPU rules for global memory: loads and stores (vectorized up to 128 bits), atomics.

A thread's consecutive elements along the fastest dimension are one vector access when axis
information proves the pointers consecutive and aligned and the mask constant over them
(`_vector_width`); a masked access is a branch around it, which ptxas turns into a predicate.
Elements several threads hold (a layout wider than its tensor) are stored by all of them (the
same value) but updated atomically only by their owner (`GPUKernel.owner`).
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import GPUKernel, is_tensor, rule, shape_of
from naiad.ir import tt

_RMW = {"add": "add", "fadd": "fadd", "and": "and", "or": "or", "xor": "xor", "max": "max",
        "min": "min", "umax": "umax", "umin": "umin", "exch": "xchg"}
_ORDERING = {"relaxed": "monotonic", "acquire": "acquire", "release": "release",
             "acq_rel": "acq_rel"}


def memory_type(mlir_type: Any) -> ir.Type:
    """How an element is laid out in memory: booleans take a byte."""
    storage = lt.scalar(mlir_type)
    return lt.I8 if storage == lt.I1 else storage


def _vector_width(k: GPUKernel, op: Any, layout: L.Layout, shape: tuple, nbytes: int) -> int:
    """How many consecutive elements of a thread one access may move (a power of two)."""
    blocked, removed = L.blocked_of(layout)
    if removed or not shape:
        return 1
    d = blocked.order[0]
    full = L.parent_shape(layout, shape)
    _, per = L.per_thread(blocked, full, d)
    ptr = k.info(op.ptr)
    width = min(per, ptr.contiguity[d], max(1, ptr.divisibility[d] // nbytes), max(1, 16 // nbytes))
    if op.mask is not None:
        width = min(width, k.info(op.mask).constancy[d])
    return 1 << (max(1, width).bit_length() - 1)


def _groups(count: int, width: int) -> list[range]:
    return [range(i, min(i + width, count)) for i in range(0, count, width)]


def _global(k: GPUKernel, address: ir.Value) -> ir.Value:
    return k.b.inttoptr(address, ir.PointerType(addrspace=k.hooks.global_addrspace))


def _guarded(k: GPUKernel, condition: ir.Value | None, body: Any, otherwise: ir.Value) -> ir.Value:
    """``body()`` where ``condition`` holds (or always), else ``otherwise``."""
    if condition is None:
        return body()
    b = k.b
    before = b.block
    then, merge = b.append_basic_block("then"), b.append_basic_block("merge")
    b.cbranch(condition, then, merge)
    b.position_at_end(then)
    value = body()
    end = b.block
    b.branch(merge)
    b.position_at_end(merge)
    phi = b.phi(value.type)
    phi.add_incoming(value, end)
    phi.add_incoming(otherwise, before)
    return phi


def _when(k: GPUKernel, condition: ir.Value | None, body: Any) -> None:
    if condition is None:
        body()
        return
    b = k.b
    then, merge = b.append_basic_block("then"), b.append_basic_block("merge")
    b.cbranch(condition, then, merge)
    b.position_at_end(then)
    body()
    b.branch(merge)
    b.position_at_end(merge)


@rule(tt.LoadOp)
def _load(k: GPUKernel, op: Any) -> None:
    result = op.results[0]
    element = memory_type(result.type)
    storage = lt.scalar(result.type)
    if not is_tensor(result):
        mask = k.scalar(op.mask) if op.mask is not None else None
        other = k.scalar(op.other) if op.other is not None else ir.Constant(element, 0 if isinstance(element, ir.IntType) else 0.0)
        value = _guarded(k, mask, lambda: k.b.load(_global(k, k.scalar(op.ptr)), typ=element), other)
        k.env[result] = _from_memory(k, value, storage)
        return
    layout, shape = k.layout_of(result), shape_of(result)
    pointers = k.tensor(op.ptr, layout).values
    masks = k.tensor(op.mask, layout).values if op.mask is not None else None
    others = k.tensor(op.other, layout).values if op.other is not None else None
    nbytes = lt.byte_size(element)
    width = _vector_width(k, op, layout, shape, nbytes)
    values: list[ir.Value] = []
    zero = ir.Constant(element, 0 if isinstance(element, ir.IntType) else 0.0)
    for group in _groups(len(pointers), width):
        n = len(group)
        first = group[0]
        vtype = ir.VectorType(element, n) if n > 1 else element
        if others is not None:
            fallback = _pack(k, [_to_memory(k, others[i], storage) for i in group], vtype)
        else:
            fallback = ir.Constant(vtype, None) if n > 1 else zero
        mask = masks[first] if masks is not None else None

        def load(first: int = first, vtype: ir.Type = vtype, n: int = n) -> ir.Value:
            v = k.b.load(_global(k, pointers[first]), typ=vtype)
            v.align = nbytes * n
            return v
        loaded = _guarded(k, mask, load, fallback)
        parts = [k.b.extract_element(loaded, ir.Constant(lt.I32, j)) for j in range(n)] if n > 1 else [loaded]
        values.extend(_from_memory(k, p, storage) for p in parts)
    k.define(result, values)


@rule(tt.StoreOp)
def _store(k: GPUKernel, op: Any) -> None:
    value_type = op.value.type
    element = memory_type(value_type)
    storage = lt.scalar(value_type)
    if not is_tensor(op.ptr):
        mask = k.scalar(op.mask) if op.mask is not None else None
        pointer, value = k.scalar(op.ptr), _to_memory(k, k.scalar(op.value), storage)
        owner = k.b.icmp_unsigned("==", k.thread, ir.Constant(lt.I32, 0))
        condition = k.b.and_(owner, mask) if mask is not None else owner
        _when(k, condition, lambda: k.b.store(value, _global(k, pointer)))
        return
    layout = k.layout_of(op.ptr)
    shape = shape_of(op.ptr)
    pointers = k.tensor(op.ptr, layout).values
    values = [_to_memory(k, v, storage) for v in k.tensor(op.value, layout).values]
    masks = k.tensor(op.mask, layout).values if op.mask is not None else None
    nbytes = lt.byte_size(element)
    width = _vector_width(k, op, layout, shape, nbytes)
    for group in _groups(len(pointers), width):
        n = len(group)
        first = group[0]
        vtype = ir.VectorType(element, n) if n > 1 else element
        packed = _pack(k, [values[i] for i in group], vtype)

        def store(first: int = first, packed: ir.Value = packed, n: int = n) -> None:
            s = k.b.store(packed, _global(k, pointers[first]))
            s.align = nbytes * n
        _when(k, masks[first] if masks is not None else None, store)


def _pack(k: GPUKernel, values: list[ir.Value], vtype: ir.Type) -> ir.Value:
    if not isinstance(vtype, ir.VectorType):
        return values[0]
    packed = ir.Constant(vtype, None)
    for j, v in enumerate(values):
        packed = k.b.insert_element(packed, v, ir.Constant(lt.I32, j))
    return packed


def _to_memory(k: GPUKernel, value: ir.Value, storage: ir.Type) -> ir.Value:
    return k.b.zext(value, lt.I8) if storage == lt.I1 else value


def _from_memory(k: GPUKernel, value: ir.Value, storage: ir.Type) -> ir.Value:
    return k.b.icmp_unsigned("!=", value, ir.Constant(lt.I8, 0)) if storage == lt.I1 else value


def _atomic(k: GPUKernel, op: Any, emit: Any) -> None:
    """``emit(address, operands..., mask)`` per element, by each element's owner only; the
    result reaches the threads that share the element through shared memory."""
    result = op.results[0]
    if not is_tensor(result):
        owner = k.b.icmp_unsigned("==", k.thread, ir.Constant(lt.I32, 0))
        value = emit(owner, *[k.scalar(v) for v in op.operands])
        k.env[result] = k.broadcast_from_thread0(value)
        return
    layout, shape = k.layout_of(result), shape_of(result)
    operands = [k.tensor(v, layout).values for v in op.operands]
    owners = k.owner(layout, shape)
    values = [emit(owners[i], *[vals[i] for vals in operands]) for i in range(len(owners))]
    k.define(result, k.share_from_owners(values, layout, shape, result.type))


@rule(tt.AtomicRMWOp)
def _atomic_rmw(k: GPUKernel, op: Any) -> None:
    kind = _RMW[op.atomic_rmw_op.data.value]
    ordering = _ORDERING[op.sem.data.value]
    element = lt.scalar(op.val.type)
    has_mask = op.mask is not None
    if lt.is_bf16(op.val.type):
        raise NotImplementedError("bf16 atomics are not supported by the GPU lowering yet")

    def emit(owner: ir.Value, address: ir.Value, value: ir.Value, *mask: ir.Value) -> ir.Value:
        condition = k.b.and_(owner, mask[0]) if has_mask else owner
        zero = ir.Constant(element, 0 if isinstance(element, ir.IntType) else 0.0)
        return _guarded(k, condition, lambda: k.b.atomic_rmw(kind, _global(k, address), value, ordering), zero)

    _atomic(k, op, emit)


@rule(tt.AtomicCASOp)
def _atomic_cas(k: GPUKernel, op: Any) -> None:
    ordering = _ORDERING[op.sem.data.value]
    element = lt.scalar(op.val.type)
    failure = "monotonic" if ordering in ("release", "monotonic") else "acquire"

    def bits(value: ir.Value) -> ir.Value:
        return value if isinstance(value.type, ir.IntType) else k.b.bitcast(value, ir.IntType(lt.byte_size(value.type) * 8))

    def emit(owner: ir.Value, address: ir.Value, expected: ir.Value, value: ir.Value) -> ir.Value:
        def exchange() -> ir.Value:
            pair = k.b.cmpxchg(_global(k, address), bits(expected), bits(value), ordering, failure)
            old = k.b.extract_value(pair, 0)
            return old if old.type == element else k.b.bitcast(old, element)
        zero = ir.Constant(element, 0 if isinstance(element, ir.IntType) else 0.0)
        return _guarded(k, owner, exchange, zero)

    _atomic(k, op, emit)

