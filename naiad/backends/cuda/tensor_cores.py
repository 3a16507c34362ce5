"""``tt.dot`` on NVIDIA tensor cores: the cuda backend's own rule for dots with a ``ttg.mma``
layout (`accelerate_matmul`): version 3 on wgmma (`wgmma`), version 2 on mma.sync
(`mma_sync`), their operands brought into shared memory by `operand_staging`; dots without
one (or whose operands no tile takes) take the shared FMA rule.  The rule table `RULES` adds
the loads that feed those dots and the pipelined loads (`async_copies`), and the transposes
that only those dots read (free: `lower_trans`).
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import scf

from naiad.backends.cuda import async_copies, tma, wgmma, wgmma_groups
from naiad.backends.cuda.dot_operands import is_transpose, only_dots_read
from naiad.backends.cuda.mma_layouts import NvidiaMma
from naiad.backends.cuda.mma_sync import lower_mma_sync
from naiad.codegen.gpu import ops_control, ops_dot
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import RULES as SHARED_RULES, Dist, GPUKernel
from naiad.ir import tt
from naiad.ir.ttg import AsyncLoadOp, AsyncTensorMapLoadOp, TensorMapLoadOp, TensorMapStoreOp


def lower_dot(k: GPUKernel, op: Any) -> None:
    """A dot on the instruction its ``ttg.mma`` layout names; on FMA without one."""
    layout = k.layout_of(op.results[0])
    if isinstance(layout, NvidiaMma) and layout.version == 3 and wgmma.lower_wgmma(k, op, layout):
        return
    if isinstance(layout, NvidiaMma) and layout.version == 2 and lower_mma_sync(k, op, layout):
        return
    _fma(k, op)


def _fma(k: GPUKernel, op: Any) -> None:
    """The shared FMA rule, its operands in registers first."""
    for value in (op.a, op.b):
        async_copies.in_registers(k, value, k.layout_of(value))
    ops_dot.fma_dot(k, op)


def fma_staging(k: GPUKernel, op: Any) -> Any:
    """What the FMA rule stages of a dot without a tensor-core layout (for the operand rings
    of ``num_stages`` 3 or more, `naiad.codegen.gpu.operand_rings`); None for the others."""
    return None if isinstance(k.layout_of(op.results[0]), NvidiaMma) else ops_dot.fma_staging(k, op)


def lower_trans(k: GPUKernel, op: Any) -> None:
    """A 2-D transpose that only tensor-core dots read moves nothing: a staged tile is read
    with its dimensions swapped, registers are relabelled (`layouts.transposed`), and the dot
    stores them into its tile as they are.  Any other transpose is the shared rule's (through
    shared memory)."""
    result = op.results[0]
    held = k.env[op.src]
    if is_transpose(op) and only_dots_read(result):
        if isinstance(held, async_copies.Staged):
            k.env[result] = held.transposed()
            return
        if isinstance(held, Dist):
            layout = L.transposed(held.layout, held.shape)
            if layout is not None:
                k.env[result] = Dist(layout, held.shape[::-1], held.values)
                return
    if not isinstance(held, Dist):           # a staged tile or a deferred load: registers first
        async_copies.in_registers(k, op.src, k.layout_of(op.src))
    SHARED_RULES[tt.TransOp](k, op)


def lower_for(k: GPUKernel, op: Any) -> None:
    """The shared rule; then the loop's last copies are waited for, and so are the wgmma
    groups still running on its accumulators."""
    ops_control.lower_for(k, op)
    async_copies.drain(k, op)
    wgmma_groups.wait_in_flight(k, op)


#: The cuda backend's rule table: the shared rules, with tensor-core dots, the loads that feed
#: them, the pipelined loads, and the copies through tensor maps (TMA).
RULES = {**SHARED_RULES, tt.DotOp: lower_dot, tt.LoadOp: async_copies.lower_load,
         AsyncLoadOp: async_copies.lower_async_load, scf.ForOp: lower_for, tt.TransOp: lower_trans,
         TensorMapLoadOp: tma.lower_load, TensorMapStoreOp: tma.lower_store,
         AsyncTensorMapLoadOp: async_copies.lower_async_map_load}
