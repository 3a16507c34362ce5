"""C functions for targets without a C math library (AMD GPUs without ROCm's device library):
``erff``, ``tanhf`` and ``expm1f`` from LLVM's single-precision ``exp`` and ``log``, which every
GPU target lowers; and ``exp``, ``exp2``, ``exp10``, ``log``, ``log2``, ``log10``, ``sin``,
``cos``, ``pow``, ``erf`` in double precision from integer and float arithmetic and ``ldexp``/``frexp``
alone (LLVM's AMDGPU back end lowers none of them).
A few ulp from the correctly rounded result (tests/hip/test_math.py).

- ``expm1f``: Kahan's ``(u - 1) (x / log(u))`` with ``u = exp(x)``: the rounding of ``u`` cancels
  in the quotient, so small ``x`` keeps its relative precision (``x`` itself where ``u == 1``).
- ``tanhf``: ``e / (e + 2)`` with ``e = expm1(2x)``: no cancellation near 0; +-1 beyond 9.
- ``erff``: below 0.84375 its Taylor series to ``x**21`` (the terms fall below 1e-9 there); above,
  ``1 - erfc``, with ``erfc`` as Numerical Recipes' Chebyshev fit ``t exp(-x*x + P(t))``,
  ``t = 1 / (1 + x/2)`` (relative error under 1.2e-7); +-1 beyond 4.
- ``exp``: ``x = k ln2 + r`` (Cody and Waite: ``ln2`` in two parts, ``k ln2_hi`` exact),
  ``|r| <= ln2 / 2``, ``exp(r)`` by its Taylor series to ``r**13`` (the next term is under
  1e-17 of it), scaled by ``2**k``.  ``exp2``: ``k = rint(x)`` and ``exp((x - k) ln2)``.
- ``log``: ``x = m 2**e`` with ``sqrt(1/2) <= m < sqrt(2)``, ``log(m) = 2 atanh(s)``,
  ``s = (m - 1) / (m + 1)``, ``|s| < 0.172``, the odd series to ``s**23``; plus ``e ln2`` in two
  parts.  ``log2`` and ``log10``: ``log`` times the constant.
- ``sin``, ``cos``: Payne and Hanek's reduction by pi/2 for every argument from 2**-10 up (the
  argument's 53-bit significand times a 192-bit window of 2/pi's bits, in 64-bit integers: the
  quadrant and 128 bits of the remainder), then Taylor series to ``r**21`` / ``r**22``.
- ``pow``: ``exp(y log|x|)`` with the logarithm and the product each kept as two doubles
  (`_exp_of_sum`), C99's special cases; ``exp10``: ``exp(x ln10)`` the same way.
- ``erf``: its Taylor series to ``x**35`` below 0.84375; up to 6, ``1 - exp(-x*x) g(x)`` with
  ``g = erfc(x) exp(x*x)`` as Chebyshev series fitted on three intervals; 1 beyond.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.mathlib.arith import (clenshaw, const, copysign, fabs, frexp, ldexp, libm,
                                         polynomial, through_double, two_product, two_sum)

#: erf(x) / x in powers of x*x, highest first: 2/sqrt(pi) (-1)^n / (n! (2n+1)).
_ERF_TAYLOR = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                    for n in range(10, -1, -1))
#: Numerical Recipes' erfc fit: the exponent's polynomial in t, highest first.
_ERFC_FIT = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806,
             0.09678418, 0.37409196, 1.00002368, -1.26551223)


def expm1(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    u = libm(ctx, "exp", x)
    one = const(ctx, x, 1.0)
    minus_one = b.fsub(u, one)
    quotient = b.fmul(minus_one, b.fdiv(x, libm(ctx, "log", u)))      # no overflow near 88
    result = b.select(b.fcmp_ordered("==", minus_one, const(ctx, x, -1.0)), minus_one, quotient)
    result = b.select(b.fcmp_ordered("==", u, const(ctx, x, float("inf"))), u, result)
    return b.select(b.fcmp_ordered("==", u, one), x, result)


def _expm1(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return expm1(ctx, args[0])


def _tanh(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    e = expm1(ctx, b.fmul(const(ctx, x, 2.0), x))
    ratio = b.fdiv(e, b.fadd(e, const(ctx, x, 2.0)))
    saturated = b.fcmp_ordered(">", fabs(ctx, x), const(ctx, x, 9.0))
    return b.select(saturated, copysign(ctx, const(ctx, x, 1.0), x), ratio)


def _erf(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    ax = fabs(ctx, x)
    series = b.fmul(x, polynomial(ctx, b.fmul(x, x), _ERF_TAYLOR))
    t = b.fdiv(const(ctx, x, 1.0), b.fadd(const(ctx, x, 1.0), b.fmul(const(ctx, x, 0.5), ax)))
    exponent = b.fsub(polynomial(ctx, t, _ERFC_FIT), b.fmul(ax, ax))
    erfc = b.fmul(t, libm(ctx, "exp", exponent))
    tail = copysign(ctx, b.fsub(const(ctx, x, 1.0), erfc), x)
    tail = b.select(b.fcmp_ordered(">", ax, const(ctx, x, 4.0)), copysign(ctx, const(ctx, x, 1.0), x), tail)
    return b.select(b.fcmp_unordered("<", ax, const(ctx, x, 0.84375)), series, tail)


#: ln2 in two parts: the high one with 11 trailing zero bits (k ln2_hi exact for |k| < 2048).
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
#: exp(r) in powers of r, highest first: 1 / n! for n = 13 .. 0.
_EXP_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(13, -1, -1))
#: 2 atanh(s) / s in powers of s*s, highest first: 2 / (2n + 1) for n = 11 .. 0.
_ATANH_SERIES = tuple(2.0 / (2 * n + 1) for n in range(11, -1, -1))


def _exp_reduced(ctx: Any, k: ir.Value, r: ir.Value, x: ir.Value) -> ir.Value:
    """``2**k exp(r)``; +inf, 0 and NaN where ``x`` (the argument) says so."""
    b = ctx.b
    value = ldexp(ctx, polynomial(ctx, r, _EXP_TAYLOR), b.fptosi(k, lt.vector(lt.I32, ctx.lanes)))
    value = b.select(b.fcmp_ordered(">", x, const(ctx, x, 709.782712893384)), const(ctx, x, math.inf), value)
    value = b.select(b.fcmp_ordered("<", x, const(ctx, x, -745.2)), const(ctx, x, 0.0), value)
    return b.select(b.fcmp_unordered("uno", x, x), x, value)


def _exp_double(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    clamped = ctx.intrinsic("minnum", [ctx.intrinsic("maxnum", [x, const(ctx, x, -746.0)]),
                                       const(ctx, x, 710.0)])
    k = ctx.intrinsic("rint", [b.fmul(clamped, const(ctx, x, 1 / math.log(2)))])
    r = ctx.intrinsic("fma", [b.fneg(k), const(ctx, x, _LN2_HI), clamped])
    r = ctx.intrinsic("fma", [b.fneg(k), const(ctx, x, _LN2_LO), r])
    return _exp_reduced(ctx, k, r, x)


def _exp2_double(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    clamped = ctx.intrinsic("minnum", [ctx.intrinsic("maxnum", [x, const(ctx, x, -1076.0)]),
                                       const(ctx, x, 1025.0)])
    k = ctx.intrinsic("rint", [clamped])
    f = b.fsub(clamped, k)                                          # exact, |f| <= 1/2
    r = ctx.intrinsic("fma", [f, const(ctx, x, _LN2_HI), b.fmul(f, const(ctx, x, _LN2_LO))])
    scaled = b.fmul(x, const(ctx, x, math.log(2)))                  # for the range checks only
    return _exp_reduced(ctx, k, r, b.select(b.fcmp_unordered("uno", x, x), x, scaled))


def _log_parts(ctx: Any, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``log(x)`` as an unevaluated sum ``hi + lo`` (finite positive ``x``): ``e ln2 + 2 s`` with
    ``s = f / (m + 1)`` rounded, and in ``lo`` the series' rest, ``e ln2_lo`` and the rounding of
    ``s`` (``2 ds / (1 - s*s)`` with ``ds`` from an fma), so that ``log2`` and ``log10`` keep
    their precision when scaled."""
    b = ctx.b
    m, e = frexp(ctx, x)                                           # 0.5 <= m < 1
    low = b.fcmp_ordered("<", m, const(ctx, x, math.sqrt(0.5)))
    m = b.select(low, b.fmul(m, const(ctx, x, 2.0)), m)
    e = b.sitofp(b.sub(e, b.zext(low, e.type)), x.type)
    one = const(ctx, x, 1.0)
    f = b.fsub(m, one)                                             # exact (Sterbenz)
    denominator = b.fadd(m, one)
    denominator_lo = b.fsub(m, b.fsub(denominator, one))           # m + 1 = den + den_lo exactly
    s = b.fdiv(f, denominator)
    remainder = b.fsub(ctx.intrinsic("fma", [b.fneg(s), denominator, f]), b.fmul(s, denominator_lo))
    ds = b.fdiv(remainder, denominator)
    z = b.fmul(s, s)
    rest = b.fmul(b.fmul(s, z), polynomial(ctx, z, _ATANH_SERIES[:-1]))
    correction = b.fdiv(b.fmul(const(ctx, x, 2.0), ds), b.fsub(one, z))
    hi_e = b.fmul(e, const(ctx, x, _LN2_HI))                       # exact
    two_s = b.fmul(const(ctx, x, 2.0), s)
    hi = b.fadd(hi_e, two_s)
    lo = b.fadd(b.fsub(two_s, b.fsub(hi, hi_e)), b.fadd(b.fadd(rest, correction),
                                                        b.fmul(e, const(ctx, x, _LN2_LO))))
    return hi, lo


def _log_specials(ctx: Any, x: ir.Value, value: ir.Value) -> ir.Value:
    """-inf at 0, +inf at +inf, NaN below 0 and for NaN."""
    b = ctx.b
    value = b.select(b.fcmp_ordered("==", x, const(ctx, x, 0.0)), const(ctx, x, -math.inf), value)
    value = b.select(b.fcmp_ordered("==", x, const(ctx, x, math.inf)), x, value)
    invalid = b.or_(b.fcmp_ordered("<", x, const(ctx, x, 0.0)), b.fcmp_unordered("uno", x, x))
    return b.select(invalid, const(ctx, x, math.nan), value)


def _log_double(ctx: Any, args: list[ir.Value]) -> ir.Value:
    hi, lo = _log_parts(ctx, args[0])
    return _log_specials(ctx, args[0], ctx.b.fadd(hi, lo))


def _scaled_log(factor: float) -> Any:
    """``log(x) * factor``, ``factor`` in two parts applied to both parts of the logarithm."""
    factor_hi, factor_lo = float(factor), _residual(factor)

    def lower(ctx: Any, args: list[ir.Value]) -> ir.Value:
        b = ctx.b
        x = args[0]
        hi, lo = _log_parts(ctx, x)
        c_hi, c_lo = const(ctx, x, factor_hi), const(ctx, x, factor_lo)
        value = ctx.intrinsic("fma", [hi, c_hi, ctx.intrinsic("fma", [hi, c_lo, b.fmul(lo, c_hi)])])
        return _log_specials(ctx, x, value)
    return lower


def _residual(value: Any) -> float:
    """What ``value`` (a high-precision constant) loses in its nearest double."""
    return float(value - type(value)(float(value)))


#: 1 / ln 2 and 1 / ln 10 beyond double precision (``decimal``, 40 digits).
_INV_LN2 = Decimal("1.442695040888963407359924681001892137426645954")
_INV_LN10 = Decimal("0.4342944819032518276511289189166050822943970058")

FUNCTIONS = {"erff": _erf, "tanhf": _tanh, "expm1f": _expm1, "exp": _exp_double,
             "exp2": _exp2_double, "log": _log_double, "log2": _scaled_log(_INV_LN2),
             "log10": _scaled_log(_INV_LN10)}


# -- double-precision sin and cos: Payne and Hanek's reduction by pi/2 with 2/pi's bits ---------
def _two_over_pi_words(count: int = 20) -> tuple[int, ...]:
    """The bits of 2/pi after 64 zero bits, as ``count`` 64-bit words (most significant first):
    bit ``i`` of the string is 2/pi's bit ``i - 63`` (its first fractional bit at ``i = 64``)."""
    from decimal import Decimal, getcontext

    getcontext().prec = 420
    pi = Decimal(0)                                # Machin: pi = 16 atan(1/5) - 4 atan(1/239)
    for weight, n in ((16, 5), (-4, 239)):
        term, k, power = Decimal(0), 0, Decimal(1) / n
        while power > Decimal(10) ** -415:
            term += power / (2 * k + 1) * (-1) ** k
            power /= n * n
            k += 1
        pi += weight * term
    bits = int((2 / pi) * (Decimal(2) ** (64 * (count - 1))))       # 2/pi's first 64 (count - 1) bits
    return tuple((bits >> (64 * (count - 1 - w))) & (2**64 - 1) if w else 0 for w in range(count))


_WORDS = _two_over_pi_words()
_MASK64 = 2**64 - 1
#: sin(r) / r - 1 and (cos(r) - 1 + r*r/2) / r**4 in powers of r*r, highest first.
_SIN_SERIES = tuple((-1) ** n / math.factorial(2 * n + 1) for n in range(10, 0, -1))
_COS_SERIES = tuple((-1) ** n / math.factorial(2 * n) for n in range(11, 1, -1))
#: Below this, x is its own reduced argument.
_REDUCE_FROM = 2.0 ** -10


def _mul_wide(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(high, low) 64-bit halves of the 128-bit product of two unsigned 64-bit integers."""
    i128 = ir.IntType(128)
    product = b.mul(b.zext(x, i128), b.zext(y, i128))
    return b.trunc(b.lshr(product, ir.Constant(i128, 64)), lt.I64), b.trunc(product, lt.I64)


def _reduce(ctx: Any, ax: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``(q, r)``: ``ax = q pi/2 + r`` (q modulo 4, an i64; |r| <= pi/4), for finite ``ax >= 0``:
    ``ax = m 2**k`` times a 192-bit window of 2/pi's bits from bit ``k - 1`` on (the bits before
    it add multiples of 4) is ``2**190 ax 2/pi`` but for those multiples: the product's bits
    190-191 are the quadrant and the 128 below them the fraction."""
    b = ctx.b
    i64 = lt.I64

    def c64(v: int) -> ir.Constant:
        return ir.Constant(i64, v)
    bits = b.bitcast(ax, i64)
    biased = b.and_(b.lshr(bits, c64(52)), c64(0x7FF))
    m = b.or_(b.and_(bits, c64(2**52 - 1)), c64(2**52))
    start = b.add(biased, c64(-1075 + 62))                       # i0 = k + 62 (k >= -62 here)
    start = b.select(b.icmp_signed("<", start, c64(0)), c64(0), start)
    table = _word_table(ctx)
    word, shift = b.lshr(start, c64(6)), b.and_(start, c64(63))
    back = b.sub(c64(64), shift)

    def window(n: int) -> ir.Value:
        first = b.load(b.gep(table, [c64(0), b.add(word, c64(n))]), typ=i64)
        second = b.load(b.gep(table, [c64(0), b.add(word, c64(n + 1))]), typ=i64)
        joined = b.or_(b.shl(first, shift), b.lshr(second, back))
        return b.select(b.icmp_unsigned("==", shift, c64(0)), first, joined)
    w0, w1, w2 = window(0), window(1), window(2)
    h2, l2 = _mul_wide(b, m, w2)
    h1, l1 = _mul_wide(b, m, w1)
    l0 = b.mul(m, w0)                                              # its high half: bits >= 192
    limb1 = b.add(h2, l1)
    carry1 = b.zext(b.icmp_unsigned("<", limb1, h2), i64)
    limb2 = b.add(b.add(h1, l0), carry1)         # (its carry and h0 only add multiples of 4)
    q = b.and_(b.lshr(limb2, c64(62)), c64(3))                     # bits 190-191
    high = b.or_(b.shl(limb2, c64(2)), b.lshr(limb1, c64(62)))     # fraction bits 126-189
    low = b.or_(b.shl(limb1, c64(2)), b.lshr(l2, c64(62)))         # and 62-125
    upper = b.icmp_signed("<", high, c64(0))                     # fraction >= 1/2: round up
    neg_low = b.sub(c64(0), low)
    neg_high = b.sub(b.xor(high, c64(-1)), b.zext(b.icmp_unsigned("!=", low, c64(0)), i64))
    neg_high = b.add(neg_high, c64(1))
    high, low = b.select(upper, neg_high, high), b.select(upper, neg_low, low)
    q = b.and_(b.add(q, b.zext(upper, i64)), c64(3))
    f64 = lt.scalar_of(ax.type)
    fraction = b.fadd(b.fmul(b.uitofp(high, f64), ir.Constant(f64, 2.0 ** -64)),
                      b.fmul(b.uitofp(low, f64), ir.Constant(f64, 2.0 ** -128)))
    r = b.fmul(fraction, ir.Constant(f64, math.pi / 2))
    return q, b.select(upper, b.fneg(r), r)


def _word_table(ctx: Any) -> ir.Value:
    module, name = ctx.module, "naiad_two_over_pi"
    table = module.globals.get(name)
    if table is None:
        space = getattr(ctx.hooks, "constant_addrspace", 0)
        ty = ir.ArrayType(lt.I64, len(_WORDS))
        table = ir.GlobalVariable(module, ty, name, addrspace=space)
        table.initializer = ir.Constant(ty, [ir.Constant(lt.I64, w - 2**64 if w >= 2**63 else w)
                                             for w in _WORDS])
        table.global_constant = True
        table.linkage = "internal"
    return table


def _sin_cos_reduced(ctx: Any, r: ir.Value) -> tuple[ir.Value, ir.Value]:
    b = ctx.b
    z = b.fmul(r, r)
    sine = ctx.intrinsic("fma", [b.fmul(r, z), polynomial(ctx, z, _SIN_SERIES), r])
    cosine = b.fadd(const(ctx, r, 1.0), ctx.intrinsic("fma", [b.fmul(z, z), polynomial(ctx, z, _COS_SERIES),
                                                              b.fmul(const(ctx, r, -0.5), z)]))
    return sine, cosine


def _trig(cosine_of: bool) -> Any:
    def lower(ctx: Any, args: list[ir.Value]) -> ir.Value:
        b = ctx.b
        x = args[0]
        ax = fabs(ctx, x)
        direct = b.fcmp_unordered("<", ax, const(ctx, x, _REDUCE_FROM))
        finite = b.fcmp_ordered("<", ax, const(ctx, x, math.inf))
        q, r = _reduce(ctx, b.select(finite, ax, const(ctx, x, 1.0)))
        q = b.select(direct, ir.Constant(lt.I64, 0), q)
        r = b.select(direct, ax, r)
        sine, cosine = _sin_cos_reduced(ctx, r)
        if cosine_of:                      # cos(x) = cos(|x|): quadrants cos, -sin, -cos, sin
            q = b.add(q, ir.Constant(lt.I64, 1))
        odd = b.icmp_unsigned("!=", b.and_(q, ir.Constant(lt.I64, 1)), ir.Constant(lt.I64, 0))
        negative = b.icmp_unsigned("!=", b.and_(q, ir.Constant(lt.I64, 2)), ir.Constant(lt.I64, 0))
        value = b.select(odd, cosine, sine)
        value = b.select(negative, b.fneg(value), value)
        if not cosine_of:
            value = b.select(b.fcmp_ordered("<", x, const(ctx, x, 0.0)), b.fneg(value), value)
            value = b.select(b.fcmp_ordered("==", x, const(ctx, x, 0.0)), x, value)   # sin(-0) = -0
        return b.select(finite, value, const(ctx, x, math.nan))
    return lower


FUNCTIONS.update({"sin": _trig(False), "cos": _trig(True)})


# -- double-precision pow and exp10: exp of a product kept as two doubles ---------------------------
_LN10 = Decimal("2.302585092994045684017991454684364207601101488628772976033")


def _exp_of_sum(ctx: Any, hi: ir.Value, lo: ir.Value) -> ir.Value:
    """``exp(hi + lo)`` (``|lo|`` tiny beside ``hi``): reduced by ``ln2`` from ``hi``, ``lo``
    added to the remainder; +inf, 0 and NaN as ``hi`` says."""
    b = ctx.b
    hi, lo = _normalized(ctx, hi, lo)
    clamped = ctx.intrinsic("minnum", [ctx.intrinsic("maxnum", [hi, const(ctx, hi, -746.0)]),
                                       const(ctx, hi, 710.0)])
    k = ctx.intrinsic("rint", [b.fmul(clamped, const(ctx, hi, 1 / math.log(2)))])
    r = ctx.intrinsic("fma", [b.fneg(k), const(ctx, hi, _LN2_HI), clamped])
    r = b.fadd(ctx.intrinsic("fma", [b.fneg(k), const(ctx, hi, _LN2_LO), r]), lo)
    return _exp_reduced(ctx, k, r, hi)


def _normalized(ctx: Any, hi: ir.Value, lo: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``hi + lo`` as the rounded sum and its error (``lo`` then below half an ulp of ``hi``);
    an infinite ``hi`` is kept with no error."""
    total, error = two_sum(ctx, hi, lo)
    finite = ctx.b.fcmp_ordered("<", fabs(ctx, total), const(ctx, hi, math.inf))
    return ctx.b.select(finite, total, hi), ctx.b.select(finite, error, const(ctx, hi, 0.0))


def _exp10_double(ctx: Any, args: list[ir.Value]) -> ir.Value:
    x = args[0]
    hi, error = two_product(ctx, x, const(ctx, x, float(_LN10)))
    lo = ctx.intrinsic("fma", [x, const(ctx, x, _residual(_LN10)), error])
    return _exp_of_sum(ctx, hi, lo)


def _pow_double(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """C's ``pow``: ``exp(y log|x|)`` with ``log|x|`` and the product as two doubles each, the
    sign of a negative base to an odd integer power, and C99's special cases."""
    b = ctx.b
    x, y = args
    zero, one, inf = const(ctx, x, 0.0), const(ctx, x, 1.0), const(ctx, x, math.inf)
    ax = fabs(ctx, x)
    log_hi, log_lo = _normalized(ctx, *_log_parts(ctx, b.select(b.fcmp_ordered("==", ax, zero), one,
                                                                 b.select(b.fcmp_ordered("==", ax, inf), one, ax))))
    hi, error = two_product(ctx, y, log_hi)
    value = _exp_of_sum(ctx, hi, ctx.intrinsic("fma", [y, log_lo, error]))
    integer = b.fcmp_ordered("==", ctx.intrinsic("rint", [y]), y)
    half = b.fmul(y, const(ctx, y, 0.5))
    odd = b.and_(integer, b.fcmp_ordered("!=", ctx.intrinsic("rint", [half]), half))
    negative = b.fcmp_ordered("<", x, zero)
    value = b.select(b.and_(negative, odd), b.fneg(value), value)
    value = b.select(b.and_(negative, b.xor(integer, ir.Constant(ir.IntType(1), 1))),
                     const(ctx, x, math.nan), value)
    # |x| = 0 or inf: 0 or inf by the sign of y (and x's sign for odd integer y)
    big = b.fcmp_ordered(">", y, zero)
    at_zero = b.select(big, zero, inf)
    at_inf = b.select(big, inf, zero)
    edge = b.select(b.fcmp_ordered("==", ax, zero), at_zero, at_inf)
    edge = b.select(b.and_(odd, b.fcmp_ordered("<", copysign(ctx, one, x), zero)), b.fneg(edge), edge)
    value = b.select(b.or_(b.fcmp_ordered("==", ax, zero), b.fcmp_ordered("==", ax, inf)), edge, value)
    # y = +-inf: by |x| against 1 (|x| = 1: 1)
    beyond = b.fcmp_ordered(">", ax, one)
    to_inf = b.select(b.fcmp_ordered(">", y, zero), b.select(beyond, inf, zero),
                      b.select(beyond, zero, inf))
    to_inf = b.select(b.fcmp_ordered("==", ax, one), one, to_inf)
    value = b.select(b.fcmp_ordered("==", fabs(ctx, y), inf), to_inf, value)
    value = b.select(b.or_(b.fcmp_unordered("uno", x, x), b.fcmp_unordered("uno", y, y)),
                     const(ctx, x, math.nan), value)
    one_result = b.or_(b.fcmp_ordered("==", y, zero), b.fcmp_ordered("==", x, one))
    return b.select(one_result, one, value)


FUNCTIONS.update({"exp10": _exp10_double, "pow": _pow_double})


# -- double-precision erf: a series near 0, 1 - erfc beyond, erfc from fitted erfc(x) exp(x*x) -------
#: erfc(x) exp(x*x) on [0.84375, 2], [2, 4], [4, 6] as Chebyshev series in t (x mapped onto
#: [-1, 1]), coefficients from T_0 up: interpolation at 64 Chebyshev nodes with mpmath at 200 bits,
#: the series cut where its terms fall under 1e-18 of the first (within 1.2 ulp over each interval).
_ERFC_INTERVALS = (
    (0.84375, 2.0, (
        0.34963137501786945, -0.10752078854361419, 0.015013303738838617, -0.0019383665215057786,
        0.0002342632906622411, -2.6738864618036645e-05, 2.901876236447034e-06,
        -3.010288117845606e-07, 2.9976496319870745e-08, -2.8755508414964327e-09,
        2.665052493399271e-10, -2.3923317940014868e-11, 2.084508653983851e-12,
        -1.766311313767083e-13, 1.4579003478727762e-14, -1.1738687252955628e-15,
        9.232260113112658e-17, -7.100701723270305e-18, 5.346356343807263e-19,)),
    (2.0, 4.0, (
        0.1874295690262241, -0.05794652883669097, 0.008595247387396534, -0.0012284613640242594,
        0.00016974366686180488, -2.2738329337044562e-05, 2.959844378804878e-06,
        -3.7513575581379714e-07, 4.6372828761738244e-08, -5.599455392564088e-09,
        6.613160896679916e-10, -7.648271522199816e-11, 8.670904325876594e-12,
        -9.645456274382108e-13, 1.0536827959360625e-13, -1.1312630906760667e-14,
        1.1945180669174577e-15, -1.241310752580407e-16, 1.270246323185436e-17,
        -1.280725873663855e-18,)),
    (4.0, 6.0, (
        0.11277819743166245, -0.021913497155272348, 0.0020915397845687493, -0.00019628624819122983,
        1.8126654238718202e-05, -1.6483628246572167e-06, 1.4769699327777977e-07,
        -1.3047490253442588e-08, 1.136975347104367e-09, -9.778180226640498e-11,
        8.303212348062975e-12, -6.964650842590714e-13, 5.772832164827166e-14,
        -4.730148558369874e-15, 3.832714974411983e-16, -3.072023314998772e-17,
        2.4364677192447835e-18, -1.9126665070732086e-19,)),
)
#: erf(x) / x in powers of x*x, highest first: 2/sqrt(pi) (-1)^n / (n! (2n+1)), n = 17 .. 0.
_ERF_SERIES = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                    for n in range(17, -1, -1))


def _fitted_erfc(ctx: Any, ax: ir.Value) -> ir.Value:
    """``erfc(ax)`` for ``0.84375 <= ax < 6``: ``exp(-ax*ax) g(ax)``, ``ax*ax`` as two doubles and
    ``g = erfc(x) exp(x*x)`` from the interval's Chebyshev series."""
    b = ctx.b
    width = max(len(c) for _, _, c in _ERFC_INTERVALS)
    low, high = const(ctx, ax, _ERFC_INTERVALS[-1][0]), const(ctx, ax, _ERFC_INTERVALS[-1][1])
    coefficients = [const(ctx, ax, _ERFC_INTERVALS[-1][2][k] if k < len(_ERFC_INTERVALS[-1][2]) else 0.0)
                    for k in range(width)]
    for start, end, values in reversed(_ERFC_INTERVALS[:-1]):
        inside = b.fcmp_ordered("<", ax, const(ctx, ax, end))
        low = b.select(inside, const(ctx, ax, start), low)
        high = b.select(inside, const(ctx, ax, end), high)
        coefficients = [b.select(inside, const(ctx, ax, values[k] if k < len(values) else 0.0), c)
                        for k, c in enumerate(coefficients)]
    t = b.fdiv(b.fsub(b.fadd(ax, ax), b.fadd(low, high)), b.fsub(high, low))
    return b.fmul(_exp_of_square(ctx, ax), clenshaw(ctx, t, coefficients))


def _exp_of_square(ctx: Any, x: ir.Value) -> ir.Value:
    """``exp(-x*x)`` with ``x*x`` as two doubles (a rounded square would cost ``x*x`` ulps)."""
    square, error = two_product(ctx, x, x)
    return _exp_of_sum(ctx, ctx.b.fneg(square), ctx.b.fneg(error))


#: Levels of `erfcx_fraction`: 3 ulp at 5, better beyond.
ERFCX_DEPTH = 16


def erfcx_fraction(ctx: Any, x: ir.Value) -> ir.Value:
    """``exp(x*x) erfc(x)`` for ``x >= 5`` by its continued fraction ``1 / (sqrt(pi) (x + (1/2) /
    (x + 1 / (x + (3/2) / ...))))``: no overflow, no cancellation."""
    b = ctx.b
    t = x
    for k in range(ERFCX_DEPTH, 0, -1):
        t = b.fadd(x, b.fdiv(const(ctx, x, k / 2), t))
    return b.fdiv(const(ctx, x, 1 / math.sqrt(math.pi)), t)


def _erf_double(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """``erf``: ``x P(x*x)`` below 0.84375; above, ``1 - erfc`` (`_fitted_erfc`); 1 from 6 on."""
    b = ctx.b
    x = args[0]
    ax = fabs(ctx, x)
    series = b.fmul(x, polynomial(ctx, b.fmul(x, x), _ERF_SERIES))
    tail = copysign(ctx, b.fsub(const(ctx, x, 1.0), _fitted_erfc(ctx, ax)), x)
    tail = b.select(b.fcmp_ordered(">=", ax, const(ctx, x, 6.0)), copysign(ctx, const(ctx, x, 1.0), x), tail)
    return b.select(b.fcmp_unordered("<", ax, const(ctx, x, 0.84375)), series, tail)


def _erfc_double(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """``erfc``: ``1 - x P(x*x)`` below 0.84375 in magnitude; above, `_fitted_erfc` up to 6 and
    ``exp(-x*x)`` times `erfcx_fraction` beyond (0 from about 27.2, where it underflows); below
    -0.84375, ``2 - erfc(-x)``."""
    b = ctx.b
    x = args[0]
    ax = fabs(ctx, x)
    one = const(ctx, x, 1.0)
    near = b.fsub(one, b.fmul(x, polynomial(ctx, b.fmul(x, x), _ERF_SERIES)))
    far_x = ctx.intrinsic("maxnum", [ax, const(ctx, x, 6.0)])
    far = b.fmul(_exp_of_square(ctx, far_x), erfcx_fraction(ctx, far_x))
    tail = b.select(b.fcmp_ordered("<", ax, const(ctx, x, 6.0)), _fitted_erfc(ctx, ax), far)
    tail = b.select(b.fcmp_ordered("<", x, const(ctx, x, 0.0)), b.fsub(const(ctx, x, 2.0), tail), tail)
    return b.select(b.fcmp_unordered("<", ax, const(ctx, x, 0.84375)), near, tail)


FUNCTIONS.update({"erf": _erf_double, "erfc": _erfc_double, "erfcf": through_double(_erfc_double)})
