"""Dead code elimination: drop what no one needs.

The code generator emits values freely and relies on this pass (and canonicalize, which
shares `EraseDeadOp`) to remove what is unused.  An op goes when its results are unused and
`effects` says it at most reads memory, so stores, atomics, prints, asserts, assumes,
volatile loads and calls stay.  Loops lose the loop-carried values that feed only
themselves: an `scf.for` iteration argument whose result is unused and which no needed
computation in the body reads, and an `scf.while` result that neither the code after the
loop nor the loop's "after" region uses.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from naiad.passes.effects import defined_outside, is_removable_when_unused, is_unused
from naiad.passes.rewrite import apply_patterns


class EraseDeadOp(RewritePattern):
    """An op whose results nobody uses and that at most reads memory."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.parent is not None and is_unused(op) and is_removable_when_unused(op):
            rewriter.erase(op)


def used_values(op: Operation) -> Iterator[SSAValue]:
    """The values `op` reads: its operands and those its nested ops take from outside."""
    yield from op.operands
    for nested in op.walk():
        if nested is not op:
            yield from (v for v in nested.operands if defined_outside(v, op))


def _live_iter_args(loop: scf.ForOp) -> set[int]:
    """Positions of the iteration arguments something needs: the loop's users, an op in
    the body with effects, or (through the yield) another needed iteration argument."""
    body = loop.body.block
    yielded = body.last_op.operands
    live = {i for i, result in enumerate(loop.res) if result.uses}
    work = [yielded[i] for i in live]
    for op in body.ops:
        if op is not body.last_op and not is_removable_when_unused(op):
            work.extend(used_values(op))
    seen: set[SSAValue] = set()
    while work:
        value = work.pop()
        if value in seen:
            continue
        seen.add(value)
        owner = value.owner
        if isinstance(owner, Operation) and loop.is_ancestor(owner):
            work.extend(used_values(owner))
        elif owner is body and value.index > 0 and value.index - 1 not in live:
            live.add(value.index - 1)
            work.append(yielded[value.index - 1])
    return live


def _erase_dead_ops(block: Block, rewriter: PatternRewriter) -> None:
    for op in reversed(list(block.ops)):
        if is_unused(op) and is_removable_when_unused(op):
            rewriter.erase(op)


class PruneForIterArgs(RewritePattern):
    """Drops `scf.for` iteration arguments that only feed themselves."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, loop: scf.ForOp, rewriter: PatternRewriter) -> None:
        live = _live_iter_args(loop)
        if len(live) == len(loop.res):
            return
        keep = sorted(live)
        body = loop.body.block
        rewriter.replace(body.last_op, scf.YieldOp(*(body.last_op.operands[i] for i in keep)))
        _erase_dead_ops(body, rewriter)
        for i in reversed(range(len(loop.res))):
            if i not in live:
                body.erase_arg(body.args[i + 1])
        new_loop = scf.ForOp(loop.lb, loop.ub, loop.step, [loop.iter_args[i] for i in keep],
                             rewriter.move_region_contents_to_new_regions(loop.body))
        new_loop.attributes |= loop.attributes
        new_loop.location = loop.location
        results = dict(zip(keep, new_loop.res))
        rewriter.replace(loop, new_loop, [results.get(i) for i in range(len(loop.res))])


class PruneWhileResults(RewritePattern):
    """Drops values an `scf.while` forwards from its condition that neither its "after"
    region nor the code after the loop reads."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, loop: scf.WhileOp, rewriter: PatternRewriter) -> None:
        after = loop.after_region.block
        dead = [i for i, r in enumerate(loop.res) if not r.uses and not after.args[i].uses]
        if not dead:
            return
        keep = [i for i in range(len(loop.res)) if i not in dead]
        condition = loop.before_region.block.last_op
        rewriter.replace(condition, scf.ConditionOp(condition.condition,
                                                    *(condition.args[i] for i in keep)))
        for i in reversed(dead):
            after.erase_arg(after.args[i])
        new_loop = scf.WhileOp(
            loop.arguments, [loop.res[i].type for i in keep],
            rewriter.move_region_contents_to_new_regions(loop.before_region),
            rewriter.move_region_contents_to_new_regions(loop.after_region),
        )
        new_loop.attributes |= loop.attributes
        new_loop.location = loop.location
        results = dict(zip(keep, new_loop.res))
        rewriter.replace(loop, new_loop, [results.get(i) for i in range(len(loop.res))])


DCE_PATTERNS = (EraseDeadOp(), PruneForIterArgs(), PruneWhileResults())


def dce(module: Operation) -> bool:
    """Remove dead ops and dead loop-carried values everywhere in `module`."""
    return apply_patterns(module, DCE_PATTERNS)


@dataclass(frozen=True)
class DeadCodeElimination(ModulePass):
    name = "dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        dce(op)
