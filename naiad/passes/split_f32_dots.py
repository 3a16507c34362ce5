"""fp32 dots in the "bf16x3", "bf16x6" and "tf32x3" precisions as sums of narrower dots.

Tensor cores multiply bf16 or tf32, not fp32.  These precisions ask for nearly fp32 results
from them: each operand is split into parts that add up to it -- ``hi`` is the value rounded
to the narrow type, the next part the remainder rounded again -- and the product becomes the
sum of the part products above fp32's precision:

- bf16x3: ``x = hi + lo``; ``lo*hi + hi*lo + hi*hi``;
- bf16x6: ``x = hi + mid + lo``; ``mid*mid + lo*hi + hi*lo + mid*hi + hi*mid + hi*hi``;
- tf32x3: ``x = hi + lo`` with ``hi`` the value cut to tf32's 10 mantissa bits (``lo`` exact
  in fp32); ``lo*hi + hi*lo + hi*hi``, each a tf32 dot.

Each product is a ``tt.dot`` of its own, accumulated smallest first into the dot's
accumulator, which the backend lowers as any other dot.  Where an operand is inf or NaN, its
remainders are 0 and the products with the other operand's remainders see 0 for its ``hi``
(an inf times a remainder of 0 would be NaN): ``hi * hi`` alone carries the inf or NaN, as the
fp32 product would.

The backend says which dots to split (``worth_it``: those whose parts its tensor cores take);
the others keep computing in fp32, which meets every one of these precisions.
"""

from __future__ import annotations

from typing import Any, Callable

from xdsl.dialects.builtin import BFloat16Type, Float32Type, IntegerType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from naiad.ir import arith, tt
from naiad.ir.types import element_type, with_element
from naiad.passes.constants import make_constant
from naiad.passes.rewrite import located

_SPLIT = (tt.InputPrecision.BF16x3, tt.InputPrecision.BF16x6, tt.InputPrecision.TF32x3)
#: Which parts (by index: 0 = hi) multiply, smallest products first.
_PRODUCTS = {2: ((1, 0), (0, 1), (0, 0)),
             3: ((1, 1), (2, 0), (0, 2), (1, 0), (0, 1), (0, 0))}
#: tf32 keeps the sign, the exponent and the top 10 mantissa bits of an fp32.
_TF32_MASK = -(1 << 13)


def split_f32_dots(func: Any, worth_it: Callable[[tt.DotOp, str], bool]) -> bool:
    """Split each fp32 dot of ``func`` in a split precision for which ``worth_it(dot, part)``
    ("bf16" or "tf32": the parts' kind) holds; True when any was."""
    dots = [op for op in func.walk() if isinstance(op, tt.DotOp) and op.inputPrecision.data in _SPLIT
            and isinstance(element_type(op.a.type), Float32Type)]
    changed = False
    for dot in dots:
        part = "tf32" if dot.inputPrecision.data == tt.InputPrecision.TF32x3 else "bf16"
        if worth_it(dot, part):
            _split(dot)
            changed = True
    return changed


class _Emitter:
    """Inserts new ops before ``dot``, each with its source location."""

    def __init__(self, dot: tt.DotOp):
        self.dot = dot

    def __call__(self, op: Operation) -> SSAValue:
        Rewriter.insert_op(located(op, self.dot), InsertPoint.before(self.dot))
        return op.results[0]

    def constant(self, value: Any, like: Attribute) -> SSAValue:
        return self(make_constant(value, like))


def _split(dot: tt.DotOp) -> None:
    emit = _Emitter(dot)
    precision = dot.inputPrecision.data
    count = 3 if precision == tt.InputPrecision.BF16x6 else 2
    cut = _tf32_parts if precision == tt.InputPrecision.TF32x3 else _bf16_parts
    a_parts, b_parts = cut(emit, dot.a, count), cut(emit, dot.b, count)
    a_finite, b_finite = _finite_hi(emit, dot.a, a_parts[0]), _finite_hi(emit, dot.b, b_parts[0])
    part_precision = tt.InputPrecision.TF32 if precision == tt.InputPrecision.TF32x3 else tt.InputPrecision.IEEE
    acc: SSAValue = dot.c
    for i, j in _PRODUCTS[count]:
        a_part = a_parts[i] if (i, j) == (0, 0) or i else a_finite
        b_part = b_parts[j] if (i, j) == (0, 0) or j else b_finite
        acc = emit(tt.DotOp(a_part, b_part, acc, input_precision=part_precision))
    dot.results[0].replace_all_uses_with(acc)
    Rewriter.erase_op(dot)


def _finite_hi(emit: _Emitter, x: SSAValue, hi: SSAValue) -> SSAValue:
    """``hi`` where ``x`` is finite, else 0."""
    difference = emit(arith.SubfOp(x, x))                  # 0, or NaN for inf and NaN
    finite = emit(arith.CmpfOp(difference, difference, "ord"))
    return emit(arith.SelectOp(finite, hi, emit.constant(0.0, hi.type)))


def _remainder(emit: _Emitter, x: SSAValue, part: SSAValue) -> SSAValue:
    """``x - part`` in fp32, 0 where that is not a number (x inf or NaN)."""
    wide = part if part.type == x.type else emit(arith.ExtFOp(part, x.type))
    rest = emit(arith.SubfOp(x, wide))
    is_number = emit(arith.CmpfOp(rest, rest, "ord"))
    return emit(arith.SelectOp(is_number, rest, emit.constant(0.0, x.type)))


def _bf16_parts(emit: _Emitter, x: SSAValue, count: int) -> list[SSAValue]:
    narrow = with_element(x.type, BFloat16Type())
    parts, rest = [], x
    for _ in range(count):
        parts.append(emit(arith.TruncFOp(rest, narrow)))
        if len(parts) < count:
            rest = _remainder(emit, rest, parts[-1])
    return parts


def _tf32_parts(emit: _Emitter, x: SSAValue, count: int) -> list[SSAValue]:
    bits_type = with_element(x.type, IntegerType(32))
    bits = emit(arith.BitcastOp(x, bits_type))
    cut = emit(arith.BitcastOp(emit(arith.AndIOp(bits, emit.constant(_TF32_MASK, bits_type))), x.type))
    is_number = emit(arith.CmpfOp(x, x, "ord"))
    hi = emit(arith.SelectOp(is_number, cut, x))      # a NaN stays NaN (cut, it might be inf)
    return [hi, _remainder(emit, x, hi)]
