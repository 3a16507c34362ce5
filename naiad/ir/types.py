"""Types of the TTIR: Triton's pointer type, and helpers over scalars and ranked tensors.

A TTIR value is a scalar, a pointer, or a ranked builtin ``tensor`` of scalars or
pointers.  A pointer whose pointee is itself a tensor (``!tt.ptr<tensor<128x64xf16>>``)
is a *block pointer*, made by ``tt.make_tensor_ptr``.  Unsigned integers have no type of
their own: like Triton, the IR uses signless ``iN`` and the ops carry the signedness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3B11FNUZType,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntAttr,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

GLOBAL_ADDRESS_SPACE = 1
"""Triton's default address space: the one a pointer argument of a kernel points into."""


@irdl_attr_definition
class PointerType(ParametrizedAttribute, TypeAttribute):
    """``!tt.ptr<pointee[, address_space]>``; the address space is printed only when not 1."""

    name = "tt.ptr"

    pointee_type: Attribute
    address_space: IntAttr

    def __init__(self, pointee_type: Attribute, address_space: int | IntAttr = 1):
        if isinstance(address_space, int):
            address_space = IntAttr(address_space)
        super().__init__(pointee_type, address_space)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> tuple[Attribute, IntAttr]:
        with parser.in_angle_brackets():
            pointee = parser.parse_type()
            space = GLOBAL_ADDRESS_SPACE
            if parser.parse_optional_punctuation(",") is not None:
                space = parser.parse_integer(allow_boolean=False, allow_negative=False)
        return pointee, IntAttr(space)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.pointee_type)
            if self.address_space.data != GLOBAL_ADDRESS_SPACE:
                printer.print_string(f", {self.address_space.data}")

    def verify(self) -> None:
        pointee = self.pointee_type
        if isinstance(pointee, TensorType) and isinstance(pointee.element_type, PointerType):
            raise VerifyException(f"a block pointer cannot point to pointers, got {self}")
        if not isinstance(pointee, TypeAttribute):
            raise VerifyException(f"pointee of !tt.ptr must be a type, got {pointee}")

    @property
    def is_block_pointer(self) -> bool:
        """True for ``!tt.ptr<tensor<...>>``, the result of ``tt.make_tensor_ptr``."""
        return isinstance(self.pointee_type, TensorType)


TRITON_SCALAR_TYPES: Mapping[str, TypeAttribute] = MappingProxyType(
    {
        "int1": IntegerType(1),
        "int8": IntegerType(8),
        "int16": IntegerType(16),
        "int32": IntegerType(32),
        "int64": IntegerType(64),
        "uint8": IntegerType(8),
        "uint16": IntegerType(16),
        "uint32": IntegerType(32),
        "uint64": IntegerType(64),
        "fp16": Float16Type(),
        "bf16": BFloat16Type(),
        "fp32": Float32Type(),
        "fp64": Float64Type(),
        "fp8e4nv": Float8E4M3FNType(),
        "fp8e5": Float8E5M2Type(),
        "fp8e4b8": Float8E4M3FNUZType(),
        "fp8e5b16": Float8E5M2FNUZType(),
        "fp8e4b15": Float8E4M3B11FNUZType(),
    }
)
"""The IR type of each scalar ``tl.dtype``, by its Triton name (``tl.float8e4nv`` is
``fp8e4nv``).  Unsigned integers map to the signless type of the same width."""


def tensor_of(shape: Sequence[int], element_type: Attribute) -> TensorType:
    """``tensor<shape x element_type>``."""
    return TensorType(element_type, shape)


def is_tensor(t: Attribute) -> bool:
    return isinstance(t, TensorType)


def element_type(t: Attribute) -> Attribute:
    """The element type of a tensor, or ``t`` itself for a scalar or pointer."""
    return t.element_type if isinstance(t, TensorType) else t


def shape_of(t: Attribute) -> list[int]:
    """The shape of a tensor; ``[]`` for a scalar or pointer."""
    return list(t.get_shape()) if isinstance(t, TensorType) else []


def with_element(t: Attribute, elem: Attribute) -> Attribute:
    """``t`` with its element type replaced: same shape (and encoding) for a tensor."""
    if isinstance(t, TensorType):
        return TensorType(elem, t.shape, t.encoding)
    return elem


def is_pointer(t: Attribute) -> bool:
    """True for a pointer, a block pointer, or a tensor of pointers."""
    return isinstance(element_type(t), PointerType)
