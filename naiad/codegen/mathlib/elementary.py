"""libdevice's elementary functions that C lacks, built on C's: ``sinpi`` / ``cospi`` (exact
argument reduction), ``rcbrt``, ``rhypot``, ``saturatef``, ``pown``, ``llrint``, and the fast
fp32 versions that are the plain function off NVIDIA hardware (``fast_dividef``,
``fast_tanhf``)."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.mathlib.arith import both_types, const, copysign, libm, same_shape


def _half_turns(ctx: Any, x: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
    """``x = n / 2 + f`` with ``n`` an integer and ``|f| <= 1/4``, both exact; returns
    ``(sin(pi f), cos(pi f), n mod 4)``, the last as a float (NaN for an infinite x)."""
    b = ctx.b
    n = ctx.intrinsic("rint", [b.fadd(x, x)])
    f = b.fsub(x, b.fmul(n, const(ctx, x, 0.5)))
    quarter = b.fmul(n, const(ctx, x, 0.25))
    turn = b.fsub(n, b.fmul(ctx.intrinsic("floor", [quarter]), const(ctx, x, 4.0)))
    angle = b.fmul(f, const(ctx, x, 3.141592653589793))
    return libm(ctx, "sin", angle), libm(ctx, "cos", angle), turn


def _by_quadrant(ctx: Any, quadrant: ir.Value, values: list[ir.Value]) -> ir.Value:
    """``values[quadrant]`` for ``quadrant`` in 0..3 (NaN: the last, which is NaN then too)."""
    b = ctx.b
    result = values[3]
    for q in (2, 1, 0):
        is_q = b.fcmp_ordered("==", quadrant, const(ctx, quadrant, float(q)))
        result = b.select(is_q, values[q], result)
    return result


def _sinpi(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """``sin(pi x)``, exact at integers (zero with x's sign) and accurate where ``sin(pi * x)``
    is not (the product loses x's low bits)."""
    (x,) = args
    b = ctx.b
    sin, cos, quadrant = _half_turns(ctx, x)
    result = _by_quadrant(ctx, quadrant, [sin, cos, b.fneg(sin), b.fneg(cos)])
    is_zero = b.fcmp_ordered("==", result, const(ctx, x, 0.0))
    return b.select(is_zero, copysign(ctx, const(ctx, x, 0.0), x), result)


def _cospi(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """``cos(pi x)``, exact at integers and half-integers (+0 there)."""
    (x,) = args
    b = ctx.b
    sin, cos, quadrant = _half_turns(ctx, x)
    result = _by_quadrant(ctx, quadrant, [cos, b.fneg(sin), b.fneg(cos), sin])
    is_zero = b.fcmp_ordered("==", result, const(ctx, x, 0.0))
    return b.select(is_zero, const(ctx, x, 0.0), result)


def _rcbrt(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return ctx.b.fdiv(const(ctx, args[0], 1.0), libm(ctx, "cbrt", args[0]))


def _rhypot(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """``1 / hypot(x, y)``: hypot neither overflows nor underflows before the division."""
    return ctx.b.fdiv(const(ctx, args[0], 1.0), libm(ctx, "hypot", *args))


def _saturate(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """``x`` clamped to [0, 1]; NaN gives 0 (``maxnum`` ignores a NaN operand)."""
    (x,) = args
    at_least_zero = ctx.intrinsic("maxnum", [x, const(ctx, x, 0.0)])
    return ctx.intrinsic("minnum", [at_least_zero, const(ctx, x, 1.0)])


def _pown(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """``x ** n`` for an ``int32`` n: C's ``pow`` of the exactly converted exponent (LLVM's
    ``powi`` multiplies repeatedly and promises no accuracy)."""
    x, n = args
    return libm(ctx, "pow", x, ctx.b.sitofp(n, x.type))


def _llrint(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """Rounded to the nearest integer (ties to even) as an ``int64``; out of range saturates and
    NaN gives 0, as NVIDIA's ``cvt.rni.s64`` (C leaves both unspecified)."""
    (x,) = args
    nearest = ctx.intrinsic("rint", [x])
    return ctx.hooks.float_to_int(ctx, nearest, same_shape(ctx, lt.I64), signed=True)


def _fast_divide(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return ctx.b.fdiv(*args)


def _fast_tanh(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return libm(ctx, "tanh", args[0])


#: libdevice symbol -> lowering.
FUNCTIONS = {
    **both_types("sinpi", _sinpi), **both_types("cospi", _cospi),
    **both_types("rcbrt", _rcbrt), **both_types("rhypot", _rhypot),
    **both_types("pown", _pown), **both_types("llrint", _llrint),
    "__naiad_saturatef": _saturate, "__naiad_fast_dividef": _fast_divide,
    "__naiad_fast_tanhf": _fast_tanh,
}
