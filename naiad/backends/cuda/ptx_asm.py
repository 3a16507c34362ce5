"""One PTX instruction as LLVM inline assembly, for what LLVM has no way to say: atomics with
PTX's own memory semantics and scopes, cache modifiers and eviction priorities of loads and
stores, relaxed polling loads and fences.

Operands are integers of 16, 32 or 64 bits (``h``, ``r``, ``l`` registers), predicates (``i1``,
``b``) or 32/64-bit floats (``f``, ``d``: tensor-core accumulators); other floats travel as their bits (`to_bits` /
`from_bits`).  ``$0``.. name the results, then the inputs.  An instruction with effects is a
``sideeffect`` call that clobbers memory, so LLVM neither drops it nor moves loads and stores
across it: the ordering is exactly the PTX instruction's.
"""

from __future__ import annotations

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt


def _register(t: ir.Type) -> str:
    """The PTX register class of an inline-assembly operand of LLVM type ``t``."""
    if isinstance(t, ir.IntType):
        return {1: "b", 16: "h", 32: "r", 64: "l"}[t.width]
    return {"float": "f", "double": "d"}[str(t)]


def asm(b: ir.IRBuilder, text: str, results: list[ir.Type], inputs: list[ir.Value],
        effects: bool = True, tied: list[ir.Value] = ()) -> ir.Value | None:
    """``text`` with ``results`` (none, one value, or a struct of several) from ``inputs``;
    integers or 32/64-bit floats.  ``tied`` values follow the inputs, each read from and
    written back to the register of the result of its position (an accumulator that an
    instruction updates in place); their operand numbers are not used in ``text``."""
    constraints = [f"={_register(t)}" for t in results]
    constraints += [_register(v.type) for v in inputs]
    constraints += [str(i) for i in range(len(tied))]
    if effects:
        constraints.append("~{memory}")
    if not results:
        ret: ir.Type = ir.VoidType()
    elif len(results) == 1:
        ret = results[0]
    else:
        ret = ir.LiteralStructType(results)
    args = list(inputs) + list(tied)
    call = ir.InlineAsm(ir.FunctionType(ret, [v.type for v in args]), text, ",".join(constraints),
                        side_effect=effects)
    return b.call(call, args)


def unpack(b: ir.IRBuilder, result: ir.Value, count: int) -> list[ir.Value]:
    """The ``count`` values of an `asm` result (one value, or a struct)."""
    return [result] if count == 1 else [b.extract_value(result, i) for i in range(count)]
