"""Triton's typing rules (naiad.language.promotion), checked against tables written from them."""

import itertools

import numpy as np
import pytest

from naiad.language import dtypes as d
from naiad.language.dtypes import DTypeValueError, IncompatibleTypeError
from naiad.language.promotion import (
    OpTypes,
    binary_op_types,
    cast_allowed,
    check_cast,
    computation_type,
    division_semantics,
    int_range,
    integer_promote,
    literal_type,
    right_shift_is_arithmetic,
    unary_op_type,
)

T = {"b": d.int1, "i8": d.int8, "i16": d.int16, "i32": d.int32, "i64": d.int64,
     "u8": d.uint8, "u16": d.uint16, "u32": d.uint32, "u64": d.uint64,
     "f16": d.float16, "bf": d.bfloat16, "f32": d.float32, "f64": d.float64,
     "e5": d.float8e5, "e4nv": d.float8e4nv}


def _grid(text):
    """{(row type, column type): result type or None for an error} from a table."""
    header, *rows = [line.split() for line in text.strip().splitlines()]
    return {(T[row[0]], T[col]): T.get(cell) for row in rows for col, cell in zip(header, row[1:])}


# Tensor op tensor, for + - * and the like.  Integers: C's usual conversions (the unsigned
# type wins at equal or greater width); any float absorbs integers, fp16 beats bf16, and
# bf16 with anything but bf16 computes in fp32.
MIXED = _grid("""
     b    i8   i16  i32  i64  u8   u16  u32  u64  f16  bf   f32  f64
b    b    i8   i16  i32  i64  u8   u16  u32  u64  f16  f32  f32  f64
i8   i8   i8   i16  i32  i64  u8   u16  u32  u64  f16  f32  f32  f64
i16  i16  i16  i16  i32  i64  i16  u16  u32  u64  f16  f32  f32  f64
i32  i32  i32  i32  i32  i64  i32  i32  u32  u64  f16  f32  f32  f64
i64  i64  i64  i64  i64  i64  i64  i64  i64  u64  f16  f32  f32  f64
u8   u8   u8   i16  i32  i64  u8   u16  u32  u64  f16  f32  f32  f64
u16  u16  u16  u16  i32  i64  u16  u16  u32  u64  f16  f32  f32  f64
u32  u32  u32  u32  u32  i64  u32  u32  u32  u64  f16  f32  f32  f64
u64  u64  u64  u64  u64  u64  u64  u64  u64  u64  f16  f32  f32  f64
f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f16  f32  f64
bf   f32  f32  f32  f32  f32  f32  f32  f32  f32  f16  bf   f32  f64
f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64
f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64
""")

# Tensor / tensor (and // and %): floats below 64 bits compute in fp32, and integers of
# different signedness (bool counts as unsigned) are an error (!).
DIV_OR_MOD = _grid("""
     b    i8   i16  i32  i64  u8   u16  u32  u64  f16  bf   f32  f64
b    b    !    !    !    !    u8   u16  u32  u64  f32  f32  f32  f64
i8   !    i8   i16  i32  i64  !    !    !    !    f32  f32  f32  f64
i16  !    i16  i16  i32  i64  !    !    !    !    f32  f32  f32  f64
i32  !    i32  i32  i32  i64  !    !    !    !    f32  f32  f32  f64
i64  !    i64  i64  i64  i64  !    !    !    !    f32  f32  f32  f64
u8   u8   !    !    !    !    u8   u16  u32  u64  f32  f32  f32  f64
u16  u16  !    !    !    !    u16  u16  u32  u64  f32  f32  f32  f64
u32  u32  !    !    !    !    u32  u32  u32  u64  f32  f32  f32  f64
u64  u64  !    !    !    !    u64  u64  u64  u64  f32  f32  f32  f64
f16  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64
bf   f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64
f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64
f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64
""")

STANDARD = [T[k] for k in "b i8 i16 i32 i64 u8 u16 u32 u64 f16 bf f32 f64".split()]


def test_tables_are_symmetric():
    for table in (MIXED, DIV_OR_MOD):
        assert all(table[a, b] == table[b, a] for a, b in table)


def _expected(a, a_is_scalar, b, b_is_scalar, div_or_mod):
    """Triton's scalar rule on top of the tables: a scalar of a kind no higher than the
    tensor's does not take part, so the tensor's type meets itself."""
    table = DIV_OR_MOD if div_or_mod else MIXED
    if a_is_scalar != b_is_scalar:
        scalar, tensor = (a, b) if a_is_scalar else (b, a)
        if scalar.kind() <= tensor.kind():
            return table[tensor, tensor]
    return table[a, b]


@pytest.mark.parametrize("div_or_mod", [False, True])
@pytest.mark.parametrize("a_is_scalar, b_is_scalar", list(itertools.product([False, True], repeat=2)))
def test_computation_type_table(a_is_scalar, b_is_scalar, div_or_mod):
    for a, b in itertools.product(STANDARD, repeat=2):
        expected = _expected(a, a_is_scalar, b, b_is_scalar, div_or_mod)
        if expected is None:
            with pytest.raises(IncompatibleTypeError, match="because they have different signedness"):
                computation_type(a, a_is_scalar, b, b_is_scalar, div_or_mod)
        else:
            assert computation_type(a, a_is_scalar, b, b_is_scalar, div_or_mod) == expected, (a, b)


def test_scalar_rule_examples():
    # Triton's documentation: (uint8, int) -> uint8 and (int16, 4.0) -> float32
    assert computation_type(d.uint8, False, literal_type(7), True) == d.uint8
    assert computation_type(d.int16, False, literal_type(4.0), True) == d.float32
    assert computation_type(literal_type(4.0), True, d.int16, False) == d.float32
    assert computation_type(d.float16, False, literal_type(2.0), True) == d.float16
    assert computation_type(d.bfloat16, False, literal_type(2), True) == d.bfloat16
    assert computation_type(d.int1, False, literal_type(True), True) == d.int1
    assert computation_type(d.int1, False, literal_type(3), True) == d.int32
    assert computation_type(d.int1, False, literal_type(2**32 - 1), True) == d.uint32
    assert computation_type(d.int8, False, literal_type(1e300), True) == d.float64
    # a scalar float against a half-precision tensor still divides in fp32
    assert computation_type(d.float16, False, literal_type(2.0), True, div_or_mod=True) == d.float32
    assert computation_type(d.int8, False, literal_type(2), True, div_or_mod=True) == d.int8


def test_fp8_rules():
    e5, e4 = d.float8e5, d.float8e4nv
    assert computation_type(e5, False, e5, False) == e5
    assert computation_type(e5, False, e4, False) == d.float16
    assert computation_type(e5, False, d.float16, False) == d.float16
    assert computation_type(e5, False, d.bfloat16, False) == d.float32
    assert computation_type(e5, False, d.float32, False) == d.float32
    assert computation_type(e5, False, d.float64, False) == d.float64
    # Triton 3.8: / and % with any float compute in fp32, fp8 included
    assert computation_type(e5, False, e5, False, div_or_mod=True) == d.float32
    assert computation_type(e5, False, literal_type(2.0), True, div_or_mod=True) == d.float32
    assert computation_type(literal_type(2.0), True, e5, False) == e5
    assert computation_type(e5, False, literal_type(3), True) == e5
    assert computation_type(d.int32, False, e5, False, div_or_mod=True) == d.float32
    for integer in (d.int32, d.int1, d.uint8):
        with pytest.raises(IncompatibleTypeError, match=(
                fr"cannot combine tl.float8e5 and tl.{integer.name}: Triton does not convert between "
                fr"tl.{integer.name} and fp8 types implicitly. Convert the fp8 operand first, e.g. "
                r"\.to\(tl.float16\) on the tl.float8e5 operand.")):
            computation_type(e5, False, integer, False)


def test_mixed_signedness_message():
    with pytest.raises(IncompatibleTypeError) as info:
        computation_type(d.int8, False, d.uint32, False, div_or_mod=True)
    assert str(info.value) == (
        "Cannot use /, // or % with tl.int8 and tl.uint32 because they have different signedness; "
        "this is unlikely to give a useful answer. Cast one operand to the other's signedness first, "
        "e.g. .to(tl.int32) on the tl.uint32 operand.")
    assert info.value.types == (d.int8, d.uint32)
    with pytest.raises(IncompatibleTypeError, match=r"e.g. .to\(tl.int8\) on the tl.int1 operand"):
        computation_type(d.int1, False, d.int8, False, div_or_mod=True)


def test_computation_type_needs_numbers():
    with pytest.raises(IncompatibleTypeError, match=r"pointer<int32> is not a numeric type, so arithmetic "
                                                    r"promotion does not apply"):
        computation_type(d.pi32_t, False, d.int32, False)
    with pytest.raises(IncompatibleTypeError, match="void is not a numeric type"):
        computation_type(d.int32, False, d.void, False)
    block = d.block_type(d.int8, [16])
    assert computation_type(block, False, d.int16, False) == d.int16


def test_integer_promote():
    assert integer_promote(d.int32, d.uint32) == d.uint32
    assert integer_promote(d.uint16, d.int32) == d.int32
    assert integer_promote(d.int1, d.int1) == d.int1
    assert integer_promote(d.int1, d.int8) == d.int8
    ints = [t for t in STANDARD if t.is_int()]
    for a, b in itertools.product(ints, repeat=2):
        assert integer_promote(a, b) == MIXED[a, b] == integer_promote(b, a)
    with pytest.raises(IncompatibleTypeError,
                       match="integer promotion needs integer types, got tl.float16"):
        integer_promote(d.int8, d.float16)


def _agrees_with_array_libraries(a, b):
    """Where torch's promotion matches Triton's: not for mixed signedness (Triton follows C),
    nor for bf16 with integers (Triton: fp32) or with fp16 (Triton: fp16)."""
    if a.is_int() and b.is_int():
        return a.is_bool() or b.is_bool() or a.int_signedness == b.int_signedness
    if d.bfloat16 in (a, b):
        other = b if a == d.bfloat16 else a
        return other in (d.bfloat16, d.float32, d.float64)
    return True


def test_agrees_with_torch_result_type():
    torch = pytest.importorskip("torch")
    torch_types = {d.int1: torch.bool, d.int8: torch.int8, d.int16: torch.int16, d.int32: torch.int32,
                   d.int64: torch.int64, d.uint8: torch.uint8, d.float16: torch.float16,
                   d.bfloat16: torch.bfloat16, d.float32: torch.float32, d.float64: torch.float64}
    by_torch = {v: k for k, v in torch_types.items()}
    for a, b in itertools.product(torch_types, repeat=2):
        if _agrees_with_array_libraries(a, b):
            ta, tb = torch.empty(1, dtype=torch_types[a]), torch.empty(1, dtype=torch_types[b])
            assert computation_type(a, False, b, False) == by_torch[torch.result_type(ta, tb)], (a, b)
    # torch also lets a scalar of a lower or equal kind leave the tensor's type alone
    for a in torch_types:
        for value in (True, 3, 2.5):
            if literal_type(value).kind() <= a.kind():
                result = torch.result_type(torch.empty(1, dtype=torch_types[a]), value)
                assert computation_type(a, False, literal_type(value), True) == by_torch[result]


def test_agrees_with_numpy_result_type():
    numpy_types = {d.int1: np.bool_, d.int8: np.int8, d.int16: np.int16, d.int32: np.int32,
                   d.int64: np.int64, d.uint8: np.uint8, d.uint16: np.uint16, d.uint32: np.uint32,
                   d.uint64: np.uint64, d.float16: np.float16, d.float32: np.float32,
                   d.float64: np.float64}
    by_numpy = {np.dtype(v): k for k, v in numpy_types.items()}
    checked = 0
    for a, b in itertools.product(numpy_types, repeat=2):
        # numpy widens integers mixed with floats (int16 + float16 -> float32); skip those
        if _agrees_with_array_libraries(a, b) and a.is_floating() == b.is_floating():
            result = np.result_type(numpy_types[a], numpy_types[b])
            assert computation_type(a, False, b, False) == by_numpy[result], (a, b)
            checked += 1
    assert checked == 58  # 49 integer pairs and 9 float pairs


def test_int_range():
    assert int_range(d.int8) == (-128, 127)
    assert int_range(d.uint64) == (0, 2**64 - 1)
    assert int_range(d.int1) == (0, 1)


# -- literals -----------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    (0, d.int32), (-1, d.int32), (2**31 - 1, d.int32), (-2**31, d.int32),
    (2**31, d.uint32), (2**32 - 1, d.uint32),
    (2**32, d.int64), (-2**31 - 1, d.int64), (2**63 - 1, d.int64), (-2**63, d.int64),
    (2**63, d.uint64), (2**64 - 1, d.uint64),
    (True, d.int1), (False, d.int1),
    (0.0, d.float32), (-0.0, d.float32), (1.5, d.float32), (float("inf"), d.float32),
    (float("-inf"), d.float32), (float("nan"), d.float32),
    (2.0**-126, d.float32), (-2.0**-126, d.float32), (2.0**-127, d.float64), (1e-300, d.float64),
    (3.4028234663852886e38, d.float32), (3.4028235677973366e38, d.float64), (1e300, d.float64),
])
def test_literal_type(value, expected):
    assert literal_type(value) == expected


@pytest.mark.parametrize("value", [2**64, -2**63 - 1, 10**30])
def test_literal_type_out_of_range(value):
    with pytest.raises(DTypeValueError, match=(
            fr"^Nonrepresentable integer {value}: integer literals must lie in \[-2\*\*63, 2\*\*64 - 1\], "
            r"the range of tl.int64 and tl.uint64 together$")):
        literal_type(value)


def test_literal_type_of_non_numbers():
    class constexpr:
        def __init__(self, value):
            self.value = value

    assert literal_type(constexpr(2**31)) == d.uint32
    with pytest.raises(IncompatibleTypeError, match=r"cannot use 'x' of type str as a tensor operand; "
                                                    r"only bool, int and float scalars convert to tensors"):
        literal_type("x")


# -- binary operators ---------------------------------------------------------------------

def same(ty, result=None):
    return OpTypes(ty, ty, result or ty)


@pytest.mark.parametrize("op, lhs, rhs, expected", [
    ("+", d.int8, 100, same(d.int8)),
    ("-", 100, d.uint8, same(d.uint8)),
    ("*", d.float16, d.bfloat16, same(d.float16)),
    ("+", d.int32, d.bfloat16, same(d.float32)),
    ("*", d.int16, 4.0, same(d.float32)),
    ("+", d.block_type(d.int8, [4]), d.block_type(d.int32, [4]), same(d.int32)),
    ("/", d.int8, d.int16, same(d.float32)),
    ("/", d.int64, 3, same(d.float32)),
    ("/", d.float16, d.float16, same(d.float32)),
    ("/", d.float64, 2, same(d.float64)),
    ("/", d.float8e5, 2.0, same(d.float32)),
    ("//", d.int8, d.int16, same(d.int16)),
    ("//", d.uint32, 3, same(d.uint32)),
    ("%", d.int32, d.int32, same(d.int32)),
    ("%", d.float16, d.float16, same(d.float32)),
    ("%", d.int32, 2.5, same(d.float32)),
    ("&", d.int8, d.uint8, same(d.uint8)),
    ("|", d.int1, d.int1, same(d.int1)),
    ("^", d.int1, True, same(d.int1)),
    ("^", d.int1, 1, same(d.int32)),
    ("<<", d.int8, 3, same(d.int8)),
    (">>", d.int8, d.uint16, same(d.uint16)),
    ("<<", d.uint64, d.int8, same(d.uint64)),
    ("==", d.int8, 1, same(d.int32, d.int1)),
    ("<", d.float16, 0.5, same(d.float32, d.int1)),
    (">", d.uint32, -1, same(d.uint32, d.int1)),
    (">=", d.uint8, -1, same(d.int32, d.int1)),
    ("!=", d.bfloat16, d.bfloat16, same(d.bfloat16, d.int1)),
    ("<=", d.float8e5, d.float8e4nv, same(d.float16, d.int1)),
    ("+", d.pi32_t, 3, OpTypes(d.pi32_t, d.int32, d.pi32_t)),
    ("+", d.uint8, d.pi32_t, OpTypes(d.uint8, d.pi32_t, d.pi32_t)),
    ("-", d.pi32_t, d.int64, OpTypes(d.pi32_t, d.int64, d.pi32_t)),
    ("+", d.block_type(d.pi32_t, [8]), d.int1, OpTypes(d.pi32_t, d.int1, d.pi32_t)),
    ("+", d.pi32_t, 2**40, OpTypes(d.pi32_t, d.int64, d.pi32_t)),
])
def test_binary_op_types(op, lhs, rhs, expected):
    assert binary_op_types(op, lhs, rhs) == expected


@pytest.mark.parametrize("op, lhs, rhs, error, message", [
    ("/", d.int8, d.uint8, IncompatibleTypeError,
     "Cannot use /, // or % with tl.int8 and tl.uint8 because they have different signedness"),
    ("%", d.int1, 2, IncompatibleTypeError,
     "Cannot use /, // or % with tl.int1 and tl.int32 because they have different signedness"),
    ("//", d.float16, 2, IncompatibleTypeError,
     r"^// is not defined for floating-point operands in Triton \(tl.float16 // tl.int32 computes in "
     r"tl.float32\); use tl.floor\(a / b\) for a float floor division, or cast both operands to an "
     r"integer type with .to\(tl.int32\).$"),
    ("//", d.int32, 2.0, IncompatibleTypeError, r"\(tl.int32 // tl.float32 computes in tl.float32\)"),
    ("&", d.float32, d.int32, IncompatibleTypeError,
     r"^invalid operands of type tl.float32 and tl.int32 for &: bitwise operators and shifts need "
     r"integers. Convert the value with .to\(tl.int32\), or reuse its bits with "
     r".to\(tl.int32, bitcast=True\).$"),
    ("|", d.int32, 1.0, IncompatibleTypeError,
     r"tl.int32 and tl.float32 for \|: .* .to\(tl.int32, bitcast=True\)"),
    ("<<", d.float16, 1, IncompatibleTypeError, r"for <<: .* .to\(tl.int16, bitcast=True\)"),
    (">>", d.int8, d.float8e5, IncompatibleTypeError, "cannot combine tl.int8 and tl.float8e5"),
    ("+", d.uint8, -1, DTypeValueError,
     r"^Cannot perform a binary operation between an unsigned tensor \(tl.uint8\) and a negative scalar "
     r"\(-1\). Perform an explicit cast on one of them, e.g. .to\(tl.int64\) on the tensor.$"),
    ("&", -3, d.uint32, DTypeValueError, "unsigned tensor"),
    ("+", d.int32, 2**40, DTypeValueError,
     r"^Scalar 1099511627776 is out of range for type tl.int32 \[-2147483648, 2147483647\]; cast the "
     r"tensor to a wider type first, e.g. .to\(tl.int64\).$"),
    ("*", d.int8, 300, DTypeValueError, r"Scalar 300 is out of range for type tl.int8 \[-128, 127\]"),
    ("/", d.int16, 2**40, DTypeValueError, "Scalar 1099511627776 is out of range for type tl.int16"),
    ("+", d.int32, 2**64, DTypeValueError, "Nonrepresentable integer 18446744073709551616"),
    ("*", d.pi32_t, 2, IncompatibleTypeError,
     r"^invalid operands of type pointer<int32> and tl.int32 for \*: the only operators on pointers are "
     r"ptr \+ int, int \+ ptr and ptr - int. To compute with an address, cast the pointer with "
     r".to\(tl.int64\).$"),
    ("==", d.pi32_t, d.pi32_t, IncompatibleTypeError, "for ==: the only operators on pointers"),
    ("-", 1, d.pi32_t, IncompatibleTypeError, "tl.int32 and pointer<int32> for -: the only operators"),
    ("+", d.pi32_t, d.pi32_t, IncompatibleTypeError,
     r"^invalid operands of type pointer<int32> and pointer<int32> for \+: two pointers cannot be added; "
     r"keep integer offsets and add them to one pointer.$"),
    ("-", d.pi32_t, d.pointer_type(d.int8), IncompatibleTypeError, "two pointers cannot be subtracted"),
    ("+", d.pi32_t, 1.0, IncompatibleTypeError,
     r"^invalid operands of type pointer<int32> and tl.float32 for \+: a pointer offset must be an "
     r"integer; convert it with .to\(tl.int32\).$"),
    ("**", d.int32, d.int32, DTypeValueError, r"unknown binary operator '\*\*'; expected one of \+ - \*"),
])
def test_binary_op_errors(op, lhs, rhs, error, message):
    with pytest.raises(error, match=message):
        binary_op_types(op, lhs, rhs)


def test_every_operator_follows_computation_type():
    """Apart from / (float) and comparisons (int1), an operator computes in the promoted type."""
    ops = ["+", "-", "*", "/", "//", "%", "&", "|", "^", "<<", ">>", "==", "<"]
    for op, (a, b) in itertools.product(ops, itertools.product(STANDARD, repeat=2)):
        div = op in ("/", "//", "%")
        promoted = (DIV_OR_MOD if div else MIXED)[a, b]
        integers_only = op in ("//", "&", "|", "^", "<<", ">>")
        if promoted is None or (integers_only and promoted.is_floating()):
            with pytest.raises(IncompatibleTypeError):
                binary_op_types(op, a, b)
            continue
        result = binary_op_types(op, a, b)
        operand = d.float32 if op == "/" and promoted.is_int() else promoted
        assert result == OpTypes(operand, operand, d.int1 if op in ("==", "<") else operand), (op, a, b)


def test_right_shift_kind():
    assert right_shift_is_arithmetic(d.int8, d.uint16)
    assert not right_shift_is_arithmetic(d.uint32, d.int32)
    assert right_shift_is_arithmetic(d.block_type(d.int64, [2]), 3)
    # scalar >> tensor: Triton looks at the shift amount's type
    assert not right_shift_is_arithmetic(-8, d.uint8)
    assert right_shift_is_arithmetic(1024, d.int32)


@pytest.mark.parametrize("op, ty, expected", [
    ("/", d.float32, "arith.divf"), ("/", d.float64, "arith.divf"),
    ("//", d.int32, "arith.divsi"), ("//", d.uint8, "arith.divui"), ("//", d.int1, "arith.divui"),
    ("%", d.int64, "arith.remsi"), ("%", d.uint64, "arith.remui"), ("%", d.float32, "arith.remf"),
])
def test_division_semantics(op, ty, expected):
    assert division_semantics(op, ty) == expected


@pytest.mark.parametrize("op, ty", [("/", d.int32), ("//", d.float32)])
def test_division_semantics_errors(op, ty):
    with pytest.raises(IncompatibleTypeError, match=fr"^{op} has no lowering for operands of type "
                                                    fr"{d.type_label(ty)}; binary_op_types"):
        division_semantics(op, ty)


# -- unary operators ----------------------------------------------------------------------

def test_unary_op_type():
    assert unary_op_type("-", d.uint8) == d.uint8
    assert unary_op_type("-", d.block_type(d.float16, [4])) == d.float16
    assert unary_op_type("~", d.int64) == d.int64
    assert unary_op_type("not", d.int1) == d.int1


@pytest.mark.parametrize("op, ty, message", [
    ("-", d.pi32_t, r"^wrong type argument to unary - \(pointer<int32>\): only numbers can be negated; "
                    r"for a pointer, negate the offset instead.$"),
    ("-", d.void, r"^wrong type argument to unary - \(tl.void\): only numbers"),
    ("~", d.float32, r"^wrong type argument to unary ~ \(tl.float32\): ~ needs an integer; to flip a "
                     r"float's bits, bitcast it to an integer of the same width first.$"),
    ("not", d.int32, r"^wrong type argument to unary not \(tl.int32\): `not` needs a boolean \(tl.int1\); "
                     r"write x == 0 for a number.$"),
    ("+", d.float32, r"^wrong type argument to unary \+ \(tl.float32\): unary \+ is not defined on "
                     r"Triton tensors; drop it.$"),
])
def test_unary_op_errors(op, ty, message):
    with pytest.raises(IncompatibleTypeError, match=message):
        unary_op_type(op, ty)


def test_unknown_unary_operator():
    with pytest.raises(DTypeValueError, match="unknown unary operator '!'; expected one of - ~ not +"):
        unary_op_type("!", d.int32)


# -- casts --------------------------------------------------------------------------------

SCALARS = [d.int1, d.int8, d.int16, d.int32, d.int64, d.uint8, d.uint16, d.uint32, d.uint64,
           d.float8e5, d.float8e5b16, d.float8e4nv, d.float8e4b8, d.float8e4b15,
           d.float16, d.bfloat16, d.float32, d.float64]
POINTERS = [d.pi32_t, d.const_pointer_type(d.float16)]


def _cast_expected(src, dst):
    """Triton's cast, restated: which value conversions exist."""
    if src == dst:
        return True
    if d.void in (src, dst):
        return False
    if src.is_ptr() or dst.is_ptr():
        if src.is_ptr() and dst.is_ptr():
            return True
        if src.is_ptr():
            return dst.is_int() and dst.int_bitwidth in (1, 64)
        return src.is_int()
    if d.float8e4b15 in (src, dst):
        other = dst if src == d.float8e4b15 else src
        return other in (d.float16, d.float32)
    if src.is_fp8() or dst.is_fp8():
        return src.is_floating() and dst.is_floating()
    return True


def test_cast_matrix():
    types = SCALARS + POINTERS + [d.void]
    for src, dst in itertools.product(types, repeat=2):
        assert cast_allowed(src, dst) == _cast_expected(src, dst), (src, dst)


def test_bitcast_matrix():
    for src, dst in itertools.product(SCALARS, repeat=2):
        assert cast_allowed(src, dst, bitcast=True) == (src.primitive_bitwidth == dst.primitive_bitwidth)
    # a bitcast involving a pointer is a value conversion
    assert cast_allowed(d.pi32_t, d.int64, bitcast=True)
    assert not cast_allowed(d.pi32_t, d.int32, bitcast=True)
    assert cast_allowed(d.block_type(d.float32, [4]), d.int32, bitcast=True)


@pytest.mark.parametrize("src, dst, kwargs, error, message", [
    (d.int32, d.float8e5, {}, IncompatibleTypeError,
     r"^cannot cast tl.int32 to tl.float8e5: fp8 types convert only to and from floating-point types; "
     r"go through a float, e.g. .to\(tl.float16\).to\(tl.float8e5\).$"),
    (d.float8e4nv, d.uint8, {}, IncompatibleTypeError,
     r"cannot cast tl.float8e4nv to tl.uint8: .* e.g. .to\(tl.float32\).to\(tl.uint8\).$"),
    (d.float8e4b15, d.bfloat16, {}, IncompatibleTypeError,
     r"^cannot cast tl.float8e4b15 to tl.bfloat16: tl.float8e4b15 converts only to and from tl.float16 "
     r"and tl.float32; go through tl.float16.$"),
    (d.pi32_t, d.int32, {}, IncompatibleTypeError,
     r"^cannot cast pointer<int32> to tl.int32: a pointer converts only to 64-bit integers \(its "
     r"address\) or tl.int1 \(whether it is non-null\); use .to\(tl.int64\).to\(tl.int32\).$"),
    (d.float32, d.pi32_t, {}, IncompatibleTypeError,
     r"^cannot cast tl.float32 to pointer<int32>: pointers convert only to and from integers and "
     r"other pointers.$"),
    (d.void, d.int8, {}, IncompatibleTypeError, r"^cannot cast tl.void to tl.int8: tl.void has no values"),
    (d.float32, d.int16, {"bitcast": True}, IncompatibleTypeError,
     r"^Cannot bitcast tl.float32 \(32 bits\) to tl.int16 \(16 bits\): a bitcast keeps the bits, so both "
     r"types need the same width. Bitcast to a 32-bit type such as tl.int32, or convert the value with "
     r".to\(tl.int16\) without bitcast=True.$"),
    (d.int1, d.uint8, {"bitcast": True}, IncompatibleTypeError, r"Cannot bitcast tl.int1 \(1 bits\)"),
    (d.float32, d.float16, {"fp_downcast_rounding": "rtn"}, DTypeValueError,
     r"^Invalid rounding mode: 'rtn'. Supported rounding modes are 'rtne' \(round to nearest, ties to "
     r"even; the default\) and 'rtz' \(round towards zero\).$"),
    (d.float16, d.float32, {"fp_downcast_rounding": "rtz"}, DTypeValueError,
     r"^fp_downcast_rounding should be set only for truncating fp conversions. Source scalar type is fp16 "
     r"and destination type is fp32; drop fp_downcast_rounding for this conversion.$"),
    (d.int32, d.float16, {"fp_downcast_rounding": "rtne"}, DTypeValueError, "only for truncating fp"),
    (d.float16, d.bfloat16, {"fp_downcast_rounding": "rtz"}, DTypeValueError, "only for truncating fp"),
])
def test_cast_errors(src, dst, kwargs, error, message):
    with pytest.raises(error, match=message):
        check_cast(src, dst, **kwargs)
    assert not cast_allowed(src, dst, **kwargs)


def test_rounding_modes():
    assert cast_allowed(d.float32, d.float16, fp_downcast_rounding="rtz")
    assert cast_allowed(d.float64, d.bfloat16, fp_downcast_rounding="rtne")
    assert cast_allowed(d.float32, d.float8e5, fp_downcast_rounding="rtz")
    assert cast_allowed(d.float32, d.float32, fp_downcast_rounding="bogus")  # no-op: Triton returns early
    # a bitcast ignores the rounding argument
    assert cast_allowed(d.float32, d.int32, bitcast=True, fp_downcast_rounding="bogus")
