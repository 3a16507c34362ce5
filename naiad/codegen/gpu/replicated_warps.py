"""Warps that only repeat other warps' work leave at the kernel's start.

A layout spreads a block over all of a program's warps; where the block is smaller than that
(a row of 256 bf16 in 4 warps: 8 elements a lane fill one warp), the other warps hold copies of
the first ones' elements and do the same loads, math and stores again.  Those copies cost issue
slots and memory requests: 16-bit softmax and layer norm over rows of 256 and 512 ran at
0.93-0.96x Triton (which spreads the row over every thread) and at 1.00-1.04x with the copies
gone (H100, docs/PERFORMANCE.md, session 29).

It applies where every tensor is 1-D and blocked, so that the warps holding distinct elements
are the first ones (`needed_warps`), and to no kernel with an op whose effect or cooperation
involves every thread: printing, assertions, inline assembly, atomics, explicit barriers,
calls, dots and the asynchronous copies.  Barriers then count only the remaining threads
(`GPUHooks.barrier_threads`), on backends whose barrier can (`GPUHooks.counts_barrier_threads`).
"""

from __future__ import annotations

from typing import Any, Mapping

from naiad.codegen.gpu import layouts as L
from naiad.ir import gpu, tt, ttg

#: Ops that need every thread of the program, or whose effects repeat with the warps.
_EVERY_THREAD = (tt.PrintOp, tt.AssertOp, tt.ElementwiseInlineAsmOp, tt.AtomicRMWOp, tt.AtomicCASOp,
                 tt.AtomicPollOp, tt.DescriptorReduceOp, tt.HistogramOp, tt.CallOp, tt.DotOp,
                 gpu.BarrierOp, ttg.AsyncLoadOp, ttg.TensorMapLoadOp, ttg.TensorMapStoreOp,
                 ttg.AsyncTensorMapLoadOp)


def needed_warps(func: Any, layouts: Mapping[Any, Any], num_warps: int) -> int:
    """How many of the program's first warps hold every distinct element of every tensor in
    ``func`` (``layouts``: value -> layout); ``num_warps`` where that cannot be said."""
    needed = 1
    for op in func.walk():
        if isinstance(op, _EVERY_THREAD):
            return num_warps
        values = [*op.results, *(arg for region in op.regions for block in region.blocks for arg in block.args)]
        for value in values:
            layout = layouts.get(value)
            if layout is None:
                continue
            shape = value.type.get_shape()
            if not isinstance(layout, L.Blocked) or len(shape) != 1:
                return num_warps
            needed = max(needed, L.distinct_threads(layout, shape, 0)[1])
    return needed
