"""Single-precision C functions for targets without a C math library (AMD GPUs without ROCm's
device library): ``erff``, ``tanhf`` and ``expm1f`` from LLVM's ``exp`` and ``log``, which every
GPU target lowers.  A few ulp from the correctly rounded result (tests/hip/test_math.py).

- ``expm1f``: Kahan's ``(u - 1) (x / log(u))`` with ``u = exp(x)``: the rounding of ``u`` cancels
  in the quotient, so small ``x`` keeps its relative precision (``x`` itself where ``u == 1``).
- ``tanhf``: ``e / (e + 2)`` with ``e = expm1(2x)``: no cancellation near 0; +-1 beyond 9.
- ``erff``: below 0.84375 its Taylor series to ``x**21`` (the terms fall below 1e-9 there); above,
  ``1 - erfc``, with ``erfc`` as Numerical Recipes' Chebyshev fit ``t exp(-x*x + P(t))``,
  ``t = 1 / (1 + x/2)`` (relative error under 1.2e-7); +-1 beyond 4.
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir

from naiad.codegen.mathlib.arith import const, copysign, fabs, libm, polynomial

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


FUNCTIONS = {"erff": _erf, "tanhf": _tanh, "expm1f": _expm1}
