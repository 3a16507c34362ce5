"""GPU rules for global memory: loads and stores (vectorized up to 128 bits), atomics.

A thread's consecutive elements along the fastest dimension are one vector access when axis
information proves the pointers consecutive and aligned and the mask constant over them
(`vector_width`); a masked access is a branch around it, which the target's compiler turns
into a predicate.  Elements several threads hold (a layout wider than its tensor) are stored and
updated atomically by their owner only (`GPUKernel.owner`): a replica storing too would race
with another replica's load of the old value (threads do not all load before any stores).

Plain accesses are LLVM loads and stores (they vectorize and optimize well).  An access with a
cache modifier or an eviction policy goes to the target when it has a use for them
(`GPUHooks.access_policy`), and atomics, polling loads and fences are the target's own
instructions (`GPUHooks.atomic_rmw` and the rest: PTX on NVIDIA).
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt, loops
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import GPUKernel, is_tensor, rule, shape_of
from naiad.ir import tt

def vector_width(k: GPUKernel, op: Any, layout: L.Layout, shape: tuple, nbytes: int) -> int:
    """How many consecutive elements of a thread one access may move (a power of two)."""
    if not shape:
        return 1
    if L.linear_of(layout, shape) is not None:
        d, per = len(shape) - 1, L.run_length(layout, shape, len(shape) - 1)
    else:
        blocked, removed = L.blocked_of(layout)
        if removed:
            return 1
        d = blocked.order[0]
        _, per = L.per_thread(blocked, L.parent_shape(layout, shape), d)
    ptr = k.info(op.ptr)
    mask = k.info(op.mask).constancy[d] if op.mask is not None else None
    return L.widest_access(min(per, ptr.contiguity[d]), ptr.divisibility[d], mask, nbytes)


def _groups(count: int, width: int) -> list[range]:
    return [range(i, min(i + width, count)) for i in range(0, count, width)]


def _global(k: GPUKernel, address: ir.Value) -> ir.Value:
    return k.b.inttoptr(address, ir.PointerType(addrspace=k.hooks.global_addrspace))


@rule(tt.LoadOp)
def load(k: GPUKernel, op: Any) -> None:
    """The shared rule: a load into registers (a backend's own load rule falls back to it)."""
    result = op.results[0]
    element = lt.memory_type(result.type)
    storage = lt.scalar(result.type)
    nbytes = lt.byte_size(element)
    zero = _zero(element)
    policy = k.hooks.access_policy(k, op, store=False)
    if not is_tensor(result):
        mask = k.scalar(op.mask) if op.mask is not None else None
        other = lt.to_memory(k.b, k.scalar(op.other)) if op.other is not None else zero
        address = k.scalar(op.ptr)
        value = _read(k, address, element, nbytes, policy, mask, other)
        k.env[result] = lt.from_memory(k.b, value, storage)
        return
    layout, shape = k.layout_of(result), shape_of(result)
    pointers = k.tensor(op.ptr, layout).values
    masks = k.tensor(op.mask, layout).values if op.mask is not None else None
    others = k.tensor(op.other, layout).values if op.other is not None else None
    width = vector_width(k, op, layout, shape, nbytes)
    values: list[ir.Value] = []
    for group in _groups(len(pointers), width):
        n = len(group)
        first = group[0]
        vtype = ir.VectorType(element, n) if n > 1 else element
        if others is not None:
            fallback = lt.pack_vector(k.b, [lt.to_memory(k.b, others[i]) for i in group], vtype)
        else:
            fallback = ir.Constant(vtype, None) if n > 1 else zero
        mask = masks[first] if masks is not None else None
        loaded = _read(k, pointers[first], vtype, nbytes, policy, mask, fallback)
        parts = [k.b.extract_element(loaded, ir.Constant(lt.I32, j)) for j in range(n)] if n > 1 else [loaded]
        values.extend(lt.from_memory(k.b, p, storage) for p in parts)
    k.define(result, values)


@rule(tt.StoreOp)
def _store(k: GPUKernel, op: Any) -> None:
    value_type = op.value.type
    element = lt.memory_type(value_type)
    nbytes = lt.byte_size(element)
    policy = k.hooks.access_policy(k, op, store=True)
    if not is_tensor(op.ptr):
        mask = k.scalar(op.mask) if op.mask is not None else None
        address, value = k.scalar(op.ptr), lt.to_memory(k.b, k.scalar(op.value))
        owner = k.is_thread0()
        condition = k.b.and_(owner, mask) if mask is not None else owner
        _write(k, address, value, nbytes, policy, condition)
        return
    layout = k.layout_of(op.ptr)
    shape = shape_of(op.ptr)
    pointers = k.tensor(op.ptr, layout).values
    values = [lt.to_memory(k.b, v) for v in k.tensor(op.value, layout).values]
    masks = k.tensor(op.mask, layout).values if op.mask is not None else None
    if k.replicated(layout, shape):      # one thread stores each element (as Triton does)
        owners = k.owner(layout, shape)
        masks = owners if masks is None else [k.b.and_(m, o) for m, o in zip(masks, owners)]
    width = vector_width(k, op, layout, shape, nbytes)
    for group in _groups(len(pointers), width):
        n = len(group)
        first = group[0]
        packed = lt.pack_vector(k.b, [values[i] for i in group], ir.VectorType(element, n) if n > 1 else element)
        _write(k, pointers[first], packed, nbytes, policy, masks[first] if masks is not None else None)


def _read(k: GPUKernel, address: ir.Value, vtype: ir.Type, nbytes: int, policy: Any,
          mask: ir.Value | None, otherwise: ir.Value) -> ir.Value:
    """One access of ``vtype`` (an element or a vector of them) at ``address`` where ``mask``
    holds (always, when None), else ``otherwise``: the target's own load under a policy (a
    predicated instruction, where it has them), else a branch around LLVM's load."""
    if policy is not None:
        return k.hooks.load_with_policy(k, policy, address, vtype, nbytes, mask, otherwise)
    n = vtype.count if isinstance(vtype, ir.VectorType) else 1

    def load() -> ir.Value:
        v = k.b.load(_global(k, address), typ=vtype)
        v.align = nbytes * n
        return v
    return k.guarded(mask, load, otherwise)


def _write(k: GPUKernel, address: ir.Value, value: ir.Value, nbytes: int, policy: Any,
           mask: ir.Value | None) -> None:
    """One store of ``value`` (an element or a vector of them) at ``address`` where ``mask``
    holds (always, when None): the target's own store under a policy (a predicated
    instruction, where it has them), else a branch around LLVM's store."""
    if policy is not None:
        k.hooks.store_with_policy(k, policy, address, value, nbytes, mask)
        return
    n = value.type.count if isinstance(value.type, ir.VectorType) else 1

    def store() -> None:
        s = k.b.store(value, _global(k, address))
        s.align = nbytes * n
    k.when(mask, store)


def _atomic(k: GPUKernel, op: Any, emit: Any) -> None:
    """``emit(owner, address, operands..., mask)`` per element, by each element's owner only;
    the result reaches the threads that share the element through shared memory.  A scalar
    atomic that releases waits at a barrier first, as in Triton: thread 0's release then also
    publishes what the other threads of the program wrote before it (a lock's critical section)."""
    result = op.results[0]
    if not is_tensor(result):
        if op.sem.data.value in ("release", "acq_rel"):
            k.hooks.barrier(k.b)
        owner = k.is_thread0()
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
    """The target's read-modify-write per element; a masked-off element is not touched (its
    result is 0).  A tensor of them whose results nobody reads is a reduction (`_reduction`)
    where the target has one."""
    element = lt.scalar(op.val.type)
    has_mask = op.mask is not None
    if is_tensor(op.results[0]) and not op.results[0].uses and k.hooks.reduction_width(k, op) > 0:
        _reduction(k, op)
        return

    def emit(owner: ir.Value, address: ir.Value, value: ir.Value, *mask: ir.Value) -> ir.Value:
        condition = k.b.and_(owner, mask[0]) if has_mask else owner
        return k.guarded(condition, lambda: k.hooks.atomic_rmw(k, op, address, value), _zero(element))

    _atomic(k, op, emit)


def _reduction(k: GPUKernel, op: Any) -> None:
    """Reductions without results (`GPUHooks.reduce_global`), a thread's consecutive elements
    together where they are consecutive and aligned in memory under one mask (`vector_width`,
    at most the target's `GPUHooks.reduction_width`); one owner per element where the layout
    repeats threads.  The results are zeros: nothing reads them."""
    result = op.results[0]
    layout, shape = k.layout_of(result), shape_of(result)
    element = lt.scalar(op.val.type)
    pointers = k.tensor(op.ptr, layout).values
    values = k.tensor(op.val, layout).values
    masks = k.tensor(op.mask, layout).values if op.mask is not None else None
    width = min(k.hooks.reduction_width(k, op), vector_width(k, op, layout, shape, lt.byte_size(element)))
    if k.replicated(layout, shape):
        owners = k.owner(layout, shape)
        masks = owners if masks is None else [k.b.and_(m, o) for m, o in zip(masks, owners)]
        width = 1
    for group in _groups(len(pointers), width):
        k.when(masks[group[0]] if masks is not None else None,
               lambda g=group: k.hooks.reduce_global(k, op, pointers[g[0]], [values[i] for i in g]))
    k.define(result, [_zero(element)] * len(pointers))


@rule(tt.AtomicCASOp)
def _atomic_cas(k: GPUKernel, op: Any) -> None:
    """The target's compare-and-swap per element."""
    element = lt.scalar(op.val.type)

    def emit(owner: ir.Value, address: ir.Value, expected: ir.Value, value: ir.Value) -> ir.Value:
        return k.guarded(owner, lambda: k.hooks.atomic_cas(k, op, address, expected, value), _zero(element))

    _atomic(k, op, emit)


@rule(tt.AtomicPollOp)
def _atomic_poll(k: GPUKernel, op: Any) -> None:
    """Every thread loads the flag (a relaxed atomic load) until it holds ``expected`` (true)
    or, with a timeout, until the target's clock says ``timeout_ns`` have passed since the
    first load (false; the first load always happens).  ``sem=acquire`` adds an acquire fence
    after the loop."""
    b = k.b
    scope = op.scope.data.value
    expected = k.scalar(op.expected)
    address = k.scalar(op.ptr)
    timeout = None if op.timeout_ns is None else k.scalar(op.timeout_ns)
    seen = loops.poll(b, lambda: k.hooks.relaxed_load(b, address, expected.type, scope), expected,
                      lambda: k.hooks.clock_ns(b), timeout)
    if op.sem.data.value == "acquire":
        k.hooks.acquire_fence(b, scope)
    k.env[op.result] = seen


def _zero(element: ir.Type) -> ir.Value:
    return ir.Constant(element, 0 if isinstance(element, ir.IntType) else 0.0)
