"""Reading and making constants: scalars, splat tensors and dense tensors.

The passes see a constant in three shapes: `arith.constant 3 : i32`, `arith.constant
dense<3> : tensor<128xi32>`, and (before canonicalization) `tt.splat` of a scalar constant.
`splat_value` answers "is every element of this value the same known number?" for all three,
which is the question most peepholes ask.  Integers come back as Python ints, signed
(two's complement for the type's width, so i1 true is -1); floats as Python floats.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from naiad.ir import arith, tt
from naiad.ir.types import element_type

Number = int | float


def to_signed(value: int, width: int) -> int:
    """`value` wrapped to `width` bits, read as a signed two's complement number."""
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def to_unsigned(value: int, width: int) -> int:
    return value & ((1 << width) - 1)


def constant_attr(value: SSAValue) -> Attribute | None:
    """The value attribute of the `arith.constant` defining `value`, if it is one."""
    owner = value.owner
    return owner.value if isinstance(owner, arith.ConstantOp) else None


def _normalize(number: Number, elem: Attribute) -> Number:
    if isinstance(elem, IntegerType):
        return to_signed(int(number), elem.width.data)
    return number


def _dense_splat(attr: DenseIntOrFPElementsAttr) -> Number | None:
    data = attr.data.data
    count = len(attr)
    size = len(data) // count if count else 0
    if not size or data != data[:size] * count:
        return None
    return attr.get_element_type().unpack(data[:size], 1)[0]


def splat_value(value: SSAValue) -> Number | None:
    """The number every element of `value` equals, when that is known at compile time."""
    owner = value.owner
    if isinstance(owner, tt.SplatOp):
        return splat_value(owner.src)
    if isinstance(owner, (arith.ExtFOp, arith.TruncFOp, tt.FpToFpOp)):
        # a float widened keeps its value; a zero converted to any float type too (``other=0.0``
        # of a bf16 or fp8 load, which no folder narrows: there is no such constant to fold to)
        number = splat_value(owner.operands[0])
        return number if isinstance(owner, arith.ExtFOp) or number == 0 else None
    attr = constant_attr(value)
    if isinstance(attr, IntegerAttr | FloatAttr):
        number = attr.value.data
    elif isinstance(attr, DenseIntOrFPElementsAttr):
        number = _dense_splat(attr)
    else:
        return None
    return None if number is None else _normalize(number, element_type(value.type))


def constant_values(value: SSAValue) -> tuple[Number, ...] | None:
    """The elements of a constant: one number for a scalar or a splat, all of them for
    any other dense tensor; None when `value` is not a constant."""
    single = splat_value(value)
    if single is not None:
        return (single,)
    attr = constant_attr(value)
    if isinstance(attr, DenseIntOrFPElementsAttr):
        elem = element_type(value.type)
        return tuple(_normalize(v, elem) for v in attr.get_values())
    return None


def make_attr(values: Sequence[Number], t: Attribute) -> Attribute:
    """The attribute of a constant of type `t` holding `values` (one value: a splat)."""
    elem = element_type(t)
    values = [_normalize(v, elem) for v in values]
    if isinstance(t, TensorType):
        return DenseIntOrFPElementsAttr.from_list(t, values)
    if isinstance(elem, IntegerType):
        return IntegerAttr(values[0], elem)
    return FloatAttr(values[0], elem)


def make_constant(values: Sequence[Number] | Number, t: Attribute,
                  like: Operation | None = None) -> arith.ConstantOp:
    """`arith.constant` of type `t`; `like` lends it its source location."""
    if not isinstance(values, Sequence):
        values = [values]
    op = arith.ConstantOp(make_attr(values, t), t)
    if like is not None:
        op.location = like.location
    return op


def reshaped_constant(attr: Attribute, t: Attribute, like: Operation) -> arith.ConstantOp | None:
    """A constant of type `t` with the splat value of `attr`, or None if `attr` is not a
    splat (scalar attributes count as splats)."""
    if isinstance(attr, IntegerAttr | FloatAttr):
        number = attr.value.data
    elif isinstance(attr, DenseIntOrFPElementsAttr):
        number = _dense_splat(attr)
    else:
        return None
    return None if number is None else make_constant(number, t, like)
