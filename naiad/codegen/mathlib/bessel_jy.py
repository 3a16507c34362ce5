"""The Bessel functions of the first and second kinds of orders 0 and 1 (``j0``, ``j1``, ``y0``,
``y1``) for targets without a C math library (AMD GPUs without ROCm's device library), in
``double`` (``float``: computed in double and rounded once).

- Below 8: Chebyshev series in ``u = x*x/32 - 1`` of J0, J1/x and of the regular parts of Y0 and
  Y1 (``Y0 - (2/pi) log(x/2) J0``, ``(Y1 - (2/pi)(log(x/2) J1 - 1/x)) / x``), the logarithms
  added back.
- From 8 on: Hankel's form ``J_n = sqrt(2/(pi x)) (P_n cos c - Q_n sin c)``, ``Y_n = sqrt(2/(pi
  x)) (P_n sin c + Q_n cos c)``, ``c = x - (2n + 1) pi/4``, with ``P_n`` and ``Q_n / t`` as
  Chebyshev series in ``2 t*t - 1``, ``t = 8/x``; ``cos c`` and ``sin c`` from ``sin x`` and
  ``cos x`` (their reduction by pi/2 is exact for every argument).

The series come from ``tools/fit_bessel.py`` (mpmath at 200 bits).  Like the C library's, these
are accurate in absolute terms, within a few units of 1e-16 of the functions' size; next to
their zeros the relative error grows (tests/hip/test_composed_math.py).
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir

from naiad.codegen.mathlib.arith import clenshaw, const, fabs, is_inf, libm, through_double

_J0_SMALL = (
    0.15772797147489012, -0.008723442352852221, 0.2651786132033368,
    -0.37009499387264977, 0.15806710233209725, -0.034893769411408884,
    0.004819180069467605, -0.00046062616620627504, 3.246032882100508e-05,
    -1.7619469077621507e-06, 7.608163592418782e-08, -2.679253530557673e-09,
    7.848696314479465e-11, -1.9438346867370164e-12, 4.125320595634374e-14,
    -7.588508125447546e-16, 1.2218515873961411e-17,
)
_J1_SMALL = (
    0.08104484632565812, -0.1489751450676521, 0.1609992623572097,
    -0.08268049176681791, 0.022213639654966037, -0.003646940600769276,
    0.0004050337728354822, -3.255554866857259e-05, 1.9858774049915165e-06,
    -9.521984756750436e-08, 3.687133759097148e-09, -1.178026622695885e-10,
    3.160154580348003e-12, -7.221755239651773e-14, 1.4232144003513942e-15,
    -2.4441972916190464e-17, 3.6912682997929334e-19,
)
_R0_SMALL = (
    0.03645469809116044, -0.2783237094075825, 0.2960499990207148,
    0.09825508408187864, -0.10755155280627783, 0.031799074084414514,
    -0.005161397105810715, 0.0005498525320039012, -4.1996983149420134e-05,
    2.4290361107923793e-06, -1.1049969793472957e-07, 4.06651736597911e-09,
    -1.2374148898289854e-10, 3.1685725528945945e-12, -6.926956032431002e-14,
    1.3086308625876684e-15, -2.1586201986914482e-17, 3.136863182479938e-19,
)
_R1_SMALL = (
    0.038300769852423776, -0.08182561412732826, -0.0248677076121964,
    0.047967452752746984, -0.01852588451089802, 0.003680607687823511,
    -0.0004627254060293369, 4.06940026958087e-05, -2.6617695125295625e-06,
    1.350602691325434e-07, -5.483524110336276e-09, 1.8245086841229007e-10,
    -5.070666636591129e-12, 1.1956162517587948e-13, -2.423162442712473e-15,
    4.268126513072962e-17, -6.596060978723042e-19,
)
_P0 = (
    0.9994603493475187, -0.0005365220468132117, 3.0751847875194745e-06,
    -5.1705945376060975e-08, 1.6306464635151382e-09, -7.86409137723707e-11,
    5.168262387349193e-12, -4.3045788699253914e-13, 4.3265957431549404e-14,
    -5.069034095935236e-15, 6.748072215733873e-16, -1.0011513723467786e-16,
    1.6305919233744186e-17, -2.880866169482871e-18,
)
_Q0 = (
    -0.015555854605337009, 6.838519942611649e-05, -7.414498411060647e-07,
    1.7972457247968992e-08, -7.27191593686632e-10, 4.2201219046687385e-11,
    -3.206747420996635e-12, 3.006145125351706e-13, -3.336328185322427e-14,
    4.255225040245461e-15, -6.09993013164005e-16, 9.662128970303257e-17,
    -1.6686065214378146e-17, 3.1082440486738143e-18, -6.191115787358145e-19,
    1.3091448717220122e-19, -2.9211627152642775e-20,
)
_P1 = (
    1.0009030408600137, 0.0008989898330859408, -3.987284300488908e-06,
    6.177633960644299e-08, -1.8718907491063067e-09, 8.816898659582339e-11,
    -5.704863640395645e-12, 4.699195515230542e-13, -4.6842237839904895e-14,
    5.452674896044717e-15, -7.221180842274018e-16, 1.0667689114335412e-16,
    -1.7312313216116335e-17, 3.0492991197665872e-18,
)
_Q1 = (
    0.04677778706953532, -9.62772354915708e-05, 9.138615257955454e-07,
    -2.0959781384083424e-08, 8.229193327650554e-10, -4.686363688176945e-11,
    3.5152187949686082e-12, -3.2643156743279e-13, 3.5967765829165294e-14,
    -4.5612523950772974e-15, 6.508282957783384e-16, -1.0269147531823243e-16,
    1.767635548776479e-17, -3.2834519872981614e-18, 6.524081149589261e-19,
    -1.3765771484849487e-19,
)


def _series(ctx: Any, u: ir.Value, table: tuple[float, ...]) -> ir.Value:
    return clenshaw(ctx, u, [const(ctx, u, c) for c in table])


def _small_u(ctx: Any, ax: ir.Value) -> ir.Value:
    """``x*x/32 - 1`` for ``x`` clamped to [0, 8]."""
    x = ctx.intrinsic("minnum", [ax, const(ctx, ax, 8.0)])
    return ctx.b.fsub(ctx.b.fmul(ctx.b.fmul(x, x), const(ctx, ax, 1 / 32)), const(ctx, ax, 1.0))


def _hankel(ctx: Any, ax: ir.Value, p_table: tuple, q_table: tuple, order: int) -> tuple[ir.Value, ...]:
    """``(sqrt(2/(pi x)) P, sqrt(2/(pi x)) Q, cos c, sin c)`` for ``x`` clamped to 8 or more."""
    b = ctx.b
    x = ctx.intrinsic("maxnum", [ax, const(ctx, ax, 8.0)])
    t = b.fdiv(const(ctx, ax, 8.0), x)
    u = b.fsub(b.fmul(b.fmul(t, t), const(ctx, ax, 2.0)), const(ctx, ax, 1.0))
    scale = ctx.intrinsic("sqrt", [b.fdiv(const(ctx, ax, 2 / math.pi), x)])
    p = b.fmul(scale, _series(ctx, u, p_table))
    q = b.fmul(scale, b.fmul(t, _series(ctx, u, q_table)))
    cos, sin = libm(ctx, "cos", x), libm(ctx, "sin", x)
    half = const(ctx, ax, math.sqrt(0.5))
    if order == 0:                       # c = x - pi/4
        cos_c, sin_c = b.fadd(cos, sin), b.fsub(sin, cos)
    else:                                # c = x - 3 pi/4
        cos_c, sin_c = b.fsub(sin, cos), b.fneg(b.fadd(sin, cos))
    return p, q, b.fmul(cos_c, half), b.fmul(sin_c, half)


def _first_kind(ctx: Any, ax: ir.Value, order: int) -> ir.Value:
    """J_order(|x|)."""
    b = ctx.b
    u = _small_u(ctx, ax)
    small = _series(ctx, u, _J0_SMALL) if order == 0 else \
        b.fmul(ctx.intrinsic("minnum", [ax, const(ctx, ax, 8.0)]), _series(ctx, u, _J1_SMALL))
    p, q, cos_c, sin_c = _hankel(ctx, ax, *((_P0, _Q0) if order == 0 else (_P1, _Q1)), order)
    large = b.fsub(b.fmul(p, cos_c), b.fmul(q, sin_c))
    value = b.select(b.fcmp_ordered("<", ax, const(ctx, ax, 8.0)), small, large)
    return b.select(is_inf(ctx, ax), const(ctx, ax, 0.0), value)


def _j0(ctx: Any, args: list[ir.Value]) -> ir.Value:
    x = args[0]
    value = _first_kind(ctx, fabs(ctx, x), 0)
    return ctx.b.select(ctx.b.fcmp_unordered("uno", x, x), x, value)


def _j1(ctx: Any, args: list[ir.Value]) -> ir.Value:
    b = ctx.b
    x = args[0]
    value = _first_kind(ctx, fabs(ctx, x), 1)
    value = b.select(b.fcmp_ordered("<", x, const(ctx, x, 0.0)), b.fneg(value), value)    # odd
    return b.select(b.fcmp_unordered("uno", x, x), x, value)


def _second_kind(ctx: Any, x: ir.Value, order: int) -> ir.Value:
    """Y_order(x): -inf at 0, NaN below 0, 0 at +inf."""
    b = ctx.b
    positive = b.select(b.fcmp_ordered(">", x, const(ctx, x, 0.0)), x, const(ctx, x, 1.0))
    u = _small_u(ctx, positive)
    log = b.fmul(const(ctx, x, 2 / math.pi), libm(ctx, "log", b.fmul(positive, const(ctx, x, 0.5))))
    if order == 0:
        small = b.fadd(_series(ctx, u, _R0_SMALL), b.fmul(log, _first_kind(ctx, positive, 0)))
    else:
        singular = b.fsub(b.fmul(log, _first_kind(ctx, positive, 1)),
                          b.fdiv(const(ctx, x, 2 / math.pi), positive))
        small = b.fadd(b.fmul(positive, _series(ctx, u, _R1_SMALL)), singular)
    p, q, cos_c, sin_c = _hankel(ctx, positive, *((_P0, _Q0) if order == 0 else (_P1, _Q1)), order)
    large = b.fadd(b.fmul(p, sin_c), b.fmul(q, cos_c))
    value = b.select(b.fcmp_ordered("<", x, const(ctx, x, 8.0)), small, large)
    value = b.select(b.fcmp_ordered("==", x, const(ctx, x, math.inf)), const(ctx, x, 0.0), value)
    value = b.select(b.fcmp_ordered("==", x, const(ctx, x, 0.0)), const(ctx, x, -math.inf), value)
    return b.select(b.fcmp_unordered("<", x, const(ctx, x, 0.0)), const(ctx, x, math.nan), value)


def _y0(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return _second_kind(ctx, args[0], 0)


def _y1(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return _second_kind(ctx, args[0], 1)


#: C symbol -> its lowering.
FUNCTIONS = {name + suffix: through_double(fn) for name, fn in
             (("j0", _j0), ("j1", _j1), ("y0", _y0), ("y1", _y1)) for suffix in ("", "f")}
