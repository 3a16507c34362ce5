"""Canonicalization patterns of `scf`: control flow whose outcome is known at compile time.

Constexpr branches and constant loop bounds are common after inlining and folding (``if
BLOCK > 64:``, ``for k in range(0, K, BLOCK_K)`` with a constexpr K): a branch on a constant
becomes the code of the branch taken, a loop that never runs becomes its initial values, and
a loop that runs once becomes its body.
"""

from __future__ import annotations

from xdsl.dialects import scf
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from naiad.passes.constants import splat_value
from naiad.passes.loops import clone_body, constant_trip_count
from naiad.passes.rewrite import replace_with


class IfConstantCondition(RewritePattern):
    """``scf.if true {A} else {B}`` -> ``A``, with the if's results the values A yields."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.IfOp, rewriter: PatternRewriter) -> None:
        condition = splat_value(op.cond)
        if condition is None:
            return
        region = op.true_region if condition else op.false_region
        if not region.blocks:
            rewriter.erase(op)
            return
        block = region.block
        yielded = list(block.last_op.operands)
        rewriter.erase(block.last_op)
        rewriter.inline_block(block, InsertPoint.before(op))
        replace_with(rewriter, op, *yielded)


class ForZeroTrips(RewritePattern):
    """An `scf.for` that never runs yields its initial values."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ForOp, rewriter: PatternRewriter) -> None:
        if constant_trip_count(op) == 0:
            replace_with(rewriter, op, *op.iter_args)


class ForSingleTrip(RewritePattern):
    """An `scf.for` that runs exactly once is its body, with the lower bound as the
    induction variable."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ForOp, rewriter: PatternRewriter) -> None:
        if constant_trip_count(op) == 1:
            yielded = clone_body(op, op.lb, op.iter_args, rewriter)
            replace_with(rewriter, op, *yielded)


SCF_PATTERNS = (IfConstantCondition(), ForZeroTrips(), ForSingleTrip())
