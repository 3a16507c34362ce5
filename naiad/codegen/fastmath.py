"""Vector implementations of the hot fp32 transcendental functions, in LLVM IR.

LLVM turns ``llvm.exp.v8f32`` into eight scalar ``expf`` calls on targets without a vector math
library, which makes softmax ten times slower than it should be; a scalar ``erff`` per lane
made a GELU layer norm (torch.compile's MLP) spend 90 % of its time in ``erf``.  These are
branch-free polynomial versions working on whole vectors, with the IEEE results for infinities
and NaN:

- ``exp``/``exp2``: Cody-Waite range reduction, a degree-6 polynomial, scaling by a power of
  two built from exponent bits; about 1 ulp.
- ``log``/``log2``: exponent and mantissa split from the bits (subnormals scaled first), the
  mantissa in [sqrt(1/2), sqrt(2)), ``log1p(f) = f - f^2/2 + f^3 Q(f)``; about 1 ulp.
- ``erf``: ``x P(x^2)`` below 1; ``1 - Q(x)`` up to 3.92, erfc a polynomial there (its
  absolute error is what counts, against erf's ulp near 1: no exp needed, 1.5x faster than
  ``1 - exp(-x^2) erfcx(x)`` was); 1 beyond, where erf rounds to 1; at most 2.4 ulp.
- ``tanh``: ``x + x^3 R(x^2)`` below 0.55, else ``1 - 2 / (exp(2|x|) + 1)``; about 2 ulp.

The polynomials are least-squares fits on Chebyshev nodes, made for Naiad (relative errors of
the fits: log 4e-9, erf 1.4e-9, tanh 4e-9; erfc's absolute error 1.5e-9), evaluated by Horner's
rule with fmas.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.mathlib.arith import polynomial

LOG2E = 1.4426950408889634
LN2_HI = 0.693359375
LN2_LO = -2.12194440e-4
# Polynomial for e^r - 1 - r on [-ln2/2, ln2/2] (Cephes' expf coefficients).
EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
            1.6666665459e-1, 5.0000001201e-1)
#: Where exp's inputs are clamped: just past where fp32 results overflow (88.72...) and round
#: to 0 (-103.97...), so that the scaling itself gives +inf (2**128) or 0 (2**-150 times less
#: than one), with no selects afterwards.
CLAMP_HIGH, CLAMP_LOW = 88.8, -104.0


def _pow2(ctx: Any, n: ir.Value) -> ir.Value:
    """2**n for integer vectors n in [-126, 127], from the exponent bits."""
    biased = ctx.b.add(n, ctx.const(lt.I32, 127))
    return ctx.b.bitcast(ctx.b.shl(biased, ctx.const(lt.I32, 23)), lt.vector(lt.F32, ctx.lanes))


def _exp_reduced(ctx: Any, r: ir.Value) -> ir.Value:
    """e**r for |r| <= ln2/2."""
    b = ctx.b
    poly = ctx.const(lt.F32, EXP_POLY[0])
    for c in EXP_POLY[1:]:
        poly = ctx.intrinsic("fma", [poly, r, ctx.const(lt.F32, c)])
    r2 = b.fmul(r, r)
    return b.fadd(ctx.intrinsic("fma", [poly, r2, r]), ctx.const(lt.F32, 1.0))


def _scale(ctx: Any, value: ir.Value, n_float: ir.Value) -> ir.Value:
    """value * 2**n for n in [-150, 128]: the target's one instruction where it has one
    (`TargetHooks.scale_by_powers_of_two`: x86 AVX-512's ``vscalefps``), else in two steps so
    each power of two is a normal float."""
    scaled = ctx.hooks.scale_by_powers_of_two(ctx, value, n_float)
    if scaled is not None:
        return scaled
    b = ctx.b
    n = b.fptosi(n_float, lt.vector(lt.I32, ctx.lanes))
    half = b.ashr(n, ctx.const(lt.I32, 1))
    rest = b.sub(n, half)
    return b.fmul(b.fmul(value, _pow2(ctx, half)), _pow2(ctx, rest))


def _clamped(ctx: Any, x: ir.Value, low: float, high: float) -> ir.Value:
    return ctx.intrinsic("minnum", [ctx.intrinsic("maxnum", [x, ctx.const(lt.F32, low)]),
                                    ctx.const(lt.F32, high)])


def _nan_kept(ctx: Any, x: ir.Value, result: ir.Value) -> ir.Value:
    """The clamp turned NaN into a number: NaN in, NaN out."""
    return ctx.b.select(ctx.b.fcmp_unordered("uno", x, x), x, result)


def exp_f32(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    clamped = _clamped(ctx, x, CLAMP_LOW, CLAMP_HIGH)
    n = ctx.intrinsic("roundeven", [b.fmul(clamped, ctx.const(lt.F32, LOG2E))])
    r = ctx.intrinsic("fma", [n, ctx.const(lt.F32, -LN2_HI), clamped])
    r = ctx.intrinsic("fma", [n, ctx.const(lt.F32, -LN2_LO), r])
    return _nan_kept(ctx, x, _scale(ctx, _exp_reduced(ctx, r), n))


def exp2_f32(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    clamped = _clamped(ctx, x, -150.0, 128.0)
    n = ctx.intrinsic("roundeven", [clamped])
    r = b.fmul(b.fsub(clamped, n), ctx.const(lt.F32, 0.6931471805599453))
    return _nan_kept(ctx, x, _scale(ctx, _exp_reduced(ctx, r), n))


def _f32(ctx: Any, value: float) -> ir.Value:
    return ctx.const(lt.F32, value)


def _i32(ctx: Any, value: int) -> ir.Value:
    return ctx.const(lt.I32, value)


#: ``Q`` of ``log1p(f) = f - f^2/2 + f^3 Q(f)`` on [sqrt(1/2) - 1, sqrt(2) - 1], highest power first.
LOG_Q = (0.07149755490818925, -0.11571199847026727, 0.11661509976652626, -0.12411050779562327,
         0.1424993668103301, -0.1666848023740883, 0.2000070747182826, -0.24999989048733448,
         0.33333331190923887)
SMALLEST_NORMAL = 2.0 ** -126


def log_f32(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    ints = lt.vector(lt.I32, ctx.lanes)
    subnormal = b.fcmp_ordered("<", x, _f32(ctx, SMALLEST_NORMAL))
    scaled = b.select(subnormal, b.fmul(x, _f32(ctx, 2.0 ** 23)), x)
    bits = b.bitcast(scaled, ints)
    exponent = b.sub(b.lshr(bits, _i32(ctx, 23)), _i32(ctx, 127))
    exponent = b.sub(exponent, b.select(subnormal, _i32(ctx, 23), _i32(ctx, 0)))
    mantissa = b.bitcast(b.or_(b.and_(bits, _i32(ctx, 0x7FFFFF)), _i32(ctx, 0x3F800000)),
                         lt.vector(lt.F32, ctx.lanes))            # in [1, 2)
    high = b.fcmp_ordered(">", mantissa, _f32(ctx, 1.4142135623730951))
    mantissa = b.select(high, b.fmul(mantissa, _f32(ctx, 0.5)), mantissa)
    exponent = b.add(exponent, b.zext(high, ints))
    f = b.fsub(mantissa, _f32(ctx, 1.0))
    f2 = b.fmul(f, f)
    near = ctx.intrinsic("fma", [f2, _f32(ctx, -0.5), f])
    series = ctx.intrinsic("fma", [b.fmul(f2, f), polynomial(ctx, f, LOG_Q), near])
    e = b.sitofp(exponent, lt.vector(lt.F32, ctx.lanes))
    result = ctx.intrinsic("fma", [e, _f32(ctx, LN2_HI), ctx.intrinsic("fma", [e, _f32(ctx, LN2_LO), series])])
    result = b.select(b.fcmp_ordered("==", x, _f32(ctx, float("inf"))), x, result)
    result = b.select(b.fcmp_ordered("==", x, _f32(ctx, 0.0)), _f32(ctx, float("-inf")), result)
    return b.select(b.fcmp_unordered("<", x, _f32(ctx, 0.0)), _f32(ctx, float("nan")), result)


def log2_f32(ctx: Any, x: ir.Value) -> ir.Value:
    return ctx.b.fmul(log_f32(ctx, x), _f32(ctx, LOG2E))


#: erf(x) / x as a polynomial in x^2 on [0, 1], highest power first.
ERF_SMALL = (7.882497111186573e-05, -0.0008018854993159047, 0.005189311942724459,
             -0.026854328796073818, 0.1128359746348723, -0.37612626903580193, 1.1283791658815026)
#: erfc(x) on [1, 3.92] as a polynomial in x - 2.46, highest power first (in float32 with fmas,
#: 1 - erfc is within 1.5 ulp of erf there).
ERFC_MID = (9.166920873494024e-06, -2.536314259174797e-05, -5.1896403555782926e-05,
            0.00030136697526330286, -0.00039067872821616867, -0.00046156969588128255,
            0.002963119898803419, -0.006798153856864589, 0.009904965234211098,
            -0.009832827862422948, 0.006535748661542785, -0.0026562088453043835,
            0.0005033268936091122)
ERF_ONE = 3.92        # erfc below half an ulp of 1 from here on


def erf_f32(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    a = ctx.intrinsic("fabs", [x])
    small = b.fmul(a, polynomial(ctx, b.fmul(a, a), ERF_SMALL))
    mid = b.fsub(_f32(ctx, 1.0), polynomial(ctx, b.fsub(a, _f32(ctx, 2.46)), ERFC_MID))
    magnitude = b.select(b.fcmp_ordered("<", a, _f32(ctx, 1.0)), small,
                         b.select(b.fcmp_ordered(">=", a, _f32(ctx, ERF_ONE)), _f32(ctx, 1.0), mid))
    return ctx.intrinsic("copysign", [magnitude, x])


#: (tanh(x) - x) / x^3 as a polynomial in x^2 on [0, 0.55], highest power first.
TANH_SMALL = (-0.006615752709778179, 0.021312743146371844, -0.05391006620704767,
              0.13333117614108164, -0.3333333204514974)


def tanh_f32(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    a = ctx.intrinsic("fabs", [x])
    square = b.fmul(a, a)
    small = ctx.intrinsic("fma", [b.fmul(a, square), polynomial(ctx, square, TANH_SMALL), a])
    grown = exp_f32(ctx, b.fmul(a, _f32(ctx, 2.0)))
    large = b.fsub(_f32(ctx, 1.0), b.fdiv(_f32(ctx, 2.0), b.fadd(grown, _f32(ctx, 1.0))))
    magnitude = b.select(b.fcmp_ordered("<", a, _f32(ctx, 0.55)), small, large)
    return ctx.intrinsic("copysign", [magnitude, x])      # tanh(-0) is -0


#: C name -> vector implementation, used for fp32 vectors.
VECTOR_F32 = {"expf": exp_f32, "exp2f": exp2_f32, "logf": log_f32, "log2f": log2_f32,
              "erff": erf_f32, "tanhf": tanh_f32}
