"""Tensor descriptors: ``tl.make_tensor_descriptor``, ``TensorDescriptor`` kernel arguments, and
``desc.load`` / ``desc.store`` / ``desc.atomic_*`` / ``desc.gather`` / ``desc.scatter``.

A descriptor describes a tensor in memory -- its base pointer, its shape and its strides --
and the block that its loads and stores move: the block shape, known at compile time, and
the padding that elements outside the tensor read as ("zero" or "nan").  Elements outside the
tensor are never written.

Design.  A descriptor is a value of the language, not of the IR: `tensor_descriptor` holds
the base pointer (a scalar pointer tensor), the shape (one int32 scalar per dimension) and the
strides (one int64 scalar per dimension) as runtime values, and its compile-time
`tensor_descriptor_type` (element type, block shape, padding).  Its operations emit ordinary IR,
so no backend needs to know about descriptors:

- ``load`` and ``store`` make a block pointer over the described tensor at the given offsets
  (``tt.make_tensor_ptr``) and load or store through it with a boundary check on every
  dimension and the descriptor's padding;
- atomics, ``gather`` and ``scatter`` compute a block of element pointers and the mask of
  those inside the tensor, and use the ordinary masked atomics, loads and stores.

A descriptor is a `naiad.language.core.aggregate_value`: the code generator passes it through
calls, returns, ``if`` and loops as its runtime parts (`tensor_descriptor.parts`).  A host-side
``TensorDescriptor`` (`naiad.runtime.tensor_descriptor`) passed to a kernel is specialized as
the type string `tensor_descriptor_type.signature` (``"tensordesc<fp32[16, 32]>"``, with
``",nan"`` after the block for NaN padding) and launched as its parts, in the same order
(`host_parts`): the base array, the shape, the strides.
"""

from __future__ import annotations

import re
from typing import Any

from naiad.language import dtypes
from naiad.language.core import (_t, _unwrap, _unwrap_shape, aggregate_value, arange,
                                 atomic_add, atomic_and, atomic_max, atomic_min, atomic_or,
                                 atomic_xor, builtin, current_semantic, expand_dims, tensor)

_SIGNATURE = re.compile(r"^tensordesc<(\w+)\[([\d, ]+)\](?:,(zero|nan))?>$")

#: Element types of each descriptor atomic, as Triton accepts them without TMA hardware.
_ATOMIC_TYPES = {
    "add": ("u32", "i32", "u64", "fp32", "fp16", "bf16"),
    "min": ("u32", "i32", "u64", "i64"), "max": ("u32", "i32", "u64", "i64"),
    "and": ("u32", "i32", "u64", "i64"), "or": ("u32", "i32", "u64", "i64"),
    "xor": ("u32", "i32", "u64", "i64"),
}
_ATOMICS = {"add": atomic_add, "min": atomic_min, "max": atomic_max, "and": atomic_and,
            "or": atomic_or, "xor": atomic_xor}


def is_signature(text: Any) -> bool:
    """Whether a kernel signature entry is a tensor descriptor's (``"tensordesc<...>"``)."""
    return isinstance(text, str) and text.startswith("tensordesc")


class tensor_descriptor_type:
    """A descriptor's compile-time type: the base pointer type, the block shape and the padding.

    ``block_type`` is the type of a block that ``load`` returns.
    """

    def __init__(self, pointer: dtypes.pointer_type, block_shape: list[int], padding: str = "zero"):
        self.pointer = pointer
        self.block_type = dtypes.block_type(pointer.element_ty, block_shape)
        self.padding = padding

    @staticmethod
    def from_signature(text: str) -> "tensor_descriptor_type":
        match = _SIGNATURE.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not a tensor descriptor type: expected e.g. "
                             f"'tensordesc<fp32[16, 32]>' or 'tensordesc<fp32[16, 32],nan>'")
        element, block, padding = match.groups()
        return tensor_descriptor_type(dtypes.pointer_type(dtypes.str_to_ty(element)),
                                      [int(d) for d in block.split(",")], padding or "zero")

    @property
    def signature(self) -> str:
        """The kernel signature string; `from_signature` reads it back."""
        element = dtypes.ty_to_str(self.block_type.element_ty)
        padding = ",nan" if self.padding == "nan" else ""
        return f"tensordesc<{element}[{', '.join(map(str, self.block_type.shape))}]{padding}>"

    @property
    def rank(self) -> int:
        return len(self.block_type.shape)

    def part_types(self) -> list[dtypes.dtype]:
        """The types of a descriptor's runtime parts, in `tensor_descriptor.parts` order."""
        return [self.pointer, *[dtypes.int32] * self.rank, *[dtypes.int64] * self.rank]

    def is_block(self) -> bool:
        return False

    def _key(self) -> tuple:
        return self.pointer, self.block_type, self.padding

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, tensor_descriptor_type) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        shape = ", ".join(map(str, self.block_type.shape))
        padding = ", padding nan" if self.padding == "nan" else ""
        return f"tensor_descriptor<{self.block_type.element_ty}[{shape}]{padding}>"

    __repr__ = __str__


def host_parts(text: str) -> list[tuple[tuple, str]]:
    """How a launcher passes a ``TensorDescriptor`` argument of signature ``text``: (where in
    the descriptor, type string) of each part, in the kernel's parameter order."""
    ty = tensor_descriptor_type.from_signature(text)
    places = [("base",), *[("shape", i) for i in range(ty.rank)],
              *[("strides", i) for i in range(ty.rank)]]
    return [(place, dtypes.ty_to_str(t)) for place, t in zip(places, ty.part_types())]


class tensor_descriptor(aggregate_value):
    """A tensor in memory (``base``, ``shape``, ``strides``) and the blocks to move in it."""

    def __init__(self, base: Any, shape: list, strides: list, type: tensor_descriptor_type):
        self.base = base
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.type = type

    # -- the aggregate protocol of the code generator ------------------------------------------
    def parts(self) -> list:
        return [self.base, *self.shape, *self.strides]

    def with_parts(self, parts: list) -> "tensor_descriptor":
        return tensor_descriptor.from_parts(self.type, parts)

    @staticmethod
    def from_parts(ty: tensor_descriptor_type, parts: list) -> "tensor_descriptor":
        """The descriptor of type ``ty`` made of ``parts`` (in `parts` order)."""
        return tensor_descriptor(parts[0], parts[1:1 + ty.rank], parts[1 + ty.rank:], ty)

    # -- compile-time properties ------------------------------------------------------------
    @property
    def block_shape(self) -> list[int]:
        return list(self.type.block_type.shape)

    @property
    def block_type(self) -> dtypes.block_type:
        return self.type.block_type

    @property
    def dtype(self) -> dtypes.dtype:
        return self.type.block_type.element_ty

    def __str__(self) -> str:
        return str(self.type)

    def __repr__(self) -> str:
        return f"{self.type}({', '.join(repr(p) for p in self.parts())})"

    # -- operations -----------------------------------------------------------------------------
    @builtin
    def load(self, offsets: Any) -> tensor:
        """The block at ``offsets``; elements outside the tensor read as the padding."""
        return current_semantic().load(self._block_pointer(offsets, "load"), None, None,
                                       list(range(self.type.rank)), self.type.padding, "", "",
                                       False)

    @builtin
    def store(self, offsets: Any, value: Any) -> None:
        """Store ``value`` (a block of the descriptor's shape, cast to its element type) at
        ``offsets``; elements outside the tensor are not written."""
        value = self._check_block(value, "store")
        current_semantic().store(self._block_pointer(offsets, "store"), value, None,
                                 list(range(self.type.rank)), "", "")

    def _block_pointer(self, offsets: Any, what: str) -> tensor:
        """A block pointer at ``offsets``.  The innermost stride is the constant 1: a descriptor
        describes a tensor whose last dimension is contiguous (Triton requires it, and its
        hardware descriptors have no innermost stride), and a constant unit stride lets the
        backend use vector accesses."""
        sem = current_semantic()
        unit = sem.constant(1, dtypes.int64)
        return sem.make_block_ptr(self.base, list(self.shape), [*self.strides[:-1], unit],
                                  self._offsets(offsets, what), self.block_shape,
                                  list(reversed(range(self.type.rank))))

    def _offsets(self, offsets: Any, what: str) -> list[tensor]:
        offsets = _unwrap(offsets)
        offsets = list(offsets) if isinstance(offsets, (tuple, list)) else [offsets]
        if len(offsets) != self.type.rank:
            raise ValueError(f"desc.{what} needs {self.type.rank} offsets (one per dimension of "
                             f"{self.type}), got {len(offsets)}")
        return [_offset(o, what) for o in offsets]

    def _check_block(self, value: Any, what: str) -> tensor:
        """Triton's rule: the value stored must have exactly the block's shape."""
        value = _t(value)
        if value.shape != self.block_shape:
            raise ValueError(f"desc.{what}: expected a value of shape {self.block_shape} (the "
                             f"descriptor's block shape), got {value.shape} -- fix: reshape or "
                             f"broadcast the value to the block shape")
        return value

    def _element_pointers(self, indices: list[tensor]) -> tuple[tensor, tensor]:
        """Pointers to the elements at ``indices`` (one integer tensor per dimension, which
        broadcast together) and the mask of those inside the tensor."""
        pointers, mask = self.base, None
        for index, size, stride in zip(indices, self.shape, self.strides):
            inside = (index >= 0) & (index < size)
            mask = inside if mask is None else mask & inside
            pointers = pointers + index.to(dtypes.int64) * stride
        return pointers, mask

    def _block_indices(self, offsets: list[tensor]) -> list[tensor]:
        """Per dimension, the indices the block at ``offsets`` covers, shaped to broadcast."""
        rank, indices = self.type.rank, []
        for d, (offset, size) in enumerate(zip(offsets, self.block_shape)):
            index = offset + arange(0, size)
            others = [a for a in range(rank) if a != d]
            indices.append(expand_dims(index, others) if others else index)
        return indices

    def _atomic(self, op: str, offsets: Any, value: Any) -> None:
        """Element atomics over the block's elements inside the tensor; a reduction that the
        backend's options list as native (``descriptor_reductions``: (op, type) pairs, e.g. the
        fp16 and bf16 minima and maxima of NVIDIA's copy engine) is one ``tt.descriptor_reduce``
        of the block instead."""
        what = f"atomic_{op}"
        element = dtypes.ty_to_str(self.dtype)
        native = [t for o, t in getattr(current_semantic().options, "descriptor_reductions", ()) if o == op]
        if element not in _ATOMIC_TYPES[op] and element not in native:
            raise TypeError(f"desc.{what} does not support {self.dtype} elements; it works on "
                            f"{', '.join([*_ATOMIC_TYPES[op], *native])} -- fix: use a descriptor "
                            f"of one of those types")
        value = self._check_block(value, what)
        if element not in _ATOMIC_TYPES[op]:
            current_semantic().descriptor_reduce(self._block_pointer(offsets, what), value, op)
            return
        pointers, mask = self._element_pointers(self._block_indices(self._offsets(offsets, what)))
        _ATOMICS[op](pointers, value, mask=mask)

    @builtin
    def atomic_add(self, offsets: Any, value: Any) -> None:
        self._atomic("add", offsets, value)

    @builtin
    def atomic_min(self, offsets: Any, value: Any) -> None:
        self._atomic("min", offsets, value)

    @builtin
    def atomic_max(self, offsets: Any, value: Any) -> None:
        self._atomic("max", offsets, value)

    @builtin
    def atomic_and(self, offsets: Any, value: Any) -> None:
        self._atomic("and", offsets, value)

    @builtin
    def atomic_or(self, offsets: Any, value: Any) -> None:
        self._atomic("or", offsets, value)

    @builtin
    def atomic_xor(self, offsets: Any, value: Any) -> None:
        self._atomic("xor", offsets, value)

    def _rows(self, x_offsets: Any, y_offset: Any, what: str) -> tuple[tensor, tensor]:
        """Pointers and mask of a gather/scatter block: rows ``x_offsets`` (a 1-D int16/int32
        tensor), ``block_shape[1]`` columns from ``y_offset``.  Triton's rules: a 2-D
        descriptor whose block is one row."""
        if self.type.rank != 2 or self.block_shape[0] != 1:
            raise ValueError(f"desc.{what} needs a 2-D descriptor whose block is one row "
                             f"([1, n]), got block shape {self.block_shape}")
        rows = _t(x_offsets)
        if len(rows.shape) != 1 or rows.dtype not in (dtypes.int16, dtypes.int32):
            raise TypeError(f"desc.{what}'s row offsets must be a 1-D int16 or int32 tensor, got "
                            f"{rows.type}")
        columns = _offset(y_offset, what) + arange(0, self.block_shape[1])
        return self._element_pointers([expand_dims(rows.to(dtypes.int32), 1),
                                       expand_dims(columns, 0)])

    @builtin
    def gather(self, x_offsets: Any, y_offset: Any) -> tensor:
        """Rows ``x_offsets`` of the tensor, ``block_shape[1]`` columns from ``y_offset``;
        elements outside the tensor read as the padding."""
        pointers, mask = self._rows(x_offsets, y_offset, "gather")
        padding = float("nan") if self.type.padding == "nan" else 0
        return current_semantic().load(pointers, mask, _t(padding), (), "", "", "", False)

    @builtin
    def scatter(self, value: Any, x_offsets: Any, y_offset: Any) -> None:
        """Store ``value`` (one row per row offset) into rows ``x_offsets``, ``block_shape[1]``
        columns from ``y_offset``; elements outside the tensor are not written."""
        pointers, mask = self._rows(x_offsets, y_offset, "scatter")
        value = _t(value)
        if value.shape != pointers.shape:
            raise ValueError(f"desc.scatter: expected a value of shape {pointers.shape} (one row "
                             f"per row offset), got {value.shape}")
        current_semantic().store(pointers, value, mask, (), "", "")


def _offset(offset: Any, what: str) -> tensor:
    """An offset as an int32 scalar (what block pointers take)."""
    offset = _t(offset)
    if offset.type.is_block() or not offset.dtype.is_int():
        raise TypeError(f"desc.{what}'s offsets must be integer scalars, got {offset.type} -- "
                        f"fix: pass one int per dimension")
    return current_semantic().cast(offset, dtypes.int32)


@builtin
def make_tensor_descriptor(base: Any, shape: Any, strides: Any, block_shape: Any,
                           padding_option: Any = "zero") -> tensor_descriptor:
    """A descriptor of the tensor at ``base`` with this shape and these strides (the last one
    must be 1), moving blocks of ``block_shape``; elements outside read as zero, or NaN with
    ``padding_option="nan"``."""
    sem = current_semantic()
    shape, strides = list(_unwrap(shape)), list(_unwrap(strides))
    block = _unwrap_shape(block_shape)
    sem.check_tensor_descriptor(base, [_unwrap(s) for s in shape], [_unwrap(s) for s in strides],
                                block)
    padding = str(_unwrap(padding_option) or "zero")
    if padding not in ("zero", "nan"):
        raise ValueError(f"padding_option must be 'zero' or 'nan', not {padding!r}")
    if padding == "nan" and not base.dtype.element_ty.is_floating():
        raise ValueError("Padding option `nan` is not supported for integer blocks -- fix: use "
                         "padding_option='zero'")
    ty = tensor_descriptor_type(base.dtype, block, padding)
    return tensor_descriptor(base, _scalars(shape, dtypes.int32, "shape"),
                             _scalars(strides, dtypes.int64, "strides"), ty)


def _scalars(values: list, ty: dtypes.dtype, what: str) -> list[tensor]:
    result = [_t(v) for v in values]
    for v in result:
        if v.type.is_block() or not v.dtype.is_int():
            raise TypeError(f"tl.make_tensor_descriptor's {what} must be integer scalars, got "
                            f"{v.type}")
    return [current_semantic().cast(v, ty) for v in result]


def _descriptor(desc: Any, what: str) -> tensor_descriptor:
    if not isinstance(desc, tensor_descriptor):
        raise TypeError(f"tl.{what} needs a tensor descriptor (from tl.make_tensor_descriptor or "
                        f"a TensorDescriptor argument), got {type(desc).__name__}")
    return desc


@builtin
def load_tensor_descriptor(desc: Any, offsets: Any) -> tensor:
    """``desc.load(offsets)`` as a function."""
    return _descriptor(desc, "load_tensor_descriptor").load(offsets)


@builtin
def store_tensor_descriptor(desc: Any, offsets: Any, value: Any) -> None:
    """``desc.store(offsets, value)`` as a function."""
    _descriptor(desc, "store_tensor_descriptor").store(offsets, value)
