"""Tensor-core accumulators between the instructions' registers and a `Dist`'s elements.

The instructions take fp32 and int32 accumulators one element to a register, fp16 ones two
to a 32-bit register (a column pair, the first in the low half); 16-bit A fragments from
registers are packed the same way.
"""

from __future__ import annotations

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu.kernel import GPUKernel


def _const(value: int) -> ir.Constant:
    return ir.Constant(lt.I32, value)


def _narrowed_from_f32(value: ir.Value) -> ir.Value | None:
    """The fp32 value ``value`` was rounded from, when it is an ``fptrunc float to half``."""
    if isinstance(value, ir.CastInstr) and value.opname == "fptrunc" and value.operands[0].type == lt.F32:
        return value.operands[0]
    return None


def pack_pair(k: GPUKernel, values: list[ir.Value]) -> ir.Value:
    """Two 16-bit values (half or bf16 bits) in one 32-bit register, the first in the low half.

    Two halves just rounded from fp32 (attention's P tile, a dot's A from registers) are rounded
    again as one pair: LLVM turns that into one `cvt.rn.f16x2.f32`, where packing the separate
    halves costs two conversions, two zero-extensions, a shift and an or.  The scalar roundings
    are left unused and LLVM drops them.
    """
    b = k.b
    sources = [_narrowed_from_f32(v) for v in values]
    if None not in sources:
        pair = ir.Constant(ir.VectorType(lt.F32, 2), None)
        for i, source in enumerate(sources):
            pair = b.insert_element(pair, source, _const(i))
        return b.bitcast(b.fptrunc(pair, ir.VectorType(lt.F16, 2)), lt.I32)
    low, high = (b.bitcast(v, lt.I16) if v.type == lt.F16 else v for v in values)
    return b.or_(b.zext(low, lt.I32), b.shl(b.zext(high, lt.I32), _const(16)))


#: The register type of each accumulator kind in the instructions (fp16: pairs in a b32).
ACC_REGISTER = {"f32": lt.F32, "i32": lt.I32, "f16": lt.I32}


def pack_accumulator(k: GPUKernel, values: list[ir.Value], c_kind: str) -> list[ir.Value]:
    """An accumulator's elements as the instruction's registers: fp16 column pairs packed."""
    if c_kind != "f16":
        return list(values)
    return [pack_pair(k, values[i:i + 2]) for i in range(0, len(values), 2)]


def unpack_accumulator(k: GPUKernel, registers: list[ir.Value], c_kind: str) -> list[ir.Value]:
    """The inverse of `_pack_accumulator`."""
    if c_kind != "f16":
        return list(registers)
    b = k.b
    values = []
    for register in registers:
        for shift in (0, 16):
            bits = b.trunc(b.lshr(register, _const(shift)) if shift else register, lt.I16)
            values.append(b.bitcast(bits, lt.F16))
    return values
