"""libdevice's integer functions: ``ffs`` (the first set bit, counted from 1) and ``mulhi``
(the high half of a product, signed or unsigned, 32 or 64 bits)."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.elementwise import unsigned_high_half
from naiad.codegen.mathlib.arith import const, same_shape


def _first_set(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """1 + the number of trailing zero bits, 0 for 0, as an ``int32``."""
    (x,) = args
    b = ctx.b
    fn = lt.intrinsic(ctx.module, "cttz", [x.type], x.type, [x.type, lt.I1])
    position = b.add(b.call(fn, [x, ir.Constant(lt.I1, 0)]), const(ctx, x, 1))
    position = b.select(b.icmp_unsigned("==", x, const(ctx, x, 0)), const(ctx, x, 0), position)
    if lt.scalar_of(x.type).width > 32:
        position = b.trunc(position, same_shape(ctx, lt.I32))
    return position


def _signed_high_half(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """The signed product's high half from the unsigned one: a negative operand, read as
    unsigned, is 2**w more, which adds the other operand to the high half."""
    a, b_ = args
    b = ctx.b
    high = unsigned_high_half(ctx, a, b_)
    zero = const(ctx, a, 0)
    high = b.sub(high, b.select(b.icmp_signed("<", a, zero), b_, zero))
    return b.sub(high, b.select(b.icmp_signed("<", b_, zero), a, zero))


def _unsigned_high_half(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return unsigned_high_half(ctx, *args)


#: libdevice symbol -> lowering.
FUNCTIONS = {
    "__naiad_ffs": _first_set, "__naiad_ffsll": _first_set,
    "__naiad_mulhi": _signed_high_half, "__naiad_mul64hi": _signed_high_half,
    "__naiad_umulhi": _unsigned_high_half, "__naiad_umul64hi": _unsigned_high_half,
}
