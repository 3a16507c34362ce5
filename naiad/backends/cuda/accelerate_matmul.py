"""Accelerate-matmul: which tensor-core instruction each ``tt.dot`` runs on (a TTGIR pass).

For every dot this picks an mma layout (`mma_layouts.NvidiaMma`) from the target, the number of
warps, the dot's shape and its operand types, and writes it on the op as ``ttg.mma``; the
lowering reads it from there (so a ``.ttgir`` override that edits it changes the code), and a
dot without it runs on FMA (`naiad.codegen.gpu.ops_dot`).

- **wgmma** (version 3, sm_90): fp16 (fp32 or fp16 accumulator), bf16 (fp32), fp32 as tf32
  (when the dot's precision is tf32), int8 (int32), fp8 e4m3 / e5m2 (fp32); M a multiple of
  64, the warps in warpgroups of 4 stacked along M first (Triton's choice), each warpgroup's
  columns one instruction of up to 256.
- **mma.sync** (version 2, sm_80 on), for the dots wgmma cannot take (M under 64, a warp count
  that is not a multiple of 4, or sm_8x): fp16 (fp32 or fp16 accumulator), bf16, tf32 and
  int8 (`MMA_SYNC`); fp8 operands are widened to fp16 first (``tt.fp_to_fp`` before the dot:
  sm_80 and sm_90 have no fp8 mma.sync).
- Everything else (fp64, fp32 in "ieee" precision, 3-D batched dots, shapes under one
  instruction) keeps the FMA path.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import (BFloat16Type, Float16Type, Float32Type, Float8E4M3FNType,
                                   Float8E5M2Type, IntegerType, StringAttr, TensorType)
from xdsl.rewriter import InsertPoint, Rewriter

from naiad.backends.cuda.mma_layouts import NvidiaMma
from naiad.ir import tt
from naiad.ir.types import element_type
from naiad.passes.rewrite import located

#: Operand element kind -> (instruction K, accumulator kinds wgmma accepts).
_WGMMA = {"f16": (16, ("f32", "f16")), "bf16": (16, ("f32",)), "tf32": (8, ("f32",)),
          "i8": (32, ("i32",)), "e4m3": (32, ("f32",)), "e5m2": (32, ("f32",))}
_FP8 = ("e4m3", "e5m2")
#: (operand kind, accumulator kind) -> (instruction K, the instruction's type suffix) of
#: ``mma.sync.aligned.m16n8kK`` (both operands of one kind).
MMA_SYNC = {("f16", "f32"): (16, "row.col.f32.f16.f16.f32"),
            ("bf16", "f32"): (16, "row.col.f32.bf16.bf16.f32"),
            ("f16", "f16"): (16, "row.col.f16.f16.f16.f16"),
            ("tf32", "f32"): (8, "row.col.f32.tf32.tf32.f32"),
            ("i8", "i32"): (32, "row.col.satfinite.s32.s8.s8.s32")}


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


def _wgmma_layout(kinds: tuple, shape: tuple[int, int, int], num_warps: int) -> NvidiaMma | None:
    a, b, c = kinds
    mixed_fp8 = a in _FP8 and b in _FP8
    if a not in _WGMMA or (a != b and not mixed_fp8) or c not in _WGMMA[a][1]:
        return None
    m, n, k = shape
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


def _mma_sync_layout(kinds: tuple, shape: tuple[int, int, int], num_warps: int) -> NvidiaMma | None:
    a, b, c = kinds
    if a in _FP8 and b in _FP8:
        a = b = "f16"                             # widened (`_widen_fp8`)
    if a != b or (a, c) not in MMA_SYNC:
        return None
    m, n, k = shape
    # M and N multiples of the 16x8 tile, or smaller (the tile's rows and columns then repeat)
    if (m % 16 and 16 % m) or (n % 8 and 8 % n) or k % MMA_SYNC[(a, c)][0]:
        return None
    wm = wn = 1
    while wm * wn < num_warps:                    # split the dimension with more tiles left
        if m // (16 * wm) >= n // (8 * wn) and m // (16 * wm) > 1:
            wm *= 2
        elif n // (8 * wn) > 1:
            wn *= 2
        else:
            break
    # more warps than 16x8 tiles: the rest repeat the tiles (the layout's warp bases wrap)
    return NvidiaMma(2, (wm, wn * (num_warps // (wm * wn))), (16, 8))


def layout_for(kinds: tuple, shape: tuple[int, ...], num_warps: int, arch: int) -> NvidiaMma | None:
    """The tensor-core layout of a dot of operand and accumulator ``kinds`` and ``shape``
    (M, N, K), or None for the FMA path (and for batched dots)."""
    if len(shape) != 3:
        return None
    if arch >= 90:
        layout = _wgmma_layout(kinds, shape, num_warps)
        if layout is not None:
            return layout
    return _mma_sync_layout(kinds, shape, num_warps) if arch >= 80 else None


def dot_shape(op: tt.DotOp) -> tuple[int, ...]:
    """(M, N, K) of a 2-D dot; () for a batched one."""
    a_shape, b_shape = op.a.type.get_shape(), op.b.type.get_shape()
    return (a_shape[0], b_shape[-1], a_shape[1]) if len(a_shape) == 2 else ()


def mma_layout(op: tt.DotOp, num_warps: int, arch: int) -> NvidiaMma | None:
    """The tensor-core layout of ``op``'s result, or None for the FMA path."""
    return layout_for(operand_kinds(op), dot_shape(op), num_warps, arch)


def accelerate_matmul(func: Any, num_warps: int, arch: int) -> None:
    """Write ``ttg.mma`` on every dot of ``func`` that runs on tensor cores (one already there,
    from an edited TTGIR, is kept)."""
    for op in list(func.walk()):
        if isinstance(op, tt.DotOp) and "ttg.mma" not in op.attributes:
            layout = mma_layout(op, num_warps, arch)
            if layout is None:
                continue
            if layout.version == 2 and operand_kinds(op)[0] in _FP8:
                _widen_fp8(op)
            op.attributes["ttg.mma"] = StringAttr(str(layout))


def _widen_fp8(op: tt.DotOp) -> None:
    """fp8 operands of an mma.sync dot become fp16 (exactly: fp16 holds every e4m3 and e5m2
    value)."""
    for index, operand in enumerate((op.a, op.b)):
        wide = TensorType(Float16Type(), operand.type.get_shape())
        widen = located(tt.FpToFpOp.build(operands=[operand], result_types=[wide]), op)
        Rewriter.insert_op(widen, InsertPoint.before(op))
        op.operands[index] = widen.results[0]
