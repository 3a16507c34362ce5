"""Reorder broadcast (Triton's ``ttir.reorder_broadcast``): do elementwise work on the small
tensor, then broadcast.

``elementwise(splat(a), splat(b))`` becomes ``splat(elementwise(a, b))``: one scalar op instead
of one per element.  ``elementwise(broadcast(x), splat(c))`` becomes
``broadcast(elementwise(x, splat'(c)))`` with the splat remade at x's shape, when at most one
operand is a broadcast (two broadcasts may come from different shapes).  Dense splat constants
count as splats.  ``expand_dims(broadcast(x))`` becomes ``broadcast(expand_dims(x))`` so that
broadcasts keep moving down, and the splat/broadcast folds of canonicalize apply as well.
Only pure elementwise ops move: a load's pointers are not its result.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.traits import SameOperandsAndResultType

from naiad.ir import arith, tt
from naiad.ir.types import element_type, shape_of
from naiad.passes.canonicalize_tt import BroadcastOfBroadcast, ShapeOfSplat
from naiad.passes.constants import make_constant, splat_value
from naiad.passes.dce import EraseDeadOp
from naiad.passes.effects import is_pure
from naiad.passes.rewrite import apply_patterns, located

TT_ELEMENTWISE = (
    tt.AddPtrOp, tt.FpToFpOp, tt.BitcastOp, tt.IntToPtrOp, tt.PtrToIntOp, tt.ClampFOp,
    tt.PreciseSqrtOp, tt.PreciseDivFOp, tt.MulhiUIOp, tt.ExternElementwiseOp,
)
ARITH_NOT_ELEMENTWISE = (arith.ConstantOp,)


def is_elementwise(op: Operation) -> bool:
    """Ops that apply the same scalar function to each element (MLIR's Elementwise trait):
    every arith op but constants, the math ops, and the tt ops listed above."""
    if isinstance(op, TT_ELEMENTWISE):
        return True
    if isinstance(op, ARITH_NOT_ELEMENTWISE):
        return False
    return op.name.startswith("arith.") or (
        op.name.startswith("math.") and op.has_trait(SameOperandsAndResultType))


def _is_splat(value: SSAValue) -> bool:
    return isinstance(value.owner, tt.SplatOp) or splat_value(value) is not None


def _candidate(op: Operation) -> bool:
    return (is_elementwise(op) and bool(op.operands) and is_pure(op)
            and all(isinstance(v.type, TensorType) for v in (*op.operands, *op.results)))


def _resized(t: Attribute, shape: list[int] | None) -> Attribute:
    """`t` with another shape, or its element type when `shape` is None (a scalar)."""
    return element_type(t) if shape is None else TensorType(element_type(t), shape)


def _splat_source(value: SSAValue, shape: list[int] | None, like: Operation,
                  rewriter: PatternRewriter) -> SSAValue:
    """The splatted value of `value` remade at `shape` (None: as a scalar)."""
    owner = value.owner
    if isinstance(owner, tt.SplatOp):
        if shape is None:
            return owner.src
        new: Operation = tt.SplatOp.create(operands=[owner.src],
                                           result_types=[_resized(value.type, shape)])
    else:
        new = make_constant(splat_value(value), _resized(value.type, shape))
    rewriter.insert(located(new, like))
    return new.results[0]


def _rebuilt(op: Operation, operands: list[SSAValue], shape: list[int] | None,
             rewriter: PatternRewriter) -> Operation:
    """`op` on new operands, its results resized to `shape`."""
    new = type(op).create(operands=operands,
                          result_types=[_resized(r.type, shape) for r in op.results],
                          properties=dict(op.properties), attributes=dict(op.attributes))
    rewriter.insert(located(new, op))
    return new


class MoveSplatAfterElementwise(RewritePattern):
    """``elementwise(splat(a), splat(b), ...)`` -> ``splat(elementwise(a, b, ...))``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _candidate(op) or not all(_is_splat(v) for v in op.operands):
            return
        if all(splat_value(v) is not None for v in op.operands):
            return  # all constants: canonicalize folds it
        scalars = [_splat_source(v, None, op, rewriter) for v in op.operands]
        scalar_op = _rebuilt(op, scalars, None, rewriter)
        splats = [located(tt.SplatOp.create(operands=[s], result_types=[r.type]), op)
                  for s, r in zip(scalar_op.results, op.results)]
        rewriter.replace(op, splats, [s.result for s in splats])


class MoveBroadcastAfterElementwise(RewritePattern):
    """``elementwise(broadcast(x), splat(c))`` -> ``broadcast(elementwise(x, splat(c)))``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _candidate(op):
            return
        broadcasts = [v.owner for v in op.operands if isinstance(v.owner, tt.BroadcastOp)]
        others = [v for v in op.operands if not isinstance(v.owner, tt.BroadcastOp)]
        if len(broadcasts) != 1 or not all(_is_splat(v) for v in others):
            return
        source = broadcasts[0].src
        shape = shape_of(source.type)
        operands = [source if v.owner is broadcasts[0] else
                    _splat_source(v, shape, op, rewriter) for v in op.operands]
        small = _rebuilt(op, operands, shape, rewriter)
        wide = [located(tt.BroadcastOp.create(operands=[s], result_types=[r.type]), op)
                for s, r in zip(small.results, op.results)]
        rewriter.replace(op, wide, [b.result for b in wide])


class MoveBroadcastAfterExpandDims(RewritePattern):
    """``expand_dims(broadcast(x))`` -> ``broadcast(expand_dims(x))``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tt.ExpandDimsOp, rewriter: PatternRewriter) -> None:
        broadcast = op.src.owner
        if not isinstance(broadcast, tt.BroadcastOp):
            return
        axis = op.axis.value.data
        shape = shape_of(broadcast.src.type)
        expanded_type = TensorType(element_type(op.result.type),
                                   [*shape[:axis], 1, *shape[axis:]])
        expand = located(tt.ExpandDimsOp.create(
            operands=[broadcast.src], result_types=[expanded_type],
            properties=dict(op.properties)), op)
        wide = located(tt.BroadcastOp.create(operands=[expand.result],
                                             result_types=[op.result.type]), op)
        rewriter.replace(op, [expand, wide])


REORDER_BROADCAST_PATTERNS = (
    EraseDeadOp(), ShapeOfSplat(), BroadcastOfBroadcast(), MoveBroadcastAfterExpandDims(),
    MoveBroadcastAfterElementwise(), MoveSplatAfterElementwise(),
)


def reorder_broadcast(module: Operation) -> bool:
    return apply_patterns(module, REORDER_BROADCAST_PATTERNS)


@dataclass(frozen=True)
class ReorderBroadcast(ModulePass):
    name = "reorder-broadcast"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        reorder_broadcast(op)
