"""Accelerate-matmul: which tensor-core instruction each ``tt.dot`` runs on (a TTGIR pass).

For every dot this picks an mma layout (`mma_layouts.NvidiaMma`) from the target, the number of
warps, the dot's shape and its operand types, and writes it on the op as ``ttg.mma``; the
lowering reads it from there (so a ``.ttgir`` override that edits it changes the code), and a
dot without it runs on FMA (`naiad.codegen.gpu.ops_dot`).

- **wgmma** (version 3, sm_90): fp16 and bf16 (fp32 accumulator), fp32 as tf32 (when the dot's
  precision is tf32), int8 (int32), fp8 e4m3 / e5m2 (fp32); M a multiple of 64, the warps in
  warpgroups of 4 stacked along M first (Triton's choice), each warpgroup's columns one
  instruction of up to 256.
- **mma.sync** (version 2, sm_80 on): fp16 and bf16 with an fp32 accumulator, for the dots
  wgmma cannot take (M under 64, a warp count that is not a multiple of 4, or sm_8x).
- Everything else (fp64, fp32 in "ieee" or "tf32x3" precision, mixed operand types, 3-D
  batched dots, shapes under one instruction) keeps the FMA path.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import (BFloat16Type, Float16Type, Float32Type, Float8E4M3FNType,
                                   Float8E5M2Type, IntegerType, StringAttr)

from naiad.backends.cuda.mma_layouts import NvidiaMma
from naiad.ir import tt
from naiad.ir.types import element_type

#: Operand element kind -> (instruction K, accumulator kinds wgmma accepts).
_WGMMA = {"f16": (16, ("f32",)), "bf16": (16, ("f32",)), "tf32": (8, ("f32",)),
          "i8": (32, ("i32",)), "e4m3": (32, ("f32",)), "e5m2": (32, ("f32",))}
_FP8 = ("e4m3", "e5m2")


def kind(t: Any) -> str | None:
    """The tensor-core name of an element type ("f16", "e4m3", ...), or None."""
    if isinstance(t, Float16Type):
        return "f16"
    if isinstance(t, BFloat16Type):
        return "bf16"
    if isinstance(t, Float32Type):
        return "f32"
    if isinstance(t, Float8E4M3FNType):
        return "e4m3"
    if isinstance(t, Float8E5M2Type):
        return "e5m2"
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    return None


def operand_kinds(op: tt.DotOp) -> tuple[str | None, str | None, str | None]:
    """(A, B, accumulator) kinds; fp32 operands of a tf32 dot are "tf32"."""
    a, b, c = (kind(element_type(v.type)) for v in (op.a, op.b, op.c))
    if a == b == "f32" and op.inputPrecision.data == tt.InputPrecision.TF32:
        a = b = "tf32"
    return a, b, c


def _wgmma_layout(op: tt.DotOp, num_warps: int) -> NvidiaMma | None:
    a, b, c = operand_kinds(op)
    mixed_fp8 = a in _FP8 and b in _FP8
    if a not in _WGMMA or (a != b and not mixed_fp8) or c not in _WGMMA[a][1]:
        return None
    m, k = op.a.type.get_shape()
    n = op.b.type.get_shape()[-1]
    k_instr = _WGMMA[a][0]
    if num_warps % 4 or m % 64 or k % k_instr:
        return None
    groups = num_warps // 4
    along_m = min(groups, m // 64)
    along_n = groups // along_m
    columns = n // along_n
    if columns < 8 or columns % 8:
        return None
    return NvidiaMma(3, (4 * along_m, along_n), (16, min(256, columns), k_instr))


def _mma_sync_layout(op: tt.DotOp, num_warps: int) -> NvidiaMma | None:
    a, b, c = operand_kinds(op)
    if a not in ("f16", "bf16") or a != b or c != "f32":
        return None
    m, k = op.a.type.get_shape()
    n = op.b.type.get_shape()[-1]
    if m % 16 or n % 8 or k % 16:
        return None
    wm = wn = 1
    while wm * wn < num_warps:                    # split the dimension with more tiles left
        if m // (16 * wm) >= n // (8 * wn) and m // (16 * wm) > 1:
            wm *= 2
        elif n // (8 * wn) > 1:
            wn *= 2
        else:
            break
    if wm * wn < num_warps:                       # warps would only repeat the work
        return None
    return NvidiaMma(2, (wm, wn), (16, 8))


def mma_layout(op: tt.DotOp, num_warps: int, arch: int) -> NvidiaMma | None:
    """The tensor-core layout of ``op``'s result, or None for the FMA path."""
    if len(op.a.type.get_shape()) != 2:
        return None
    if arch >= 90:
        layout = _wgmma_layout(op, num_warps)
        if layout is not None:
            return layout
    return _mma_sync_layout(op, num_warps) if arch >= 80 else None


def accelerate_matmul(func: Any, num_warps: int, arch: int) -> None:
    """Write ``ttg.mma`` on every dot of ``func`` that runs on tensor cores (one already there,
    from an edited TTGIR, is kept)."""
    for op in func.walk():
        if isinstance(op, tt.DotOp) and "ttg.mma" not in op.attributes:
            layout = mma_layout(op, num_warps, arch)
            if layout is not None:
                op.attributes["ttg.mma"] = StringAttr(str(layout))
