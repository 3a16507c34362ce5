"""NVIDIA's PTX for the memory operations of the shared GPU lowering that LLVM cannot say
(`naiad.codegen.gpu.hooks.GPUHooks`' access policies, atomics, polling loads, fences, clock):
one PTX instruction each (`ptx_asm`), as Triton emits them -- ``ld.global.cg.v4.b32``,
``st.global.L1::evict_first.b32``, ``atom.global.gpu.acq_rel.add.f32``,
``atom.global.acquire.gpu.cas.b64``, ``ld.relaxed.gpu.global``, ``fence.acq_rel``,
``%globaltimer``.  LLVM's own atomics would not do: it may move plain loads across a
``release`` cmpxchg, and has no bf16 add.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.backends.cuda.ptx_asm import asm
from naiad.codegen import llvm_types as lt


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


def access_policy(k: Any, op: Any, store: bool) -> tuple[str, list[ir.Value]] | None:
    """The PTX qualifiers of ``op``'s cache modifier and eviction policy, with the L2 policy
    operand an eviction policy needs (Triton's: ``L1::evict_*`` plus a ``createpolicy`` of the
    same priority for L2); None for a plain access.  PTX takes an L1 eviction priority only
    without a cache modifier: with both, the policy reaches L2 alone.  A masked store is never
    plain: it becomes one predicated ``st.global`` (as in Triton) instead of a branch around
    each store, which ptxas keeps (a branch and a convergence barrier per vector in a matmul's
    epilogue).  Nor is a masked load: behind a branch, ptxas issues a thread's loads one after
    another's use (three waits on memory where Triton's predicated loads take two in a 1-D
    GELU), which small kernels feel."""
    caches = _STORE_CACHE if store else _LOAD_CACHE
    cache = op.cache.data.value
    cache = cache if cache in caches else None
    evict = op.evict.data.value
    evict = None if evict == "evict_normal" else evict
    if cache is None and evict is None:
        return ("", []) if op.mask is not None else None
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


def _to_words(b: ir.IRBuilder, value: ir.Value, nbytes: int) -> list[ir.Value]:
    """``value`` (an element of ``nbytes`` or a vector of them) as the PTX words `_words` moves
    it in, 8-bit words widened to 16 bits (PTX has no 8-bit registers)."""
    n = value.type.count if isinstance(value.type, ir.VectorType) else 1
    count, bits = _words(nbytes, n)
    wtype = _word_type(bits, count)
    word = value if value.type == wtype else b.bitcast(value, wtype)
    words = [word] if count == 1 else [b.extract_element(word, ir.Constant(lt.I32, i))
                                       for i in range(count)]
    return [b.zext(w, lt.I16) if bits < 16 else w for w in words]


def load_with_policy(k: Any, qualifiers: tuple[str, list[ir.Value]], address: ir.Value,
                     vtype: ir.Type, nbytes: int, mask: ir.Value | None,
                     otherwise: ir.Value) -> ir.Value:
    """``ld.global`` with the qualifiers of `access_policy`, in 32-bit words (or elements where
    wider), predicated on ``mask``: its registers hold ``otherwise`` where the load does not
    run."""
    n = vtype.count if isinstance(vtype, ir.VectorType) else 1
    text, policy = qualifiers
    count, bits = _words(nbytes, n)
    register = ir.IntType(max(16, bits))          # PTX has no 8-bit registers
    vec = f".v{count}" if count > 1 else ""
    hint = f", ${count + 1}" if policy else ""
    guard = f"@${count + 1 + len(policy)} " if mask is not None else ""
    kept = _to_words(k.b, otherwise, nbytes) if mask is not None else []
    out = asm(k.b, f"{guard}ld.global{text}{vec}.b{bits} {_operands(0, count)}, [${count}]{hint};",
              [register] * count, [address, *policy, *([mask] if mask is not None else [])], tied=kept)
    words = [out] if count == 1 else [k.b.extract_value(out, i) for i in range(count)]
    words = [k.b.trunc(w, ir.IntType(bits)) if bits < 16 else w for w in words]
    packed = lt.pack_vector(k.b, words, _word_type(bits, count))
    return packed if packed.type == vtype else k.b.bitcast(packed, vtype)


def store_with_policy(k: Any, qualifiers: tuple[str, list[ir.Value]], address: ir.Value,
                      value: ir.Value, nbytes: int, mask: ir.Value | None) -> None:
    """``st.global`` with the qualifiers of `access_policy`, predicated on ``mask``."""
    n = value.type.count if isinstance(value.type, ir.VectorType) else 1
    text, policy = qualifiers
    count, bits = _words(nbytes, n)
    words = _to_words(k.b, value, nbytes)
    vec = f".v{count}" if count > 1 else ""
    hint = f", ${count + 1}" if policy else ""
    guard = f"@${count + 1 + len(policy)} " if mask is not None else ""
    asm(k.b, f"{guard}st.global{text}{vec}.b{bits} [$0], {_operands(1, count)}{hint};", [],
        [address, *words, *policy, *([mask] if mask is not None else [])])


def atomic_rmw(k: Any, op: Any, address: ir.Value, value: ir.Value) -> ir.Value:
    """``atom.global.<scope>.<sem>.<op>.<type>`` of one element."""
    operation, kind = _ATOM[op.atomic_rmw_op.data.value]
    ptx_type = _rmw_type(op.atomic_rmw_op.data.value, kind, op.val.type)
    text = f"atom.global.{op.scope.data.value}.{op.sem.data.value}.{operation}.{ptx_type} $0, [$1], $2;"
    bits = lt.to_bits(k.b, value)
    return lt.from_bits(k.b, asm(k.b, text, [bits.type], [address, bits]), lt.scalar(op.val.type))


#: The PTX ISA version of ``red`` on vectors (8.1; sm_90 on).
VECTOR_RED_PTX = 81


def reduction_width(op: Any, arch: int) -> int:
    """Elements one ``red`` may update for ``op`` (`GPUHooks.reduction_width`): a float add on
    sm_90 takes 16 bytes (four fp32, eight fp16/bf16), as Triton's; other operations and older
    GPUs one; 0 for an exchange (which has no ``red``), for acquiring semantics (``red`` is
    relaxed or releases), and for an operation ``atom`` does not have on the type."""
    name = op.atomic_rmw_op.data.value
    if name == "exch" or op.sem.data.value not in ("relaxed", "release"):
        return 0
    try:
        _rmw_type(name, _ATOM[name][1], op.val.type)
    except NotImplementedError:
        return 0
    width = 8 * lt.byte_size(lt.scalar(op.val.type))
    return 128 // width if arch >= 90 and name == "fadd" and width in (16, 32) else 1


def reduce_global(k: Any, op: Any, address: ir.Value, values: list[ir.Value]) -> None:
    """``red.<sem>.<scope>.global.<op>[.vN].<type> [address], values`` (no old value)."""
    name = op.atomic_rmw_op.data.value
    operation, kind = _ATOM[name]
    ptx_type = _rmw_type(name, kind, op.val.type)
    n = len(values)
    if n > 1:                                  # .noftz.v8.f16, .v4.f32
        head, _, last = ptx_type.rpartition(".")
        ptx_type = f"{head + '.' if head else ''}v{n}.{last}"
    operands = "{" + ", ".join(f"${i + 1}" for i in range(n)) + "}" if n > 1 else "$1"
    text = f"red.{op.sem.data.value}.{op.scope.data.value}.global.{operation}.{ptx_type} [$0], {operands};"
    asm(k.b, text, [], [address, *[lt.to_bits(k.b, v) for v in values]])


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


def atomic_cas(k: Any, op: Any, address: ir.Value, expected: ir.Value, value: ir.Value) -> ir.Value:
    """``atom.global.<sem>.<scope>.cas.b<N>`` on the bits (16, 32 or 64)."""
    element = lt.scalar(op.val.type)
    width = 8 * lt.byte_size(element)
    text = f"atom.global.{op.sem.data.value}.{op.scope.data.value}.cas.b{width} $0, [$1], $2, $3;"
    old = asm(k.b, text, [ir.IntType(width)], [address, lt.to_bits(k.b, expected), lt.to_bits(k.b, value)])
    return lt.from_bits(k.b, old, element)


def relaxed_load(b: ir.IRBuilder, address: ir.Value, element: ir.Type, scope: str) -> ir.Value:
    """``ld.relaxed.<scope>.global`` (``tl.atomic_poll``)."""
    return asm(b, f"ld.relaxed.{scope}.global.b{element.width} $0, [$1];", [element], [address])


#: The PTX ISA version that has ``fence.acquire`` (8.6; sm_90 on).
FENCE_ACQUIRE_PTX = 86


def acquire_fence(b: ir.IRBuilder, scope: str, acquire_only: bool) -> None:
    """``fence.acquire`` where the PTX may be of version `FENCE_ACQUIRE_PTX` (``acquire_only``),
    else ``fence.acq_rel``, which orders at least as much."""
    asm(b, f"fence.{'acquire' if acquire_only else 'acq_rel'}.{scope};", [], [])


def clock_ns(b: ir.IRBuilder) -> ir.Value:
    """``%globaltimer``, in nanoseconds."""
    return asm(b, "mov.u64 $0, %globaltimer;", [lt.I64], [])
