"""TTIR's `arith`: xDSL's arith dialect, with the ops Triton applies to tensors made tensor-capable.

xDSL 0.75's `arith` types a few ops for scalars only: `cmpi`/`cmpf` always yield a scalar i1,
and `select` and the integer/float casts reject tensors, while MLIR's arith (and every Triton
kernel) applies them elementwise to tensors.  This module redefines those ops with the same
names, syntax and constructors, accepting tensors, adds `arith.remf` (which xDSL lacks), and
re-exports every other op, so code that builds IR imports its arith ops from here only.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects import arith as _xarith
from xdsl.dialects.arith import *  # noqa: F401,F403  (AddiOp, MulfOp, ...: re-exported)
from xdsl.dialects.arith import FloatingPointLikeBinaryOperation
from xdsl.dialects.builtin import IntegerAttr, i1
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.irdl import (AnyAttr, IRDLOperation, VarConstraint, irdl_op_definition, operand_def,
                       prop_def, result_def, traits_def)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from naiad.ir.tt import BoolLike, FloatLike, IntLike
from naiad.ir.types import element_type, shape_of, with_element

Value = SSAValue | Operation


class _CompareOp(IRDLOperation):
    """`arith.cmpi`/`cmpf` yielding i1 of the operands' shape; xDSL's syntax."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    predicate = prop_def(IntegerAttr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(BoolLike)

    traits = traits_def(Pure())
    PREDICATES: ClassVar[list[str]]

    def __init__(self, lhs: Value, rhs: Value, arg: int | str, **props: Attribute):
        lhs = SSAValue.get(lhs)
        predicate = self.PREDICATES.index(arg) if isinstance(arg, str) else arg
        super().__init__(
            operands=[lhs, rhs],
            result_types=[with_element(lhs.type, i1)],
            properties={"predicate": IntegerAttr(predicate, 64), **props},
        )

    def verify_(self) -> None:
        if self.result.type != with_element(self.lhs.type, i1):
            raise VerifyException(f"result must be {with_element(self.lhs.type, i1)}")


@irdl_op_definition
class CmpiOp(_CompareOp):
    name = "arith.cmpi"

    T: ClassVar = VarConstraint("T", IntLike)
    PREDICATES: ClassVar = _xarith.CMPI_COMPARISON_OPERATIONS
    parse = classmethod(_xarith.CmpiOp.parse.__func__)
    print = _xarith.CmpiOp.print


@irdl_op_definition
class CmpfOp(_CompareOp):
    name = "arith.cmpf"

    T: ClassVar = VarConstraint("T", FloatLike)
    fastmath = prop_def(_xarith.FastMathFlagsAttr, _xarith.FastMathFlagsAttr("none"))
    PREDICATES: ClassVar = _xarith.CMPF_COMPARISON_OPERATIONS
    parse = classmethod(_xarith.CmpfOp.parse.__func__)
    print = _xarith.CmpfOp.print

    def __init__(
        self,
        lhs: Value,
        rhs: Value,
        arg: int | str,
        fastmath: _xarith.FastMathFlagsAttr = _xarith.FastMathFlagsAttr("none"),
    ):
        super().__init__(lhs, rhs, arg, fastmath=fastmath)


@irdl_op_definition
class SelectOp(IRDLOperation):
    """`arith.select` with an i1 or tensor-of-i1 condition; prints `: type` for an i1
    condition and `: cond_type, type` otherwise, as MLIR does."""

    name = "arith.select"

    T: ClassVar = VarConstraint("T", AnyAttr())
    cond = operand_def(BoolLike)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())

    def __init__(self, cond: Value, lhs: Value, rhs: Value):
        lhs = SSAValue.get(lhs)
        super().__init__(operands=[cond, lhs, rhs], result_types=[lhs.type])

    def verify_(self) -> None:
        if self.cond.type != i1 and shape_of(self.cond.type) != shape_of(self.result.type):
            raise VerifyException(f"condition {self.cond.type} does not fit {self.result.type}")

    @classmethod
    def parse(cls, parser: Parser) -> SelectOp:
        pos = parser.pos
        operands = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = [parser.parse_type()]
        if parser.parse_optional_punctuation(","):
            types.append(parser.parse_type())
        cond_type, value_type = types if len(types) == 2 else (i1, types[0])
        op = cls(*parser.resolve_operands(operands, [cond_type, value_type, value_type], pos))
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_operand)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        if self.cond.type != i1:
            printer.print_attribute(self.cond.type)
            printer.print_string(", ")
        printer.print_attribute(self.result.type)


def _cast(xdsl_op: type[IRDLOperation], src, dst, widen: bool | None = None):
    """An elementwise cast named like `xdsl_op`, from `src`-like to `dst`-like values;
    `widen` says whether an integer cast must grow (True) or shrink (False)."""

    class Cast(IRDLOperation):
        name = xdsl_op.name
        input = operand_def(src)
        result = result_def(dst)

        traits = traits_def(Pure())
        assembly_format = "$input attr-dict `:` type($input) `to` type($result)"

        def __init__(self, op: Value, target_type: Attribute):
            super().__init__(operands=[op], result_types=[target_type])

        def verify_(self) -> None:
            if shape_of(self.input.type) != shape_of(self.result.type):
                raise VerifyException(f"{self.input.type}, {self.result.type}: shapes differ")
            if widen is None:
                return
            old, new = (element_type(v.type).width.data for v in (self.input, self.result))
            if old == new or (new > old) != widen:
                raise VerifyException(f"{self.name} cannot go from i{old} to i{new}")

    Cast.__name__ = Cast.__qualname__ = xdsl_op.__name__
    return irdl_op_definition(Cast)


TruncIOp = _cast(_xarith.TruncIOp, IntLike, IntLike, widen=False)
ExtSIOp = _cast(_xarith.ExtSIOp, IntLike, IntLike, widen=True)
ExtUIOp = _cast(_xarith.ExtUIOp, IntLike, IntLike, widen=True)
FPToSIOp = _cast(_xarith.FPToSIOp, FloatLike, IntLike)
FPToUIOp = _cast(_xarith.FPToUIOp, FloatLike, IntLike)
SIToFPOp = _cast(_xarith.SIToFPOp, IntLike, FloatLike)
UIToFPOp = _cast(_xarith.UIToFPOp, IntLike, FloatLike)

_TENSOR_ARITH = (CmpiOp, CmpfOp, SelectOp, TruncIOp, ExtSIOp, ExtUIOp)
_TENSOR_ARITH += (FPToSIOp, FPToUIOp, SIToFPOp, UIToFPOp)
_REPLACED = {op.name for op in _TENSOR_ARITH}


@irdl_op_definition
class RemFOp(FloatingPointLikeBinaryOperation):
    """Float remainder with the sign of the dividend (C's fmod), Triton's `%` on floats."""

    name = "arith.remf"

    traits = traits_def(Pure())


_TENSOR_ARITH += (RemFOp,)
ARITH = Dialect(
    "arith",
    [*(op for op in _xarith.Arith.operations if op.name not in _REPLACED), *_TENSOR_ARITH],
    list(_xarith.Arith.attributes),
)
"""xDSL's arith with the tensor-capable ops above in place of its scalar-only ones."""


