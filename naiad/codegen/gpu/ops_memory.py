"""GPU rules for global memory: loads and stores (vectorized up to 128 bits), atomics.

A thread's consecutive elements along the fastest dimension are one vector access when axis
information proves the pointers consecutive and aligned and the mask constant over them
(`vector_width`); a masked access is a branch around it, which ptxas turns into a predicate.
Elements several threads hold (a layout wider than its tensor) are stored by all of them (the
same value) but updated atomically only by their owner (`GPUKernel.owner`).

Plain accesses are LLVM loads and stores (they vectorize and optimize well); one with a cache
modifier or an eviction policy, and every atomic, is one PTX instruction (`ptx_asm`), as Triton
emits it: ``ld.global.cg.v4.b32``, ``st.global.L1::evict_first.b32``,
``atom.global.gpu.acq_rel.add.f32``, ``atom.global.acquire.gpu.cas.b64``.  LLVM's own atomics
would not do: it may move plain loads across a ``release`` cmpxchg, and has no bf16 add.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt, loops
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import GPUKernel, is_tensor, rule, shape_of
from naiad.codegen.gpu.ptx_asm import asm, from_bits, to_bits
from naiad.ir import tt

#: tt.atomic_rmw kind -> the PTX operation and how it reads the bits (b: bits, s: signed,
#: u: unsigned, f: float).  Integer add is the same on signed and unsigned bits.
_ATOM = {"add": ("add", "u"), "fadd": ("add", "f"), "and": ("and", "b"), "or": ("or", "b"),
         "xor": ("xor", "b"), "max": ("max", "s"), "min": ("min", "s"), "umax": ("max", "u"),
         "umin": ("min", "u"), "exch": ("exch", "b")}
#: Float types of ``atom.add`` (the 16-bit ones only without flushing subnormals; bf16 on sm_90).
_FLOAT_ADD = {"f16": "noftz.f16", "bf16": "noftz.bf16", "f32": "f32", "f64": "f64"}
#: Cache modifiers PTX has for loads and for stores; others (``.wb`` on a load) change nothing,
#: as in Triton, and the access stays plain.
_LOAD_CACHE = {"ca", "cg", "cs", "cv"}
_STORE_CACHE = {"wb", "cg", "cs", "wt"}


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
    width = min(per, ptr.contiguity[d], max(1, ptr.divisibility[d] // nbytes), max(1, 16 // nbytes))
    if op.mask is not None:
        width = min(width, k.info(op.mask).constancy[d])
    return 1 << (max(1, width).bit_length() - 1)


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
    qualifiers = _qualifiers(k, op, _LOAD_CACHE)
    if not is_tensor(result):
        mask = k.scalar(op.mask) if op.mask is not None else None
        other = _to_memory(k, k.scalar(op.other), storage) if op.other is not None else zero
        address = k.scalar(op.ptr)
        value = k.guarded(mask, lambda: _read(k, address, element, nbytes, qualifiers), other)
        k.env[result] = _from_memory(k, value, storage)
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
            fallback = _pack(k, [_to_memory(k, others[i], storage) for i in group], vtype)
        else:
            fallback = ir.Constant(vtype, None) if n > 1 else zero
        mask = masks[first] if masks is not None else None
        loaded = k.guarded(mask, lambda a=pointers[first], t=vtype: _read(k, a, t, nbytes, qualifiers),
                          fallback)
        parts = [k.b.extract_element(loaded, ir.Constant(lt.I32, j)) for j in range(n)] if n > 1 else [loaded]
        values.extend(_from_memory(k, p, storage) for p in parts)
    k.define(result, values)


@rule(tt.StoreOp)
def _store(k: GPUKernel, op: Any) -> None:
    value_type = op.value.type
    element = lt.memory_type(value_type)
    storage = lt.scalar(value_type)
    nbytes = lt.byte_size(element)
    qualifiers = _qualifiers(k, op, _STORE_CACHE)
    if not is_tensor(op.ptr):
        mask = k.scalar(op.mask) if op.mask is not None else None
        address, value = k.scalar(op.ptr), _to_memory(k, k.scalar(op.value), storage)
        owner = k.is_thread0()
        condition = k.b.and_(owner, mask) if mask is not None else owner
        k.when(condition, lambda: _write(k, address, value, nbytes, qualifiers))
        return
    layout = k.layout_of(op.ptr)
    shape = shape_of(op.ptr)
    pointers = k.tensor(op.ptr, layout).values
    values = [_to_memory(k, v, storage) for v in k.tensor(op.value, layout).values]
    masks = k.tensor(op.mask, layout).values if op.mask is not None else None
    width = vector_width(k, op, layout, shape, nbytes)
    for group in _groups(len(pointers), width):
        n = len(group)
        first = group[0]
        packed = _pack(k, [values[i] for i in group], ir.VectorType(element, n) if n > 1 else element)
        k.when(masks[first] if masks is not None else None,
              lambda a=pointers[first], v=packed: _write(k, a, v, nbytes, qualifiers))


def _qualifiers(k: GPUKernel, op: Any, caches: set[str]) -> tuple[str, list[ir.Value]] | None:
    """The PTX qualifiers of ``op``'s cache modifier and eviction policy, with the L2 policy
    operand an eviction policy needs (Triton's: ``L1::evict_*`` plus a ``createpolicy`` of the
    same priority for L2); None for a plain access.  PTX takes an L1 eviction priority only
    without a cache modifier: with both, the policy reaches L2 alone."""
    cache = op.cache.data.value
    cache = cache if cache in caches else None
    evict = op.evict.data.value
    evict = None if evict == "evict_normal" else evict
    if cache is None and evict is None:
        return None
    text = f".{cache}" if cache else f".L1::{evict}"
    if evict is None:
        return text, []
    policy = asm(k.b, f"createpolicy.fractional.L2::{evict}.b64 $0, 1.0;", [lt.I64], [], effects=False)
    return text + ".L2::cache_hint", [policy]


def _words(nbytes: int, n: int) -> tuple[int, int]:
    """``n`` elements of ``nbytes`` as PTX moves them: (how many words, bits per word), words of
    32 bits or of one element where elements are wider (``.v4.b32``, ``.v2.b64``, ``.b16``)."""
    total = 8 * nbytes * n
    bits = min(total, max(32, 8 * nbytes))
    return total // bits, bits


def _word_type(bits: int, count: int) -> ir.Type:
    return ir.VectorType(ir.IntType(bits), count) if count > 1 else ir.IntType(bits)


def _operands(first: int, count: int) -> str:
    names = ", ".join(f"${first + i}" for i in range(count))
    return "{" + names + "}" if count > 1 else names


def _read(k: GPUKernel, address: ir.Value, vtype: ir.Type, nbytes: int,
          qualifiers: tuple[str, list[ir.Value]] | None) -> ir.Value:
    """One access of ``vtype`` (an element or a vector of them) at ``address``."""
    n = vtype.count if isinstance(vtype, ir.VectorType) else 1
    if qualifiers is None:
        v = k.b.load(_global(k, address), typ=vtype)
        v.align = nbytes * n
        return v
    text, policy = qualifiers
    count, bits = _words(nbytes, n)
    register = ir.IntType(max(16, bits))          # PTX has no 8-bit registers
    vec = f".v{count}" if count > 1 else ""
    hint = f", ${count + 1}" if policy else ""
    out = asm(k.b, f"ld.global{text}{vec}.b{bits} {_operands(0, count)}, [${count}]{hint};",
              [register] * count, [address, *policy])
    words = [out] if count == 1 else [k.b.extract_value(out, i) for i in range(count)]
    words = [k.b.trunc(w, ir.IntType(bits)) if bits < 16 else w for w in words]
    packed = _pack(k, words, _word_type(bits, count))
    return packed if packed.type == vtype else k.b.bitcast(packed, vtype)


def _write(k: GPUKernel, address: ir.Value, value: ir.Value, nbytes: int,
           qualifiers: tuple[str, list[ir.Value]] | None) -> None:
    """One store of ``value`` (an element or a vector of them) at ``address``."""
    n = value.type.count if isinstance(value.type, ir.VectorType) else 1
    if qualifiers is None:
        s = k.b.store(value, _global(k, address))
        s.align = nbytes * n
        return
    text, policy = qualifiers
    count, bits = _words(nbytes, n)
    wtype = _word_type(bits, count)
    word = value if value.type == wtype else k.b.bitcast(value, wtype)
    words = [word] if count == 1 else [k.b.extract_element(word, ir.Constant(lt.I32, i))
                                       for i in range(count)]
    words = [k.b.zext(w, lt.I16) if bits < 16 else w for w in words]
    vec = f".v{count}" if count > 1 else ""
    hint = f", ${count + 1}" if policy else ""
    asm(k.b, f"st.global{text}{vec}.b{bits} [$0], {_operands(1, count)}{hint};", [],
        [address, *words, *policy])


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
    """``atom.global.<scope>.<sem>.<op>.<type>``; a masked-off element is not touched (its
    result is 0)."""
    operation, kind = _ATOM[op.atomic_rmw_op.data.value]
    ptx_type = _rmw_type(op.atomic_rmw_op.data.value, kind, op.val.type)
    text = f"atom.global.{op.scope.data.value}.{op.sem.data.value}.{operation}.{ptx_type} $0, [$1], $2;"
    element = lt.scalar(op.val.type)
    has_mask = op.mask is not None

    def emit(owner: ir.Value, address: ir.Value, value: ir.Value, *mask: ir.Value) -> ir.Value:
        condition = k.b.and_(owner, mask[0]) if has_mask else owner
        bits = to_bits(k.b, value)

        def update() -> ir.Value:
            return from_bits(k.b, asm(k.b, text, [bits.type], [address, bits]), element)
        return k.guarded(condition, update, _zero(element))

    _atomic(k, op, emit)


def _rmw_type(name: str, kind: str, mlir_type: Any) -> str:
    """The PTX type of an ``atom`` of ``name`` on ``mlir_type`` (``u32``, ``noftz.bf16``...); an
    operation PTX does not have on the type (an integer op on floats, say) is not supported."""
    width = 8 * lt.byte_size(lt.scalar(mlir_type))
    floating = lt.is_float(mlir_type)
    if kind == "f":
        ptx_type = _FLOAT_ADD.get("bf16" if lt.is_bf16(mlir_type) else f"f{width}") if floating else None
        if ptx_type is not None:
            return ptx_type
    elif width >= 32 and (kind == "b" or not floating):
        return f"{kind}{width}"
    raise NotImplementedError(f"tt.atomic_rmw {name} on {lt.element(mlir_type)} is not supported by "
                              f"the GPU lowering")


@rule(tt.AtomicCASOp)
def _atomic_cas(k: GPUKernel, op: Any) -> None:
    """``atom.global.<sem>.<scope>.cas.b<N>`` on the bits (16, 32 or 64)."""
    element = lt.scalar(op.val.type)
    width = 8 * lt.byte_size(element)
    text = f"atom.global.{op.sem.data.value}.{op.scope.data.value}.cas.b{width} $0, [$1], $2, $3;"

    def emit(owner: ir.Value, address: ir.Value, expected: ir.Value, value: ir.Value) -> ir.Value:
        def exchange() -> ir.Value:
            old = asm(k.b, text, [ir.IntType(width)], [address, to_bits(k.b, expected), to_bits(k.b, value)])
            return from_bits(k.b, old, element)
        return k.guarded(owner, exchange, _zero(element))

    _atomic(k, op, emit)


@rule(tt.AtomicPollOp)
def _atomic_poll(k: GPUKernel, op: Any) -> None:
    """Every thread loads the flag (``ld.relaxed.<scope>.global``) until it holds ``expected``
    (true) or, with a timeout, until ``%globaltimer`` says ``timeout_ns`` have passed since the
    first load (false; the first load always happens).  ``sem=acquire`` adds an acquire fence
    after the loop (``fence.acq_rel``: the PTX this backend writes predates ``fence.acquire``)."""
    b = k.b
    scope = op.scope.data.value
    expected = k.scalar(op.expected)
    address = k.scalar(op.ptr)
    text = f"ld.relaxed.{scope}.global.b{expected.type.width} $0, [$1];"
    timeout = None if op.timeout_ns is None else k.scalar(op.timeout_ns)
    seen = loops.poll(b, lambda: asm(b, text, [expected.type], [address]), expected,
                      lambda: asm(b, "mov.u64 $0, %globaltimer;", [lt.I64], []), timeout)
    if op.sem.data.value == "acquire":
        asm(b, f"fence.acq_rel.{scope};", [], [])
    k.env[op.result] = seen


def _zero(element: ir.Type) -> ir.Value:
    return ir.Constant(element, 0 if isinstance(element, ir.IntType) else 0.0)
