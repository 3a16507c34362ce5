"""Triton's TTIR peepholes (``ttir.combine``), with the behaviour of Triton's Combine.td and
Combine.cpp:

* ``d + dot(a, b, 0)`` -> ``dot(a, b, d)`` when the add is the dot's only user (for floats
  only when ``maxNumImpreciseAcc`` is 0): the accumulation happens inside the dot.
* ``addptr(addptr(p, a), b)`` -> ``addptr(p, a + b)`` when the offsets have one type and the
  sum cannot overflow differently from two separate offsets: 64-bit offsets, or two constants
  whose sum fits.
* ``select(c, load(p, splat(c)), o)`` -> ``load(p, splat(c), other=o)`` (also with the mask
  being ``c`` itself): the masked-off lanes already take ``other``.  Unlike Triton this needs
  the load to have no other user, so the rewrite never duplicates a load.
* ``broadcast`` of a splat or a splat constant -> a splat or constant of the wide shape.
* ``sum(x[:, :, None] * y[None, :, :], axis=1)`` -> ``dot(x, y, 0)`` for f32 or narrower
  floats with K >= 16 (Triton's BroadcastMulReduce).  Triton emits that dot with TF32 inputs;
  here it keeps IEEE precision, so the result stays that of an f32 sum of products.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from naiad.ir import arith, tt
from naiad.ir.types import element_type, shape_of
from naiad.passes.canonicalize_tt import ShapeOfSplat
from naiad.passes.constants import make_constant, splat_value, to_signed
from naiad.passes.dce import EraseDeadOp
from naiad.passes.rewrite import apply_patterns, located


def is_zero(value: SSAValue) -> bool:
    """A constant zero, possibly splat or broadcast (Triton's ``isZero``)."""
    if isinstance(value.owner, tt.BroadcastOp):
        value = value.owner.src
    return splat_value(value) == 0


class DotAccumulate(RewritePattern):
    """``addf d, dot(a, b, 0)`` (either operand order) -> ``dot(a, b, d)``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, arith.AddfOp | arith.AddiOp):
            return
        for dot_value, addend in (op.operands, reversed(op.operands)):
            dot = dot_value.owner
            if (isinstance(dot, tt.DotOp) and is_zero(dot.c) and dot_value.has_one_use()
                    and (isinstance(op, arith.AddiOp)
                         or dot.maxNumImpreciseAcc.value.data == 0)):
                new = tt.DotOp.create(operands=[dot.a, dot.b, addend],
                                      result_types=[dot.d.type],
                                      properties=dict(dot.properties))
                rewriter.replace(op, located(new, dot))
                return


def _offset_constant(value: SSAValue) -> int | None:
    number = splat_value(value)
    return number if isinstance(number, int) else None


def offsets_combinable(first: SSAValue, second: SSAValue) -> bool:
    """Whether ``first + second`` in their own type equals adding them to a pointer in
    turn (Triton's ``isAddPtrOffsetCombinable``)."""
    if first.type != second.type:
        return False
    width = element_type(first.type).width.data
    if width == 64:
        return True
    a, b = _offset_constant(first), _offset_constant(second)
    return a is not None and b is not None and to_signed(a + b, width) == a + b


class AddPtrOfAddPtr(RewritePattern):
    """``addptr(addptr(p, a), b)`` -> ``addptr(p, addi(a, b))``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tt.AddPtrOp, rewriter: PatternRewriter) -> None:
        inner = op.ptr.owner
        if not isinstance(inner, tt.AddPtrOp) or not offsets_combinable(inner.offset, op.offset):
            return
        offset = located(arith.AddiOp(inner.offset, op.offset), op)
        rewriter.replace(op, [offset, located(tt.AddPtrOp(inner.ptr, offset), op)])


def _mask_matches(mask: SSAValue | None, condition: SSAValue) -> bool:
    if mask is None:
        return False
    return mask is condition or (isinstance(mask.owner, tt.SplatOp) and mask.owner.src is condition)


class SelectOfMaskedLoad(RewritePattern):
    """``select(c, load(p, splat(c), o1), o2)`` -> ``load(p, splat(c), o2)``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SelectOp, rewriter: PatternRewriter) -> None:
        load = op.lhs.owner
        if (not isinstance(load, tt.LoadOp) or not op.lhs.has_one_use()
                or not _mask_matches(load.mask, op.cond)):
            return
        properties = {k: v for k, v in load.properties.items() if k != "operandSegmentSizes"}
        new = tt.LoadOp.build(operands=[load.ptr, load.mask, op.rhs],
                              result_types=[load.result.type], properties=properties,
                              attributes=dict(load.attributes))
        rewriter.replace(op, located(new, load))


def _is_add_combiner(reduce: tt.ReduceOp) -> bool:
    ops = list(reduce.combineOp.block.ops)
    return (len(ops) == 2 and isinstance(ops[0], arith.AddfOp)
            and element_type(ops[0].result.type).bitwidth <= 32)


def _expanded_source(value: SSAValue, axis: int) -> SSAValue | None:
    """`x` when `value` is ``broadcast(expand_dims(x, axis))``."""
    broadcast = value.owner
    if not isinstance(broadcast, tt.BroadcastOp):
        return None
    expand = broadcast.src.owner
    if not isinstance(expand, tt.ExpandDimsOp) or expand.axis.value.data != axis:
        return None
    return expand.src


class BroadcastMulReduce(RewritePattern):
    """``reduce(add, x[:, :, None] * y[None, :, :], axis=1)`` -> ``dot(x, y, 0)``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tt.ReduceOp, rewriter: PatternRewriter) -> None:
        if len(op.srcs) != 1 or op.axis.value.data != 1 or not _is_add_combiner(op):
            return
        mul = op.srcs[0].owner
        if not isinstance(mul, arith.MulfOp) or len(shape_of(mul.result.type)) != 3:
            return
        x, y = _expanded_source(mul.lhs, 2), _expanded_source(mul.rhs, 0)
        if x is None or y is None:
            return
        (m, k), (k2, n) = shape_of(x.type), shape_of(y.type)
        if k != k2 or k < 16 or shape_of(op.result[0].type) != [m, n]:
            return
        zero = make_constant(0.0, TensorType(element_type(x.type), [m, n]), like=op)
        dot = located(tt.DotOp(x, y, zero), op)
        rewriter.replace(op, [zero, dot])


COMBINE_PATTERNS = (
    EraseDeadOp(), DotAccumulate(), AddPtrOfAddPtr(), SelectOfMaskedLoad(), ShapeOfSplat(),
    BroadcastMulReduce(),
)


def combine(module: Operation) -> bool:
    return apply_patterns(module, COMBINE_PATTERNS)


@dataclass(frozen=True)
class Combine(ModulePass):
    name = "combine"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        combine(op)
