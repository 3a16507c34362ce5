"""Conversions between the fp8 formats (stored as ``i8``) and ``float``, in LLVM IR.

Every fp8 value is computed in fp32, so these two functions are all a target needs for fp8:
`TargetHooks` calls them, and a backend with conversion instructions may override the hooks.
Both are branch-free integer/float code that works the same on scalars and on vectors of any
lane count (no table gathers, which are slow on many CPUs and need memory on GPUs).

The formats, by their MLIR type and Triton's name:

====================  ===========  =====  ===========  ===============  ============  ===========
MLIR type             Triton       e-m    bias         largest finite   infinities    NaN byte
====================  ===========  =====  ===========  ===============  ============  ===========
Float8E4M3FN          fp8e4nv      4-3    7            448 (0x7E)       none          S.1111.111
Float8E5M2            fp8e5        5-2    15           57344 (0x7B)     S.11111.00    S.11111.xx
Float8E4M3FNUZ        fp8e4b8      4-3    8            240 (0x7F)       none          0x80 only
Float8E5M2FNUZ        fp8e5b16     5-2    16           57344 (0x7F)     none          0x80 only
Float8E4M3B11FNUZ     fp8e4b15     4-3    15 (!)       1.75 (0x7E)      none          S.1111.111
====================  ===========  =====  ===========  ===============  ============  ===========

The FNUZ formats have no negative zero: 0x80 is their only NaN.

fp8e4b15 follows Triton, not MLIR: Triton reuses MLIR's E4M3B11FNUZ type as a tag for its own
format, whose ``tl.float8e4b15.exponent_bias`` is 15, with fp8e4nv's encoding (NaN S.1111.111,
a negative zero, no infinities) as Triton's tests decode it, and its conversions saturate at
1.75 as Triton's do.  Triton's NVIDIA conversions for it are approximate (through fp16, ties
away from zero, "rtz" ignored, NaN -> 0x7E, and 0x7F read as 1.875); these are exact.

fp8e4nv and fp8e5 match Triton 3.6 on an H200 (sm_90) bit for bit: every byte decoded, and
rounding to nearest and (fp8e5) toward zero of ties, subnormals, overflow, infinities and NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import llvmlite.ir as ir
from xdsl.dialects.builtin import (Float8E4M3B11FNUZType, Float8E4M3FNType, Float8E4M3FNUZType,
                                   Float8E5M2FNUZType, Float8E5M2Type)

from naiad.codegen import llvm_types as lt


@dataclass(frozen=True)
class Format:
    """An fp8 format (the exponent takes the 7 - ``mantissa_bits`` bits under the sign)."""

    mantissa_bits: int
    bias: int
    max_code: int           # magnitude bits (sign cleared) of the largest finite value
    nan: int                # the byte every NaN converts to (0x80: FNUZ, no negative zero)
    inf: int | None = None  # magnitude bits of infinity, for formats that have one

    @property
    def negative_zero(self) -> bool:
        return self.nan != 0x80


FORMATS = {
    Float8E4M3FNType: Format(mantissa_bits=3, bias=7, max_code=0x7E, nan=0x7F),
    Float8E5M2Type: Format(mantissa_bits=2, bias=15, max_code=0x7B, nan=0x7F, inf=0x7C),
    Float8E4M3FNUZType: Format(mantissa_bits=3, bias=8, max_code=0x7F, nan=0x80),
    Float8E5M2FNUZType: Format(mantissa_bits=2, bias=16, max_code=0x7F, nan=0x80),
    Float8E4M3B11FNUZType: Format(mantissa_bits=3, bias=15, max_code=0x7E, nan=0x7F),
}

_F32_INF, _F32_NAN = 0x7F800000, 0x7FC00000


def _format(fp8_type: Any) -> Format:
    try:
        return FORMATS[type(fp8_type)]
    except KeyError:
        raise NotImplementedError(f"no conversion for the fp8 type {fp8_type}") from None


def fp8_to_f32(ctx: Any, bits: ir.Value, fp8_type: Any) -> ir.Value:
    """The exact fp32 value of fp8 ``bits`` (``i8`` lanes).

    A normal number moves its exponent and mantissa into fp32's fields and rebiases the
    exponent with an integer add; a subnormal (exponent field 0) is its mantissa times
    ``2**(1 - bias - mantissa_bits)``, computed exactly in fp32.  Then the specials: fp8e5's
    S.11111.00 is an infinity and its other S.11111.xx are NaNs; in fp8e4nv and fp8e4b15
    S.1111.111 is NaN; in the FNUZ formats 0x80 (the would-be negative zero) is NaN.
    """
    fmt, b = _format(fp8_type), ctx.b
    i32 = lt.vector(lt.I32, ctx.lanes)
    wide = b.zext(bits, i32)
    magnitude = b.and_(wide, ctx.const(lt.I32, 0x7F))
    sign = b.shl(b.and_(wide, ctx.const(lt.I32, 0x80)), ctx.const(lt.I32, 24))
    m = fmt.mantissa_bits
    normal = b.add(b.shl(magnitude, ctx.const(lt.I32, 23 - m)),
                   ctx.const(lt.I32, (127 - fmt.bias) << 23))
    subnormal = b.fmul(b.uitofp(magnitude, lt.vector(lt.F32, ctx.lanes)),
                       ctx.const(lt.F32, 2.0 ** (1 - fmt.bias - m)))
    is_subnormal = b.icmp_unsigned("<", magnitude, ctx.const(lt.I32, 1 << m))
    value = b.or_(b.select(is_subnormal, b.bitcast(subnormal, i32), normal), sign)
    if fmt.max_code < 0x7F:                 # codes above the largest finite one: inf or NaN
        special = ctx.const(lt.I32, _F32_NAN)
        if fmt.inf is not None:
            is_inf = b.icmp_unsigned("==", magnitude, ctx.const(lt.I32, fmt.inf))
            special = b.select(is_inf, b.or_(sign, ctx.const(lt.I32, _F32_INF)), special)
        value = b.select(b.icmp_unsigned(">", magnitude, ctx.const(lt.I32, fmt.max_code)),
                         special, value)
    if not fmt.negative_zero:
        value = b.select(b.icmp_unsigned("==", wide, ctx.const(lt.I32, 0x80)),
                         ctx.const(lt.I32, _F32_NAN), value)
    return b.bitcast(value, lt.vector(lt.F32, ctx.lanes))


def f32_to_fp8(ctx: Any, value: ir.Value, fp8_type: Any, rounding: str) -> ir.Value:
    """fp32 ``value`` rounded to the fp8 format, as ``i8`` lanes.

    ``rounding`` is "rtne" (to nearest, ties to even) or "rtz" (toward zero); subnormals are
    rounded exactly (the magnitude is scaled so the fp8 subnormal step is 1 and rounded to an
    integer, which is the code; a carry into the smallest normal code is right).  Normal
    numbers round by adding half an fp8 unit in the last place (less one, plus the kept
    lowest bit, for ties to even) to the fp32 bits and dropping the extra mantissa bits.

    Out of range, as Triton on NVIDIA (sm_90's ``cvt.rn.satfinite.{e4m3,e5m2}x2.f32``, and
    AMD's software conversions for the FNUZ formats): a finite value too large, or an infinity,
    becomes the largest finite value of its sign, in every format -- fp8e5 included.  Rounding
    toward zero, finite values saturate the same way (as IEEE rounding toward zero does), but
    fp8e5 keeps infinities (Triton converts through fp16 rounded toward zero and keeps the top
    byte).  NaN becomes the format's NaN byte (0x7F, or 0x80 for FNUZ).  The FNUZ formats have
    no negative zero, so a negative value that rounds to zero becomes +0.
    """
    fmt, b = _format(fp8_type), ctx.b
    i32 = lt.vector(lt.I32, ctx.lanes)
    m, shift = fmt.mantissa_bits, 23 - fmt.mantissa_bits
    bits = b.bitcast(value, i32)
    magnitude = b.and_(bits, ctx.const(lt.I32, 0x7FFFFFFF))
    if rounding == "rtne":
        kept_lsb = b.and_(b.lshr(magnitude, ctx.const(lt.I32, shift)), ctx.const(lt.I32, 1))
        rounded = b.add(magnitude, b.add(kept_lsb, ctx.const(lt.I32, (1 << (shift - 1)) - 1)))
    else:
        rounded = magnitude
    normal = b.sub(b.lshr(rounded, ctx.const(lt.I32, shift)),
                   ctx.const(lt.I32, (127 - fmt.bias) << m))
    scaled = b.fmul(b.bitcast(magnitude, lt.vector(lt.F32, ctx.lanes)),
                    ctx.const(lt.F32, 2.0 ** (fmt.bias + m - 1)))
    integral = ctx.intrinsic("roundeven" if rounding == "rtne" else "trunc", [scaled])
    subnormal = b.fptosi(integral, i32)     # poison outside the subnormal range: not selected
    smallest_normal = (127 + 1 - fmt.bias) << 23
    is_subnormal = b.icmp_unsigned("<", magnitude, ctx.const(lt.I32, smallest_normal))
    code = b.select(is_subnormal, subnormal, normal)
    code = ctx.intrinsic("umin", [code, ctx.const(lt.I32, fmt.max_code)])
    if rounding == "rtz" and fmt.inf is not None:
        is_inf = b.icmp_unsigned("==", magnitude, ctx.const(lt.I32, _F32_INF))
        code = b.select(is_inf, ctx.const(lt.I32, fmt.inf), code)
    code = b.trunc(code, lt.vector(lt.I8, ctx.lanes))
    sign = b.trunc(b.lshr(bits, ctx.const(lt.I32, 24)), lt.vector(lt.I8, ctx.lanes))
    sign = b.and_(sign, ctx.const(lt.I8, 0x80))
    if not fmt.negative_zero:
        sign = b.select(b.icmp_unsigned("==", code, ctx.const(lt.I8, 0)), ctx.const(lt.I8, 0), sign)
    result = b.or_(code, sign)
    return b.select(b.fcmp_unordered("uno", value, value), ctx.const(lt.I8, fmt.nan), result)
