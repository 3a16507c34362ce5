"""Building blocks of Naiad's own math functions: constants of an operand's type, libm calls
through the target's hooks, polynomial evaluation, exponent splitting, the error-free sum and
product, and a float value computed in ``double`` and rounded back.

Every function takes the rule's `naiad.codegen.elementwise.Lowering` (``ctx``) and LLVM values
that are scalars or vectors of ``ctx.lanes``; results have the operands' shape.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt


def const(ctx: Any, like: ir.Value, value: float) -> ir.Value:
    """``value`` in the (float or integer) element type of ``like``, splat across the lanes."""
    return ctx.const(lt.scalar_of(like.type), value)


def same_shape(ctx: Any, element: ir.Type) -> ir.Type:
    """``element``, or a vector of it with the rule's lanes."""
    return lt.vector(element, ctx.lanes)


def libm(ctx: Any, name: str, *args: ir.Value) -> ir.Value:
    """The C math function ``name`` (``exp``, ``erfc``...) of the arguments' float type, through
    the target's hooks (an LLVM intrinsic, a vector version, or a library call per lane)."""
    suffix = "f" if lt.scalar_of(args[0].type) == lt.F32 else ""
    return ctx.hooks.call_math(ctx, name + suffix, list(args), args[0].type)


def fabs(ctx: Any, x: ir.Value) -> ir.Value:
    return ctx.intrinsic("fabs", [x])


def is_inf(ctx: Any, x: ir.Value) -> ir.Value:
    return ctx.b.fcmp_ordered("==", fabs(ctx, x), const(ctx, x, float("inf")))


def is_finite(ctx: Any, x: ir.Value) -> ir.Value:
    return ctx.b.fcmp_ordered("<", fabs(ctx, x), const(ctx, x, float("inf")))


def copysign(ctx: Any, magnitude: ir.Value, sign: ir.Value) -> ir.Value:
    return ctx.intrinsic("copysign", [magnitude, sign])


def polynomial(ctx: Any, x: ir.Value, coefficients: Sequence[float]) -> ir.Value:
    """``c[0] * x**n + ... + c[n]`` by Horner's rule (a fused multiply-add where fast)."""
    acc = const(ctx, x, coefficients[0])
    for c in coefficients[1:]:
        acc = ctx.intrinsic("fmuladd", [acc, x, const(ctx, x, c)])
    return acc


def clenshaw(ctx: Any, t: ir.Value, coefficients: list[ir.Value]) -> ir.Value:
    """``sum c_k T_k(t)`` (Chebyshev polynomials of the first kind) by Clenshaw's recurrence."""
    b = ctx.b
    two_t = b.fmul(const(ctx, t, 2.0), t)
    after, later = const(ctx, t, 0.0), const(ctx, t, 0.0)
    for c in reversed(coefficients[1:]):
        after, later = b.fsub(ctx.intrinsic("fma", [two_t, after, c]), later), after
    return b.fsub(ctx.intrinsic("fma", [t, after, coefficients[0]]), later)


def two_sum(ctx: Any, a: ir.Value, b_: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``(s, e)`` with ``s = a + b`` rounded and ``s + e == a + b`` exactly (Knuth), for finite
    sums that do not overflow."""
    b = ctx.b
    s = b.fadd(a, b_)
    b_virtual = b.fsub(s, a)
    a_virtual = b.fsub(s, b_virtual)
    return s, b.fadd(b.fsub(a, a_virtual), b.fsub(b_, b_virtual))


def two_product(ctx: Any, a: ir.Value, b_: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``(p, e)`` with ``p = a * b`` rounded and ``p + e == a * b`` exactly, where the product's
    error does not underflow (``fma`` computes it)."""
    p = ctx.b.fmul(a, b_)
    return p, ctx.intrinsic("fma", [a, b_, ctx.b.fneg(p)])


def frexp(ctx: Any, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``(m, e)`` with ``x == m * 2**e`` and ``0.5 <= |m| < 1`` (subnormals too; 0 -> (0, 0))."""
    exponent = same_shape(ctx, lt.I32)
    fn = lt.intrinsic(ctx.module, "frexp", [x.type, exponent],
                      ir.LiteralStructType([x.type, exponent]), [x.type])
    parts = ctx.b.call(fn, [x])
    return ctx.b.extract_value(parts, 0), ctx.b.extract_value(parts, 1)


def ldexp(ctx: Any, x: ir.Value, exponent: ir.Value) -> ir.Value:
    """``x * 2**exponent``, rounded once (exact unless it leaves the normal range)."""
    fn = lt.intrinsic(ctx.module, "ldexp", [x.type, exponent.type], x.type, [x.type, exponent.type])
    return ctx.b.call(fn, [x, exponent])


def through_double(fn: Callable[[Any, list[ir.Value]], ir.Value]) -> Callable:
    """A ``double`` implementation as one for both float types: ``float`` arguments are widened
    (exactly), and the result rounded back once, so the ``float`` version is as accurate as
    rounding allows and over/underflows where the true value does."""
    def lower(ctx: Any, args: list[ir.Value]) -> ir.Value:
        if lt.scalar_of(args[0].type) == lt.F64:
            return fn(ctx, args)
        wide = [ctx.b.fpext(a, same_shape(ctx, lt.F64)) for a in args]
        return ctx.b.fptrunc(fn(ctx, wide), args[0].type)
    lower.__doc__ = fn.__doc__
    return lower


def both_types(name: str, lower: Callable) -> dict[str, Callable]:
    """``{"__naiad_<name>": lower, "__naiad_<name>f": lower}``: libdevice's fp64 and fp32 names."""
    return {f"__naiad_{name}": lower, f"__naiad_{name}f": lower}
