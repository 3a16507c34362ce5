"""C math functions composed from ``exp``, ``log``, ``sin``, ``cos`` and ``sqrt``, for targets
without a C math library (AMD GPUs without ROCm's device library).  Each is computed in
``double`` (`through_double`: the ``float`` version widens its arguments exactly and rounds
once, so it is as accurate as rounding allows) from those functions as the target provides them
(on hip: Naiad's own, `naiad.codegen.mathlib.without_libm`).  A few ulp of ``double`` from the
correctly rounded result (tests/hip/test_math.py), by formulas that avoid cancellation:

- ``atan``: ``pi/2 - atan(1/a)`` above 1; below 7/16 its odd series to ``a**47``; between,
  ``atan(c) + atan((a - c) / (1 + a c))`` for ``c`` 1/2 or 1, ``atan(c)`` in two parts (fdlibm's
  reduction, with fewer breakpoints);
  ``atan2`` by quadrant from the smaller of ``|y|/|x|`` and ``|x|/|y|`` (C99's zeros and
  infinities), ``asin(x) = atan2(x, sqrt((1-x)(1+x)))``, ``acos(x) = atan2(sqrt((1-x)(1+x)), x)``.
- ``tan = sin / cos`` (each from the full reduction by pi/2).
- ``expm1`` by Kahan's quotient (`without_libm.expm1`); ``sinh``, ``cosh`` from ``expm1`` near 0
  and ``exp`` elsewhere, in halves near overflow; ``tanh = e / (e + 2)``, ``e = expm1(2|x|)``.
- ``log1p(x) = log(u) x / (u - 1)``, ``u = 1 + x`` (the rounding of ``u`` cancels); ``asinh``,
  ``acosh``, ``atanh`` through it; ``log(2a)`` where ``a*a`` would overflow.
- ``cbrt``: ``exp(log|x| / 3)`` and a Newton step; ``hypot``: ``a sqrt(1 + (b/a)**2)``, ``a``
  the larger magnitude (infinite if either is, NaN or not).
- ``fdim``, ``logb``, ``ilogb``, ``nextafter``: on the values and their bits, per type;
  ``fmod`` and ``remainder`` exactly (`_reduced`), per type.
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.mathlib.arith import (const, copysign, fabs, frexp, is_finite, is_inf, ldexp, libm,
                                         polynomial, same_shape, through_double)
from naiad.codegen.mathlib.without_libm import expm1

#: atan(t) / t in powers of t*t, highest first: (-1)^n / (2n + 1) for n = 23 .. 0 (exact to
#: double for |t| < 7/16: the first term left out is under 2**-58 of the sum there).
_ATAN_SERIES = tuple((-1) ** n / (2 * n + 1) for n in range(23, -1, -1))
#: pi/2 as two doubles.
_HALF_PI_HI, _HALF_PI_LO = 1.5707963267948966, 6.123233995736766e-17
#: atan(1/2) and atan(1) (pi/4) as two doubles each.
_ATAN_HALF = (0.4636476090008061, 2.2698777452961687e-17)
_ATAN_ONE = (0.7853981633974483, 3.061616997868383e-17)


def _sqrt(ctx: Any, x: ir.Value) -> ir.Value:
    return ctx.intrinsic("sqrt", [x])


def _atan_unit(ctx: Any, a: ir.Value) -> ir.Value:
    """``atan(a)`` for ``0 <= a <= 1``: below 7/16 its series; above, ``atan(c) + atan(t)`` with
    ``t = (a - c) / (1 + a c)``, ``c`` 1/2 or 1 (``|t| < 0.19``) and ``atan(c)`` in two parts."""
    b = ctx.b
    one = const(ctx, a, 1.0)
    middle = b.fcmp_ordered(">=", a, const(ctx, a, 7 / 16))
    upper = b.fcmp_ordered(">=", a, const(ctx, a, 11 / 16))
    t_half = b.fdiv(b.fsub(b.fadd(a, a), one), b.fadd(const(ctx, a, 2.0), a))
    t_one = b.fdiv(b.fsub(a, one), b.fadd(a, one))
    t = b.select(upper, t_one, b.select(middle, t_half, a))
    hi = b.select(upper, const(ctx, a, _ATAN_ONE[0]), b.select(middle, const(ctx, a, _ATAN_HALF[0]), const(ctx, a, 0.0)))
    lo = b.select(upper, const(ctx, a, _ATAN_ONE[1]), b.select(middle, const(ctx, a, _ATAN_HALF[1]), const(ctx, a, 0.0)))
    series = b.fmul(t, polynomial(ctx, b.fmul(t, t), _ATAN_SERIES))
    return b.fadd(hi, b.fadd(lo, series))


def _complement(ctx: Any, r: ir.Value) -> ir.Value:
    """``pi/2 - r`` with pi/2 in two parts."""
    b = ctx.b
    return b.fadd(b.fsub(const(ctx, r, _HALF_PI_HI), r), const(ctx, r, _HALF_PI_LO))


def _atan(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    a = fabs(ctx, x)
    large = b.fcmp_ordered(">", a, const(ctx, x, 1.0))
    r = _atan_unit(ctx, b.select(large, b.fdiv(const(ctx, x, 1.0), a), a))
    return copysign(ctx, b.select(large, _complement(ctx, r), r), x)


def _atan2(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    y, x = args
    ay, ax = fabs(ctx, y), fabs(ctx, x)
    steep = b.fcmp_ordered(">", ay, ax)
    small, big = b.select(steep, ax, ay), b.select(steep, ay, ax)
    ratio = b.fdiv(small, big)
    both_infinite = b.and_(is_inf(ctx, x), is_inf(ctx, y))
    ratio = b.select(both_infinite, const(ctx, x, 1.0), ratio)
    ratio = b.select(b.fcmp_ordered("==", big, const(ctx, x, 0.0)), const(ctx, x, 0.0), ratio)
    r = _atan_unit(ctx, ratio)
    r = b.select(steep, _complement(ctx, r), r)
    negative_x = _sign_bit(ctx, x)
    pi_minus = b.fadd(b.fsub(const(ctx, x, 2 * _HALF_PI_HI), r), const(ctx, x, 2 * _HALF_PI_LO))
    r = b.select(negative_x, pi_minus, r)
    r = copysign(ctx, r, y)
    return b.select(b.or_(b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", y, y)),
                    b.fadd(x, y), r)


def _sign_bit(ctx: Any, x: ir.Value) -> ir.Value:
    """Whether ``x``'s sign bit is set (-0.0 too)."""
    integer = ir.IntType(lt.byte_size(lt.scalar_of(x.type)) * 8)
    return ctx.b.icmp_signed("<", ctx.b.bitcast(x, same_shape(ctx, integer)), ctx.const(integer, 0))


def _asin(ctx: Any, args: list[ir.Value]) -> ir.Value:
    x = args[0]
    return _atan2(ctx, [x, _cosine_of(ctx, x)])


def _acos(ctx: Any, args: list[ir.Value]) -> ir.Value:
    x = args[0]
    return _atan2(ctx, [_cosine_of(ctx, x), x])


def _cosine_of(ctx: Any, x: ir.Value) -> ir.Value:
    """``sqrt(1 - x*x)`` as ``sqrt((1 - x)(1 + x))`` (NaN beyond 1)."""
    b = ctx.b
    one = const(ctx, x, 1.0)
    return _sqrt(ctx, b.fmul(b.fsub(one, x), b.fadd(one, x)))


def _tan(ctx: Any, args: list[ir.Value]) -> ir.Value:
    x = args[0]
    return ctx.b.fdiv(libm(ctx, "sin", x), libm(ctx, "cos", x))


def _expm1(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return expm1(ctx, args[0])


#: Beyond this ``exp`` overflows while ``sinh`` and ``cosh`` do not yet.
_EXP_LIMIT = 709.0


def _exp_halves(ctx: Any, a: ir.Value) -> ir.Value:
    """``exp(a) / 2`` for ``a >= 0``, as ``(exp(a/2) / 2) exp(a/2)`` near overflow."""
    b = ctx.b
    half = libm(ctx, "exp", b.fmul(a, const(ctx, a, 0.5)))
    split = b.fmul(b.fmul(half, const(ctx, a, 0.5)), half)
    whole = b.fmul(libm(ctx, "exp", a), const(ctx, a, 0.5))
    return b.select(b.fcmp_ordered(">", a, const(ctx, a, _EXP_LIMIT)), split, whole)


def _sinh(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    a = fabs(ctx, x)
    e = expm1(ctx, a)
    near = b.fmul(const(ctx, x, 0.5), b.fadd(e, b.fdiv(e, b.fadd(e, const(ctx, x, 1.0)))))
    grown = _exp_halves(ctx, a)
    far = b.fsub(grown, b.fdiv(const(ctx, x, 0.25), grown))
    return copysign(ctx, b.select(b.fcmp_ordered("<", a, const(ctx, x, 1.0)), near, far), x)


def _cosh(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    a = fabs(ctx, args[0])
    grown = _exp_halves(ctx, a)
    return b.fadd(grown, b.fdiv(const(ctx, a, 0.25), grown))


def _tanh(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    a = fabs(ctx, x)
    e = expm1(ctx, b.fmul(const(ctx, x, 2.0), a))
    ratio = b.fdiv(e, b.fadd(e, const(ctx, x, 2.0)))
    ratio = b.select(b.fcmp_ordered(">", a, const(ctx, x, 22.0)), const(ctx, x, 1.0), ratio)
    return copysign(ctx, ratio, x)


def _log1p_of(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    one = const(ctx, x, 1.0)
    u = b.fadd(one, x)
    quotient = b.fmul(libm(ctx, "log", u), b.fdiv(x, b.fsub(u, one)))
    result = b.select(b.fcmp_ordered("==", u, one), x, quotient)
    return b.select(b.fcmp_ordered("==", x, const(ctx, x, math.inf)), x, result)


def _log1p(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return _log1p_of(ctx, args[0])


#: Above this ``a*a`` (for ``asinh``, ``acosh``) is not needed: ``log(2a)`` is exact to double.
_HUGE = 2.0 ** 28


def _log_twice(ctx: Any, a: ir.Value) -> ir.Value:
    """``log(2a) = log(a) + ln2``."""
    return ctx.b.fadd(libm(ctx, "log", a), const(ctx, a, math.log(2)))


def _asinh(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    a = fabs(ctx, x)
    one = const(ctx, x, 1.0)
    square = b.fmul(a, a)
    moderate = _log1p_of(ctx, b.fadd(a, b.fdiv(square, b.fadd(one, _sqrt(ctx, b.fadd(one, square))))))
    value = b.select(b.fcmp_ordered(">", a, const(ctx, x, _HUGE)), _log_twice(ctx, a), moderate)
    return copysign(ctx, value, x)


def _acosh(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    one, two = const(ctx, x, 1.0), const(ctx, x, 2.0)
    t = b.fsub(x, one)
    near = _log1p_of(ctx, b.fadd(t, _sqrt(ctx, b.fadd(b.fmul(two, t), b.fmul(t, t)))))
    far = libm(ctx, "log", b.fsub(b.fmul(two, x),
                                  b.fdiv(one, b.fadd(x, _sqrt(ctx, b.fsub(b.fmul(x, x), one))))))
    value = b.select(b.fcmp_ordered("<", x, two), near, far)
    value = b.select(b.fcmp_ordered(">", x, const(ctx, x, _HUGE)), _log_twice(ctx, x), value)
    return b.select(b.fcmp_unordered("<", x, one), const(ctx, x, math.nan), value)


def _atanh(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    a = fabs(ctx, x)
    value = b.fmul(const(ctx, x, 0.5), _log1p_of(ctx, b.fdiv(b.fadd(a, a), b.fsub(const(ctx, x, 1.0), a))))
    return copysign(ctx, value, x)


def _cbrt(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    a = fabs(ctx, x)
    tiny = b.fcmp_ordered("<", a, const(ctx, x, 2.0 ** -900))      # the Newton step's cube would underflow
    scaled = b.select(tiny, b.fmul(a, const(ctx, x, 2.0 ** 600)), a)
    r = libm(ctx, "exp", b.fmul(libm(ctx, "log", scaled), const(ctx, x, 1 / 3)))
    cube = b.fmul(b.fmul(r, r), r)
    r = b.fsub(r, b.fdiv(b.fsub(cube, scaled), b.fmul(const(ctx, x, 3.0), b.fmul(r, r))))
    r = b.select(tiny, b.fmul(r, const(ctx, x, 2.0 ** -200)), r)
    special = b.or_(b.fcmp_ordered("==", a, const(ctx, x, 0.0)),
                    b.fcmp_unordered("==", a, const(ctx, x, math.inf)))
    return copysign(ctx, b.select(special, a, r), x)


def _hypot(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    ax, ay = (fabs(ctx, v) for v in args)
    big, small = ctx.intrinsic("maxnum", [ax, ay]), ctx.intrinsic("minnum", [ax, ay])
    ratio = b.fdiv(small, big)
    value = b.fmul(big, _sqrt(ctx, ctx.intrinsic("fma", [ratio, ratio, const(ctx, big, 1.0)])))
    value = b.select(b.fcmp_ordered("==", big, const(ctx, big, 0.0)), big, value)
    value = b.select(b.or_(b.fcmp_unordered("uno", ax, ax), b.fcmp_unordered("uno", ay, ay)),
                     b.fadd(ax, ay), value)
    infinite = b.or_(is_inf(ctx, args[0]), is_inf(ctx, args[1]))
    return b.select(infinite, const(ctx, big, math.inf), value)


def _fdim(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x, y = args
    value = b.select(b.fcmp_ordered(">", x, y), b.fsub(x, y), const(ctx, x, 0.0))
    return b.select(b.or_(b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", y, y)), b.fadd(x, y), value)


def _exponent(ctx: Any, x: ir.Value) -> ir.Value:
    """The unbiased binary exponent of finite nonzero ``x`` (subnormals too), as an i32."""
    _, e = frexp(ctx, x)
    return ctx.b.sub(e, ctx.const(lt.I32, 1))


def _logb(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    a = fabs(ctx, x)
    value = b.sitofp(_exponent(ctx, x), x.type)
    value = b.select(b.fcmp_ordered("==", a, const(ctx, x, 0.0)), const(ctx, x, -math.inf), value)
    return b.select(b.fcmp_unordered("==", a, const(ctx, x, math.inf)), b.fmul(a, a), value)


#: What ``ilogb`` returns for 0 and NaN, and for infinities (glibc's and CUDA's).
_ILOGB_ZERO, _ILOGB_INF = -2 ** 31, 2 ** 31 - 1


def _ilogb(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    a = fabs(ctx, x)
    value = _exponent(ctx, x)
    value = b.select(is_inf(ctx, x), ctx.const(lt.I32, _ILOGB_INF), value)
    return b.select(b.fcmp_unordered("ueq", a, const(ctx, x, 0.0)), ctx.const(lt.I32, _ILOGB_ZERO), value)


def _nextafter(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x, y = args
    width = lt.byte_size(lt.scalar_of(x.type)) * 8
    integer = same_shape(ctx, ir.IntType(width))
    bits = b.bitcast(x, integer)
    away = b.xor(b.fcmp_ordered("<", x, y), _sign_bit(ctx, x))      # |x| grows
    stepped = b.bitcast(b.select(away, b.add(bits, ctx.const(ir.IntType(width), 1)),
                                 b.sub(bits, ctx.const(ir.IntType(width), 1))), x.type)
    tiny = b.bitcast(ctx.const(ir.IntType(width), 1), x.type)
    stepped = b.select(b.fcmp_ordered("==", x, const(ctx, x, 0.0)), copysign(ctx, tiny, y), stepped)
    stepped = b.select(b.fcmp_ordered("==", x, y), y, stepped)
    return b.select(b.or_(b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", y, y)), b.fadd(x, y), stepped)


def _reduced(ctx: Any, ax: ir.Value, ay: ir.Value) -> ir.Value:
    """``ax mod ay`` for finite ``ax >= 0``, ``ay > 0``, exactly: each step takes from ``ax`` a
    multiple of ``ay * 2**s`` -- ``s`` chosen so that the quotient has no more bits than the
    significand, so ``fma(-q, ay 2**s, ax)`` is exact -- cutting the exponents' distance by a
    significand's width; enough steps for the farthest apart."""
    b = ctx.b
    double = lt.scalar_of(ax.type) == lt.F64
    precision = 52 if double else 23
    span = 1023 + 1074 if double else 127 + 149
    zero = ctx.const(lt.I32, 0)
    _, ey = frexp(ctx, ay)
    r = ax
    for _ in range(span // (precision - 1) + 3):
        _, ex = frexp(ctx, r)
        shift = b.sub(b.sub(ex, ey), ctx.const(lt.I32, precision))
        shift = b.select(b.icmp_signed(">", shift, zero), shift, zero)
        scale = ldexp(ctx, ay, shift)
        q = ctx.intrinsic("trunc", [b.fdiv(r, scale)])
        remainder = ctx.intrinsic("fma", [b.fneg(q), scale, r])
        remainder = b.select(b.fcmp_ordered("<", remainder, const(ctx, r, 0.0)), b.fadd(remainder, scale), remainder)
        r = b.select(b.fcmp_ordered(">=", r, ay), remainder, r)
    return r


def _c99_remainders(ctx: Any, x: ir.Value, y: ir.Value, value: ir.Value) -> ir.Value:
    """NaN for an infinite x, a zero y or a NaN; x itself for an infinite y."""
    b = ctx.b
    value = b.select(is_inf(ctx, y), x, value)
    invalid = b.or_(b.fcmp_unordered("ueq", y, const(ctx, y, 0.0)),
                    b.fcmp_unordered("ueq", fabs(ctx, x), const(ctx, x, math.inf)))
    return b.select(invalid, const(ctx, x, math.nan), value)


def _fmod(ctx: Any, args: list[ir.Value]) -> ir.Value:
    x, y = args
    ax, ay = fabs(ctx, x), fabs(ctx, y)
    finite = ctx.b.select(is_finite(ctx, x), ax, const(ctx, x, 0.0))
    positive = ctx.b.select(ctx.b.fcmp_ordered(">", ay, const(ctx, y, 0.0)), ay, const(ctx, y, 1.0))
    return _c99_remainders(ctx, x, y, copysign(ctx, _reduced(ctx, finite, positive), x))


def _remainder(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """``x - n y`` with ``n`` the nearest integer to ``x / y`` (ties to even): ``|x| mod 2|y|``
    gives the remainder and the quotient's parity."""
    b = ctx.b
    x, y = args
    ax, ay = fabs(ctx, x), fabs(ctx, y)
    finite = b.select(is_finite(ctx, x), ax, const(ctx, x, 0.0))
    positive = b.select(b.fcmp_ordered(">", ay, const(ctx, y, 0.0)), ay, const(ctx, y, 1.0))
    twice = b.fadd(positive, positive)
    wide = b.select(b.fcmp_ordered("<", twice, const(ctx, y, math.inf)), _reduced(ctx, finite, twice), finite)
    odd = b.fcmp_ordered(">=", wide, positive)
    r = b.select(odd, b.fsub(wide, positive), wide)
    small = b.fcmp_ordered("<", positive, const(ctx, y, 1.0))            # 2r exact; else ay / 2 is
    above = b.select(small, b.fcmp_ordered(">", b.fadd(r, r), positive),
                     b.fcmp_ordered(">", r, b.fmul(positive, const(ctx, y, 0.5))))
    tie = b.select(small, b.fcmp_ordered("==", b.fadd(r, r), positive),
                   b.fcmp_ordered("==", r, b.fmul(positive, const(ctx, y, 0.5))))
    r = b.select(b.or_(above, b.and_(tie, odd)), b.fsub(r, positive), r)
    signed = b.select(_sign_bit(ctx, x), b.fneg(r), r)
    return _c99_remainders(ctx, x, y, signed)


_IN_DOUBLE = {"atan": _atan, "atan2": _atan2, "asin": _asin, "acos": _acos, "tan": _tan,
              "expm1": _expm1, "sinh": _sinh, "cosh": _cosh, "tanh": _tanh, "log1p": _log1p,
              "asinh": _asinh, "acosh": _acosh, "atanh": _atanh, "cbrt": _cbrt,
              "hypot": _hypot}
_PER_TYPE = {"fdim": _fdim, "logb": _logb, "ilogb": _ilogb, "nextafter": _nextafter, "fmod": _fmod,
             "remainder": _remainder}

#: C symbol (``atan``, ``atanf``...) -> its lowering.
FUNCTIONS = {**{name: through_double(fn) for name, fn in _IN_DOUBLE.items()},
             **{name + "f": through_double(fn) for name, fn in _IN_DOUBLE.items()},
             **_PER_TYPE, **{name + "f": fn for name, fn in _PER_TYPE.items()}}
