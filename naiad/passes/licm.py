"""Loop-invariant code motion: compute once, before the loop, what every iteration
recomputes identically.

An op in the body of an `scf.for` or `scf.while` moves in front of the loop when every value
it (or an op nested in it) reads is defined outside the loop, it is pure, and it is
speculatable (running it even when the loop runs zero times is harmless: a division is
hoisted only by a constant divisor that cannot trap).  Loads never move: memory may change
between iterations, and Triton's guarded load hoisting is a separate transformation.
Inner loops are processed first, so an expression invariant in a whole loop nest climbs
all the way out.  A loop carrying ``tt.disable_licm`` (``tl.range(..., disable_licm=True)``)
is left alone.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation, Region
from xdsl.passes import ModulePass
from xdsl.traits import IsTerminator

from naiad.passes.dce import used_values
from naiad.passes.effects import defined_outside, is_pure, is_speculatable

DISABLE_LICM = "tt.disable_licm"
LOOPS = (scf.ForOp, scf.WhileOp)


def licm_disabled(loop: Operation) -> bool:
    flag = loop.attributes.get(DISABLE_LICM)
    return flag is not None and not (isinstance(flag, IntegerAttr) and flag.value.data == 0)


def _is_invariant(op: Operation, loop: Operation) -> bool:
    return all(defined_outside(v, loop) for v in used_values(op))


def _hoistable(op: Operation, loop: Operation) -> bool:
    return (not op.has_trait(IsTerminator) and is_pure(op) and is_speculatable(op)
            and _is_invariant(op, loop))


def hoist_invariants(loop: Operation) -> bool:
    """Move the invariant ops of `loop`'s regions in front of it; True if any moved."""
    moved = False
    for region in loop.regions:
        moved |= _hoist_from(region, loop)
    return moved


def _hoist_from(region: Region, loop: Operation) -> bool:
    work = deque(op for block in region.blocks for op in block.ops)
    moved = False
    while work:
        op = work.popleft()
        if op.parent_region() is not region or not _hoistable(op, loop):
            continue
        op.detach()
        loop.parent_block().insert_op_before(op, loop)
        moved = True
        work.extend(use.operation for r in op.results for use in r.uses
                    if use.operation.parent_region() is region)
    return moved


def licm(module: Operation) -> bool:
    """Hoist loop invariants out of every loop of `module`, innermost loops first."""
    loops = [op for op in module.walk(region_first=True) if isinstance(op, LOOPS)]
    moved = False
    for loop in loops:
        if not licm_disabled(loop):
            moved |= hoist_invariants(loop)
    return moved


@dataclass(frozen=True)
class LoopInvariantCodeMotion(ModulePass):
    name = "licm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        licm(op)
