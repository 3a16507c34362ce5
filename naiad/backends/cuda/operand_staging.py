"""Tensor-core operands into their shared-memory tiles, for wgmma and mma.sync alike.

An operand of a tensor-core dot is held in one of three ways (`async_copies.operand`): a
`Staged` tile in a ring slot (the pipeliner copied it there ahead), a `DeferredLoad` (a load
left for the dot to copy straight from global memory) or a `Dist` in registers.  The
staged ones already have their tile; the others get one in the kernel's scratch shared memory,
are copied or stored into it, and every thread waits for the copies before the dot reads.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.backends.cuda import async_copies
from naiad.backends.cuda.async_copies import DeferredLoad, Staged
from naiad.backends.cuda.shared_tiles import copy_global, store_registers
from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import GPUKernel
from naiad.backends.cuda.ptx_asm import asm


def _const(value: int) -> ir.Constant:
    return ir.Constant(lt.I32, value)


def _place(k: GPUKernel, operand: Any, tile: Any, base: ir.Value) -> bool:
    """Put an operand into its tile at ``base`` (a staged one is there already).  True when it
    was stored from registers (the async proxy must then be fenced before wgmma reads it)."""
    if isinstance(operand, DeferredLoad):
        held = operand.op
        pointers = k.tensor(held.ptr, operand.layout).values
        masks = k.tensor(held.mask, operand.layout).values if held.mask is not None else None
        copy_global(k, pointers, masks, operand.layout, operand.shape, operand.vector, tile, base)
        return False
    if isinstance(operand, Staged):
        return False
    store_registers(k, operand, tile, base)
    return True


def _spread(operand: Any) -> tuple[L.Layout, tuple[int, int]]:
    """The layout and shape that say along which dimension an operand's elements run."""
    return operand.layout, operand.shape


def operand_tiles(k: GPUKernel, op: Any, operands: list[Any], make: Any) -> tuple[list[Any], list[ir.Value]] | None:
    """The tile and base of each operand: a staged operand's are its ring's and its slot;
    the others get tiles (``make(index, layout, shape)``) in the scratch; None when one
    cannot have a tile."""
    tiles: list[Any] = [None, None]
    bases: list[Any] = [None, None]
    scratch = []
    for i, operand in enumerate(operands):
        if operand is None:
            continue
        if isinstance(operand, Staged):
            # read as this operand: one tile may serve a dot as A and another as B
            tiles[i], bases[i] = operand.tile.read_as(i), operand.offset
            continue
        tiles[i] = make(i, *_spread(operand))
        if tiles[i] is None:
            return None
        scratch.append(i)
    if scratch:
        offsets = k.shared_regions([tiles[i].size_bytes for i in scratch], align=1024)
        for i, offset in zip(scratch, offsets):
            bases[i] = _const(k.scratch_start + offset)
    return tiles, bases


def stage_operands(k: GPUKernel, op: Any, operands: list[Any], tiles: list[Any], bases: list[ir.Value],
           fence: bool, waits_at_once: bool = True) -> None:
    """Bring the operands into their tiles and make them visible to every thread (and, for
    wgmma, to the async proxy when stored from registers).  Staged tiles that an earlier dot
    of the same block already waited for and made visible need neither again (tutorial 06's
    backward reads each of its two tiles twice an iteration: two of its four barriers) -- for
    a dot that waits for its own reads at once (``waits_at_once``): a group left running
    relies on its barrier to keep the next copies out of its tiles until every warpgroup is
    past the wait before it."""
    b = k.b
    present = [o for o in operands if o is not None]
    visible = k.state.setdefault(_VISIBLE, {}).setdefault(id(b.block), (b.block, []))[1]
    if waits_at_once and all(isinstance(o, Staged) and any(o.offset is v for v in visible) for o in present):
        return
    if any(not isinstance(o, Staged) for o in present):
        k.hooks.barrier(b)                     # the previous user of the scratch is done
    stored = False
    for operand, tile, base in zip(operands, tiles, bases):
        if operand is not None:
            stored = _place(k, operand, tile, base) or stored
    pending = op.attributes["ttg.pipeline_wait"].value.data if "ttg.pipeline_wait" in op.attributes else 0
    async_copies.wait(k, [o for o in operands if o is not None], pending)
    if stored and fence:
        asm(b, "fence.proxy.async.shared::cta;", [], [])
    k.hooks.barrier(b)
    visible.extend(o.offset for o in present if isinstance(o, Staged))


#: k.state key: per LLVM block (by id, with the block kept alive beside it), the slot offsets of
#: the staged tiles that a dot there has waited for and made visible to every thread.
_VISIBLE = "visible staged tiles"
