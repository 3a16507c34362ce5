"""What a GPU target supplies to the shared GPU lowering (`naiad.codegen.gpu`): the contract.

The shared rules lower TTGIR to LLVM IR for any GPU whose programs run as blocks of threads in
lockstep groups ("warps": NVIDIA's warps, AMD's wavefronts, OpenCL's sub-groups) with a shared
memory per block.  Everything that differs between targets goes through an instance of a
subclass of `GPUHooks`, which `GPUKernel` holds as ``hooks``:

- the module (triple, data layout), kernel parameters (default: pointers into the global
  address space, booleans as bytes) and the kernel's marking;
- thread, program and grid ids, the block barrier, lane shuffles within a warp, the shared
  memory's base;
- memory accesses with cache hints, atomics with memory semantics and scopes, polling loads,
  fences and a clock: each with a default in plain LLVM that a target may replace by its own
  instructions (NVIDIA: PTX);
- inline assembly's register classes, device printf and assert (from `TargetHooks`, with its
  math library choices).

A member without a default raises `NotImplementedError` naming what the target must supply;
the compiler reports it as the backend's missing feature.  `naiad.backends.cuda.hooks` is the
worked example.
"""

from __future__ import annotations

import re
from typing import Any

import llvmlite.ir as ir

from naiad.codegen import elementwise, llvm_types as lt
from naiad.codegen.hooks import TargetHooks
from naiad.ir.types import PointerType

#: Triton's memory semantics -> LLVM's atomic orderings (and the strongest a failed cmpxchg
#: may have).
_ORDERING = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
_FAILURE_ORDERING = {"monotonic": "monotonic", "acquire": "acquire", "release": "monotonic",
                     "acq_rel": "acquire"}
#: tt.atomic_rmw kinds LLVM's atomicrmw has for integers.
_LLVM_RMW = {"add": "add", "and": "and", "or": "or", "xor": "xor", "max": "max", "min": "min",
             "umax": "umax", "umin": "umin", "exch": "xchg"}


def _float_max(b: ir.IRBuilder, old: ir.Value, value: ir.Value) -> ir.Value:
    return b.select(b.fcmp_unordered(">", value, old), value, old)


def _float_min(b: ir.IRBuilder, old: ir.Value, value: ir.Value) -> ir.Value:
    return b.select(b.fcmp_unordered("<", value, old), value, old)


#: Float read-modify-writes done by a cmpxchg loop: the new value from the old one.
_FLOAT_COMBINE = {"fadd": lambda b, old, value: b.fadd(old, value), "max": _float_max, "min": _float_min}


#: Integer read-modify-writes of narrow elements, done in a word's cmpxchg loop.
_NARROW_INT = {
    "add": lambda b, old, v: b.add(old, v), "and": lambda b, old, v: b.and_(old, v),
    "or": lambda b, old, v: b.or_(old, v), "xor": lambda b, old, v: b.xor(old, v),
    "max": lambda b, old, v: b.select(b.icmp_signed(">", v, old), v, old),
    "min": lambda b, old, v: b.select(b.icmp_signed("<", v, old), v, old),
    "umax": lambda b, old, v: b.select(b.icmp_unsigned(">", v, old), v, old),
    "umin": lambda b, old, v: b.select(b.icmp_unsigned("<", v, old), v, old),
}


def _word_cas_loop(b: ir.IRBuilder, addrspace: int, address: ir.Value, value: ir.Value, ordering: str,
                   combine: Any, expected: ir.Value | None = None) -> ir.Value:
    """``combine(old, value)`` of the narrow element at the i64 ``address``, through cmpxchg of
    the aligned 32-bit word around it (the word's other bytes written back as they were); with
    ``expected``, only where the element held it (a compare-and-swap).  The old element."""
    width = lt.bit_width(value.type)
    narrow = ir.IntType(width)
    word_address = b.and_(address, ir.Constant(lt.I64, -4))
    shift = b.trunc(b.shl(b.and_(address, ir.Constant(lt.I64, 3)), ir.Constant(lt.I64, 3)), lt.I32)
    keep = b.xor(b.shl(ir.Constant(lt.I32, (1 << width) - 1), shift), ir.Constant(lt.I32, -1))
    pointer = b.inttoptr(word_address, ir.PointerType(addrspace=addrspace))
    start = b.block
    first = b.load_atomic(pointer, "monotonic", 4, typ=lt.I32)
    retry = b.append_basic_block("word.retry")
    attempt = b.append_basic_block("word.attempt")
    done = b.append_basic_block("word.done")
    b.branch(retry)
    b.position_at_end(retry)
    seen = b.phi(lt.I32)
    seen.add_incoming(first, start)
    old_bits = b.trunc(b.lshr(seen, shift), narrow)
    old = lt.from_bits(b, old_bits, value.type)
    if expected is not None:
        b.cbranch(b.icmp_unsigned("==", old_bits, lt.to_bits(b, expected)), attempt, done)
    else:
        b.branch(attempt)
    b.position_at_end(attempt)
    new_bits = lt.to_bits(b, combine(b, old, value))
    word = b.or_(b.and_(seen, keep), b.shl(b.zext(new_bits, lt.I32), shift))
    pair = b.cmpxchg(pointer, seen, word, ordering, _FAILURE_ORDERING[ordering])
    seen.add_incoming(b.extract_value(pair, 0), attempt)
    b.cbranch(b.extract_value(pair, 1), done, retry)
    b.position_at_end(done)
    return old


def _cas_loop(b: ir.IRBuilder, pointer: ir.Value, value: ir.Value, ordering: str, combine: Any) -> ir.Value:
    """``combine(old, value)`` stored atomically at ``pointer`` by retrying a cmpxchg of the
    bits until no other thread wrote in between; the old value."""
    bits_type = ir.IntType(lt.bit_width(value.type))
    start = b.block
    first = b.load_atomic(pointer, "monotonic", lt.byte_size(value.type), typ=bits_type)
    retry = b.append_basic_block("cas.retry")
    done = b.append_basic_block("cas.done")
    b.branch(retry)
    b.position_at_end(retry)
    seen = b.phi(bits_type)
    seen.add_incoming(first, start)
    updated = combine(b, b.bitcast(seen, value.type), value)
    pair = b.cmpxchg(pointer, seen, b.bitcast(updated, bits_type), ordering, _FAILURE_ORDERING[ordering])
    seen.add_incoming(b.extract_value(pair, 0), retry)
    b.cbranch(b.extract_value(pair, 1), done, retry)
    b.position_at_end(done)
    return b.bitcast(b.extract_value(pair, 0), value.type)


class GPUHooks(TargetHooks):
    """The target side of the shared GPU lowering; subclass it and override what the target
    has (the abstract members first)."""

    #: Threads of one lockstep group, the unit of shuffles and of a layout's lanes.
    warp_size: int = 32
    #: LLVM address spaces of global memory (kernel pointers), constants and shared memory.
    global_addrspace: int = 1
    constant_addrspace: int = 4
    shared_addrspace: int = 3
    #: Whether `barrier` can wait for only `barrier_threads` threads: then a kernel lets warps
    #: that only repeat others' work leave at its start (`replicated_warps`).
    counts_barrier_threads: bool = False
    #: The threads that reach the kernel's barriers (set by the kernel; None: all of them).
    barrier_threads: int | None = None

    def _missing(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"the {self.name} backend's GPU hooks do not supply {what}")

    # -- the module and the kernel's interface ---------------------------------------------------
    def prepare_module(self, module: ir.Module) -> None:
        """Set the module's triple and data layout (called once, before anything is emitted)."""
        raise self._missing("prepare_module (the LLVM triple and data layout)")

    def param_type(self, mlir_type: Any) -> ir.Type:
        """The LLVM type of a kernel parameter of TTIR type ``mlir_type``.  Default: pointers
        into ``global_addrspace``, scalars as they lie in memory (a boolean as a byte)."""
        if isinstance(mlir_type, PointerType):
            return ir.PointerType(addrspace=self.global_addrspace)
        return lt.memory_type(mlir_type)

    def param_value(self, b: ir.IRBuilder, param: ir.Value, mlir_type: Any) -> ir.Value:
        """The value the shared rules use for parameter ``param``: pointers as i64 addresses,
        booleans as i1 (the default reads `param_type`'s default so)."""
        if isinstance(mlir_type, PointerType):
            return b.ptrtoint(param, lt.I64)
        if lt.scalar(mlir_type) == lt.I1:
            return b.trunc(param, lt.I1)
        return param

    def mark_kernel(self, fn: ir.Function, threads: int) -> None:
        """Make ``fn`` a kernel entry of ``threads`` threads per block (calling convention,
        annotations)."""
        raise self._missing("mark_kernel")

    # -- ids, synchronization, shuffles, shared memory ----------------------------------------
    def thread_id(self, b: ir.IRBuilder) -> ir.Value:
        """This thread's index in its block (i32)."""
        raise self._missing("thread_id")

    def program_id(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        """``tl.program_id(axis)`` (i32)."""
        raise self._missing("program_id")

    def num_programs(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        """``tl.num_programs(axis)`` (i32)."""
        raise self._missing("num_programs")

    def barrier(self, b: ir.IRBuilder) -> None:
        """Every thread of the block (`barrier_threads` of them, where set) waits here; shared
        memory written before is visible after.  It must be a call LLVM knows is convergent."""
        raise self._missing("barrier")

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, offset: int) -> ir.Value:
        """The 32-bit ``value`` of lane ``lane ^ offset`` of the same warp."""
        raise self._missing("shuffle_xor")

    def shuffle_index(self, b: ir.IRBuilder, value: ir.Value, lane: ir.Value) -> ir.Value:
        """The 32-bit ``value`` of lane ``lane`` (an i32) of the same warp."""
        raise self._missing("shuffle_index")

    def lane_id(self, b: ir.IRBuilder) -> ir.Value:
        """This thread's lane in its warp (i32); the default `shuffle_up` needs it."""
        raise self._missing("lane_id")

    def shuffle_up(self, b: ir.IRBuilder, value: ir.Value, delta: int) -> ir.Value:
        """The 32-bit ``value`` of lane ``lane - delta`` (a lane's own below ``delta``).
        Default: through `shuffle_index` from `lane_id` (targets whose own shift leaves the
        lanes below ``delta`` undefined, or that have none)."""
        lane = self.lane_id(b)
        source = b.sub(lane, ir.Constant(lt.I32, delta))
        below = b.icmp_signed("<", source, ir.Constant(lt.I32, 0))
        moved = self.shuffle_index(b, value, b.select(below, lane, source))
        return b.select(below, value, moved)

    def store_in_shared(self, k: Any, dist: Any, addresses: Any) -> bool:
        """Write a thread's elements of ``dist`` (a `Dist`, 16 contiguous bytes for each 8
        16-bit elements of a row at the destination) into shared memory the target's faster
        way -- NVIDIA's ``stmatrix`` for a tensor-core accumulator --, given
        ``addresses(thread, constants)``: the 32-bit shared addresses of the elements at
        coordinates ``thread`` (values) plus each of ``constants``.  False (nothing emitted):
        the shared code stores each element."""
        return False

    #: The symbol of the default `shared_base`'s array.
    shared_symbol = "naiad_shared"

    def shared_base(self, b: ir.IRBuilder) -> ir.Value:
        """A pointer (in the shared address space) to the block's shared memory, whose size the
        compiler reports as the kernel's ``shared`` metadata.  Default: an external array of
        no size named `shared_symbol`, which `sized_shared_array` gives the kernel's size in the
        module's text (for targets without an unsized shared array)."""
        module = b.module
        shared = module.globals.get(self.shared_symbol)
        if shared is None:
            shared = ir.GlobalVariable(module, ir.ArrayType(lt.I8, 0), self.shared_symbol,
                                       addrspace=self.shared_addrspace)
            shared.linkage = "external"
            shared.align = 16
        return lt.opaque(b, shared, self.shared_addrspace)

    def offset_address(self, ctx: Any, address: ir.Value, offset: ir.Value, size: int) -> ir.Value:
        """As an LLVM ``getelementptr`` of ``size``-byte integers from ``address`` (turned back
        into an i64): the GPU code generators (NVPTX's and AMDGPU's SeparateConstOffsetFromGEP)
        split the constant part of a GEP's index off, so a thread's accesses along a row share
        one 64-bit address plus immediates (``[R2.64+0x4000]``), as in Triton, where the same
        sum in integers keeps a 64-bit register for each: an fp32 row of 32,768 in 16 warps
        spilled 136 bytes a thread with them, 4 without (Triton 80)."""
        if size not in (1, 2, 4, 8, 16) or isinstance(offset.type, ir.VectorType):
            return super().offset_address(ctx, address, offset, size)
        base = ctx.b.inttoptr(address, ir.PointerType(addrspace=self.global_addrspace))
        return ctx.b.ptrtoint(ctx.b.gep(base, [offset], source_etype=ir.IntType(8 * size)), lt.I64)

    # -- memory with hints, atomics, polling ----------------------------------------------------
    def access_policy(self, k: Any, op: Any, store: bool) -> Any:
        """What the target makes of a load's or store's cache modifier and eviction policy, once
        per op (an object the two calls below receive), or None for a plain access.  By
        default hints are ignored: they change speed, not results."""
        return None

    def load_with_policy(self, k: Any, policy: Any, address: ir.Value, vtype: ir.Type,
                         nbytes: int, mask: ir.Value | None, otherwise: ir.Value) -> ir.Value:
        """One load of ``vtype`` (an element of ``nbytes`` or a vector of them) at the i64
        ``address`` under ``policy`` (from `access_policy`) where the i1 ``mask`` holds
        (always, when None); ``otherwise`` (of ``vtype``) where it does not."""
        raise self._missing("load_with_policy")

    def store_with_policy(self, k: Any, policy: Any, address: ir.Value, value: ir.Value,
                          nbytes: int, mask: ir.Value | None) -> None:
        """One store of ``value`` at the i64 ``address`` under ``policy``, where the i1
        ``mask`` holds (always, when None)."""
        raise self._missing("store_with_policy")

    def atomic_rmw(self, k: Any, op: Any, address: ir.Value, value: ir.Value) -> ir.Value:
        """``tt.atomic_rmw`` ``op``'s read-modify-write of one element: ``value`` at the i64
        ``address``, with ``op``'s kind, memory semantics and scope; the old value.  Default:
        LLVM's ``atomicrmw`` for integers and exchanges, a ``cmpxchg`` loop for float adds,
        maxima and minima (which not every target has), at system scope (the widest)."""
        kind = op.atomic_rmw_op.data.value
        ordering = _ORDERING[op.sem.data.value]
        if lt.bit_width(value.type) < 32:
            return self._narrow_rmw(k, op, kind, ordering, address, value)
        pointer = k.b.inttoptr(address, ir.PointerType(addrspace=self.global_addrspace))
        if isinstance(value.type, ir.IntType) and kind in _LLVM_RMW:
            return k.b.atomic_rmw(_LLVM_RMW[kind], pointer, value, ordering)
        if kind == "exch":
            bits = lt.to_bits(k.b, value)
            return lt.from_bits(k.b, k.b.atomic_rmw("xchg", pointer, bits, ordering), value.type)
        if kind in _FLOAT_COMBINE and not isinstance(value.type, ir.IntType):
            return _cas_loop(k.b, pointer, value, ordering, _FLOAT_COMBINE[kind])
        raise NotImplementedError(f"tt.atomic_rmw {kind} on {value.type} is not supported by the "
                                  f"{self.name} backend")

    def _narrow_rmw(self, k: Any, op: Any, kind: str, ordering: str, address: ir.Value,
                    value: ir.Value) -> ir.Value:
        """A read-modify-write of an 8- or 16-bit element as a cmpxchg loop on the aligned
        32-bit word that holds it (targets have no narrower atomics); bf16, held as its bits,
        is combined in fp32 and rounded back."""
        def combine(b: ir.IRBuilder, old: ir.Value, operand: ir.Value) -> ir.Value:
            if kind == "exch":
                return operand
            if lt.is_bf16(op.val.type) and kind in _FLOAT_COMBINE:
                ctx = k.ctx()
                wide = [elementwise.to_compute(ctx, v, op.val.type) for v in (old, operand)]
                return elementwise.to_storage(ctx, _FLOAT_COMBINE[kind](b, *wide), op.val.type)
            if not isinstance(operand.type, ir.IntType):
                if kind not in _FLOAT_COMBINE:
                    raise NotImplementedError(f"tt.atomic_rmw {kind} on {operand.type} is not "
                                              f"supported by the {self.name} backend")
                return _FLOAT_COMBINE[kind](b, old, operand)
            if kind not in _NARROW_INT:
                raise NotImplementedError(f"tt.atomic_rmw {kind} on {operand.type} is not "
                                          f"supported by the {self.name} backend")
            return _NARROW_INT[kind](b, old, operand)
        return _word_cas_loop(k.b, self.global_addrspace, address, value, ordering, combine)

    def reduction_width(self, k: Any, op: Any) -> int:
        """How many consecutive elements one reduction may update: a ``tt.atomic_rmw`` whose
        old values nobody reads, which needs no answer from memory (NVIDIA's ``red``, four
        floats at once on sm_90).  0 where the target has no such instruction for ``op``: the
        atomic stays `atomic_rmw` per element.  Default 0."""
        return 0

    def reduce_global(self, k: Any, op: Any, address: ir.Value, values: list[ir.Value]) -> None:
        """``op``'s update of ``len(values)`` consecutive elements from the i64 ``address``
        (aligned to their size; at most `reduction_width`), without reading the old values."""
        raise self._missing("reduce_global")

    def atomic_cas(self, k: Any, op: Any, address: ir.Value, expected: ir.Value,
                   value: ir.Value) -> ir.Value:
        """``tt.atomic_cas`` ``op`` on one element; the old value.  Default: LLVM's
        ``cmpxchg`` on the bits (8- and 16-bit elements: on the word that holds them)."""
        ordering = _ORDERING[op.sem.data.value]
        if lt.bit_width(value.type) < 32:
            return _word_cas_loop(k.b, self.global_addrspace, address, value, ordering,
                                  lambda b, old, operand: operand, expected=expected)
        pointer = k.b.inttoptr(address, ir.PointerType(addrspace=self.global_addrspace))
        pair = k.b.cmpxchg(pointer, lt.to_bits(k.b, expected), lt.to_bits(k.b, value), ordering,
                           _FAILURE_ORDERING[ordering])
        return lt.from_bits(k.b, k.b.extract_value(pair, 0), value.type)

    def relaxed_load(self, b: ir.IRBuilder, address: ir.Value, element: ir.Type, scope: str) -> ir.Value:
        """A relaxed atomic load of ``element`` at the i64 ``address`` (``tl.atomic_poll``).
        Default: LLVM's ``load atomic monotonic``."""
        pointer = b.inttoptr(address, ir.PointerType(addrspace=self.global_addrspace))
        return b.load_atomic(pointer, "monotonic", lt.byte_size(element), typ=element)

    def acquire_fence(self, b: ir.IRBuilder, scope: str) -> None:
        """A fence with (at least) acquire semantics at ``scope`` ("gpu", "cta", "sys").
        Default: LLVM's ``fence acquire`` (system scope)."""
        b.fence("acquire")

    def clock_ns(self, b: ir.IRBuilder) -> ir.Value:
        """A nanosecond clock (i64) for timeouts (``tl.atomic_poll(timeout_ns=...)``)."""
        raise self._missing("clock_ns (timeouts)")

    # -- inline assembly -----------------------------------------------------------------------------
    def asm_register_type(self, letter: str) -> ir.Type:
        """The LLVM type of an inline-assembly operand of constraint ``letter`` (NVIDIA: ``r``
        is i32, ``f`` f32...)."""
        raise self._missing("asm_register_type (inline assembly: tl.inline_asm_elementwise)")


def sized_shared_array(llir: str, symbol: str, nbytes: int, addrspace: int = 3) -> str:
    """A lowered module's text with the default `GPUHooks.shared_base` array (``symbol``) given
    ``nbytes`` (16 at least), as a module-internal array."""
    declared = re.compile(rf'@"?{re.escape(symbol)}"? = external addrspace\({addrspace}\) global '
                          rf'\[0 x i8\](, align \d+)?')
    return declared.sub(f'@"{symbol}" = internal addrspace({addrspace}) global [{max(nbytes, 16)} x i8] '
                        f'undef, align 16', llir)
