"""Canonicalization patterns of `arith`: constant folding and algebraic identities.

Folding computes with the tables of `folding` (exact integer wrap-around, floats in their own
precision) on scalars, splats and small dense tensors alike.  The identities only use facts
that hold for every value, including NaN, infinities and -0.0: ``x + -0.0 == x`` but not
``x + 0.0`` (which turns -0.0 into 0.0), and ``x * 0 == 0`` only for integers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from xdsl.dialects.builtin import IntegerType
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from naiad.ir import arith
from naiad.ir.types import element_type
from naiad.passes.constants import (
    Number,
    constant_values,
    make_constant,
    splat_value,
    to_signed,
)
from naiad.passes.folding import (
    CASTS,
    CMPF,
    CMPI,
    FLOAT_BINARY,
    FLOAT_UNARY,
    INT_BINARY,
    fold_float_binary,
    fold_float_unary,
    fold_int_binary,
)
from naiad.passes.rewrite import replace_with


def _elementwise(fn: Callable[..., Number | None], *operands: tuple[Number, ...]):
    """`fn` applied element by element (a one-element operand is a splat); None if any
    element does not fold."""
    count = max(len(values) for values in operands)
    if any(len(values) not in (1, count) for values in operands):
        return None
    results = []
    for i in range(count):
        result = fn(*(values[i % len(values)] for values in operands))
        if result is None:
            return None
        results.append(result)
    return results


def _replace_with_constant(rewriter: PatternRewriter, op: Operation, values) -> None:
    if values is not None:
        rewriter.replace(op, make_constant(values, op.results[0].type, like=op))


def _constant_operands(op: Operation) -> list[tuple[Number, ...]] | None:
    values = [constant_values(v) for v in op.operands]
    return None if any(v is None for v in values) else values


class FoldIntBinary(RewritePattern):
    """``arith.addi 3, 4`` -> ``7``, and every op of `folding.INT_BINARY`."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if type(op) not in INT_BINARY or (operands := _constant_operands(op)) is None:
            return
        width = element_type(op.results[0].type).width.data
        fold = partial(fold_int_binary, type(op), width=width)
        _replace_with_constant(rewriter, op, _elementwise(fold, *operands))


class FoldFloatBinary(RewritePattern):
    """``arith.addf 1.5, 2.25`` -> ``3.75`` in the operands' precision."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if type(op) not in FLOAT_BINARY or (operands := _constant_operands(op)) is None:
            return
        elem = element_type(op.results[0].type)
        fold = partial(fold_float_binary, type(op), t=elem)
        _replace_with_constant(rewriter, op, _elementwise(fold, *operands))


class FoldFloatUnary(RewritePattern):
    """``arith.negf 1.5`` -> ``-1.5``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if type(op) not in FLOAT_UNARY or (operands := _constant_operands(op)) is None:
            return
        elem = element_type(op.results[0].type)
        fold = partial(fold_float_unary, type(op), t=elem)
        _replace_with_constant(rewriter, op, _elementwise(fold, *operands))


def _compare_fn(op: arith.CmpiOp | arith.CmpfOp) -> Callable[[Number, Number], bool]:
    predicate = op.PREDICATES[op.predicate.value.data]
    if isinstance(op, arith.CmpfOp):
        return CMPF[predicate]
    width = element_type(op.lhs.type).width.data
    return lambda a, b: CMPI[predicate](a, b, width)


class FoldCompare(RewritePattern):
    """``arith.cmpi slt, -1, 0`` -> ``true``; cmpf honours ordered/unordered predicates."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, arith.CmpiOp | arith.CmpfOp):
            return
        if (operands := _constant_operands(op)) is None:
            return
        compare = _compare_fn(op)
        _replace_with_constant(rewriter, op, _elementwise(lambda a, b: int(compare(a, b)),
                                                          *operands))


class FoldCast(RewritePattern):
    """Casts of constants: ``arith.extsi -1 : i8 to i32`` -> ``-1``, sitofp, truncf, ..."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if type(op) not in CASTS or (operands := _constant_operands(op)) is None:
            return
        src, dst = element_type(op.operands[0].type), element_type(op.results[0].type)
        cast = CASTS[type(op)]

        def fold(a: Number) -> Number | None:
            result = cast(a, src, dst)
            if result is None or not isinstance(dst, IntegerType):
                return result
            return to_signed(result, dst.width.data)

        _replace_with_constant(rewriter, op, _elementwise(fold, *operands))


def _is_exactly(value: SSAValue, number: Number) -> bool:
    """`value` is a splat of `number`, with the sign of a float zero taken into account."""
    found = splat_value(value)
    if found is None or found != number:
        return False
    return not isinstance(number, float) or math.copysign(1, found) == math.copysign(1, number)


RIGHT_IDENTITY: dict[type, Number] = {
    arith.AddiOp: 0, arith.SubiOp: 0, arith.MuliOp: 1,
    arith.DivSIOp: 1, arith.DivUIOp: 1, arith.FloorDivSIOp: 1,
    arith.CeilDivSIOp: 1, arith.CeilDivUIOp: 1,
    arith.AndIOp: -1, arith.OrIOp: 0, arith.XOrIOp: 0,
    arith.ShLIOp: 0, arith.ShRSIOp: 0, arith.ShRUIOp: 0,
    arith.AddfOp: -0.0, arith.SubfOp: 0.0, arith.MulfOp: 1.0, arith.DivfOp: 1.0,
}
"""``x op c == x`` for every x: the constant `c` on the right of each op."""

RIGHT_ABSORBING: dict[type, int] = {arith.MuliOp: 0, arith.AndIOp: 0, arith.OrIOp: -1}
"""``x op c == c`` for every integer x."""

COMMUTATIVE = (
    arith.AddiOp, arith.MuliOp, arith.AndIOp, arith.OrIOp, arith.XOrIOp,
    arith.MaxSIOp, arith.MinSIOp, arith.MaxUIOp, arith.MinUIOp,
    arith.AddfOp, arith.MulfOp,
    arith.MaximumfOp, arith.MinimumfOp, arith.MaxnumfOp, arith.MinnumfOp,
)

SAME_OPERANDS_IS_OPERAND = (
    arith.AndIOp, arith.OrIOp, arith.MaxSIOp, arith.MinSIOp, arith.MaxUIOp, arith.MinUIOp,
    arith.MaximumfOp, arith.MinimumfOp, arith.MaxnumfOp, arith.MinnumfOp,
)
"""``x op x == x``."""

SAME_OPERANDS_IS_ZERO = (arith.SubiOp, arith.XOrIOp)
"""``x op x == 0`` (integers)."""


class ConstantToRight(RewritePattern):
    """Commutative ops put a constant operand on the right, so that the identities below
    and CSE see one form: ``addi 0, x`` becomes ``addi x, 0``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, COMMUTATIVE):
            return
        lhs, rhs = op.operands
        if constant_values(lhs) is not None and constant_values(rhs) is None:
            op.operands = (rhs, lhs)
            rewriter.notify_op_modified(op)


class RightIdentity(RewritePattern):
    """``addi x, 0`` -> ``x``; ``mulf x, 1.0`` -> ``x``; ``addf x, -0.0`` -> ``x``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        identity = RIGHT_IDENTITY.get(type(op))
        if identity is not None and _is_exactly(op.operands[1], identity):
            replace_with(rewriter, op, op.operands[0])


class RightAbsorbing(RewritePattern):
    """``muli x, 0`` -> ``0``; ``andi x, 0`` -> ``0``; ``ori x, -1`` -> ``-1``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        absorbing = RIGHT_ABSORBING.get(type(op))
        if absorbing is not None and splat_value(op.operands[1]) == absorbing:
            replace_with(rewriter, op, op.operands[1])


class SameOperands(RewritePattern):
    """``andi x, x`` -> ``x``; ``subi x, x`` -> ``0``; ``xori x, x`` -> ``0``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if len(op.operands) != 2 or op.operands[0] is not op.operands[1]:
            return
        if isinstance(op, SAME_OPERANDS_IS_OPERAND):
            replace_with(rewriter, op, op.operands[0])
        elif isinstance(op, SAME_OPERANDS_IS_ZERO):
            rewriter.replace(op, make_constant(0, op.results[0].type, like=op))


CMPI_REFLEXIVE = {"eq": 1, "sle": 1, "sge": 1, "ule": 1, "uge": 1,
                  "ne": 0, "slt": 0, "sgt": 0, "ult": 0, "ugt": 0}
"""What ``cmpi pred, x, x`` is for every x."""


class CompareSameOperands(RewritePattern):
    """``cmpi sle, x, x`` -> ``true``; ``cmpi ne, x, x`` -> ``false``."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpiOp, rewriter: PatternRewriter) -> None:
        if op.lhs is op.rhs:
            value = CMPI_REFLEXIVE[op.PREDICATES[op.predicate.value.data]]
            rewriter.replace(op, make_constant(value, op.result.type, like=op))


class SimplifySelect(RewritePattern):
    """``select true, a, b`` -> ``a``; ``select c, a, a`` -> ``a``;
    ``select c, true, false`` -> ``c`` (i1 values of the condition's type)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SelectOp, rewriter: PatternRewriter) -> None:
        condition = splat_value(op.cond)
        if op.lhs is op.rhs:
            replace_with(rewriter, op, op.lhs)
        elif condition is not None:
            replace_with(rewriter, op, op.lhs if condition else op.rhs)
        elif (op.cond.type == op.result.type and splat_value(op.lhs) == -1
              and splat_value(op.rhs) == 0):
            replace_with(rewriter, op, op.cond)


ARITH_PATTERNS = (
    FoldIntBinary(), FoldFloatBinary(), FoldFloatUnary(), FoldCompare(), FoldCast(),
    ConstantToRight(), RightIdentity(), RightAbsorbing(), SameOperands(),
    CompareSameOperands(), SimplifySelect(),
)
