"""The type objects of naiad.language.dtypes: attributes, identity, type strings."""

import ast
import collections
from pathlib import Path

import numpy as np
import pytest

from naiad.errors import NaiadError
from naiad.language import dtypes as d
from naiad.language.dtypes import DTypeValueError, IncompatibleTypeError


class constexpr:
    """Stands in for naiad.language.core.constexpr, which dtypes recognises by name."""

    def __init__(self, value):
        self.value = value


# name, attribute name in naiad.language, bitwidth, signed?, int bitwidth, mantissa, bias
SCALARS = [
    ("void", "void", 0, None, None, None, None),
    ("int1", "int1", 1, False, 1, None, None),
    ("int8", "int8", 8, True, 8, None, None),
    ("int16", "int16", 16, True, 16, None, None),
    ("int32", "int32", 32, True, 32, None, None),
    ("int64", "int64", 64, True, 64, None, None),
    ("uint8", "uint8", 8, False, 8, None, None),
    ("uint16", "uint16", 16, False, 16, None, None),
    ("uint32", "uint32", 32, False, 32, None, None),
    ("uint64", "uint64", 64, False, 64, None, None),
    ("fp8e5", "float8e5", 8, None, None, 2, 15),
    ("fp8e5b16", "float8e5b16", 8, None, None, 2, 16),
    ("fp8e4nv", "float8e4nv", 8, None, None, 3, 7),
    ("fp8e4b8", "float8e4b8", 8, None, None, 3, 8),
    ("fp8e4b15", "float8e4b15", 8, None, None, 3, 15),
    ("fp16", "float16", 16, None, None, 10, 15),
    ("bf16", "bfloat16", 16, None, None, 7, 127),
    ("fp32", "float32", 32, None, None, 23, 127),
    ("fp64", "float64", 64, None, None, 52, 1023),
]
ALL_SCALARS = [getattr(d, row[1]) for row in SCALARS]


@pytest.mark.parametrize("name, attr, bits, signed, int_bits, mantissa, bias", SCALARS)
def test_scalar_attributes(name, attr, bits, signed, int_bits, mantissa, bias):
    ty = getattr(d, attr)
    assert ty == d.dtype(name) and ty.name == name and str(ty) == name
    assert repr(ty) == f"naiad.language.{attr}" and ty.codegen_name() == attr
    assert ty.primitive_bitwidth == bits and ty.itemsize == bits // 8
    assert ty.cache_key_part == name
    assert ty.scalar is ty and ty.with_element_ty(d.int8) is d.int8
    if signed is None:
        assert not hasattr(ty, "int_signedness") and not hasattr(ty, "int_bitwidth")
    else:
        expected = d.dtype.SIGNEDNESS.SIGNED if signed else d.dtype.SIGNEDNESS.UNSIGNED
        assert ty.int_signedness == expected and ty.int_bitwidth == int_bits
    if mantissa is None:
        assert not hasattr(ty, "fp_mantissa_width") and not hasattr(ty, "exponent_bias")
    else:
        assert (ty.fp_mantissa_width, ty.exponent_bias) == (mantissa, bias)


def test_type_lists_match_triton():
    assert d.dtype.SINT_TYPES == ["int8", "int16", "int32", "int64"]
    assert d.dtype.UINT_TYPES == ["int1", "uint8", "uint16", "uint32", "uint64"]
    assert d.dtype.FP_TYPES == ["fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16",
                                "fp16", "bf16", "fp32", "fp64"]
    assert d.dtype.STANDARD_FP_TYPES == ["fp16", "bf16", "fp32", "fp64"]
    assert d.dtype.OTHER_TYPES == ["void"]
    assert sorted(row[0] for row in SCALARS) == sorted(
        d.dtype.SINT_TYPES + d.dtype.UINT_TYPES + d.dtype.FP_TYPES + d.dtype.OTHER_TYPES)
    assert all(d.dtype.is_dtype(row[0]) for row in SCALARS) and not d.dtype.is_dtype("fp128")


# predicate -> the type names for which it holds
PREDICATES = {
    "is_fp8": {"fp8e5", "fp8e5b16", "fp8e4nv", "fp8e4b8", "fp8e4b15"},
    "is_fp8e4nv": {"fp8e4nv"}, "is_fp8e4b8": {"fp8e4b8"}, "is_fp8e4b15": {"fp8e4b15"},
    "is_fp8e5": {"fp8e5"}, "is_fp8e5b16": {"fp8e5b16"},
    "is_fp16": {"fp16"}, "is_bf16": {"bf16"}, "is_fp32": {"fp32"}, "is_fp64": {"fp64"},
    "is_int1": {"int1"}, "is_int8": {"int8"}, "is_int16": {"int16"}, "is_int32": {"int32"},
    "is_int64": {"int64"}, "is_uint8": {"uint8"}, "is_uint16": {"uint16"},
    "is_uint32": {"uint32"}, "is_uint64": {"uint64"},
    "is_floating": {"fp8e5", "fp8e5b16", "fp8e4nv", "fp8e4b8", "fp8e4b15", "fp16", "bf16", "fp32", "fp64"},
    "is_standard_floating": {"fp16", "bf16", "fp32", "fp64"},
    "is_int_signed": {"int8", "int16", "int32", "int64"},
    "is_int_unsigned": {"int1", "uint8", "uint16", "uint32", "uint64"},
    "is_int": {"int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"},
    "is_bool": {"int1"},
    "is_void": {"void"},
    "is_block": set(), "is_ptr": set(), "is_const": set(),
}


@pytest.mark.parametrize("predicate", sorted(PREDICATES))
def test_predicates(predicate):
    assert {ty.name for ty in ALL_SCALARS if getattr(ty, predicate)()} == PREDICATES[predicate]


def test_kind_orders_bool_int_float():
    K = d.dtype.KIND
    assert K.BOOLEAN < K.INTEGRAL < K.FLOATING
    assert d.int1.kind() == K.BOOLEAN
    assert {ty.kind() for ty in ALL_SCALARS if ty.is_int() and not ty.is_bool()} == {K.INTEGRAL}
    assert {ty.kind() for ty in ALL_SCALARS if ty.is_floating()} == {K.FLOATING}
    with pytest.raises(IncompatibleTypeError, match="tl.void is not a number, so it has no kind"):
        d.void.kind()


def test_integer_ranges():
    for ty in ALL_SCALARS:
        if ty.is_int():
            bits = ty.int_bitwidth
            lo, hi = (-2**(bits - 1), 2**(bits - 1) - 1) if ty.is_int_signed() else (0, 2**bits - 1)
            assert (ty.get_int_min_value(), ty.get_int_max_value()) == (lo, hi)
    assert (d.int1.get_int_min_value(), d.int1.get_int_max_value()) == (0, 1)
    with pytest.raises(IncompatibleTypeError, match="tl.float32 is not an integer type"):
        d.float32.get_int_max_value()


@pytest.mark.parametrize("ty", [d.float16, d.float32, d.float64], ids=str)
def test_ieee_floats_match_numpy(ty):
    info = np.finfo({16: np.float16, 32: np.float32, 64: np.float64}[ty.primitive_bitwidth])
    assert ty.fp_mantissa_width == info.nmant
    assert ty.exponent_bias == 1 - info.minexp
    assert ty.primitive_bitwidth == info.bits
    assert _largest_finite(ty, "ieee") == float(info.max)


# The published formats: how the all-ones exponent is used, largest finite value, smallest normal.
#   ieee: all-ones exponent holds inf and NaN;  fn: only all-ones exponent+mantissa is NaN;
#   fnuz: no inf, NaN is the negative-zero pattern, so every exponent holds finite values.
FORMATS = [
    (d.float8e5, "ieee", 57344.0, 2.0**-14),     # OCP E5M2
    (d.float8e4nv, "fn", 448.0, 2.0**-6),        # OCP E4M3FN
    (d.float8e4b8, "fnuz", 240.0, 2.0**-7),      # E4M3FNUZ (AMD)
    (d.float8e5b16, "fnuz", 57344.0, 2.0**-15),  # E5M2FNUZ (AMD)
    (d.float8e4b15, "fn", 1.75, 2.0**-14),       # Triton's E4M3 with bias 15
    (d.float16, "ieee", 65504.0, 2.0**-14),
    (d.bfloat16, "ieee", 3.3895313892515355e38, 2.0**-126),
    (d.float32, "ieee", 3.4028234663852886e38, 2.0**-126),
]


def _largest_finite(ty, convention):
    exponent_bits = ty.primitive_bitwidth - 1 - ty.fp_mantissa_width
    top_exponent = 2**exponent_bits - 1 - (convention == "ieee")
    ulp = 2.0**-ty.fp_mantissa_width
    top_mantissa = 2 - ulp * (2 if convention == "fn" else 1)
    return 2.0**(top_exponent - ty.exponent_bias) * top_mantissa


@pytest.mark.parametrize("ty, convention, largest, smallest_normal", FORMATS, ids=lambda v: str(v))
def test_float_formats(ty, convention, largest, smallest_normal):
    assert _largest_finite(ty, convention) == largest
    assert 2.0**(1 - ty.exponent_bias) == smallest_normal


def test_identity_is_by_name():
    assert d.dtype("fp32") == d.float32 and d.dtype("fp32") is not d.float32
    assert hash(d.dtype("fp32")) == hash(d.float32)
    assert d.float32 != d.int32 and d.float32 != "fp32" and d.float32 != d.pointer_type(d.float32)
    assert d.float32 == constexpr(d.float32)
    assert d.dtype(constexpr("int8")) == d.int8
    assert len({d.dtype(row[0]) for row in SCALARS} | set(ALL_SCALARS)) == len(SCALARS)


def test_unknown_name_is_an_error():
    with pytest.raises(DTypeValueError,
                       match=r"unknown dtype name 'float32'; the names are int8, .*fp64, void"):
        d.dtype("float32")
    assert issubclass(DTypeValueError, NaiadError) and issubclass(DTypeValueError, ValueError)
    assert issubclass(IncompatibleTypeError, NaiadError) and issubclass(IncompatibleTypeError, TypeError)


def test_mangle():
    types = (d.int1, d.int8, d.uint64, d.float16, d.bfloat16, d.float8e5, d.void)
    assert [ty.mangle() for ty in types] == ["u1", "i8", "u64", "fp16", "bf16", "fp8e5", "V"]
    assert d.pointer_type(d.float32).mangle() == "Pfp32"
    assert d.block_type(d.int32, [16, 4]).mangle() == "i32S16_4S"
    assert d.tuple_type([d.int32, d.pi32_t]).mangle() == "Ti32_Pi32T"
    assert d.constexpr_type(3).mangle() == "c3"
    assert d.constexpr_type(d.float16).mangle() == "cfp16"


def test_pointer_type():
    p = d.pointer_type(d.float32)
    assert p.name == str(p) == repr(p) == "pointer<fp32>"
    assert p.is_ptr() and not p.is_const() and not p.is_block() and not p.is_floating()
    assert p.element_ty == d.float32 and p.address_space == 1 and p.scalar is p
    assert p == d.pointer_type(d.float32) and hash(p) == hash(d.pointer_type(d.float32))
    assert p != d.pointer_type(d.float16) and p != d.pointer_type(d.float32, address_space=3)
    assert p != d.float32 and p == constexpr(p)

    k = d.const_pointer_type(d.float32)
    assert str(k) == "const_pointer<fp32>" and k.is_const() and k.is_ptr()
    assert k == d.pointer_type(d.float32, const=True) and k != p

    assert d.pi32_t == d.pointer_type(d.int32)
    assert str(d.pointer_type(d.pointer_type(d.int8))) == "pointer<pointer<int8>>"
    assert str(d.pointer_type(d.block_type(d.float16, [64, 64]))) == "pointer<<(64, 64), fp16>>"
    with pytest.raises(TypeError, match="a pointer's element type must be a dtype, not str"):
        d.pointer_type("fp32")


def test_block_type():
    b = d.block_type(d.float32, [16, constexpr(32)])
    assert b.shape == (16, 32) and b.get_block_shapes() == (16, 32)
    assert b.numel == 512 and b.nbytes == 2048
    assert b.name == str(b) == repr(b) == "<(16, 32), fp32>"
    assert b.is_block() and not b.is_ptr() and b.scalar == d.float32 and b.element_ty == d.float32
    assert b == d.block_type(d.float32, (16, 32)) and hash(b) == hash(d.block_type(d.float32, (16, 32)))
    assert b != d.block_type(d.float32, [32, 16]) and b != d.block_type(d.int32, [16, 32])
    assert b.with_element_ty(d.int1) == d.block_type(d.int1, [16, 32])
    assert str(d.block_type(d.pi32_t, [8])) == "<(8,), pointer<int32>>"
    assert d.block_type(d.int8, [d.TRITON_MAX_TENSOR_NUMEL]).numel == 2**20


@pytest.mark.parametrize("element, shape, error, message", [
    (d.float32, [], TypeError, "0d block_type is forbidden"),
    (d.float32, [16.0], TypeError, "shape element 0 must be an int"),
    (d.float32, [16, 12], DTypeValueError, "shape element 1 must be a power of 2, got 12"),
    (d.float32, [0], DTypeValueError, "shape element 0 must be a power of 2, got 0"),
    (d.float32, [1024, 2048], DTypeValueError,
     r"numel \(2097152\) exceeds triton maximum tensor numel \(1048576\)"),
    (d.block_type(d.int8, [2]), [2], TypeError, "a block's element type must be a scalar or pointer dtype"),
])
def test_block_type_errors(element, shape, error, message):
    with pytest.raises(error, match=message):
        d.block_type(element, shape)


def test_tuple_function_and_constexpr_types():
    t = d.tuple_type([d.int32, d.pi32_t])
    assert str(t) == repr(t) == "[int32,pointer<int32>]" and t.fields is None
    assert list(t) == [d.int32, d.pi32_t] and t[1] == d.pi32_t and len(t) == 2
    named = d.tuple_type([d.int32, d.float16], fields=["n", "x"])
    assert str(named) == "[n:int32,x:fp16]" and named.fields == ("n", "x")
    assert named != d.tuple_type([d.int32, d.float16]) and t == d.tuple_type((d.int32, d.pi32_t))
    assert hash(t) == hash(d.tuple_type([d.int32, d.pi32_t]))

    f = d.function_type([d.float32], [d.pi32_t, d.int32])
    assert str(f) == "fn ([pointer<int32>, naiad.language.int32]) -> [naiad.language.float32]"
    assert f == d.function_type([d.float32], [d.pi32_t, d.int32]) and f != d.function_type([], [])

    c = d.constexpr_type(4)
    assert c == d.constexpr_type(4) and c != d.constexpr_type(5) and hash(c) == hash(4)
    assert repr(c) == "constexpr_type[4]"


def test_get_int_dtype():
    for ty in ALL_SCALARS:
        if ty.is_int():
            assert d.get_int_dtype(ty.int_bitwidth, ty.is_int_signed()) is ty
    assert d.get_int_dtype(1, signed=True) is d.int1
    with pytest.raises(DTypeValueError, match="there is no signed integer type of 24 bits"):
        d.get_int_dtype(24, True)


# -- type strings -------------------------------------------------------------------------

CANONICAL_STRINGS = {
    "u1": d.int1, "i8": d.int8, "i16": d.int16, "i32": d.int32, "i64": d.int64,
    "u8": d.uint8, "u16": d.uint16, "u32": d.uint32, "u64": d.uint64,
    "fp8e4nv": d.float8e4nv, "fp8e4b8": d.float8e4b8, "fp8e4b15": d.float8e4b15,
    "fp8e5": d.float8e5, "fp8e5b16": d.float8e5b16,
    "fp16": d.float16, "bf16": d.bfloat16, "fp32": d.float32, "fp64": d.float64, "void": d.void,
}


def test_every_scalar_has_a_type_string():
    assert set(CANONICAL_STRINGS.values()) == set(ALL_SCALARS)


@pytest.mark.parametrize("text", sorted(CANONICAL_STRINGS))
def test_scalar_strings_round_trip(text):
    ty = d.str_to_ty(text)
    assert ty == CANONICAL_STRINGS[text] and d.ty_to_str(ty) == text
    pointer = d.str_to_ty("*" + text)
    assert pointer == d.pointer_type(ty) and not pointer.is_const() and d.ty_to_str(pointer) == "*" + text
    const = d.str_to_ty("*k" + text)
    assert const == d.const_pointer_type(ty) and d.ty_to_str(const) == "*k" + text


def test_bool_spellings():
    assert d.str_to_ty("i1") == d.str_to_ty("B") == d.str_to_ty("u1") == d.int1
    assert d.ty_to_str(d.int1) == "u1"


def test_composite_strings():
    assert d.str_to_ty("**fp16") == d.pointer_type(d.pointer_type(d.float16))
    assert d.ty_to_str(d.pointer_type(d.const_pointer_type(d.int8))) == "**ki8"
    assert d.str_to_ty("constexpr") == d.constexpr_type(None)
    assert d.str_to_ty("constexpr", 16) == d.constexpr_type(16)
    assert d.ty_to_str(d.constexpr_type(16)) == "constexpr"
    assert d.str_to_ty(("i32", "*fp32")) == d.tuple_type([d.int32, d.pointer_type(d.float32)])
    Pair = collections.namedtuple("Pair", ["n", "ptr"])
    named = d.str_to_ty(Pair("i64", "*kbf16"))
    assert named == d.tuple_type([d.int64, d.const_pointer_type(d.bfloat16)], fields=("n", "ptr"))
    assert d.ty_to_str(named) == ("i64", "*kbf16")
    assert d.ty_to_str(d.tuple_type([d.int32, d.tuple_type([d.float32])])) == ("i32", ("fp32",))


def test_string_errors():
    with pytest.raises(DTypeValueError, match=r"unknown type string 'float32'; expected one of i1, B, u1, "
                                              r".*'\*' or '\*k' followed by one of them, or 'constexpr'"):
        d.str_to_ty("float32")
    with pytest.raises(DTypeValueError, match="unknown type string 'i24'"):
        d.str_to_ty("*ki24")
    with pytest.raises(DTypeValueError, match=r"<\(16,\), fp32> has no signature string: only scalars, "
                                              r"pointers, tuples and constexprs"):
        d.ty_to_str(d.block_type(d.float32, [16]))


ARRAY_NAMES = {
    # torch
    "bool": "u1", "uint8": "u8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "float64": "fp64", "double": "fp64", "short": "i16", "int": "i32", "long": "i64",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16",
    "torch.float8_e4m3fn": "fp8e4nv", "torch.bool": "u1",
    # numpy
    "bool_": "u1", "single": "fp32", "longlong": "i64", "ubyte": "u8",
    # Triton's own names
    "fp32": "fp32", "bf16": "bf16", "i1": "u1", "u1": "u1", "int1": "u1", "float8e4b15": "fp8e4b15",
    # numpy typestr codes
    "|b1": "u1", "|i1": "i8", "|u1": "u8", "<i2": "i16", ">u4": "u32", "=i8": "i64",
    "<f2": "fp16", "<f4": "fp32", ">f8": "fp64",
}


@pytest.mark.parametrize("name", sorted(ARRAY_NAMES))
def test_from_torch_dtype_name(name):
    assert d.from_torch_dtype_name(name) == ARRAY_NAMES[name]
    d.str_to_ty(ARRAY_NAMES[name])  # every answer is a valid type string


@pytest.mark.parametrize("name", ["complex64", "float128", "void", "|V8", "<f16", "<c8", "object", "<M8"])
def test_from_torch_dtype_name_unknown(name):
    assert d.from_torch_dtype_name(name) is None


@pytest.mark.parametrize("np_type", [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                     np.uint32, np.uint64, np.float16, np.float32, np.float64])
def test_numpy_names_and_codes_agree(np_type):
    for order in "<>":
        dt = np.dtype(np_type).newbyteorder(order)
        text = d.from_torch_dtype_name(dt.str)
        assert text == d.from_torch_dtype_name(dt.name) is not None
        ty = d.str_to_ty(text)
        assert ty.primitive_bitwidth == (1 if dt.kind == "b" else 8 * dt.itemsize)


def test_dtypes_imports_nothing_heavy():
    """The launcher and type checker import this module; it must stay pure Python."""
    tree = ast.parse(Path(d.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"__future__", "enum", "re", "functools", "naiad.errors"}

