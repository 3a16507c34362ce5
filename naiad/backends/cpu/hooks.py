"""CPU specifics for the shared lowering rules: the process's C math library, vector exp,
debug-mode bounds checks."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import fastmath, llvm_types as lt
from naiad.codegen.hooks import TargetHooks

#: Lanes of an fp32 vector -> the width of its ``vscalefps``.
_SCALEF_WIDTHS = {4: 128, 8: 256, 16: 512}


class CPUHooks(TargetHooks):
    name = "cpu"

    def __init__(self, bounds_check: bool = False, compare_exchange_16: bool = False,
                 bf16_pairs: bool = False, scalef: bool = False, int8_quads: bool = False,
                 amx_bf16: bool = False, amx_int8: bool = False):
        self.bounds_check = bounds_check
        #: Whether the target has a 16-byte compare-and-swap (x86 ``cmpxchg16b``): fp32
        #: atomic adds then go four elements at a time (`lowering.memory`).
        self.compare_exchange_16 = compare_exchange_16
        #: Whether the target multiplies pairs of bf16 into fp32 in one instruction (x86
        #: AVX-512 BF16 ``vdpbf16ps``): bf16 dots then run at twice fp32's rate
        #: (`lowering.matmul`).
        self.bf16_pairs = bf16_pairs
        #: Whether the target multiplies fours of int8 into int32 in one instruction (x86
        #: AVX-512 VNNI ``vpdpbusd``): int8 dots then go four k at a time.
        self.int8_quads = int8_quads
        #: Whether the target has AVX-512's ``vscalefps`` for 4, 8 and 16 lanes (AVX-512F and VL).
        self.scalef = scalef
        #: Whether bf16 (``tdpbf16ps``) and int8 (``tdpbssd``) dots may run on AMX tiles
        #: (`lowering.amx_matmul`): the processor has them and this process was granted them
        #: (`naiad.backends.cpu.amx`).
        self.amx_bf16 = amx_bf16
        self.amx_int8 = amx_int8

    def call_math(self, ctx: Any, symbol: str, args: list, ret: Any) -> Any:
        """fp32 exp and exp2 on vectors use Naiad's polynomial (LLVM would call expf per lane)."""
        fast = fastmath.VECTOR_F32.get(symbol)
        if fast is not None and ctx.lanes > 1:
            return fast(ctx, args[0])
        return super().call_math(ctx, symbol, args, ret)

    def scale_by_powers_of_two(self, ctx: Any, value: Any, exponent: Any) -> Any:
        """``vscalefps`` (the exponent taken as a float, so no conversion to integers): exp's
        scaling in one instruction instead of nine."""
        width = _SCALEF_WIDTHS.get(ctx.lanes) if self.scalef else None
        if width is None:
            return None
        mask = ir.IntType(max(8, ctx.lanes))
        extra = [ir.Constant(lt.I32, 4)] if width == 512 else []     # 4: the current rounding
        fn = lt.intrinsic(ctx.module, f"x86.avx512.mask.scalef.ps.{width}", [], value.type,
                          [value.type] * 3 + [mask] + [e.type for e in extra])
        return ctx.b.call(fn, [value, exponent, value, ir.Constant(mask, -1)] + extra)

    def check_access(self, kernel: Any, op: Any, addresses: Any, mask: Any, lanes: int,
                     element: Any) -> Any:
        if not self.bounds_check:
            return mask
        from naiad.backends.cpu.lowering.debug import check_access

        return check_access(kernel, op, addresses, mask, lanes, element)
