"""TTIR types as LLVM types, and declaring overloaded LLVM intrinsics with llvmlite.

Storage types: pointers are ``i64`` inside kernels (address arithmetic stays integer and
vectorizes; they become ``ptr`` only at a memory access), ``bf16`` is ``i16`` and the fp8 types
are ``i8`` (llvmlite has no bfloat or fp8 type: arithmetic on them goes through ``float`` in the
element-wise rules), ``f16`` is LLVM's ``half``.
"""

from __future__ import annotations

import hashlib
import math
import struct

import llvmlite.ir as ir
from xdsl.dialects.builtin import (BFloat16Type, Float16Type, Float32Type, Float64Type,
                                   IntegerType, TensorType)

from naiad.ir.types import PointerType


class BFloatType(ir.Type):
    """LLVM's ``bfloat``, which llvmlite lacks: only for intrinsics that take it (x86's
    ``vdpbf16ps``); values are bitcast to it from their ``i16`` storage at the call."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BFloatType)

    def __hash__(self) -> int:
        return hash("bfloat")


I1, I8, I16, I32, I64 = (ir.IntType(w) for w in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()


def element(mlir_type):
    """The element type of a tensor type, or the type itself."""
    return mlir_type.element_type if isinstance(mlir_type, TensorType) else mlir_type


def is_bf16(mlir_type) -> bool:
    return isinstance(element(mlir_type), BFloat16Type)


def is_int8(mlir_type) -> bool:
    """Whether the elements are 8-bit integers (TTIR's ``i8``; fp8 is stored in bytes too)."""
    t = element(mlir_type)
    return isinstance(t, IntegerType) and t.width.data == 8


def is_fp8(mlir_type) -> bool:
    t = element(mlir_type)
    return type(t).__name__.startswith("Float8")


def is_float(mlir_type) -> bool:
    t = element(mlir_type)
    return isinstance(t, (Float16Type, Float32Type, Float64Type, BFloat16Type)) or is_fp8(t)


def scalar(mlir_type) -> ir.Type:
    """The LLVM storage type of one element of ``mlir_type``."""
    t = element(mlir_type)
    if isinstance(t, IntegerType):
        return ir.IntType(t.width.data)
    if isinstance(t, PointerType):
        return I64
    if isinstance(t, Float32Type):
        return F32
    if isinstance(t, Float64Type):
        return F64
    if isinstance(t, Float16Type):
        return F16
    if isinstance(t, BFloat16Type):
        return I16
    if is_fp8(t):
        return I8
    raise TypeError(f"no LLVM type for {t}")


def c_string(module: ir.Module, text: str) -> ir.GlobalVariable:
    """A NUL-terminated constant holding ``text`` (UTF-8), one internal global per distinct
    text (named by its hash): what printf formats, assert messages and file names point at."""
    data = bytearray(text.encode("utf-8") + b"\0")
    name = f"naiad.str.{hashlib.sha1(data).hexdigest()[:16]}"
    glob = module.globals.get(name)
    if glob is None:
        kind = ir.ArrayType(I8, len(data))
        glob = ir.GlobalVariable(module, kind, name=name)
        glob.initializer, glob.global_constant, glob.linkage = ir.Constant(kind, data), True, "internal"
    return glob


def opaque(builder: ir.IRBuilder, pointer: ir.Value, addrspace: int = 0) -> ir.Value:
    """``pointer`` as an opaque ``ptr`` (llvmlite's alloca yields a typed pointer, and its
    builder refuses to store other types through one; LLVM itself has only ``ptr``)."""
    cast = ir.CastInstr(builder.block, "bitcast", pointer,
                        PTR if addrspace == 0 else ir.PointerType(addrspace=addrspace))
    builder._insert(cast)
    return cast


def memory_type(mlir_type) -> ir.Type:
    """How one element of ``mlir_type`` is laid out in memory (global, shared, a buffer): its
    storage type, but a boolean takes a byte (LLVM packs vectors of i1 into bits, which would
    not match element addresses)."""
    storage = scalar(mlir_type)
    return I8 if storage == I1 else storage


def to_memory(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """``value`` (a scalar or a vector) as memory holds it (`memory_type`): booleans as bytes."""
    if scalar_of(value.type) == I1:
        return b.zext(value, vector(I8, lanes_of(value.type)))
    return value


def from_memory(b: ir.IRBuilder, value: ir.Value, storage: ir.Type) -> ir.Value:
    """The inverse of `to_memory` for values whose storage type is ``storage``: a byte read
    as a boolean is true when it is not zero."""
    if storage == I1:
        return b.icmp_unsigned("!=", value, ir.Constant(value.type, None))
    return value


def bit_width(t: ir.Type) -> int:
    """Bits of a scalar type (1 for a boolean)."""
    return t.width if isinstance(t, ir.IntType) else 8 * byte_size(t)


def vector(t: ir.Type, lanes: int) -> ir.Type:
    return t if lanes == 1 else ir.VectorType(t, lanes)


def lanes_of(t: ir.Type) -> int:
    return t.count if isinstance(t, ir.VectorType) else 1


def scalar_of(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t


def byte_size(t: ir.Type) -> int:
    t = scalar_of(t)
    if isinstance(t, ir.IntType):
        return max(1, t.width // 8)
    return {F16: 2, F32: 4, F64: 8}.get(t, 8)


def _mangle(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_mangle(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.PointerType):
        return "p0"
    return {F16: "f16", F32: "f32", F64: "f64"}[t]


def intrinsic(module: ir.Module, name: str, overloads: list[ir.Type], ret: ir.Type,
              args: list[ir.Type]) -> ir.Function:
    """Declare (once) ``llvm.<name>.<mangled overloads>`` with the given signature."""
    full = ".".join([f"llvm.{name}"] + [_mangle(t) for t in overloads])
    existing = module.globals.get(full)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), full)


def all_lanes(b: ir.IRBuilder, module: ir.Module, flags: ir.Value) -> ir.Value:
    """Whether every lane of ``flags`` (a vector of i1, or one i1) is true: an i1."""
    if not isinstance(flags.type, ir.VectorType):
        return flags
    return b.call(intrinsic(module, "vector.reduce.and", [flags.type], I1, [flags.type]), [flags])


def function(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """Declare (once) an external function."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name)


def bf16_bits(value: float) -> int:
    """The bf16 nearest to ``value`` (ties to even), rounded once: through the f32 rounded to
    odd (see `naiad.codegen.elementwise`), as ``value`` may be any Python float."""
    if math.isnan(value):
        return 0x7FC0
    sign = 0x8000 if math.copysign(1.0, value) < 0 else 0
    if abs(value) > _F32_MAX:
        return sign | 0x7F80
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    nearest = struct.unpack("<f", struct.pack("<I", bits))[0]
    if nearest != value:
        bits = (bits - 1 if abs(nearest) > abs(value) else bits) | 1
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


_F32_MAX = 3.4028234663852886e38


def to_bits(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """A scalar as an integer of its width (floats bitcast): what atomics compare and
    registers carry."""
    if isinstance(value.type, ir.IntType):
        return value
    return b.bitcast(value, ir.IntType(bit_width(value.type)))


def from_bits(b: ir.IRBuilder, bits: ir.Value, storage: ir.Type) -> ir.Value:
    """The inverse of `to_bits`."""
    return bits if bits.type == storage else b.bitcast(bits, storage)


def pack_vector(b: ir.IRBuilder, values: list[ir.Value], vtype: ir.Type) -> ir.Value:
    """``values`` as one value of ``vtype``: a vector of them, or the one value itself."""
    if not isinstance(vtype, ir.VectorType):
        return values[0]
    packed = ir.Constant(vtype, None)
    for j, v in enumerate(values):
        packed = b.insert_element(packed, v, ir.Constant(I32, j))
    return packed


def freeze(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """LLVM's ``freeze`` of ``value`` (llvmlite's builder has no method for it).  It computes
    nothing; code generators do not look through it, which is how a caller keeps a pattern
    from being matched (see `ChunkEmitter.store_chunk`)."""
    instruction = ir.instructions.Instruction(b.block, value.type, "freeze", [value])
    b._insert(instruction)      # the builder's own insertion, as its methods use
    return instruction
