"""CPU specifics for the shared lowering rules: the process's C math library, vector exp,
debug-mode bounds checks."""

from __future__ import annotations

from typing import Any

from naiad.codegen import fastmath
from naiad.codegen.hooks import TargetHooks


class CPUHooks(TargetHooks):
    name = "cpu"

    def __init__(self, bounds_check: bool = False, compare_exchange_16: bool = False,
                 bf16_pairs: bool = False, vector_ldexp: bool = False):
        self.bounds_check = bounds_check
        #: Whether the target has a 16-byte compare-and-swap (x86 ``cmpxchg16b``): fp32
        #: atomic adds then go four elements at a time (`lowering.memory`).
        self.compare_exchange_16 = compare_exchange_16
        #: Whether the target multiplies pairs of bf16 into fp32 in one instruction (x86
        #: AVX-512 BF16 ``vdpbf16ps``): bf16 dots then run at twice fp32's rate
        #: (`lowering.matmul`).
        self.bf16_pairs = bf16_pairs
        self.vector_ldexp = vector_ldexp

    def call_math(self, ctx: Any, symbol: str, args: list, ret: Any) -> Any:
        """fp32 exp and exp2 on vectors use Naiad's polynomial (LLVM would call expf per lane)."""
        fast = fastmath.VECTOR_F32.get(symbol)
        if fast is not None and ctx.lanes > 1:
            return fast(ctx, args[0])
        return super().call_math(ctx, symbol, args, ret)

    def check_access(self, kernel: Any, op: Any, addresses: Any, mask: Any, lanes: int,
                     element: Any) -> Any:
        if not self.bounds_check:
            return mask
        from naiad.backends.cpu.lowering.debug import check_access

        return check_access(kernel, op, addresses, mask, lanes, element)
