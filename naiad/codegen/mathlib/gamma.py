"""``lgamma`` and ``tgamma`` for targets without a C math library (AMD GPUs without ROCm's
device library), in ``double`` (``float``: computed in double and rounded once).

- ``x >= 1/2``: Lanczos' approximation with Godfrey's coefficients (g = 7, nine terms: about
  1e-15 relative), ``Gamma(z + 1) = sqrt(2 pi) t**(z + 1/2) exp(-t) A(z)``, ``t = z + g + 1/2``;
  ``tgamma`` takes ``t**((z + 1/2) / 2)`` twice, so that it overflows only where Gamma does.
- ``lgamma`` within 0.2 of its zeros at 1 and 2: its Taylor series there (``lgamma(1 + z) =
  -gamma z + sum (-1)**k zeta(k) z**k / k``; at 2, ``lgamma(2 + z) = log1p(z) + lgamma(1 + z)``),
  so the result keeps its relative precision where it is tiny; the zeta values are summed once,
  here, by Euler and Maclaurin's formula.
- ``x < 1/2``: the reflection ``Gamma(x) Gamma(1 - x) = pi / sin(pi x)`` with ``sinpi`` (exact
  at integers: poles give +inf for ``lgamma``, NaN for ``tgamma`` below 0, +-inf at +-0).
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir

from naiad.codegen.mathlib.arith import const, is_inf, libm, polynomial, through_double

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)
_EULER_GAMMA = 0.5772156649015329
#: Where the series at 1 and 2 take over, and how many terms they have (0.2**26 < 1e-18).
_NEAR, _TERMS = 0.2, 26
#: Above this, Gamma overflows double.
_TGAMMA_LIMIT = 171.62437695630272


def _zeta(k: int) -> float:
    """Riemann's zeta at an integer ``k >= 2``: nineteen terms, the tail's integral and five of
    Euler and Maclaurin's corrections (Bernoulli numbers 1/6 ... 5/66): 1e-17 relative."""
    n = 20
    head = sum(m ** -k for m in range(1, n))
    tail = n ** (1 - k) / (k - 1) + n ** -k / 2
    rising, correction = float(k), 0.0
    for j, bernoulli in enumerate((1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66), start=1):
        correction += bernoulli / math.factorial(2 * j) * rising * n ** (-k - 2 * j + 1)
        rising *= (k + 2 * j - 1) * (k + 2 * j)
    return head + tail + correction


#: lgamma(1 + z) / z in powers of z, highest first: (-1)**k zeta(k) / k for k = TERMS .. 2, then -gamma.
_SERIES_AT_ONE = tuple((-1) ** k * _zeta(k) / k for k in range(_TERMS, 1, -1)) + (-_EULER_GAMMA,)


def _lanczos_sum(ctx: Any, z: ir.Value) -> ir.Value:
    b = ctx.b
    total = const(ctx, z, _LANCZOS[0])
    for i, p in enumerate(_LANCZOS[1:], start=1):
        total = b.fadd(total, b.fdiv(const(ctx, z, p), b.fadd(z, const(ctx, z, float(i)))))
    return total


def _lgamma_above_half(ctx: Any, x: ir.Value) -> ir.Value:
    """lgamma(x) for x >= 1/2: Lanczos, or the series near 1 and 2."""
    b = ctx.b
    z = b.fsub(x, const(ctx, x, 1.0))
    t = b.fadd(z, const(ctx, x, _LANCZOS_G + 0.5))
    lanczos = b.fadd(b.fsub(b.fmul(b.fadd(z, const(ctx, x, 0.5)), libm(ctx, "log", t)), t),
                     b.fadd(const(ctx, x, 0.5 * math.log(2 * math.pi)), libm(ctx, "log", _lanczos_sum(ctx, z))))
    near_one = b.fmul(z, polynomial(ctx, z, _SERIES_AT_ONE))
    w = b.fsub(x, const(ctx, x, 2.0))
    near_two = b.fadd(libm(ctx, "log1p", w), b.fmul(w, polynomial(ctx, w, _SERIES_AT_ONE)))
    near = const(ctx, x, _NEAR)
    value = b.select(b.fcmp_ordered("<", ctx.intrinsic("fabs", [z]), near), near_one, lanczos)
    return b.select(b.fcmp_ordered("<", ctx.intrinsic("fabs", [w]), near), near_two, value)


def _sinpi(ctx: Any, x: ir.Value) -> ir.Value:
    return ctx.hooks.call_math(ctx, "__naiad_sinpi", [x], x.type)


def _both_sides(ctx: Any, x: ir.Value, above_half: Any) -> tuple[ir.Value, ir.Value, ir.Value]:
    """``(x >= 1/2, above_half(x), above_half(1 - x))``, each argument kept at 1/2 or more (the
    side not taken computes at 1/2)."""
    b = ctx.b
    half = const(ctx, x, 0.5)
    above = b.fcmp_ordered(">=", x, half)
    return (above, above_half(ctx, b.select(above, x, half)),
            above_half(ctx, b.select(above, half, b.fsub(const(ctx, x, 1.0), x))))


def _lgamma(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    above, direct, other = _both_sides(ctx, x, _lgamma_above_half)
    sine = ctx.intrinsic("fabs", [_sinpi(ctx, x)])
    reflected = b.fsub(libm(ctx, "log", b.fdiv(const(ctx, x, math.pi), sine)), other)
    value = b.select(above, direct, reflected)
    value = b.select(is_inf(ctx, x), const(ctx, x, math.inf), value)
    return b.select(b.fcmp_unordered("uno", x, x), x, value)


def _gamma_above_half(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    z = b.fsub(x, const(ctx, x, 1.0))
    t = b.fadd(z, const(ctx, x, _LANCZOS_G + 0.5))
    half_power = libm(ctx, "pow", t, b.fmul(b.fadd(z, const(ctx, x, 0.5)), const(ctx, x, 0.5)))
    scaled = b.fmul(b.fmul(const(ctx, x, math.sqrt(2 * math.pi)), half_power),
                    b.fmul(b.fmul(half_power, libm(ctx, "exp", b.fneg(t))), _lanczos_sum(ctx, z)))
    return b.select(b.fcmp_ordered(">", x, const(ctx, x, _TGAMMA_LIMIT)), const(ctx, x, math.inf), scaled)


def _tgamma(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    above, direct, other = _both_sides(ctx, x, _gamma_above_half)
    reflected = b.fdiv(const(ctx, x, math.pi), b.fmul(_sinpi(ctx, x), other))
    value = b.select(above, direct, reflected)
    negative_integer = b.and_(b.fcmp_ordered("<", x, const(ctx, x, 0.0)),
                              b.fcmp_ordered("==", ctx.intrinsic("floor", [x]), x))
    value = b.select(negative_integer, const(ctx, x, math.nan), value)          # -inf too
    zero = b.fcmp_ordered("==", x, const(ctx, x, 0.0))
    value = b.select(zero, ctx.intrinsic("copysign", [const(ctx, x, math.inf), x]), value)
    return b.select(b.fcmp_unordered("uno", x, x), x, value)


#: C symbol -> its lowering.
FUNCTIONS = {"lgamma": through_double(_lgamma), "lgammaf": through_double(_lgamma),
             "tgamma": through_double(_tgamma), "tgammaf": through_double(_tgamma)}
