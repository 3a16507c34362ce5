"""Constant folding computes what the hardware would: every arith op on every integer width
and float precision, checked against numpy's result for the same operation.

Each test folds a whole table (ops x operand pairs) in one module, so the suite parses a few
modules rather than thousands.
"""

from __future__ import annotations

import numpy as np
import pytest

from naiad.passes.canonicalize import canonicalize

from .ttir import count, module, returned_constant

INT_TYPES = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
UINT_TYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
FLOAT_TYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
FLOAT_BITS = {"f16": np.uint16, "f32": np.uint32, "f64": np.uint64}


def fold_table(ops: list[str], operands: list[tuple[str, ...]], operand_type: str,
               result_type: str | None = None, syntax: str = "{t}") -> dict:
    """What each ``op operands : syntax`` folds to (None: not folded), keyed by
    ``(op, index of the operands)``; one module, each distinct constant defined once."""
    result_type = result_type or operand_type
    names: dict[str, str] = {}
    lines = []
    for literal in dict.fromkeys(v for row in operands for v in row):
        names[literal] = f"%c{len(names)}"
        lines.append(f"{names[literal]} = arith.constant {literal} : {operand_type}")
    keys = [(op, i) for op in ops for i in range(len(operands))]
    for n, (op, i) in enumerate(keys):
        args = ", ".join(names[v] for v in operands[i])
        lines.append(f"%r{n} = {op} {args} : "
                     + syntax.format(t=operand_type, src=operand_type, dst=result_type))
    results = ", ".join(f"%r{n}" for n in range(len(keys)))
    types = ", ".join([result_type] * len(keys))
    mod = module("", "\n".join([*lines, f"tt.return {results} : {types}"]), results=types)
    canonicalize(mod)
    return {key: returned_constant(mod, n) for n, key in enumerate(keys)}


def fold_one(op: str, operands: tuple[str, ...], operand_type: str, result_type=None,
             syntax: str = "{t}"):
    return fold_table([op], [operands], operand_type, result_type, syntax)[(op, 0)]


CAST = "{src} to {dst}"

# -- integers ---------------------------------------------------------------------------


def int_pairs(width: int) -> list[tuple[int, int]]:
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return [(100, 100), (-7, 2), (7, -2), (-7, -2), (high, 1), (low, low), (low, 3),
            (high, high), (-1, 3), (0, 5), (low, high), (-100, 7)]


def as_arrays(a: int, b: int, width: int):
    return np.array([a], INT_TYPES[width]), np.array([b], INT_TYPES[width])


def unsigned(x: np.ndarray, width: int) -> np.ndarray:
    return x.view(UINT_TYPES[width])


def as_signed(x: np.ndarray, width: int) -> int:
    """The first element of `x` wrapped to `width` bits, read as signed (how the IR holds
    integer constants)."""
    return int(x.astype(UINT_TYPES[width]).view(INT_TYPES[width])[0])


def ceil_div(a, b):
    return np.floor_divide(a, b) + (np.mod(a, b) != 0)


NUMPY_INT_OPS = {
    "addi": lambda a, b, w: a + b,
    "subi": lambda a, b, w: a - b,
    "muli": lambda a, b, w: a * b,
    "andi": lambda a, b, w: a & b,
    "ori": lambda a, b, w: a | b,
    "xori": lambda a, b, w: a ^ b,
    "minsi": lambda a, b, w: np.minimum(a, b),
    "maxsi": lambda a, b, w: np.maximum(a, b),
    "minui": lambda a, b, w: np.minimum(unsigned(a, w), unsigned(b, w)),
    "maxui": lambda a, b, w: np.maximum(unsigned(a, w), unsigned(b, w)),
    "divsi": lambda a, b, w: (a - np.fmod(a, b)) // b,   # C division: toward zero
    "remsi": lambda a, b, w: np.fmod(a, b),                # sign of the dividend
    "floordivsi": lambda a, b, w: np.floor_divide(a, b),
    "ceildivsi": lambda a, b, w: ceil_div(a, b),
    "divui": lambda a, b, w: unsigned(a, w) // unsigned(b, w),
    "remui": lambda a, b, w: unsigned(a, w) % unsigned(b, w),
    "ceildivui": lambda a, b, w: ceil_div(unsigned(a, w), unsigned(b, w)),
}
SIGNED_DIVISIONS = {"divsi", "remsi", "floordivsi", "ceildivsi"}


@pytest.mark.parametrize("width", INT_TYPES)
def test_integer_binary_ops_fold_like_numpy(width) -> None:
    pairs = int_pairs(width)
    folded = fold_table([f"arith.{op}" for op in NUMPY_INT_OPS],
                        [(str(a), str(b)) for a, b in pairs], f"i{width}")
    for op, numpy_op in NUMPY_INT_OPS.items():
        for i, (a, b) in enumerate(pairs):
            if op in SIGNED_DIVISIONS and (a, b) == (-(1 << (width - 1)), -1):
                assert folded[f"arith.{op}", i] is None  # overflow: undefined
                continue
            with np.errstate(all="ignore"):
                expected = as_signed(numpy_op(*as_arrays(a, b, width), width), width)
            assert folded[f"arith.{op}", i] == expected, (op, a, b)


NUMPY_SHIFTS = {
    "shli": lambda a, s, w: np.left_shift(a, s),
    "shrsi": lambda a, s, w: np.right_shift(a, s),
    "shrui": lambda a, s, w: np.right_shift(unsigned(a, w), unsigned(s, w)),
}


@pytest.mark.parametrize("width", INT_TYPES)
def test_shifts_fold_like_numpy(width) -> None:
    pairs = [(value, amount) for value in (1, -1, -(1 << (width - 1)), 0x35, -77)
             for amount in (0, 1, 3, width - 1)]
    folded = fold_table([f"arith.{op}" for op in NUMPY_SHIFTS],
                        [(str(v), str(a)) for v, a in pairs], f"i{width}")
    for op, numpy_op in NUMPY_SHIFTS.items():
        for i, (value, amount) in enumerate(pairs):
            expected = as_signed(numpy_op(*as_arrays(value, amount, width), width), width)
            assert folded[f"arith.{op}", i] == expected, (op, value, amount)


def test_undefined_integer_ops_are_not_folded() -> None:
    shifts = fold_table(["arith.shli", "arith.shrsi", "arith.shrui"], [("1", "8"), ("1", "-1")],
                        "i8")
    divisions = fold_table([f"arith.{op}" for op in ("divsi", "remsi", "divui", "remui",
                                                     "floordivsi", "ceildivsi", "ceildivui")],
                           [("7", "0")], "i32")
    assert set(shifts.values()) == {None}
    assert set(divisions.values()) == {None}


def test_integer_folding_works_on_splat_and_dense_tensors() -> None:
    assert fold_one("arith.addi", ("dense<127>", "dense<1>"), "tensor<4xi8>") == -128
    assert fold_one("arith.divsi", ("dense<-7>", "dense<2>"), "tensor<4xi32>") == -3
    assert fold_one("arith.muli", ("dense<[1, 2, 3, 127]>", "dense<2>"), "tensor<4xi8>") == \
        (2, 4, 6, -2)


def test_mulhiui_folds_like_numpy() -> None:
    for width in (8, 16, 32):
        pairs = int_pairs(width)
        folded = fold_table(["tt.mulhiui"], [(str(a), str(b)) for a, b in pairs], f"i{width}")
        for i, (a, b) in enumerate(pairs):
            x, y = (unsigned(v, width).astype(np.uint64) for v in as_arrays(a, b, width))
            assert folded["tt.mulhiui", i] == as_signed((x * y) >> np.uint64(width), width)


NUMPY_CMPI = {
    "eq": lambda a, b, w: a == b, "ne": lambda a, b, w: a != b,
    "slt": lambda a, b, w: a < b, "sle": lambda a, b, w: a <= b,
    "sgt": lambda a, b, w: a > b, "sge": lambda a, b, w: a >= b,
    "ult": lambda a, b, w: unsigned(a, w) < unsigned(b, w),
    "ule": lambda a, b, w: unsigned(a, w) <= unsigned(b, w),
    "ugt": lambda a, b, w: unsigned(a, w) > unsigned(b, w),
    "uge": lambda a, b, w: unsigned(a, w) >= unsigned(b, w),
}


@pytest.mark.parametrize("width", INT_TYPES)
def test_cmpi_folds_like_numpy(width) -> None:
    pairs = int_pairs(width)
    folded = fold_table([f"arith.cmpi {p}," for p in NUMPY_CMPI],
                        [(str(a), str(b)) for a, b in pairs], f"i{width}", "i1")
    for predicate, compare in NUMPY_CMPI.items():
        for i, (a, b) in enumerate(pairs):
            expected = -1 if compare(*as_arrays(a, b, width), width)[0] else 0  # true is -1
            assert folded[f"arith.cmpi {predicate},", i] == expected, (predicate, a, b)


# -- floats -----------------------------------------------------------------------------


def float_literal(value, ftype: str) -> str:
    """The exact bit pattern of `value` in `ftype`, as an MLIR hex float literal."""
    bits = np.array([value], FLOAT_TYPES[ftype]).view(FLOAT_BITS[ftype])[0]
    return f"0x{int(bits):0{np.dtype(FLOAT_BITS[ftype]).itemsize * 2}X}"


def same_float(result: float | None, expected, ftype: str) -> bool:
    """Bit-identical, except that any NaN matches any NaN."""
    if result is None:
        return False
    got, want = (np.array([v], FLOAT_TYPES[ftype]) for v in (result, expected))
    if np.isnan(want[0]):
        return bool(np.isnan(got[0]))
    return got.view(FLOAT_BITS[ftype])[0] == want.view(FLOAT_BITS[ftype])[0]


FLOAT_PAIRS = [(0.1, 0.2), (1.0, 3.0), (1e30, 1e30), (65504.0, 65504.0), (-2.5, 0.75),
               (float("inf"), float("-inf")), (float("nan"), 1.0), (5.5, -0.0), (1e-8, 3.0),
               (-7.25, 2.0)]

NUMPY_FLOAT_OPS = {
    "addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide,
    "remf": np.fmod, "maximumf": np.maximum, "minimumf": np.minimum, "maxnumf": np.fmax,
    "minnumf": np.fmin,
}


@pytest.mark.parametrize("ftype", FLOAT_TYPES)
def test_float_binary_ops_fold_like_numpy_in_their_precision(ftype) -> None:
    kind = FLOAT_TYPES[ftype]
    with np.errstate(over="ignore"):  # 1e30 is inf in f16
        pairs = [(kind(a), kind(b)) for a, b in FLOAT_PAIRS]
    folded = fold_table([f"arith.{op}" for op in NUMPY_FLOAT_OPS],
                        [(float_literal(x, ftype), float_literal(y, ftype)) for x, y in pairs],
                        ftype)
    for op, numpy_op in NUMPY_FLOAT_OPS.items():
        for i, (x, y) in enumerate(pairs):
            with np.errstate(all="ignore"):
                expected = numpy_op(x, y)
            result = folded[f"arith.{op}", i]
            assert same_float(result, expected, ftype), (op, x, y, result, expected)


def test_f32_addition_rounds_in_f32_not_f64() -> None:
    result = fold_one("arith.addf", (float_literal(0.1, "f32"), float_literal(0.2, "f32")),
                      "f32")
    assert result == float(np.float32(0.1) + np.float32(0.2))
    assert result != float(np.float32(0.1)) + float(np.float32(0.2))


def test_min_max_of_zeros_of_both_signs_and_bf16_are_not_folded() -> None:
    zeros = fold_table(["arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf"],
                       [("0.0", "-0.0")], "f32")
    assert set(zeros.values()) == {None}
    assert fold_one("arith.addf", ("1.0", "2.0"), "bf16") is None


@pytest.mark.parametrize("ftype", FLOAT_TYPES)
def test_negf_folds(ftype) -> None:
    values = (1.5, -0.0, float("inf"))
    folded = fold_table(["arith.negf"], [(float_literal(v, ftype),) for v in values], ftype)
    for i, value in enumerate(values):
        assert same_float(folded["arith.negf", i], -FLOAT_TYPES[ftype](value), ftype)


NUMPY_CMPF = {
    "false": lambda a, b: False, "true": lambda a, b: True,
    "oeq": np.equal, "ogt": np.greater, "oge": np.greater_equal, "olt": np.less,
    "ole": np.less_equal,
    "one": lambda a, b: np.not_equal(a, b) and not (np.isnan(a) or np.isnan(b)),
    "ord": lambda a, b: not (np.isnan(a) or np.isnan(b)),
    "ueq": lambda a, b: np.equal(a, b) or np.isnan(a) or np.isnan(b),
    "ugt": lambda a, b: not np.less_equal(a, b),
    "uge": lambda a, b: not np.less(a, b),
    "ult": lambda a, b: not np.greater_equal(a, b),
    "ule": lambda a, b: not np.greater(a, b),
    "une": np.not_equal,
    "uno": lambda a, b: np.isnan(a) or np.isnan(b),
}


def test_cmpf_folds_like_numpy() -> None:
    pairs = [(np.float32(a), np.float32(b))
             for a, b in FLOAT_PAIRS + [(1.0, 1.0), (float("nan"), float("nan"))]]
    folded = fold_table([f"arith.cmpf {p}," for p in NUMPY_CMPF],
                        [(float_literal(x, "f32"), float_literal(y, "f32")) for x, y in pairs],
                        "f32", "i1")
    for predicate, compare in NUMPY_CMPF.items():
        for i, (x, y) in enumerate(pairs):
            expected = -1 if compare(x, y) else 0
            assert folded[f"arith.cmpf {predicate},", i] == expected, (predicate, x, y)


# -- casts ------------------------------------------------------------------------------

INT_CASTS = [
    ("extsi", 8, 32, lambda a: a.astype(np.int32)),
    ("extsi", 16, 64, lambda a: a.astype(np.int64)),
    ("extui", 8, 32, lambda a: a.view(np.uint8).astype(np.int32)),
    ("extui", 32, 64, lambda a: a.view(np.uint32).astype(np.int64)),
    ("trunci", 32, 8, lambda a: a.astype(np.int8)),
    ("trunci", 64, 16, lambda a: a.astype(np.int16)),
]


def test_integer_casts_fold_like_numpy() -> None:
    for op, src, dst, convert in INT_CASTS:
        values = (-1, 1, 100, -(1 << (src - 1)), (1 << (src - 1)) - 1, 0x5A)
        folded = fold_table([f"arith.{op}"], [(str(v),) for v in values], f"i{src}",
                            f"i{dst}", CAST)
        for i, value in enumerate(values):
            expected = int(convert(np.array([value], INT_TYPES[src]))[0])
            assert folded[f"arith.{op}", i] == expected, (op, src, dst, value)


@pytest.mark.parametrize("ftype", FLOAT_TYPES)
def test_int_to_float_folds_like_numpy(ftype) -> None:
    for width in (8, 32, 64):
        values = (-1, 7, (1 << (width - 1)) - 1, -(1 << (width - 1)) + 1)
        folded = fold_table(["arith.sitofp", "arith.uitofp"], [(str(v),) for v in values],
                            f"i{width}", ftype, CAST)
        signed = np.array(values, INT_TYPES[width])
        with np.errstate(all="ignore"):
            expected = {"arith.sitofp": signed.astype(FLOAT_TYPES[ftype]),
                        "arith.uitofp": unsigned(signed, width).astype(FLOAT_TYPES[ftype])}
        for (op, i), result in folded.items():
            assert same_float(result, expected[op][i], ftype), (op, width, values[i])


@pytest.mark.parametrize("op, ftype, itype", [
    ("fptosi", "f32", np.int32), ("fptosi", "f16", np.int8), ("fptoui", "f64", np.uint16),
])
def test_float_to_int_in_range_folds_like_numpy(op, ftype, itype) -> None:
    width = np.dtype(itype).itemsize * 8
    sign = -1 if op == "fptosi" else 1
    values = np.array([sign * v for v in (0.0, 1.9, 100.5, 3.0, 27.99)], FLOAT_TYPES[ftype])
    folded = fold_table([f"arith.{op}"], [(float_literal(v, ftype),) for v in values], ftype,
                        f"i{width}", CAST)
    for i in range(len(values)):
        expected = as_signed(values[i:i + 1].astype(itype).view(INT_TYPES[width]), width)
        assert folded[f"arith.{op}", i] == expected


def test_float_to_int_out_of_range_is_not_folded() -> None:
    folded = fold_table(["arith.fptosi"], [("0x7FC00000",), ("0x7F800000",), ("3.0e9",),
                                           ("-1.0e10",)], "f32", "i32", CAST)
    assert set(folded.values()) == {None}


@pytest.mark.parametrize("op, src, dst", [("extf", "f16", "f32"), ("extf", "f32", "f64"),
                                          ("truncf", "f32", "f16"), ("truncf", "f64", "f32"),
                                          ("truncf", "f64", "f16")])
def test_float_casts_round_like_numpy(op, src, dst) -> None:
    with np.errstate(all="ignore"):
        values = np.array([0.1, 1.0 / 3.0, 65519.0, 65520.0, 1e-7, -2.5e38, float("inf")],
                          FLOAT_TYPES[src])
        expected = values.astype(FLOAT_TYPES[dst])
    folded = fold_table([f"arith.{op}"], [(float_literal(v, src),) for v in values], src, dst,
                        CAST)
    for i, want in enumerate(expected):
        assert same_float(folded[f"arith.{op}", i], want, dst), values[i]


def test_bitcast_folds_like_numpy_view() -> None:
    x = np.array([1.5], np.float32)
    bits = int(x.view(np.int32)[0])
    assert fold_one("arith.bitcast", (float_literal(x[0], "f32"),), "f32", "i32", CAST) == bits
    back = fold_one("arith.bitcast", (str(bits),), "i32", "f32", CAST)
    assert same_float(back, x[0], "f32")


def test_casts_of_splat_tensors_fold() -> None:
    mod = module("", """
        %a = arith.constant dense<-1> : tensor<8xi8>
        %r = arith.extui %a : tensor<8xi8> to tensor<8xi32>
        tt.return %r : tensor<8xi32>
    """, results="tensor<8xi32>")
    canonicalize(mod)
    assert returned_constant(mod) == 255
    assert count(mod, "arith.extui") == 0
