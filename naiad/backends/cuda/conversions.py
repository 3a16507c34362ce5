"""Float conversions on NVIDIA's conversion instructions, where the GPU has them.

The shared lowering converts bf16 and fp8 with integer code that any target can run (about six
instructions an element for bf16, fifteen for fp8).  sm_80 has ``cvt.rn.bf16.f32`` and sm_89
the fp8 conversions, each one instruction; they round the way the shared code does (to nearest
even, fp8 saturating to the largest finite value, as ``.satfinite``), and they are what Triton
emits on those GPUs.  Each function returns None where the instruction does not apply, and the
hook then falls back to the shared code.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from xdsl.dialects.builtin import Float8E4M3FNType, Float8E5M2Type

from naiad.backends.cuda.ptx_asm import asm
from naiad.codegen import llvm_types as lt

#: The fp8 formats sm_89's conversions take, by their PTX name.
_FP8_NAMES = {Float8E4M3FNType: "e4m3", Float8E5M2Type: "e5m2"}


def f32_to_bf16(ctx: Any, arch: int, value: ir.Value) -> ir.Value | None:
    """bf16 bits (``i16``) of one fp32, rounded to nearest even: ``cvt.rn.bf16.f32`` (sm_80)."""
    if arch < 80 or ctx.lanes != 1:
        return None
    return asm(ctx.b, "cvt.rn.bf16.f32 $0, $1;", [lt.I16], [value], effects=False)


def f32_to_fp8(ctx: Any, arch: int, value: ir.Value, fp8_type: Any, rounding: str) -> ir.Value | None:
    """fp8 bits (``i8``) of one fp32, to nearest even and saturating: the low byte of
    ``cvt.rn.satfinite.<fmt>x2.f32`` of the value twice (sm_89)."""
    name = _FP8_NAMES.get(type(fp8_type))
    if arch < 89 or ctx.lanes != 1 or name is None or rounding != "rtne":
        return None
    pair = asm(ctx.b, f"cvt.rn.satfinite.{name}x2.f32 $0, $1, $1;", [lt.I16], [value], effects=False)
    return ctx.b.trunc(pair, lt.I8)


def fp8_to_f32(ctx: Any, arch: int, bits: ir.Value, fp8_type: Any) -> ir.Value | None:
    """The fp32 of fp8 ``bits`` (``i8``): ``cvt.rn.f16x2.<fmt>x2`` (exact) and the half of the
    low byte widened (sm_89)."""
    name = _FP8_NAMES.get(type(fp8_type))
    if arch < 89 or ctx.lanes != 1 or name is None:
        return None
    b = ctx.b
    pair = asm(b, f"cvt.rn.f16x2.{name}x2 $0, $1;", [lt.I32], [b.zext(bits, lt.I16)], effects=False)
    return b.fpext(b.bitcast(b.trunc(pair, lt.I16), lt.F16), lt.F32)


def float_to_int(ctx: Any, value: ir.Value, target: ir.Type, signed: bool) -> ir.Value | None:
    """An f32 (or f16, widened exactly) converted to a 32-bit integer toward zero, saturating, NaN -> 0: one
    ``cvt.rzi.<s|u>32.f32``, whose float-to-integer conversions clamp to the destination's range
    (PTX: ``.sat`` is implied) and give 0 for NaN (only from ``.f32`` to a 32-bit or narrower
    integer: from ``.f64`` or to 64 bits NaN gives ``1 << (width - 1)``, so those keep the
    shared code), as Triton's plain ``fptosi`` gives it.  LLVM's ``fptosi.sat`` adds two
    compares, a NaN test and three selects around the same instruction (a row quantizer: 288
    SASS instructions against Triton's 184, now 192)."""
    if ctx.lanes != 1 or value.type not in (lt.F16, lt.F32) or target != lt.I32:
        return None
    if value.type == lt.F16:                       # exact in fp32
        value = ctx.b.fpext(value, lt.F32)
    return asm(ctx.b, f"cvt.rzi.{'s' if signed else 'u'}32.f32 $0, $1;", [target], [value], effects=False)
