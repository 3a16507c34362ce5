"""The modified Bessel functions of the first kind ``cyl_bessel_i0`` and ``cyl_bessel_i1``
(``torch.special.i0`` / ``i1`` under Inductor), in ``double`` (``float``: rounded from it).

- ``|x| <= 20``: the power series, ``I0(x) = sum (x*x/4)**k / k!**2`` and ``I1(x) = x/2 *
  sum (x*x/4)**k / (k! (k+1)!)``, as polynomials in ``x*x`` (all terms positive, so Horner's
  rule adds no cancellation; 36 terms reach 1e-19 of the sum at 20).
- beyond: Hankel's asymptotic expansion ``I_nu(x) = exp(x) / sqrt(2 pi x) * sum (-1)**k
  a_k(nu) / x**k``, ``a_k = prod_{j<=k} (4 nu**2 - (2j - 1)**2) / (k! 8**k)``, 22 terms (its
  smallest term at 20 is below 1e-17).  ``exp(x)`` is applied in two halves, so the result
  overflows only where ``I_nu`` does (``x`` near 713.99; ``exp`` alone overflows at 709.78).

Each coefficient is computed exactly (`fractions.Fraction`) and rounded once.  About 2e-15
relative in ``double``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import llvmlite.ir as ir

from naiad.codegen.mathlib.arith import (both_types, const, copysign, fabs, libm, polynomial,
                                         through_double)

SERIES_LIMIT, SERIES_TERMS, ASYMPTOTIC_TERMS = 20.0, 36, 22


def _series(order: int) -> tuple[float, ...]:
    """``1 / (4**k k! (k + order)!)``, highest power first."""
    return tuple(float(Fraction(1, 4 ** k * math.factorial(k) * math.factorial(k + order)))
                 for k in reversed(range(SERIES_TERMS)))


def _asymptotic(order: int) -> tuple[float, ...]:
    """``(-1)**k a_k(order)`` in powers of ``1 / x``, highest first."""
    terms, term = [], Fraction(1)
    for k in range(ASYMPTOTIC_TERMS):
        terms.append(float(term))
        term *= Fraction(-(4 * order * order - (2 * k + 1) ** 2), 8 * (k + 1))
    return tuple(reversed(terms))


I0_SERIES, I1_SERIES = _series(0), _series(1)
I0_ASYMPTOTIC, I1_ASYMPTOTIC = _asymptotic(0), _asymptotic(1)


def _large(ctx: Any, magnitude: ir.Value, coefficients: tuple[float, ...]) -> ir.Value:
    """``exp(|x|) / sqrt(2 pi |x|) * sum(...)``; infinity at infinity."""
    b = ctx.b
    series = polynomial(ctx, b.fdiv(const(ctx, magnitude, 1.0), magnitude), coefficients)
    root = libm(ctx, "sqrt", b.fmul(const(ctx, magnitude, 2 * math.pi), magnitude))
    half = libm(ctx, "exp", b.fmul(magnitude, const(ctx, magnitude, 0.5)))
    value = b.fmul(b.fmul(half, b.fdiv(series, root)), half)
    infinite = b.fcmp_ordered("==", magnitude, const(ctx, magnitude, float("inf")))
    return b.select(infinite, magnitude, value)


def _i0(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    magnitude = fabs(ctx, x)
    small = polynomial(ctx, b.fmul(x, x), I0_SERIES)
    in_series = b.fcmp_ordered("<=", magnitude, const(ctx, x, SERIES_LIMIT))
    return b.select(in_series, small, _large(ctx, magnitude, I0_ASYMPTOTIC))


def _i1(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    magnitude = fabs(ctx, x)
    small = b.fmul(b.fmul(x, const(ctx, x, 0.5)), polynomial(ctx, b.fmul(x, x), I1_SERIES))
    large = copysign(ctx, _large(ctx, magnitude, I1_ASYMPTOTIC), x)
    in_series = b.fcmp_ordered("<=", magnitude, const(ctx, x, SERIES_LIMIT))
    return b.select(in_series, small, large)


#: libdevice symbol -> lowering.
FUNCTIONS = {
    **both_types("cyl_bessel_i0", through_double(lambda ctx, args: _i0(ctx, args[0]))),
    **both_types("cyl_bessel_i1", through_double(lambda ctx, args: _i1(ctx, args[0]))),
}
