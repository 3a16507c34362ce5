"""Canonicalization patterns of `tt` ops (Triton's op folders and canonicalizers).

The code generator splats scalars freely and reshapes what it splatted; a splat stays a
splat through any shape op, and a splat of a constant is a dense constant, which then folds
further.  Masks known to be all true or all false make `tt.load`/`tt.store` unmasked (or
gone).
"""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, i32
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from naiad.ir import tt
from naiad.passes.constants import constant_attr, make_constant, reshaped_constant, splat_value
from naiad.passes.rewrite import located, replace_with

SHAPE_OPS = (tt.BroadcastOp, tt.ExpandDimsOp, tt.ReshapeOp, tt.TransOp)
"""Ops that only move elements around: a splat stays a splat through them."""


def splat_to(src: SSAValue, like: Operation) -> tt.SplatOp:
    """``tt.splat src`` with the result type (shape and encoding) and location of `like`."""
    return located(tt.SplatOp.create(operands=[src], result_types=[like.results[0].type]), like)


class SplatOfConstant(RewritePattern):
    """``tt.splat (arith.constant 1.0)`` -> ``arith.constant dense<1.0>``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tt.SplatOp, rewriter: PatternRewriter) -> None:
        value = splat_value(op.src)
        if value is not None:
            rewriter.replace(op, make_constant(value, op.result.type, like=op))


class ShapeOfSplat(RewritePattern):
    """broadcast / expand_dims / reshape / trans of a splat -> a splat of the new shape;
    of a splat constant -> a constant of the new shape."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, SHAPE_OPS):
            return
        source = op.src.owner
        if isinstance(source, tt.SplatOp):
            rewriter.replace(op, splat_to(source.src, op))
        elif (attr := constant_attr(op.src)) is not None:
            constant = reshaped_constant(attr, op.result.type, like=op)
            if constant is not None:
                rewriter.replace(op, constant)


def _is_identity(op: Operation) -> bool:
    if isinstance(op, tt.TransOp):
        return list(op.order.get_values()) == sorted(op.order.get_values())
    return isinstance(op, tt.BroadcastOp | tt.ReshapeOp) and op.src.type == op.result.type


class IdentityShapeOp(RewritePattern):
    """A broadcast or reshape to the same type, or a transpose by the identity order, is
    its operand."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if _is_identity(op):
            replace_with(rewriter, op, op.src)


class BroadcastOfBroadcast(RewritePattern):
    """``broadcast (broadcast x)`` -> ``broadcast x``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tt.BroadcastOp, rewriter: PatternRewriter) -> None:
        inner = op.src.owner
        if isinstance(inner, tt.BroadcastOp):
            new = tt.BroadcastOp.create(operands=[inner.src], result_types=[op.result.type])
            rewriter.replace(op, located(new, op))


class TransOfTrans(RewritePattern):
    """``trans (trans x, inner), outer`` -> ``trans x, inner∘outer``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tt.TransOp, rewriter: PatternRewriter) -> None:
        inner = op.src.owner
        if not isinstance(inner, tt.TransOp):
            return
        inner_order = inner.order.get_values()
        order = [inner_order[i] for i in op.order.get_values()]
        new = tt.TransOp.create(operands=[inner.src], result_types=[op.result.type],
                                properties={"order": DenseArrayBase.from_list(i32, order)})
        rewriter.replace(op, located(new, op))


class AddPtrZero(RewritePattern):
    """``tt.addptr p, 0`` -> ``p``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tt.AddPtrOp, rewriter: PatternRewriter) -> None:
        if splat_value(op.offset) == 0:
            replace_with(rewriter, op, op.ptr)


def _without_operand_segments(op: Operation) -> dict:
    return {k: v for k, v in op.properties.items() if k != "operandSegmentSizes"}


class LoadKnownMask(RewritePattern):
    """A load whose mask is all true needs neither mask nor ``other``; one whose mask is
    all false yields ``other`` (Triton's CanonicalizeMaskedLoadPattern)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tt.LoadOp, rewriter: PatternRewriter) -> None:
        mask = None if op.mask is None else splat_value(op.mask)
        if mask == -1:
            new = tt.LoadOp.build(
                operands=[op.ptr, None, None], result_types=[op.result.type],
                properties=_without_operand_segments(op), attributes=dict(op.attributes))
            rewriter.replace(op, located(new, op))
        elif mask == 0 and op.other is not None and not op.isVolatile.value.data:
            replace_with(rewriter, op, op.other)


class StoreKnownMask(RewritePattern):
    """A store whose mask is all true needs no mask; one whose mask is all false does
    nothing (Triton's CanonicalizeMaskedStorePattern)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tt.StoreOp, rewriter: PatternRewriter) -> None:
        mask = None if op.mask is None else splat_value(op.mask)
        if mask == -1:
            new = tt.StoreOp.build(operands=[op.ptr, op.value, None],
                                   properties=dict(op.properties), attributes=dict(op.attributes))
            rewriter.replace(op, located(new, op))
        elif mask == 0:
            rewriter.erase(op)


TT_PATTERNS = (
    SplatOfConstant(), ShapeOfSplat(), IdentityShapeOp(), BroadcastOfBroadcast(),
    TransOfTrans(), AddPtrZero(), LoadKnownMask(), StoreKnownMask(),
)
