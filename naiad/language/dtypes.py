"""The data types of Naiad's kernel language, with the public surface of ``triton.language``'s.

A kernel value has one of these types:

* a scalar ``dtype`` (``int32``, ``float16``, ``float8e4nv``, ``void``...), named as Triton
  names them (``str(float32) == "fp32"``);
* a ``pointer_type`` to a scalar (or to a block, for block pointers), optionally ``const``;
* a ``block_type``: a tensor of scalars or pointers with a static, power-of-two shape;
* a ``tuple_type``, a ``constexpr_type`` (a compile-time constant) or a ``function_type``.

Triton's signature strings (``"i32"``, ``"*fp16"``, ``"*kbf16"``, ``"constexpr"``) are
parsed by `str_to_ty` and printed by `ty_to_str`; `from_torch_dtype_name` maps the dtype
names of torch and numpy arrays onto them.

This module is pure Python on purpose: the launcher, the type checker and the tests all
need it, and none of them should pay for importing an IR library, numpy or torch.
"""

from __future__ import annotations

import enum
import re
from functools import reduce

from naiad.errors import NaiadError

TRITON_MAX_TENSOR_NUMEL = 1048576
"""The most elements a block may have (Triton's limit, shared by every backend)."""


class IncompatibleTypeError(NaiadError, TypeError):
    """Operands or a conversion whose types Triton's rules reject.

    The message names the types and says how to fix the code; ``types`` holds them.
    Derives from TypeError because Triton raises TypeError for the same mistakes.
    """

    def __init__(self, message: str, *types):
        super().__init__(message)
        self.types = types


class DTypeValueError(NaiadError, ValueError):
    """A value the type rules cannot place: a literal too large for every integer type,
    a scalar outside its operand's range, an unknown type name or rounding mode.

    Derives from ValueError because Triton raises ValueError for the same mistakes.
    """


def _unwrap_constexpr(value):
    """The value inside a ``tl.constexpr``, or ``value`` itself.

    Checked by class name because ``naiad.language.core`` (which defines constexpr)
    imports this module, not the other way round.
    """
    while type(value).__name__ == "constexpr":
        value = value.value
    return value


def type_label(ty) -> str:
    """How error messages name a type: ``tl.int8`` for scalars (as the user writes it),
    the type's own text for pointers and blocks."""
    if type(ty) is dtype:
        return f"tl.{ty.codegen_name()}"
    return str(ty)


# Floating-point formats: name -> (primitive bitwidth, mantissa width, exponent bias).
# The fp8 names say what differs from IEEE: "nv" is OCP E4M3FN (no infinities), "b8"/"b16"
# are the "fnuz" variants (bias one larger, a single NaN, no negative zero), "b15" is
# E4M3 with bias 15, which backends convert with their own code (to and from fp16 and fp32).
_FLOAT_FORMATS = {
    "fp8e4b15": (8, 3, 15),
    "fp8e4nv": (8, 3, 7),
    "fp8e4b8": (8, 3, 8),
    "fp8e5": (8, 2, 15),
    "fp8e5b16": (8, 2, 16),
    "fp16": (16, 10, 15),
    "bf16": (16, 7, 127),
    "fp32": (32, 23, 127),
    "fp64": (64, 52, 1023),
}


class dtype:
    """A scalar type: an integer (signed, unsigned or the 1-bit bool), a float, or void.

    Equality and hashing go by ``name``, so ``dtype("fp32") == float32``.
    """

    SINT_TYPES = ["int8", "int16", "int32", "int64"]
    UINT_TYPES = ["int1", "uint8", "uint16", "uint32", "uint64"]  # bool counts as unsigned
    FP_TYPES = list(_FLOAT_FORMATS)
    STANDARD_FP_TYPES = ["fp16", "bf16", "fp32", "fp64"]
    OTHER_TYPES = ["void"]
    _ALL_NAMES = SINT_TYPES + UINT_TYPES + FP_TYPES + OTHER_TYPES

    class SIGNEDNESS(enum.Enum):
        SIGNED = 0
        UNSIGNED = 1

    class KIND(enum.IntEnum):
        """The kinds that promotion orders: a higher kind absorbs a lower one."""

        BOOLEAN = 0
        INTEGRAL = 1
        FLOATING = 2

    def __init__(self, name):
        name = _unwrap_constexpr(name)
        if not dtype.is_dtype(name):
            raise DTypeValueError(f"unknown dtype name {name!r}; the names are {', '.join(dtype._ALL_NAMES)}")
        self.name = name
        if name in _FLOAT_FORMATS:
            self.primitive_bitwidth, self.fp_mantissa_width, self.exponent_bias = _FLOAT_FORMATS[name]
        elif name == "void":
            self.primitive_bitwidth = 0
        else:
            self.int_signedness = (dtype.SIGNEDNESS.SIGNED if name in dtype.SINT_TYPES
                                   else dtype.SIGNEDNESS.UNSIGNED)
            self.int_bitwidth = self.primitive_bitwidth = int(name.split("int")[-1])
        self.itemsize = self.primitive_bitwidth // 8  # 0 for int1, as in Triton

    @staticmethod
    def is_dtype(type_str) -> bool:
        """Whether ``type_str`` names a scalar dtype ("int8", "fp32", "void"...)."""
        return type_str in dtype._ALL_NAMES

    # -- predicates ---------------------------------------------------------------------

    def is_fp8(self) -> bool:
        return self.name.startswith("fp8")

    def is_fp8e4nv(self) -> bool:
        return self.name == "fp8e4nv"

    def is_fp8e4b8(self) -> bool:
        return self.name == "fp8e4b8"

    def is_fp8e4b15(self) -> bool:
        return self.name == "fp8e4b15"

    def is_fp8e5(self) -> bool:
        return self.name == "fp8e5"

    def is_fp8e5b16(self) -> bool:
        return self.name == "fp8e5b16"

    def is_fp16(self) -> bool:
        return self.name == "fp16"

    def is_bf16(self) -> bool:
        return self.name == "bf16"

    def is_fp32(self) -> bool:
        return self.name == "fp32"

    def is_fp64(self) -> bool:
        return self.name == "fp64"

    def is_int1(self) -> bool:
        return self.name == "int1"

    def is_int8(self) -> bool:
        return self.name == "int8"

    def is_int16(self) -> bool:
        return self.name == "int16"

    def is_int32(self) -> bool:
        return self.name == "int32"

    def is_int64(self) -> bool:
        return self.name == "int64"

    def is_uint8(self) -> bool:
        return self.name == "uint8"

    def is_uint16(self) -> bool:
        return self.name == "uint16"

    def is_uint32(self) -> bool:
        return self.name == "uint32"

    def is_uint64(self) -> bool:
        return self.name == "uint64"

    def is_floating(self) -> bool:
        return self.name in dtype.FP_TYPES

    def is_standard_floating(self) -> bool:
        """fp16, bf16, fp32 or fp64: the floats that convert to and from integers."""
        return self.name in dtype.STANDARD_FP_TYPES

    def is_int_signed(self) -> bool:
        return self.name in dtype.SINT_TYPES

    def is_int_unsigned(self) -> bool:
        return self.name in dtype.UINT_TYPES

    def is_int(self) -> bool:
        return self.is_int_signed() or self.is_int_unsigned()

    def is_bool(self) -> bool:
        return self.is_int1()

    def is_void(self) -> bool:
        return self.name == "void"

    def is_block(self) -> bool:
        return False

    def is_ptr(self) -> bool:
        return False

    def is_const(self) -> bool:
        return False

    # -- derived facts ------------------------------------------------------------------

    def kind(self) -> dtype.KIND:
        """bool < integer < float: the order in which promotion lets one kind absorb another."""
        if self.is_bool():
            return dtype.KIND.BOOLEAN
        if self.is_int():
            return dtype.KIND.INTEGRAL
        if self.is_floating():
            return dtype.KIND.FLOATING
        raise IncompatibleTypeError(f"{type_label(self)} is not a number, so it has no kind", self)

    def get_int_max_value(self) -> int:
        self._require_int()
        return 2**(self.int_bitwidth - 1) - 1 if self.is_int_signed() else 2**self.int_bitwidth - 1

    def get_int_min_value(self) -> int:
        self._require_int()
        return -2**(self.int_bitwidth - 1) if self.is_int_signed() else 0

    def _require_int(self):
        if not self.is_int():
            raise IncompatibleTypeError(f"{type_label(self)} is not an integer type", self)

    @property
    def scalar(self) -> dtype:
        """The element type: the type itself for scalars and pointers."""
        return self

    def with_element_ty(self, element_ty: dtype) -> dtype:
        """This type with its scalar replaced: just ``element_ty`` for a scalar."""
        return element_ty

    def codegen_name(self) -> str:
        """The attribute name in ``naiad.language``: "float32" for "fp32", "bfloat16" for "bf16"."""
        if self.name.startswith("fp"):
            return "float" + self.name[2:]
        if self.name.startswith("bf"):
            return "bfloat" + self.name[2:]
        return self.name

    @property
    def cache_key_part(self) -> str:
        return self.name

    def mangle(self) -> str:
        """The type's part of a mangled function name (Triton's scheme: "i32", "u1", "fp16")."""
        if self.is_int():
            return ("i" if self.is_int_signed() else "u") + str(self.int_bitwidth)
        if self.is_void():
            return "V"
        return self.name

    # -- identity -----------------------------------------------------------------------

    def __eq__(self, other) -> bool:
        other = _unwrap_constexpr(other)
        return type(other) is type(self) and self.name == other.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        """An expression that evaluates back to this type."""
        return f"naiad.language.{self.codegen_name()}"


class pointer_type(dtype):
    """A pointer to ``element_ty`` in ``address_space`` (1 is global memory).

    A ``const`` pointer may be loaded from but not stored to; constness is part of the type.
    """

    def __init__(self, element_ty: dtype, address_space: int = 1, const: bool = False):
        element_ty = _unwrap_constexpr(element_ty)
        if not isinstance(element_ty, dtype):
            raise TypeError(f"a pointer's element type must be a dtype, not {type(element_ty).__name__}")
        self.element_ty = element_ty
        self.address_space = address_space
        self.const = const
        self.name = f"{'const_' if const else ''}pointer<{element_ty}>"

    def is_ptr(self) -> bool:
        return True

    def is_const(self) -> bool:
        return self.const

    def mangle(self) -> str:
        return "P" + self.element_ty.mangle()

    def _key(self):
        return self.element_ty, self.address_space, self.const

    def __eq__(self, other) -> bool:
        other = _unwrap_constexpr(other)
        return isinstance(other, pointer_type) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return self.name


def const_pointer_type(element_ty: dtype, address_space: int = 1) -> pointer_type:
    """A pointer to constant data: ``pointer_type(element_ty, address_space, const=True)``."""
    return pointer_type(element_ty, address_space, const=True)


class block_type(dtype):
    """A tensor of ``element_ty`` (a scalar or pointer type) with a static shape.

    Every dimension is a power of two and the element count is at most
    `TRITON_MAX_TENSOR_NUMEL`, as Triton requires; a 0-d block is a scalar instead.
    """

    def __init__(self, element_ty: dtype, shape):
        if not isinstance(element_ty, dtype) or element_ty.is_block():
            raise TypeError(f"a block's element type must be a scalar or pointer dtype, not {element_ty!r}")
        self.element_ty = element_ty
        self.shape = tuple(_unwrap_constexpr(d) for d in shape)
        if not self.shape:
            raise TypeError("0d block_type is forbidden: use the element type for a scalar")
        for i, d in enumerate(self.shape):
            if type(d) is not int:
                raise TypeError(f"shape element {i} must be an int (a tl.constexpr), "
                                f"got {type(d).__name__}")
            if d <= 0 or d & (d - 1):
                raise DTypeValueError(f"shape element {i} must be a power of 2, got {d}")
        self.numel = reduce(lambda a, b: a * b, self.shape)
        if self.numel > TRITON_MAX_TENSOR_NUMEL:
            raise DTypeValueError(f"numel ({self.numel}) exceeds triton maximum tensor numel "
                                  f"({TRITON_MAX_TENSOR_NUMEL})")
        self.name = f"<{self.shape}, {self.element_ty}>"

    def is_block(self) -> bool:
        return True

    @property
    def scalar(self) -> dtype:
        return self.element_ty

    def get_block_shapes(self) -> tuple:
        return self.shape

    def with_element_ty(self, element_ty: dtype) -> block_type:
        return block_type(element_ty, self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * (self.element_ty.primitive_bitwidth // 8)

    def mangle(self) -> str:
        return f"{self.element_ty.mangle()}S{'_'.join(map(str, self.shape))}S"

    def _key(self):
        return self.element_ty, self.shape

    def __eq__(self, other) -> bool:
        return isinstance(other, block_type) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return self.name


class function_type(dtype):
    """The type of a function: its parameter types and its result types."""

    def __init__(self, ret_types: list, param_types: list):
        self.ret_types = list(ret_types)
        self.param_types = list(param_types)
        self.name = f"fn ({self.param_types}) -> {self.ret_types}"

    def __eq__(self, other) -> bool:
        return (isinstance(other, function_type)
                and (self.ret_types, self.param_types) == (other.ret_types, other.param_types))

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return self.name


class tuple_type:
    """The type of a tuple of values; ``fields`` holds the field names of a namedtuple."""

    def __init__(self, types, fields=None):
        self.types = list(types)
        self.fields = None if fields is None else tuple(fields)
        if self.fields is None:
            self.name = "[" + ",".join(str(t) for t in self.types) + "]"
        else:
            self.name = "[" + ",".join(f"{k}:{v}" for k, v in zip(self.fields, self.types)) + "]"

    def __iter__(self):
        return iter(self.types)

    def __len__(self) -> int:
        return len(self.types)

    def __getitem__(self, index):
        return self.types[index]

    def mangle(self) -> str:
        return "T" + "_".join(t.mangle() for t in self.types) + "T"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and (self.types, self.fields) == (other.types, other.fields)

    def __hash__(self) -> int:
        return hash((tuple(self.types), self.fields))

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


class constexpr_type:
    """The type of a compile-time constant: the value itself is part of the type."""

    def __init__(self, value):
        self.value = value

    def mangle(self) -> str:
        inner = self.value.mangle() if hasattr(self.value, "mangle") else repr(self.value)
        return "c" + inner

    def __eq__(self, other) -> bool:
        return isinstance(other, constexpr_type) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"constexpr_type[{self.value}]"


# -- the scalar types, under Triton's names -------------------------------------------------

void = dtype("void")
int1 = dtype("int1")
int8 = dtype("int8")
int16 = dtype("int16")
int32 = dtype("int32")
int64 = dtype("int64")
uint8 = dtype("uint8")
uint16 = dtype("uint16")
uint32 = dtype("uint32")
uint64 = dtype("uint64")
float8e5 = dtype("fp8e5")
float8e5b16 = dtype("fp8e5b16")
float8e4nv = dtype("fp8e4nv")
float8e4b8 = dtype("fp8e4b8")
float8e4b15 = dtype("fp8e4b15")
float16 = dtype("fp16")
bfloat16 = dtype("bf16")
float32 = dtype("fp32")
float64 = dtype("fp64")

pi32_t = pointer_type(int32)

_INTS = {(t.int_bitwidth, t.is_int_signed()): t
         for t in (int8, int16, int32, int64, uint8, uint16, uint32, uint64)}


def get_int_dtype(bitwidth: int, signed: bool) -> dtype:
    """The integer type of ``bitwidth`` bits and the given signedness (1 bit is always int1)."""
    if bitwidth == 1:
        return int1
    try:
        return _INTS[bitwidth, bool(signed)]
    except KeyError:
        raise DTypeValueError(f"there is no {'signed' if signed else 'unsigned'} integer type "
                              f"of {bitwidth} bits; the widths are 8, 16, 32 and 64") from None


# -- Triton's type strings ------------------------------------------------------------------

# Signature string -> scalar type.  "i1" and "B" are accepted spellings of bool; Triton
# itself writes "u1", because bool counts as unsigned.
_STR_TO_SCALAR = {
    "i1": int1, "B": int1, "u1": int1,
    "i8": int8, "i16": int16, "i32": int32, "i64": int64,
    "u8": uint8, "u16": uint16, "u32": uint32, "u64": uint64,
    "fp8e4nv": float8e4nv, "fp8e4b8": float8e4b8, "fp8e4b15": float8e4b15,
    "fp8e5": float8e5, "fp8e5b16": float8e5b16,
    "fp16": float16, "bf16": bfloat16, "fp32": float32, "fp64": float64,
    "void": void,
}


def str_to_ty(text, constant=None):
    """Parse a Triton signature string into a type.

    ``"i32"``, ``"u1"``, ``"fp16"``...: a scalar; ``"*fp32"``: a pointer; ``"*kfp32"``: a
    const pointer; ``"constexpr"``: a ``constexpr_type`` of ``constant``; a tuple (or
    namedtuple) of strings: a ``tuple_type`` of their types.
    """
    if isinstance(text, tuple):
        return tuple_type([str_to_ty(t, constant) for t in text], getattr(type(text), "_fields", None))
    if text.startswith("*"):
        const = text.startswith("*k")
        return pointer_type(str_to_ty(text[2 if const else 1:]), const=const)
    if text.startswith("constexpr"):
        return constexpr_type(constant)
    try:
        return _STR_TO_SCALAR[text]
    except KeyError:
        raise DTypeValueError(f"unknown type string {text!r}; expected one of {', '.join(_STR_TO_SCALAR)}, "
                              f"'*' or '*k' followed by one of them, or 'constexpr'") from None


def ty_to_str(ty) -> str | tuple:
    """Print a type as Triton's signature string; the inverse of `str_to_ty`."""
    if isinstance(ty, constexpr_type):
        return "constexpr"
    if isinstance(ty, tuple_type):
        return tuple(ty_to_str(t) for t in ty)
    if isinstance(ty, pointer_type):
        return ("*k" if ty.const else "*") + ty_to_str(ty.element_ty)
    if type(ty) is dtype:
        return ty.mangle() if ty.is_int() else ty.name
    raise DTypeValueError(f"{ty} has no signature string: only scalars, pointers, tuples and "
                          f"constexprs appear in kernel signatures")


# Array dtype names -> type strings: torch's names, numpy's names and their C-style aliases,
# and Triton's own names (str() of a tl dtype), which Triton accepts as well.
_ARRAY_DTYPE_NAMES = {
    "bool": "u1", "bool_": "u1", "int1": "u1", "uint1": "u1", "i1": "u1",
    "int8": "i8", "byte": "i8", "int16": "i16", "short": "i16",
    "int32": "i32", "int": "i32", "intc": "i32", "int64": "i64", "long": "i64", "longlong": "i64",
    "uint8": "u8", "ubyte": "u8", "uint16": "u16", "ushort": "u16",
    "uint32": "u32", "uintc": "u32", "uint64": "u64", "ulonglong": "u64",
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "float32": "fp32", "float": "fp32", "single": "fp32", "float64": "fp64", "double": "fp64",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16",
    "float8e4nv": "fp8e4nv", "float8e5": "fp8e5", "float8e4b8": "fp8e4b8",
    "float8e5b16": "fp8e5b16", "float8e4b15": "fp8e4b15",
    **{s: s for s, t in _STR_TO_SCALAR.items() if t != void and ty_to_str(t) == s},
}
# numpy's dtype.str: a byte-order mark, then a kind letter and the size in bytes ("<f4", "|b1").
# The mark is required: without it "u1" would read as Triton's bool, not numpy's uint8.
_NUMPY_TYPESTR = re.compile(r"[<>|=](\w+)")
_NUMPY_TYPESTR_CODES = {
    "b1": "u1", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64",
    "u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64", "f2": "fp16", "f4": "fp32", "f8": "fp64",
}


def from_torch_dtype_name(name: str) -> str | None:
    """The Triton type string of an array's dtype name, or None when Triton has no such type.

    Accepts torch names ("float32", "torch.bfloat16", "float8_e4m3fn"), numpy names
    ("float32", "bool") and numpy typestr codes ("<f4", "|u1"), without importing either.
    """
    match = _NUMPY_TYPESTR.fullmatch(name)
    if match:
        return _NUMPY_TYPESTR_CODES.get(match.group(1))
    return _ARRAY_DTYPE_NAMES.get(name.rsplit(".", 1)[-1])
