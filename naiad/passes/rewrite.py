"""Running rewrite patterns greedily, as MLIR's pattern driver does.

`apply_patterns` is MLIR's greedy driver in xDSL terms: walk the module, apply the first
pattern that matches each op, and walk again until nothing changes.  xDSL's applier would
also erase every op it deems dead using its own trait-based rules, which would delete unused
volatile loads; that is switched off here and dead code goes through `effects` instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)


def apply_patterns(module: Operation, patterns: Iterable[RewritePattern]) -> bool:
    """Apply `patterns` everywhere in `module` until none matches; True if anything changed."""
    applier = GreedyRewritePatternApplier(list(patterns), dce_enabled=False)
    walker = PatternRewriteWalker(applier, apply_recursively=True)
    changed = False
    for region in module.regions:
        changed |= walker.rewrite_region(region)
    return changed


def replace_with(rewriter: PatternRewriter, op: Operation, *values: SSAValue) -> None:
    """Replace the results of `op` by existing values and erase it."""
    rewriter.replace(op, [], list(values))


def located(new_op: Operation, like: Operation) -> Operation:
    """`new_op` with the source location of the op it replaces (or derives from)."""
    new_op.location = like.location
    return new_op
