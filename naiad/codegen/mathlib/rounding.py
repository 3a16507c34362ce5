"""libdevice's arithmetic in a chosen rounding direction: ``add``, ``mul``, ``div`` and ``fma``
with the suffix ``_rn`` (to nearest, ties to even), ``_rz`` (toward zero), ``_rd`` (down) or
``_ru`` (up).

A CPU rounds in the mode of its floating-point environment, which LLVM assumes is to nearest
(changing it needs ``strictfp`` code in the whole kernel).  So each operation is computed to
nearest (``s``), together with a value whose sign is that of the exact result minus ``s``;
``s`` then moves one step (`_step`) where the exact result lies beyond it in the chosen
direction.  The remainder's sign comes from an exact computation:

- a sum, in either type: `two_sum`'s rounding error, which is exact.
- ``float``: a product of two floats is exact in ``double`` (24 + 24 bits), and so is an
  ``fma`` as a `two_sum` pair of that product and the addend; a quotient's remainder
  ``a - s * b`` has its sign in ``double``.
- ``double``: a product by `two_product` of the operands' mantissas (`frexp`: the error cannot
  underflow there) against ``s`` scaled the same way; a quotient's remainder
  ``ma - (s scaled) * mb`` by one ``fma`` of the mantissas; an ``fma`` by comparing the
  mantissas' exact product with ``s - c`` (exact as a `two_sum` pair), scaled alike
  (`_fma_error`).

A result that overflows is one step inside infinity where the direction says so (``_rz``:
the largest finite value); an exact zero sum is -0 under ``_rd`` unless both terms are +0.
"""

from __future__ import annotations

from typing import Any, Callable

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.mathlib.arith import (const, frexp, is_finite, is_inf, ldexp, same_shape,
                                         two_product, two_sum)

MODES = ("rn", "rz", "rd", "ru")


def _bits_type(ctx: Any, x: ir.Value) -> ir.Type:
    return same_shape(ctx, ir.IntType(lt.byte_size(x.type) * 8))


def _step(ctx: Any, s: ir.Value, upward: bool) -> ir.Value:
    """The float next to ``s`` toward +inf or -inf (from a zero: the smallest subnormal; from
    an infinity toward zero: the largest finite value), by stepping its bit pattern."""
    b, kind = ctx.b, _bits_type(ctx, s)
    bits = b.bitcast(s, kind)
    one = const(ctx, bits, 1)
    toward_zero, away = b.sub(bits, one), b.add(bits, one)
    zero = const(ctx, s, 0.0)
    positive, negative = b.fcmp_ordered(">", s, zero), b.fcmp_ordered("<", s, zero)
    sign = const(ctx, bits, -(1 << (lt.byte_size(s.type) * 8 - 1)))
    smallest = one if upward else b.or_(sign, one)
    grows, shrinks = (positive, negative) if upward else (negative, positive)
    moved = b.select(grows, away, b.select(shrinks, toward_zero, smallest))
    return b.bitcast(moved, s.type)


def _directed(ctx: Any, s: ir.Value, error: ir.Value, mode: str) -> ir.Value:
    """``s`` rounded to nearest, moved one step where the exact result (``s`` + something of
    ``error``'s sign; ``error`` NaN: ``s`` is exact or NaN) lies past it in ``mode``'s direction."""
    b = ctx.b
    zero = const(ctx, error, 0.0)
    below, above = b.fcmp_ordered("<", error, zero), b.fcmp_ordered(">", error, zero)
    if mode == "rz":
        s_zero = const(ctx, s, 0.0)
        below = b.and_(below, b.fcmp_ordered(">", s, s_zero))
        above = b.and_(above, b.fcmp_ordered("<", s, s_zero))
    result = s
    if mode in ("rd", "rz"):
        result = b.select(below, _step(ctx, s, upward=False), result)
    if mode in ("ru", "rz"):
        result = b.select(above, _step(ctx, s, upward=True), result)
    return result


def _zero_sum_sign(ctx: Any, result: ir.Value, error: ir.Value, first: ir.Value,
                   second: ir.Value, mode: str) -> ir.Value:
    """IEEE's sign of an exact zero sum of ``first + second``: -0 rounding down unless both are
    +0 (to nearest, which ``result`` holds, +0 unless both are -0)."""
    if mode != "rd":
        return result
    b = ctx.b
    exact_zero = b.and_(b.fcmp_ordered("==", result, const(ctx, result, 0.0)),
                        b.fcmp_ordered("==", error, const(ctx, error, 0.0)))
    first_bits = b.bitcast(first, _bits_type(ctx, first))
    second_bits = b.bitcast(second, _bits_type(ctx, second))
    both_plus = b.and_(b.icmp_unsigned("==", first_bits, const(ctx, first_bits, 0)),
                       b.icmp_unsigned("==", second_bits, const(ctx, second_bits, 0)))
    negative_zero = const(ctx, result, -0.0)
    return b.select(b.and_(exact_zero, b.not_(both_plus)), negative_zero, result)


def _overflow(ctx: Any, s: ir.Value, *operands: ir.Value) -> ir.Value:
    """Whether ``s`` is infinite from finite operands: the exact result lies inside infinity
    (an error of ``-s``'s sign)."""
    result = is_inf(ctx, s)
    for x in operands:
        result = ctx.b.and_(result, is_finite(ctx, x))
    return result


def _widen(ctx: Any, x: ir.Value) -> ir.Value:
    return ctx.b.fpext(x, same_shape(ctx, lt.F64))


def _is_float(x: ir.Value) -> bool:
    return lt.scalar_of(x.type) == lt.F32


# -- add ----------------------------------------------------------------------------------------
def _add(ctx: Any, a: ir.Value, b_: ir.Value, mode: str) -> ir.Value:
    """The sum's rounding error is exact as `two_sum`'s (but for an overflow)."""
    s, error = two_sum(ctx, a, b_)
    error = ctx.b.select(_overflow(ctx, s, a, b_), ctx.b.fneg(s), error)
    return _zero_sum_sign(ctx, _directed(ctx, s, error, mode), error, a, b_, mode)


# -- mul ----------------------------------------------------------------------------------------
def _mul(ctx: Any, a: ir.Value, b_: ir.Value, mode: str) -> ir.Value:
    b = ctx.b
    if _is_float(a):
        exact = b.fmul(_widen(ctx, a), _widen(ctx, b_))
        s = b.fptrunc(exact, a.type)
        return _directed(ctx, s, b.fsub(exact, _widen(ctx, s)), mode)
    s = b.fmul(a, b_)
    (ma, ea), (mb, eb) = frexp(ctx, a), frexp(ctx, b_)
    high, low = two_product(ctx, ma, mb)
    scaled = ldexp(ctx, s, b.neg(b.add(ea, eb)))
    return _directed(ctx, s, b.fadd(b.fsub(high, scaled), low), mode)


# -- div ----------------------------------------------------------------------------------------
def _div(ctx: Any, a: ir.Value, b_: ir.Value, mode: str) -> ir.Value:
    """The exact quotient minus ``s`` has the sign of the remainder ``a - s * b`` times b's."""
    b = ctx.b
    s = b.fdiv(a, b_)
    if _is_float(a):
        numerator, quotient, divisor = _widen(ctx, a), _widen(ctx, s), _widen(ctx, b_)
        remainder = b.fsub(numerator, b.fmul(quotient, divisor))
    else:
        (numerator, ea), (divisor, eb) = frexp(ctx, a), frexp(ctx, b_)
        quotient = ldexp(ctx, s, b.sub(eb, ea))
        remainder = ctx.intrinsic("fma", [b.fneg(quotient), divisor, numerator])
    negative = b.fcmp_ordered("<", divisor, const(ctx, divisor, 0.0))
    return _directed(ctx, s, b.select(negative, b.fneg(remainder), remainder), mode)


# -- fma ----------------------------------------------------------------------------------------
def _fma(ctx: Any, a: ir.Value, b_: ir.Value, c: ir.Value, mode: str) -> ir.Value:
    b = ctx.b
    if _is_float(a):
        product = b.fmul(_widen(ctx, a), _widen(ctx, b_))
        total, low = two_sum(ctx, product, _widen(ctx, c))
        s = b.fptrunc(total, a.type)
        error = b.fadd(b.fsub(total, _widen(ctx, s)), low)
        return _zero_sum_sign(ctx, _directed(ctx, s, error, mode), error, product, c, mode)
    s = ctx.intrinsic("fma", [a, b_, c])
    error = _fma_error(ctx, a, b_, c, s)
    return _zero_sum_sign(ctx, _directed(ctx, s, error, mode), error, b.fmul(a, b_), c, mode)


def _fma_error(ctx: Any, a: ir.Value, b_: ir.Value, c: ir.Value, s: ir.Value) -> ir.Value:
    """A double of the sign of ``a * b + c - s``.  The mantissas' exact product ``high + low``
    (scaled by 2**-k, k the sum of the operands' exponents) is compared with ``s - c``, exact as
    ``d + d_low`` and scaled alike.  ``high - d`` is exact (Sterbenz, or ``d`` is 0), and so is
    adding ``low`` where the two are close; where they are not, that sum outweighs ``d_low``.
    Where the sum is 0, ``-d_low`` decides (its scaled value might underflow).  ``s - c`` is
    taken in halves where it alone would overflow."""
    b = ctx.b
    halve = b.and_(is_inf(ctx, b.fsub(s, c)), b.and_(is_finite(ctx, s), is_finite(ctx, c)))
    half = b.select(halve, const(ctx, s, 0.5), const(ctx, s, 1.0))
    d, d_low = two_sum(ctx, b.fmul(s, half), b.fneg(b.fmul(c, half)))
    (ma, ea), (mb, eb) = frexp(ctx, a), frexp(ctx, b_)
    high, low = two_product(ctx, ma, mb)
    shift = b.sub(b.zext(halve, same_shape(ctx, lt.I32)), b.add(ea, eb))
    difference = b.fadd(b.fsub(high, ldexp(ctx, d, shift)), low)
    exact_match = b.fcmp_ordered("==", difference, const(ctx, difference, 0.0))
    error = b.select(exact_match, b.fneg(d_low), b.fsub(difference, ldexp(ctx, d_low, shift)))
    return b.select(_overflow(ctx, s, a, b_, c), b.fneg(s), error)


def _nearest(op: str) -> Callable:
    """``_rn``: the plain LLVM operation (no fast-math flag lets it fuse with a neighbour)."""
    if op == "fma":
        return lambda ctx, args: ctx.intrinsic("fma", args)
    method = {"add": "fadd", "mul": "fmul", "div": "fdiv"}[op]
    return lambda ctx, args: getattr(ctx.b, method)(*args)


def _rounded(fn: Callable, mode: str) -> Callable:
    return lambda ctx, args: fn(ctx, *args, mode)


def _table() -> dict[str, Callable]:
    table: dict[str, Callable] = {}
    for op, fn in (("add", _add), ("mul", _mul), ("div", _div), ("fma", _fma)):
        for mode in MODES:
            lower = _nearest(op) if mode == "rn" else _rounded(fn, mode)
            table[f"__naiad_{op}_{mode}"] = table[f"__naiad_{op}_{mode}f"] = lower
    return table


#: libdevice symbol -> lowering.
FUNCTIONS = _table()
