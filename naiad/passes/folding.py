"""The arithmetic of constant folding: what each arith op computes on known numbers.

Tables map an op class to a function on Python numbers, so canonicalization folds exactly
what the hardware would compute:

* integers are signless bit patterns: a function gets its operands as signed Python ints
  and the bit width, reinterprets them as unsigned where the op is unsigned, and the result
  is wrapped to the width by the caller;
* floats are computed in their own precision through numpy (`np.float16`, `np.float32`,
  `np.float64`) so an f32 sum rounds like an f32 sum; bf16 and the fp8 types have no exact
  numpy type and are not folded;
* a function returns None where the op is undefined (division by zero, ``INT_MIN / -1``,
  shifting by the width or more, float-to-int out of range): such ops are left as they are.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import Float16Type, Float32Type, Float64Type, IntegerType
from xdsl.ir import Attribute

from naiad.ir import arith, tt
from naiad.passes.constants import Number, to_signed, to_unsigned

NUMPY_FLOAT: dict[type[Attribute], type[np.floating]] = {
    Float16Type: np.float16,
    Float32Type: np.float32,
    Float64Type: np.float64,
}
"""Float types folded in their own precision; others (bf16, fp8) are not folded."""

NUMPY_INT = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def numpy_float(t: Attribute) -> type[np.floating] | None:
    return NUMPY_FLOAT.get(type(t))


# -- integers ---------------------------------------------------------------------------

IntFn = Callable[[int, int, int], int | None]


def _min_int(width: int) -> int:
    return -(1 << (width - 1))


def _trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _signed_division(fn: Callable[[int, int], int]) -> IntFn:
    """`fn` where a signed division is defined: no zero divisor, no ``INT_MIN / -1``."""
    def fold(a: int, b: int, width: int) -> int | None:
        if b == 0 or (a == _min_int(width) and b == -1):
            return None
        return fn(a, b)
    return fold


def _unsigned(fn: Callable[[int, int], int | None]) -> IntFn:
    return lambda a, b, width: fn(to_unsigned(a, width), to_unsigned(b, width))


def _unsigned_division(fn: Callable[[int, int], int]) -> IntFn:
    return _unsigned(lambda a, b: None if b == 0 else fn(a, b))


def _shift(fn: Callable[[int, int, int], int]) -> IntFn:
    """A shift by `b` read as unsigned; shifting by the width or more is poison."""
    def fold(a: int, b: int, width: int) -> int | None:
        amount = to_unsigned(b, width)
        return None if amount >= width else fn(a, amount, width)
    return fold


INT_BINARY: dict[type, IntFn] = {
    arith.AddiOp: lambda a, b, w: a + b,
    arith.SubiOp: lambda a, b, w: a - b,
    arith.MuliOp: lambda a, b, w: a * b,
    arith.AndIOp: lambda a, b, w: a & b,
    arith.OrIOp: lambda a, b, w: a | b,
    arith.XOrIOp: lambda a, b, w: a ^ b,
    arith.MinSIOp: lambda a, b, w: min(a, b),
    arith.MaxSIOp: lambda a, b, w: max(a, b),
    arith.MinUIOp: _unsigned(min),
    arith.MaxUIOp: _unsigned(max),
    arith.DivSIOp: _signed_division(_trunc_div),
    arith.RemSIOp: _signed_division(lambda a, b: a - b * _trunc_div(a, b)),
    arith.FloorDivSIOp: _signed_division(lambda a, b: a // b),
    arith.CeilDivSIOp: _signed_division(lambda a, b: -(-a // b)),
    arith.DivUIOp: _unsigned_division(lambda a, b: a // b),
    arith.RemUIOp: _unsigned_division(lambda a, b: a % b),
    arith.CeilDivUIOp: _unsigned_division(lambda a, b: -(-a // b)),
    arith.ShLIOp: _shift(lambda a, n, w: a << n),
    arith.ShRSIOp: _shift(lambda a, n, w: a >> n),
    arith.ShRUIOp: _shift(lambda a, n, w: to_unsigned(a, w) >> n),
    tt.MulhiUIOp: lambda a, b, w: (to_unsigned(a, w) * to_unsigned(b, w)) >> w,
}
"""Integer binary ops; the result is wrapped to the operands' width."""


def _signed_predicate(fn: Callable[[int, int], bool]) -> Callable[[int, int, int], bool]:
    return lambda a, b, w: fn(a, b)


def _unsigned_predicate(fn: Callable[[int, int], bool]) -> Callable[[int, int, int], bool]:
    return lambda a, b, w: fn(to_unsigned(a, w), to_unsigned(b, w))


_RELATIONS: dict[str, Callable[[Number, Number], bool]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}

CMPI: dict[str, Callable[[int, int, int], bool]] = {
    "eq": _signed_predicate(_RELATIONS["eq"]),
    "ne": _signed_predicate(_RELATIONS["ne"]),
    **{f"s{rel}": _signed_predicate(_RELATIONS[rel]) for rel in ("lt", "le", "gt", "ge")},
    **{f"u{rel}": _unsigned_predicate(_RELATIONS[rel]) for rel in ("lt", "le", "gt", "ge")},
}
"""`arith.cmpi` predicates on signed operands of a given width."""


def _ordered(rel: Callable[[float, float], bool]) -> Callable[[float, float], bool]:
    return lambda a, b: not (math.isnan(a) or math.isnan(b)) and rel(a, b)


def _unordered(rel: Callable[[float, float], bool]) -> Callable[[float, float], bool]:
    return lambda a, b: math.isnan(a) or math.isnan(b) or rel(a, b)


CMPF: dict[str, Callable[[float, float], bool]] = {
    "false": lambda a, b: False,
    "true": lambda a, b: True,
    "ord": _ordered(lambda a, b: True),
    "uno": _unordered(lambda a, b: False),
    **{f"o{rel}": _ordered(_RELATIONS[rel]) for rel in ("eq", "ne", "lt", "le", "gt", "ge")},
    **{f"u{rel}": _unordered(_RELATIONS[rel]) for rel in ("eq", "ne", "lt", "le", "gt", "ge")},
}
"""`arith.cmpf` predicates: ``o*`` is false and ``u*`` true when either operand is NaN."""


# -- floats -----------------------------------------------------------------------------

FloatFn = Callable[[np.floating, np.floating], np.floating | None]


def _zeros_of_both_signs(a: np.floating, b: np.floating) -> bool:
    return a == 0 and b == 0 and np.signbit(a) != np.signbit(b)


def _no_signed_zero_tie(fn: FloatFn) -> FloatFn:
    """min/max of +0 and -0 depends on the op's IEEE flavour: left unfolded."""
    return lambda a, b: None if _zeros_of_both_signs(a, b) else fn(a, b)


FLOAT_BINARY: dict[type, FloatFn] = {
    arith.AddfOp: lambda a, b: a + b,
    arith.SubfOp: lambda a, b: a - b,
    arith.MulfOp: lambda a, b: a * b,
    arith.DivfOp: lambda a, b: a / b,
    arith.RemFOp: np.fmod,
    arith.MaximumfOp: _no_signed_zero_tie(np.maximum),
    arith.MinimumfOp: _no_signed_zero_tie(np.minimum),
    arith.MaxnumfOp: _no_signed_zero_tie(np.fmax),
    arith.MinnumfOp: _no_signed_zero_tie(np.fmin),
}
"""Float binary ops, computed on numpy scalars of the operands' precision.  ``maximumf``
propagates NaN (np.maximum); ``maxnumf`` returns the other operand (np.fmax)."""

FLOAT_UNARY: dict[type, Callable[[np.floating], np.floating]] = {
    arith.NegfOp: np.negative,
}


def fold_int_binary(op_type: type, a: int, b: int, width: int) -> int | None:
    result = INT_BINARY[op_type](a, b, width)
    return None if result is None else to_signed(result, width)


def fold_float_binary(op_type: type, a: float, b: float, t: Attribute) -> float | None:
    kind = numpy_float(t)
    if kind is None:
        return None
    with np.errstate(all="ignore"):
        result = FLOAT_BINARY[op_type](kind(a), kind(b))
    return None if result is None else float(kind(result))


def fold_float_unary(op_type: type, a: float, t: Attribute) -> float | None:
    kind = numpy_float(t)
    return None if kind is None else float(FLOAT_UNARY[op_type](kind(a)))


# -- casts ------------------------------------------------------------------------------

CastFn = Callable[[Number, Attribute, Attribute], Number | None]


def _width(t: Attribute) -> int:
    return t.width.data


def _int_to_float(signed: bool) -> CastFn:
    def fold(a: int, src: Attribute, dst: Attribute) -> float | None:
        kind = numpy_float(dst)
        if kind is None:
            return None
        value = a if signed else to_unsigned(a, _width(src))
        with np.errstate(all="ignore"):
            return float(np.array(value, np.int64 if signed else np.uint64).astype(kind))
    return fold


def _float_to_int(signed: bool) -> CastFn:
    def fold(a: float, src: Attribute, dst: Attribute) -> int | None:
        if not math.isfinite(a):
            return None
        value, width = math.trunc(a), _width(dst)
        low, high = (_min_int(width), -_min_int(width) - 1) if signed else (0, (1 << width) - 1)
        return value if low <= value <= high else None
    return fold


def _float_to_float(a: float, src: Attribute, dst: Attribute) -> float | None:
    src_kind, dst_kind = numpy_float(src), numpy_float(dst)
    if src_kind is None or dst_kind is None:
        return None
    with np.errstate(all="ignore"):
        return float(np.array(a, src_kind).astype(dst_kind))


def _bitcast(a: Number, src: Attribute, dst: Attribute) -> Number | None:
    """Reinterprets the bits between same-width integer and numpy float types."""
    def numpy_type(t: Attribute):
        return NUMPY_INT.get(_width(t)) if isinstance(t, IntegerType) else numpy_float(t)

    src_kind, dst_kind = numpy_type(src), numpy_type(dst)
    if src_kind is None or dst_kind is None:
        return None
    result = np.array(a, src_kind).view(dst_kind)[()]
    return int(result) if isinstance(dst, IntegerType) else float(result)


CASTS: dict[type, CastFn] = {
    arith.ExtSIOp: lambda a, src, dst: a,
    arith.ExtUIOp: lambda a, src, dst: to_unsigned(a, _width(src)),
    arith.TruncIOp: lambda a, src, dst: a,
    arith.SIToFPOp: _int_to_float(signed=True),
    arith.UIToFPOp: _int_to_float(signed=False),
    arith.FPToSIOp: _float_to_int(signed=True),
    arith.FPToUIOp: _float_to_int(signed=False),
    arith.ExtFOp: _float_to_float,
    arith.TruncFOp: _float_to_float,
    arith.BitcastOp: _bitcast,
}
"""Casts of one element from type `src` to type `dst` (element types); the caller wraps
integer results to the destination width."""
