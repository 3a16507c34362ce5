"""One PTX instruction as LLVM inline assembly, for what LLVM has no way to say: atomics with
PTX's own memory semantics and scopes, cache modifiers and eviction priorities of loads and
stores, relaxed polling loads and fences.

Operands are integers of 16, 32 or 64 bits (``h``, ``r``, ``l`` registers: floats travel as
their bits, see `to_bits` / `from_bits`); ``$0``.. name the results, then the inputs.  An
instruction with effects is a ``sideeffect`` call that clobbers memory, so LLVM neither drops
it nor moves loads and stores across it: the ordering is exactly the PTX instruction's.
"""

from __future__ import annotations

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt

#: Integer width -> the PTX register class of an inline-assembly operand.
_REGISTER = {16: "h", 32: "r", 64: "l"}


def asm(b: ir.IRBuilder, text: str, results: list[ir.Type], inputs: list[ir.Value],
        effects: bool = True) -> ir.Value | None:
    """``text`` with ``results`` (integer types; none, one value, or a struct of several) from
    ``inputs`` (integers)."""
    constraints = [f"={_REGISTER[t.width]}" for t in results]
    constraints += [_REGISTER[v.type.width] for v in inputs]
    if effects:
        constraints.append("~{memory}")
    if not results:
        ret: ir.Type = ir.VoidType()
    elif len(results) == 1:
        ret = results[0]
    else:
        ret = ir.LiteralStructType(results)
    call = ir.InlineAsm(ir.FunctionType(ret, [v.type for v in inputs]), text, ",".join(constraints),
                        side_effect=effects)
    return b.call(call, inputs)


def to_bits(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """A scalar as an integer of its width (floats bitcast)."""
    if isinstance(value.type, ir.IntType):
        return value
    return b.bitcast(value, ir.IntType(lt.bit_width(value.type)))


def from_bits(b: ir.IRBuilder, bits: ir.Value, storage: ir.Type) -> ir.Value:
    """The inverse of `to_bits`."""
    return bits if bits.type == storage else b.bitcast(bits, storage)
