"""Common subexpression elimination: compute each value once.

An op equal to one that dominates it (same name, operands, properties, attributes, result
types and, for ops with regions, structurally equal regions) is replaced by it.  Pure ops
merge whenever the earlier one dominates: in the same block before, or in an enclosing block.
A non-volatile `tt.load` merges only with an equal load earlier in the same block with no
op between them that may write memory (a store, an atomic, a call, a loop containing one).

xDSL's `CSEDriver` has the same structure but judges effects by traits only: it would merge
volatile loads and delete unused ones, and it cannot see that a pure `tt.extern_elementwise`
is pure.  This pass reuses its `KnownOps` table (hashing ops by structure) and decides
through `effects`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.traits import IsTerminator
from xdsl.transforms.common_subexpression_elimination import KnownOps

from naiad.passes.effects import Effect, effect_of
from naiad.passes.scopes import is_closed_scope


def _writes_between(first: Operation, last: Operation) -> bool:
    op = first.next_op
    while op is not None and op is not last:
        if effect_of(op) is Effect.WRITE:
            return True
        op = op.next_op
    return False


@dataclass
class _CSE:
    known: KnownOps

    def run_region(self, region: Region) -> None:
        if len(region.blocks) != 1:
            return
        outer, self.known = self.known, KnownOps(self.known)
        self.run_block(region.block)
        self.known = outer

    def run_block(self, block: Block) -> None:
        for op in list(block.ops):
            self.run_nested(op)
            self.simplify(op)

    def run_nested(self, op: Operation) -> None:
        if not op.regions:
            return
        outer = self.known
        if is_closed_scope(op):
            self.known = KnownOps()
        for region in op.regions:
            self.run_region(region)
        self.known = outer

    def simplify(self, op: Operation) -> None:
        if op.has_trait(IsTerminator) or any(len(r.blocks) > 1 for r in op.regions):
            return
        effect = effect_of(op)
        if effect is Effect.WRITE:
            return
        existing = self.known.get(op)
        mergeable = existing is not None and (effect is Effect.NONE or (
            existing.parent is op.parent and not _writes_between(existing, op)))
        if mergeable:
            for old, new in zip(op.results, existing.results):
                old.replace_all_uses_with(new)
            Rewriter.erase_op(op)
        else:
            self.known[op] = op


def cse(module: Operation) -> None:
    """Merge equal computations everywhere in `module`."""
    for region in module.regions:
        _CSE(KnownOps()).run_region(region)


@dataclass(frozen=True)
class CommonSubexpressionElimination(ModulePass):
    name = "cse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        cse(op)
