"""Canonicalize: fold constants, simplify, remove dead code, and gather constants.

MLIR's canonicalizer in one pass: the patterns of `canonicalize_arith` (constant folding
and algebraic identities), `canonicalize_tt` (splats, shape ops, masks) and
`canonicalize_scf` (branches and loops with known outcomes), plus dead-op removal, applied
until nothing changes.  Then, as MLIR's folder does, every constant moves to the top of its
function (or combine region) and equal constants merge, so later passes (CSE, LICM,
combine) see one ``arith.constant 0 : i32`` rather than one per use.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from naiad.ir import arith
from naiad.passes.canonicalize_arith import ARITH_PATTERNS
from naiad.passes.canonicalize_scf import SCF_PATTERNS
from naiad.passes.canonicalize_tt import TT_PATTERNS
from naiad.passes.dce import EraseDeadOp
from naiad.passes.rewrite import apply_patterns
from naiad.passes.scopes import enclosing_scope

CANONICALIZE_PATTERNS = (EraseDeadOp(), *ARITH_PATTERNS, *TT_PATTERNS, *SCF_PATTERNS)


def gather_constants(module: Operation) -> None:
    """Move each `arith.constant` to the start of its scope's entry block, in order of first
    appearance, keeping one constant per (value, type)."""
    seen: dict[tuple[Block, Attribute, Attribute], Operation] = {}
    last: dict[Block, Operation] = {}
    for op in [op for op in module.walk() if isinstance(op, arith.ConstantOp)]:
        scope = enclosing_scope(op)
        if scope is None or not scope.regions or not scope.regions[0].blocks:
            continue
        entry = scope.regions[0].blocks.first
        key = (entry, op.value, op.result.type)
        if key in seen:
            op.result.replace_all_uses_with(seen[key].result)
            Rewriter.erase_op(op)
            continue
        seen[key] = op
        op.detach()
        anchor = last.get(entry)
        if anchor is not None:
            entry.insert_op_after(op, anchor)
        elif entry.first_op is not None:
            entry.insert_op_before(op, entry.first_op)
        else:
            entry.add_op(op)
        last[entry] = op


def canonicalize(module: Operation) -> bool:
    """Canonicalize `module` in place; True if anything changed."""
    changed = apply_patterns(module, CANONICALIZE_PATTERNS)
    gather_constants(module)
    return changed


@dataclass(frozen=True)
class Canonicalize(ModulePass):
    name = "canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        canonicalize(op)
