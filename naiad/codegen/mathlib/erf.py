"""The error function's relatives that C lacks: ``erfcx`` (the scaled complement),
``erfinv``, ``erfcinv``, ``normcdf`` and ``normcdfinv`` (its inverse, SciPy's ``ndtri``).

``double`` is computed to about 1e-15 relative from C's ``erf``, ``erfc``, ``exp`` and ``log``;
``float`` is that, rounded (`through_double`), except ``erfinv``, which uses Giles' single
precision approximation (M. Giles, "Approximating the erfinv function", GPU Computing Gems,
2011: under 4 ulp).

- ``erfcx(x) = exp(x*x) * erfc(x)``, with ``x*x`` exact as two doubles, below 5; above, the
  continued fraction ``1 / (sqrt(pi) (x + (1/2) / (x + 1 / (x + (3/2) / ...))))``, 16 levels
  deep (3 ulp at 5, better beyond): no overflow for large x, no cancellation.
- ``erfinv(y)`` for ``|y| <= 1/2``: Giles' polynomial, then one Halley step on
  ``erf(x) - y`` (cubic: from Giles' 1e-7 to rounding).
- Beyond, and ``erfcinv``: ``x`` with ``erfc(x) = c`` for ``c = 1 - |y| <= 1/2`` (exact):
  Newton's method on ``s = x*x`` for ``log(erfcx(x)) - s - log(c) = 0``, whose derivative is
  ``-1 / (sqrt(pi) x erfcx(x))`` and which is nearly linear in ``s``: two steps from Giles'
  polynomial (or from the asymptotic ``s = t - log(sqrt(pi)) - log(t)/2 + log1p(-1/(2t))``,
  ``t = -log(c)``, where Giles' range ends) reach rounding for every ``c`` down to the
  smallest subnormal.
- ``normcdf(x) = erfc(-x / sqrt(2)) / 2`` with ``-x / sqrt(2)`` as two doubles, the low one
  applied through erfc's derivative (in the far lower tail a rounded argument would cost
  ``x*x`` ulps).
- ``normcdfinv(p) = -sqrt(2) erfcinv(2 p)``.
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.mathlib.arith import (both_types, const, copysign, fabs, libm, polynomial,
                                         through_double, two_product)
from naiad.codegen.mathlib.without_libm import erfcx_fraction

SQRT_PI = 1.772453850905516
HALF_SQRT_PI = 0.886226925452758
TWO_OVER_SQRT_PI = 1.1283791670955126
LOG_SQRT_PI = 0.5723649429247001
SQRT_2 = 1.4142135623730951
#: 1/sqrt(2) as two doubles.
INV_SQRT_2 = (0.7071067811865476, -4.833646656726457e-17)

#: Giles' erfinv(y) / y for w = -log((1 - y)(1 + y)) < 5, in powers of w - 2.5 ...
GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                 0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
#: ... and for larger w, in powers of sqrt(w) - 3.
GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
              -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
#: Where the continued fraction (`erfcx_fraction`) takes over from exp(x*x) erfc(x).
ERFCX_SWITCH = 5.0
#: Where Giles' tail polynomial stops being a good first guess for the inverse.
GILES_LIMIT = 16.0


def _giles(ctx: Any, w: ir.Value) -> ir.Value:
    """Giles' erfinv(y) / y from ``w = -log((1 - y)(1 + y))``."""
    b = ctx.b
    central = polynomial(ctx, b.fsub(w, const(ctx, w, 2.5)), GILES_CENTRAL)
    tail = polynomial(ctx, b.fsub(libm(ctx, "sqrt", w), const(ctx, w, 3.0)), GILES_TAIL)
    return b.select(b.fcmp_ordered("<", w, const(ctx, w, 5.0)), central, tail)


def _w(ctx: Any, y: ir.Value) -> ir.Value:
    b = ctx.b
    one = const(ctx, y, 1.0)
    return b.fneg(libm(ctx, "log", b.fmul(b.fsub(one, y), b.fadd(one, y))))


def _with_infinities(ctx: Any, y: ir.Value, result: ir.Value) -> ir.Value:
    """erfinv's poles: +-inf at y = +-1."""
    b = ctx.b
    pole = b.fcmp_ordered("==", fabs(ctx, y), const(ctx, y, 1.0))
    return b.select(pole, copysign(ctx, const(ctx, y, float("inf")), y), result)


def _erfinv_float(ctx: Any, y: ir.Value) -> ir.Value:
    return _with_infinities(ctx, y, ctx.b.fmul(_giles(ctx, _w(ctx, y)), y))


# -- double -----------------------------------------------------------------------------------
def _erfcx(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    clamped = ctx.intrinsic("maxnum", [x, const(ctx, x, -27.0)])     # beyond: overflows anyway
    square, square_low = two_product(ctx, clamped, clamped)
    scale = b.fmul(libm(ctx, "exp", square), b.fadd(const(ctx, x, 1.0), square_low))
    direct = b.fmul(scale, libm(ctx, "erfc", clamped))
    below = b.fcmp_ordered("<", x, const(ctx, x, ERFCX_SWITCH))
    fraction = erfcx_fraction(ctx, b.select(below, const(ctx, x, ERFCX_SWITCH), x))    # NaN stays
    return b.select(below, direct, fraction)


def _erfinv_central(ctx: Any, y: ir.Value) -> ir.Value:
    """erfinv(y) for ``|y| <= 1/2``: Giles, then a Halley step ``x -= u / (1 + x u)`` with
    ``u = (erf(x) - y) / erf'(x)``."""
    b = ctx.b
    x = b.fmul(_giles(ctx, _w(ctx, y)), y)
    u = b.fmul(b.fmul(b.fsub(libm(ctx, "erf", x), y), const(ctx, y, HALF_SQRT_PI)),
               libm(ctx, "exp", b.fmul(x, x)))
    return b.fsub(x, b.fdiv(u, b.fadd(const(ctx, y, 1.0), b.fmul(x, u))))


def _erfc_inverse_tail(ctx: Any, c: ir.Value) -> ir.Value:
    """x > 0 with ``erfc(x) = c`` for ``0 < c <= 1/2`` (see the module docstring)."""
    b = ctx.b
    log_c = libm(ctx, "log", c)
    t = b.fneg(log_c)
    w = b.fsub(t, libm(ctx, "log", b.fsub(const(ctx, c, 2.0), c)))
    first = b.fmul(_giles(ctx, w), b.fsub(const(ctx, c, 1.0), c))
    asymptotic = b.fadd(b.fsub(b.fsub(t, const(ctx, c, LOG_SQRT_PI)),
                               b.fmul(const(ctx, c, 0.5), libm(ctx, "log", t))),
                        libm(ctx, "log1p", b.fdiv(const(ctx, c, -0.5), t)))
    in_giles_range = b.fcmp_ordered("<", w, const(ctx, c, GILES_LIMIT))
    s = b.select(in_giles_range, b.fmul(first, first), asymptotic)
    for _ in range(2):
        x = libm(ctx, "sqrt", s)
        scaled = _erfcx(ctx, x)
        square, square_low = two_product(ctx, x, x)
        residual = b.fsub(b.fsub(b.fsub(libm(ctx, "log", scaled), log_c), square), square_low)
        s = b.fadd(s, b.fmul(residual, b.fmul(const(ctx, c, SQRT_PI), b.fmul(x, scaled))))
    return libm(ctx, "sqrt", s)


def _erfinv_double(ctx: Any, y: ir.Value) -> ir.Value:
    b = ctx.b
    magnitude = fabs(ctx, y)
    tail = copysign(ctx, _erfc_inverse_tail(ctx, b.fsub(const(ctx, y, 1.0), magnitude)), y)
    central = b.fcmp_ordered("<=", magnitude, const(ctx, y, 0.5))
    return _with_infinities(ctx, y, b.select(central, _erfinv_central(ctx, y), tail))


def _erfcinv_double(ctx: Any, c: ir.Value) -> ir.Value:
    """Central for ``1/2 <= c <= 3/2`` (``1 - c`` is exact there), the tail of ``c`` below and
    of ``2 - c`` (exact) above; +-inf at 0 and 2."""
    b = ctx.b
    one, two = const(ctx, c, 1.0), const(ctx, c, 2.0)
    low = b.fcmp_ordered("<", c, const(ctx, c, 0.5))
    high = b.fcmp_ordered(">", c, const(ctx, c, 1.5))
    near = _erfinv_central(ctx, b.fsub(one, c))
    upper = b.fneg(_erfc_inverse_tail(ctx, b.fsub(two, c)))
    result = b.select(low, _erfc_inverse_tail(ctx, c), b.select(high, upper, near))
    result = b.select(b.fcmp_ordered("==", c, const(ctx, c, 0.0)), const(ctx, c, math.inf), result)
    return b.select(b.fcmp_ordered("==", c, two), const(ctx, c, -math.inf), result)


def _normcdf_double(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    minus_x = b.fneg(x)
    high = b.fmul(minus_x, const(ctx, x, INV_SQRT_2[0]))
    low = b.fadd(ctx.intrinsic("fma", [minus_x, const(ctx, x, INV_SQRT_2[0]), b.fneg(high)]),
                 b.fmul(minus_x, const(ctx, x, INV_SQRT_2[1])))
    low = b.select(b.fcmp_ordered("<", fabs(ctx, high), const(ctx, x, float("inf"))), low,
                   const(ctx, x, 0.0))
    slope = b.fmul(const(ctx, x, TWO_OVER_SQRT_PI), libm(ctx, "exp", b.fneg(b.fmul(high, high))))
    return b.fmul(const(ctx, x, 0.5), b.fsub(libm(ctx, "erfc", high), b.fmul(low, slope)))


def _normcdfinv_double(ctx: Any, p: ir.Value) -> ir.Value:
    b = ctx.b
    return b.fmul(const(ctx, p, -SQRT_2), _erfcinv_double(ctx, b.fadd(p, p)))


def _erfinv(ctx: Any, args: list[ir.Value]) -> ir.Value:
    (y,) = args
    return _erfinv_double(ctx, y) if lt.scalar_of(y.type) == lt.F64 else _erfinv_float(ctx, y)


def _unary(fn: Any) -> Any:
    return through_double(lambda ctx, args: fn(ctx, args[0]))


#: libdevice symbol -> lowering.
FUNCTIONS = {
    **both_types("erfinv", _erfinv),
    **both_types("erfcinv", _unary(_erfcinv_double)),
    **both_types("erfcx", _unary(_erfcx)),
    **both_types("normcdf", _unary(_normcdf_double)),
    **both_types("normcdfinv", _unary(_normcdfinv_double)),
}
