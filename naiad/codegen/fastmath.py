"""Vector implementations of the hot fp32 transcendental functions, in LLVM IR.

LLVM turns ``llvm.exp.v8f32`` into eight scalar ``expf`` calls on targets without a vector math
library, which makes softmax ten times slower than it should be.  These are branch-free
polynomial versions working on whole vectors (Cody-Waite range reduction, then a degree-6
minimax polynomial, then scaling by a power of two built from exponent bits), accurate to
about 1 ulp over the whole fp32 range, with the IEEE results for infinities and NaN.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt

LOG2E = 1.4426950408889634
LN2_HI = 0.693359375
LN2_LO = -2.12194440e-4
# Polynomial for e^r - 1 - r on [-ln2/2, ln2/2] (Cephes' expf coefficients).
EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
            1.6666665459e-1, 5.0000001201e-1)
OVERFLOW = 88.72283935546875      # above: +inf
UNDERFLOW = -103.97208404541016   # below: 0


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
    """value * 2**n for n in [-150, 128], in two steps so each power of two is a normal float."""
    b = ctx.b
    n = b.fptosi(n_float, lt.vector(lt.I32, ctx.lanes))
    half = b.ashr(n, ctx.const(lt.I32, 1))
    rest = b.sub(n, half)
    return b.fmul(b.fmul(value, _pow2(ctx, half)), _pow2(ctx, rest))


def _special_cases(ctx: Any, x: ir.Value, result: ir.Value) -> ir.Value:
    b = ctx.b
    result = b.select(b.fcmp_ordered(">", x, ctx.const(lt.F32, OVERFLOW)),
                      ctx.const(lt.F32, float("inf")), result)
    result = b.select(b.fcmp_ordered("<", x, ctx.const(lt.F32, UNDERFLOW)),
                      ctx.const(lt.F32, 0.0), result)
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


def exp_f32(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    clamped = ctx.intrinsic("minnum", [ctx.intrinsic("maxnum", [x, ctx.const(lt.F32, UNDERFLOW)]),
                                       ctx.const(lt.F32, OVERFLOW)])
    n = ctx.intrinsic("roundeven", [b.fmul(clamped, ctx.const(lt.F32, LOG2E))])
    r = ctx.intrinsic("fma", [n, ctx.const(lt.F32, -LN2_HI), clamped])
    r = ctx.intrinsic("fma", [n, ctx.const(lt.F32, -LN2_LO), r])
    return _special_cases(ctx, x, _scale(ctx, _exp_reduced(ctx, r), n))


def exp2_f32(ctx: Any, x: ir.Value) -> ir.Value:
    b = ctx.b
    low, high = UNDERFLOW * LOG2E, OVERFLOW * LOG2E
    clamped = ctx.intrinsic("minnum", [ctx.intrinsic("maxnum", [x, ctx.const(lt.F32, low)]),
                                       ctx.const(lt.F32, high)])
    n = ctx.intrinsic("roundeven", [clamped])
    r = b.fmul(b.fsub(clamped, n), ctx.const(lt.F32, 0.6931471805599453))
    result = _scale(ctx, _exp_reduced(ctx, r), n)
    result = b.select(b.fcmp_ordered(">", x, ctx.const(lt.F32, high)), ctx.const(lt.F32, float("inf")), result)
    result = b.select(b.fcmp_ordered("<", x, ctx.const(lt.F32, low)), ctx.const(lt.F32, 0.0), result)
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


#: C name -> vector implementation, used for fp32 vectors.
VECTOR_F32 = {"expf": exp_f32, "exp2f": exp2_f32}
