"""Loads, stores and atomics on the CPU.

A chunk of pointers whose lanes are consecutive elements (known from the kernel's axis
information: `KernelLowering.consecutive`) becomes one vector load or store, masked with
``llvm.masked.load`` / ``llvm.masked.store`` when there is a mask; any other chunk becomes
``llvm.masked.gather`` / ``llvm.masked.scatter``.  A masked-off lane never touches memory
(`emit_load` / `store_chunk`, which `block_pointers` shares).  ``int1`` tensors are stored
as one byte per element, as in Triton.  Atomics run element by element (LLVM's
``atomicrmw`` is scalar) in program order; a float compare-and-swap compares bits, and a bf16
add is a compare-and-swap loop.  An fp32 add whose result is unused, to consecutive 16-byte
aligned elements, goes four at a time through one 16-byte compare-and-swap where the target
has one (`_add_four_at_a_time`): x86 has no float atomic add, so each is a compare-and-swap
loop, and an embedding's backward (torch.compile's ``index_put`` with accumulate) is millions.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from xdsl.dialects.builtin import TensorType

from naiad.backends.cpu.lowering.tiles import Lazy, numel, shape_of
from naiad.codegen import elementwise, llvm_types as lt, loops
from naiad.codegen.axis_info import innermost_dim


def _pointers(kernel: Any, addresses: ir.Value, lanes: int) -> ir.Value:
    return kernel.b.inttoptr(addresses, lt.vector(lt.PTR, lanes))


def _first_address(kernel: Any, addresses: ir.Value, lanes: int) -> ir.Value:
    first = addresses if lanes == 1 else kernel.b.extract_element(addresses, ir.Constant(lt.I32, 0))
    return kernel.b.inttoptr(first, lt.PTR)


# -- loads ---------------------------------------------------------------------------------------
def lower_load(kernel: Any, op: Any) -> None:
    result = op.results[0]
    if isinstance(result.type, TensorType):
        kernel.env[result] = Lazy(op)
        if kernel._must_materialize(result):
            kernel.materialize(result)
        return
    kernel.env[result] = load_chunk(kernel, op, None, 1)


def load_chunk(kernel: Any, op: Any, index: ir.Value | None, lanes: int) -> ir.Value:
    """The chunk ``index .. index+lanes-1`` of ``tt.load`` (a scalar load when index is None)."""
    def operand(value: Any) -> ir.Value:
        return kernel.scalar(value) if index is None else kernel.chunks.value_at(value, index, lanes)

    element = lt.memory_type(op.results[0].type)
    mask = operand(op.mask) if op.mask is not None else None
    passthru = operand(op.other) if op.other is not None else kernel.ctx(lanes).const(element, 0)
    if index is not None and lanes > 1 and not kernel.bounds_check and reads_one_address(kernel, op, lanes):
        return _uniform_load(kernel, op, operand(op.ptr), mask, passthru, lanes)
    return emit_load(kernel, op, operand(op.ptr), mask, passthru, lanes,
                     kernel.consecutive(op.ptr, lanes))


def reads_one_address(kernel: Any, op: Any, lanes: int) -> bool:
    """Whether every chunk of ``lanes`` of the load ``op`` reads one address under one mask:
    one scalar load serves all its lanes (`_uniform_load`)."""
    return kernel.uniform(op.ptr, lanes) and (op.mask is None or kernel.uniform(op.mask, lanes))


def _uniform_load(kernel: Any, op: Any, addresses: ir.Value, mask: ir.Value | None,
                  passthru: ir.Value, lanes: int) -> ir.Value:
    """A chunk whose lanes all read one address (``ids[offs // 128]``: one id per row of a
    block), under a mask equal in every lane: one scalar load, in every lane.  The lanes'
    ``other`` values may differ, so a masked-off chunk keeps them."""
    b, ctx = kernel.b, kernel.ctx(lanes)
    element = lt.memory_type(op.results[0].type)
    lane0 = ir.Constant(lt.I32, 0)
    first = b.extract_element(addresses, lane0)
    active = None if mask is None else b.extract_element(mask, lane0)
    value = ctx.splat(_scalar_load(kernel, first, active, ir.Constant(element, None), element))
    if mask is not None:
        value = b.select(mask, value, lt.to_memory(b, passthru))
    return lt.from_memory(b, value, lt.scalar(op.results[0].type))


def emit_load(kernel: Any, op: Any, addresses: ir.Value, mask: ir.Value | None,
              passthru: ir.Value, lanes: int, contiguous: bool) -> ir.Value:
    """Load ``lanes`` elements of ``op``'s result type at ``addresses`` (consecutive ones when
    ``contiguous``); masked-off lanes take ``passthru`` and touch no memory."""
    value_type = op.results[0].type
    element = lt.memory_type(value_type)
    passthru = lt.to_memory(kernel.b, passthru)
    mask = kernel.hooks.check_access(kernel, op, addresses, mask, lanes, element)
    b, align = kernel.b, ir.Constant(lt.I32, lt.byte_size(element))
    vec = lt.vector(element, lanes)
    if lanes == 1:
        loaded = _scalar_load(kernel, addresses, mask, passthru, element)
    elif contiguous:
        first = _first_address(kernel, addresses, lanes)
        if mask is None:
            loaded = b.load(first, typ=vec, align=lt.byte_size(element))
        else:
            fn = lt.intrinsic(kernel.llmod, "masked.load", [vec, lt.PTR], vec,
                              [lt.PTR, lt.I32, mask.type, vec])
            loaded = _unless_all_active(
                kernel, mask, vec,
                lambda: b.load(first, typ=vec, align=lt.byte_size(element)),
                lambda: b.call(fn, [first, align, mask, passthru]))
    else:
        ptrs = _pointers(kernel, addresses, lanes)
        mask = mask if mask is not None else kernel.ctx(lanes).const(lt.I1, 1)
        fn = lt.intrinsic(kernel.llmod, "masked.gather", [vec, ptrs.type], vec,
                          [ptrs.type, lt.I32, mask.type, vec])
        loaded = b.call(fn, [ptrs, align, mask, passthru])
    return lt.from_memory(kernel.b, loaded, lt.scalar(value_type))


def _unless_all_active(kernel: Any, mask: ir.Value, result_type: ir.Type | None,
                       plain: Any, masked: Any) -> ir.Value | None:
    """``plain()`` when every lane of ``mask`` is on, else ``masked()``.

    Masked vector loads and stores are slow on many CPUs (on AMD Zen a masked store costs
    several times a plain one), and in typical kernels only the last chunk of the last
    program is partial; the branch is almost always taken the same way.
    """
    every = lt.all_lanes(kernel.b, kernel.llmod, mask)
    return kernel.choose(every, plain, masked, result_type)


def _scalar_load(kernel: Any, address: ir.Value, mask: ir.Value | None, passthru: ir.Value,
                 element: ir.Type) -> ir.Value:
    def load() -> ir.Value:
        return kernel.b.load(kernel.b.inttoptr(address, lt.PTR), typ=element, align=lt.byte_size(element))

    return load() if mask is None else kernel.choose(mask, load, lambda: passthru, element)


# -- stores --------------------------------------------------------------------------------------
def lower_store(kernel: Any, op: Any) -> None:
    if not isinstance(op.ptr.type, TensorType):
        mask = kernel.scalar(op.mask) if op.mask is not None else None
        store_chunk(kernel, op, kernel.scalar(op.ptr), kernel.scalar(op.value), mask, 1, False)
        return

    def chunk(index: ir.Value, lanes: int) -> None:
        def at(v: Any) -> ir.Value:
            return kernel.chunks.value_at(v, index, lanes)

        mask = at(op.mask) if op.mask is not None else None
        store_chunk(kernel, op, at(op.ptr), at(op.value), mask, lanes,
                    kernel.consecutive(op.ptr, lanes))

    kernel.for_each_chunk(op.ptr.type, chunk)


def store_chunk(kernel: Any, op: Any, addresses: ir.Value, value: ir.Value, mask: ir.Value | None,
                lanes: int, contiguous: bool) -> None:
    """Store ``lanes`` elements at ``addresses`` (consecutive ones when ``contiguous``)."""
    value_type = op.value.type
    element = lt.memory_type(value_type)
    value = lt.to_memory(kernel.b, value)
    mask = kernel.hooks.check_access(kernel, op, addresses, mask, lanes, element)
    b, align = kernel.b, ir.Constant(lt.I32, lt.byte_size(element))
    if lanes == 1:
        if mask is None:
            b.store(value, b.inttoptr(addresses, lt.PTR), align=lt.byte_size(element))
            return
        with b.if_then(mask):
            b.store(value, b.inttoptr(addresses, lt.PTR), align=lt.byte_size(element))
        return
    if contiguous:
        first = _first_address(kernel, addresses, lanes)
        if mask is None:
            b.store(value, first, align=lt.byte_size(element))
            return
        fn = lt.intrinsic(kernel.llmod, "masked.store", [value.type, lt.PTR], lt.VOID,
                          [value.type, lt.PTR, lt.I32, mask.type])
        _unless_all_active(kernel, mask, None,
                           lambda: b.store(value, first, align=lt.byte_size(element)),
                           lambda: b.call(fn, [value, first, align, mask]))
        return
    ptrs = _pointers(kernel, addresses, lanes)
    mask = mask if mask is not None else kernel.ctx(lanes).const(lt.I1, 1)
    fn = lt.intrinsic(kernel.llmod, "masked.scatter", [value.type, ptrs.type], lt.VOID,
                      [value.type, ptrs.type, lt.I32, mask.type])
    b.call(fn, [value, ptrs, align, mask])


# -- atomics -------------------------------------------------------------------------------------
_RMW = {"add": "add", "fadd": "fadd", "and": "and", "or": "or", "xor": "xor", "max": "max",
        "min": "min", "umax": "umax", "umin": "umin", "exch": "xchg"}
_ORDERING = {"relaxed": "monotonic", "acquire": "acquire", "release": "release",
             "acq_rel": "acq_rel"}


def _atomic_elementwise(kernel: Any, op: Any, emit: Any) -> None:
    """Run ``emit(address, operands..., mask)`` per element; results into a buffer or a scalar."""
    result = op.results[0]
    operands = [v for v in op.operands]
    if not isinstance(result.type, TensorType):
        kernel.env[result] = emit(*[kernel.scalar(v) for v in operands])
        return
    target = kernel.buffer(result.type)

    def chunk(index: ir.Value, lanes: int) -> None:
        values = [kernel.chunks.value_at(v, index, 1) for v in operands]
        kernel.chunks.store_chunk(target, index, emit(*values))

    count = 1
    for d in result.type.get_shape():
        count *= d
    kernel.counted_loop(count, lambda i: chunk(i, 1))
    kernel.env[result] = target


def _guarded(kernel: Any, mask: ir.Value | None, element: ir.Type, body: Any) -> ir.Value:
    """``body()`` when ``mask`` is true (or absent), else zero."""
    if mask is None:
        return body()
    zero = ir.Constant(element, 0 if isinstance(element, ir.IntType) else 0.0)
    return kernel.choose(mask, body, lambda: zero, element)


def lower_atomic_rmw(kernel: Any, op: Any) -> None:
    kind = _RMW[op.atomic_rmw_op.data.value]
    ordering = _ORDERING[op.sem.data.value]
    element = lt.scalar(op.val.type)
    has_mask = op.mask is not None
    bf16 = lt.is_bf16(op.val.type)

    def emit(address: ir.Value, value: ir.Value, *mask: ir.Value) -> ir.Value:
        checked = kernel.hooks.check_access(kernel, op, address, mask[0] if has_mask else None, 1, element)
        pointer = kernel.b.inttoptr(address, lt.PTR)
        if bf16:
            return _guarded(kernel, checked, element, lambda: _add_bf16(kernel, op, pointer, value, ordering))
        return _guarded(kernel, checked, element, lambda: kernel.b.atomic_rmw(kind, pointer, value, ordering))

    if _adds_four_at_a_time(kernel, op):
        _add_four_at_a_time(kernel, op, emit, ordering)
        return
    _atomic_elementwise(kernel, op, emit)


#: Elements one 16-byte compare-and-swap covers in `_add_four_at_a_time`.
_WIDE_LANES = 4


def _adds_four_at_a_time(kernel: Any, op: Any) -> bool:
    """An fp32 atomic add whose result nobody reads, to pointers whose every group of four
    lanes is four consecutive elements starting 16-byte aligned, on a target with a 16-byte
    compare-and-swap, without bounds checks."""
    if op.atomic_rmw_op.data.value != "fadd" or lt.scalar(op.val.type) != lt.F32 \
            or not kernel.hooks.compare_exchange_16 or kernel.bounds_check:
        return False
    result = op.results[0]
    if not isinstance(result.type, TensorType) or any(True for _ in result.uses):
        return False
    shape = shape_of(op.ptr.type)
    inner = innermost_dim(shape)
    return inner is not None and kernel.consecutive(op.ptr, _WIDE_LANES) \
        and kernel.axis_info(op.ptr).divisibility[inner] % 16 == 0


def _add_four_at_a_time(kernel: Any, op: Any, emit: Any, ordering: str) -> None:
    """Each group of four lanes: one compare-and-swap loop on 16 bytes adding all four (each
    element's add is atomic, as asked; the four are also atomic together).  A group with some
    lanes masked off runs lane by lane."""
    b = kernel.b
    wide, vector = ir.IntType(128), lt.vector(lt.F32, _WIDE_LANES)

    def group(i: ir.Value) -> None:
        index = b.mul(i, ir.Constant(lt.I32, _WIDE_LANES))
        addresses = kernel.chunks.value_at(op.ptr, index, _WIDE_LANES)
        values = kernel.chunks.value_at(op.val, index, _WIDE_LANES)
        mask = None if op.mask is None else kernel.chunks.value_at(op.mask, index, _WIDE_LANES)
        first = b.extract_element(addresses, ir.Constant(lt.I32, 0))

        def together() -> None:
            _update_atomically(kernel, b.inttoptr(first, lt.PTR), wide, 16, ordering,
                               lambda old: b.bitcast(b.fadd(b.bitcast(old, vector), values), wide))

        def lane_by_lane() -> None:
            for k in range(_WIDE_LANES):
                lane = ir.Constant(lt.I32, k)
                lane_mask = [] if mask is None else [b.extract_element(mask, lane)]
                emit(b.extract_element(addresses, lane), b.extract_element(values, lane), *lane_mask)

        # The alignment is proven (axis information), and checked again here: a wrong
        # ``tl.multiple_of`` hint must not make cmpxchg16b fault and kill the process.
        aligned = b.icmp_unsigned("==", b.and_(first, ir.Constant(first.type, 15)),
                                  ir.Constant(first.type, 0))
        if mask is None:
            kernel.choose(aligned, together, lane_by_lane, None)
            return
        _unless_all_active(kernel, mask, None,
                           lambda: kernel.choose(aligned, together, lane_by_lane, None), lane_by_lane)

    kernel.counted_loop(numel(op.results[0].type) // _WIDE_LANES, group)


def _failure_ordering(ordering: str) -> str:
    return "monotonic" if ordering in ("release", "monotonic") else "acquire"


def _add_bf16(kernel: Any, op: Any, pointer: ir.Value, value: ir.Value, ordering: str) -> ir.Value:
    """Atomic add of a bf16 (an ``i16`` to LLVM, which atomicrmw cannot add as a float): add in
    float and round, then compare-and-swap, again until no other thread wrote in between."""
    b, ctx, bf16 = kernel.b, kernel.ctx(1), lt.element(op.val.type)

    def added(old: ir.Value) -> ir.Value:
        total = b.fadd(elementwise.to_compute(ctx, old, bf16), elementwise.to_compute(ctx, value, bf16))
        return elementwise.to_storage(ctx, total, bf16)

    return _update_atomically(kernel, pointer, lt.I16, 2, ordering, added)


def _update_atomically(kernel: Any, pointer: ir.Value, typ: ir.Type, align: int, ordering: str,
                       update: Any) -> ir.Value:
    """``*pointer = update(*pointer)`` as one atomic step: read, update, compare-and-swap, again
    until no other thread wrote in between; the value it replaced."""
    b = kernel.b
    pre = b.block
    retry, done = b.append_basic_block("atomic.retry"), b.append_basic_block("atomic.done")
    initial = b.load_atomic(pointer, "monotonic", align, typ=typ)
    b.branch(retry)
    b.position_at_end(retry)
    old = b.phi(typ)
    old.add_incoming(initial, pre)
    pair = b.cmpxchg(pointer, old, update(old), ordering, _failure_ordering(ordering))
    old.add_incoming(b.extract_value(pair, 0), retry)
    b.cbranch(b.extract_value(pair, 1), done, retry)
    b.position_at_end(done)
    return old


def _bits(kernel: Any, value: ir.Value) -> ir.Value:
    """A float as the integer of its bits (cmpxchg compares bits, as GPUs' atomic CAS does)."""
    if isinstance(value.type, ir.IntType):
        return value
    return kernel.b.bitcast(value, ir.IntType(lt.byte_size(value.type) * 8))


def lower_atomic_cas(kernel: Any, op: Any) -> None:
    ordering = _ORDERING[op.sem.data.value]
    element = lt.scalar(op.val.type)

    def emit(address: ir.Value, expected: ir.Value, value: ir.Value) -> ir.Value:
        checked = kernel.hooks.check_access(kernel, op, address, None, 1, element)

        def exchange() -> ir.Value:
            pair = kernel.b.cmpxchg(kernel.b.inttoptr(address, lt.PTR), _bits(kernel, expected),
                                    _bits(kernel, value), ordering, _failure_ordering(ordering))
            old = kernel.b.extract_value(pair, 0)
            return old if old.type == element else kernel.b.bitcast(old, element)

        return _guarded(kernel, checked, element, exchange)

    _atomic_elementwise(kernel, op, emit)


def lower_atomic_poll(kernel: Any, op: Any) -> None:
    """``tt.atomic_poll``: a spin loop of atomic loads (with bounds checks: none if the address is
    outside every buffer; the result is then false)."""
    element = lt.scalar(op.expected.type)
    address = kernel.scalar(op.ptr)
    checked = kernel.hooks.check_access(kernel, op, address, None, 1, element)
    kernel.env[op.result] = _guarded(kernel, checked, lt.I1, lambda: _poll(kernel, op, address, element))


def _poll(kernel: Any, op: Any, address: ir.Value, element: ir.Type) -> ir.Value:
    """Load until the value is the expected one (true); with a timeout, read the runtime's
    clock after each miss and give up (false) once ``timeout_ns`` have passed since the first
    load -- which always happens, even for a timeout of 0."""
    b = kernel.b
    expected, pointer = kernel.scalar(op.expected), b.inttoptr(address, lt.PTR)
    clock = lt.function(kernel.llmod, "naiad_clock_ns", lt.I64, [])
    timeout = None if op.timeout_ns is None else kernel.scalar(op.timeout_ns)
    return loops.poll(b, lambda: b.load_atomic(pointer, _ORDERING[op.sem.data.value],
                                               lt.byte_size(element), typ=element),
                      expected, lambda: b.call(clock, []), timeout)
