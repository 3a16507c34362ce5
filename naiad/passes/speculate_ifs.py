"""Branches that only compute tensors become selects: both sides run, the condition picks.

Inductor's Welford reductions start each loop with ``if roffset == 0: (first values) else:
(the update)``, an ``scf.if`` yielding whole blocks.  A backend that holds blocks in memory
(the CPU's) must write each branch's blocks to buffers and copy them out, several passes over
the block a trip, while the loop around it could otherwise be one fused pass of vector code.
When both branches hold nothing but pure element-wise and shape ops (no memory access, no
integer division, which may trap), computing both and selecting is the same result, so the
branches are moved in front of the ``scf.if`` and each of its results becomes an
``arith.select`` on the condition.  Large branches are left alone (running both costs more).
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import math, scf
from xdsl.dialects.builtin import TensorType
from xdsl.rewriter import InsertPoint, Rewriter

from naiad.ir import arith, tt
from naiad.passes.rewrite import located

#: Ops that compute a value from their operands alone, never trap, and touch no memory.
_PURE: tuple[type, ...] = (
    arith.ConstantOp, arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.NegfOp,
    arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.AndIOp, arith.OrIOp, arith.XOrIOp,
    arith.CmpfOp, arith.CmpiOp, arith.SelectOp, arith.MaxnumfOp, arith.MinnumfOp,
    arith.MaximumfOp, arith.MinimumfOp, arith.MaxSIOp, arith.MinSIOp, arith.MaxUIOp,
    arith.MinUIOp, arith.ExtFOp, arith.TruncFOp, arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp,
    arith.SIToFPOp, arith.UIToFPOp, arith.FPToSIOp, arith.FPToUIOp, arith.BitcastOp,
    tt.SplatOp, tt.BroadcastOp, tt.ExpandDimsOp, tt.MakeRangeOp, tt.FpToFpOp, tt.BitcastOp,
    tt.PreciseDivFOp, tt.PreciseSqrtOp, tt.ClampFOp, math.AbsFOp, math.AbsIOp, math.FmaOp,
    math.FloorOp, math.CeilOp, math.SqrtOp, math.RsqrtOp,
)
#: The most ops both branches together may hold: above it, running both costs more than
#: the branch.
MAX_OPS = 48


def speculate_ifs(module: Any) -> bool:
    """Turn every small pure ``scf.if`` that yields a tensor into selects; whether any was."""
    changed = False
    for op in reversed(list(module.walk())):        # inner branches first
        if isinstance(op, scf.IfOp) and _speculatable(op):
            _flatten(op)
            changed = True
    return changed


def _speculatable(op: scf.IfOp) -> bool:
    if not any(isinstance(r.type, TensorType) for r in op.results) or not op.false_region.blocks:
        return False
    body = [o for region in (op.true_region, op.false_region) for o in region.block.ops
            if not isinstance(o, scf.YieldOp)]
    return len(body) <= MAX_OPS and all(isinstance(o, _PURE) for o in body)


def _flatten(op: scf.IfOp) -> None:
    chosen = []
    for region in (op.true_region, op.false_region):
        block = region.block
        chosen.append(list(block.last_op.operands))
        Rewriter.erase_op(block.last_op)
        Rewriter.inline_block(block, InsertPoint.before(op))
    for result, on_true, on_false in zip(op.results, *chosen):
        value = on_true
        if on_true is not on_false:
            select = located(arith.SelectOp(op.cond, on_true, on_false), op)
            Rewriter.insert_op(select, InsertPoint.before(op))
            value = select.results[0]
        result.replace_all_uses_with(value)
    Rewriter.erase_op(op)
