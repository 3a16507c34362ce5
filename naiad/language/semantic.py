"""Triton's semantics, emitted as TTIR: typing, broadcasting and one method per language operation.

`Semantic` is what the builtins of `naiad.language.core` call.  Each method checks its operands
the way Triton does (same messages where Triton's are clear), applies the implicit conversions
(Python scalars, type promotion, broadcasting) and emits ``tt`` / ``arith`` / ``math`` / ``scf``
operations through the `IRBuilder`.  Errors are raised as ``TypeError`` / ``ValueError`` with a
message that says what to do; the code generator adds the kernel's name and line.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (BFloat16Type, DenseArrayBase, Float16Type, Float32Type,
                                   Float64Type, Float8E4M3B11FNUZType, Float8E4M3FNType,
                                   Float8E4M3FNUZType, Float8E5M2FNUZType, Float8E5M2Type,
                                   FloatAttr, IntegerAttr, IntegerType, StringAttr, TensorType, i32)
from xdsl.ir import Attribute, Block, Region

from naiad.ir.builder import IRBuilder
from naiad.ir import gpu, tt
from naiad.ir import arith
from naiad.ir.arith import RemFOp
from naiad.ir.types import PointerType
from naiad.language import dtypes as tl
from naiad.language import promotion
from naiad.language.core import tensor

_FLOAT_IR = {"fp16": Float16Type, "bf16": BFloat16Type, "fp32": Float32Type, "fp64": Float64Type,
             "fp8e4nv": Float8E4M3FNType, "fp8e5": Float8E5M2Type, "fp8e4b8": Float8E4M3FNUZType,
             "fp8e5b16": Float8E5M2FNUZType, "fp8e4b15": Float8E4M3B11FNUZType}

# op -> (float op, signed int op, unsigned int op); None: not defined for that kind.
_ARITH = {
    "add": (arith.AddfOp, arith.AddiOp, arith.AddiOp),
    "sub": (arith.SubfOp, arith.SubiOp, arith.SubiOp),
    "mul": (arith.MulfOp, arith.MuliOp, arith.MuliOp),
    "mod": (RemFOp, arith.RemSIOp, arith.RemUIOp),
    "floordiv": (None, arith.DivSIOp, arith.DivUIOp),
    "and": (None, arith.AndIOp, arith.AndIOp),
    "or": (None, arith.OrIOp, arith.OrIOp),
    "xor": (None, arith.XOrIOp, arith.XOrIOp),
    "shl": (None, arith.ShLIOp, arith.ShLIOp),
}
# comparison -> (float predicate, signed predicate, unsigned predicate)
_COMPARE = {"eq": ("oeq", "eq", "eq"), "ne": ("une", "ne", "ne"), "lt": ("olt", "slt", "ult"),
            "le": ("ole", "sle", "ule"), "gt": ("ogt", "sgt", "ugt"), "ge": ("oge", "sge", "uge")}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
           "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "eq": "==", "ne": "!=",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def type_name(ty: tl.dtype) -> str:
    """A type as error messages show it: "fp32", "int32[16, 16]", "pointer<fp16>[64]"."""
    if ty.is_block():
        return f"{ty.scalar}[{', '.join(str(s) for s in ty.get_block_shapes())}]"
    return str(ty)


def _shape(t: tensor) -> list[int]:
    return list(t.type.get_block_shapes()) if t.type.is_block() else []


def _is_python_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, tensor)


class Semantic:
    """Emits the IR of language operations into ``builder``."""

    def __init__(self, builder: IRBuilder, options: Any = None,
                 call_jit: Callable[..., Any] | None = None, codegen_fns: dict | None = None):
        self.builder = builder
        self.options = options
        self.call_jit = call_jit
        self.codegen_fns = codegen_fns or {}     # the backend's hooks, e.g. min_dot_size

    # -- types -------------------------------------------------------------------------------
    def ir_type(self, ty: tl.dtype) -> Attribute:
        if ty.is_block():
            return TensorType(self.ir_type(ty.scalar), list(ty.get_block_shapes()))
        if ty.is_ptr():
            return PointerType(self.ir_type(ty.element_ty), ty.address_space)
        if ty.is_int():
            return IntegerType(ty.int_bitwidth)
        if ty.name in _FLOAT_IR:
            return _FLOAT_IR[ty.name]()
        raise TypeError(f"type {ty} has no runtime representation")

    def _tensor(self, op: Any, ty: tl.dtype) -> tensor:
        return tensor(self.builder.value(op), ty)

    @staticmethod
    def _like(t: tensor, scalar: tl.dtype) -> tl.dtype:
        return t.type.with_element_ty(scalar) if t.type.is_block() else scalar

    # -- constants -------------------------------------------------------------------------------
    def constant(self, value: Any, ty: tl.dtype) -> tensor:
        """A scalar constant of type ``ty`` (ints wrap to the type's bit pattern, as in C).

        An fp8 constant is an fp32 constant converted with ``tt.fp_to_fp`` (as Triton emits a
        Python float used with an fp8 tensor): the backend's conversion rounds it like any fp8
        value, and LLVM folds the conversion away."""
        if ty.is_fp8():
            return self.cast(self.constant(value, tl.float32), ty)
        if ty.is_floating():
            return self._tensor(arith.ConstantOp(FloatAttr(float(value), self.ir_type(ty))), ty)
        if ty.is_int():
            bits = ty.int_bitwidth
            v = int(value) & ((1 << bits) - 1)
            if bits > 1 and v >= 1 << (bits - 1):
                v -= 1 << bits
            return self._tensor(arith.ConstantOp(IntegerAttr(v, IntegerType(bits))), ty)
        raise TypeError(f"cannot make a constant of type {ty}")

    def to_tensor(self, value: Any) -> tensor:
        value = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
        if isinstance(value, tensor):
            return value
        if isinstance(value, (bool, int, float)):
            return self.constant(value, promotion.literal_type(value))
        raise TypeError(f"cannot use a {type(value).__name__} ({value!r}) as a kernel value")

    def to_condition(self, cond: tensor) -> tensor:
        """A scalar i1 for an if/while condition (Triton: non-zero is true)."""
        if cond.type.is_block():
            raise TypeError(f"an if/while condition must be a scalar, not a block of shape "
                            f"{_shape(cond)} -- fix: reduce it first (e.g. tl.max(x) > 0)")
        return cond if cond.dtype.is_int1() else self.compare("ne", cond, 0)

    # -- broadcasting ------------------------------------------------------------------------------
    def splat(self, value: tensor, shape: list[int]) -> tensor:
        return self._tensor(tt.SplatOp(value.handle, shape), tl.block_type(value.dtype, shape))

    def broadcast_to(self, value: tensor, shape: list[int]) -> tensor:
        if not value.type.is_block():
            return self.splat(value, shape)
        src = _shape(value)
        if src == list(shape):
            return value
        if len(src) != len(shape) or any(s not in (1, d) for s, d in zip(src, shape)):
            raise ValueError(f"cannot broadcast shape {src} to {list(shape)} -- fix: each "
                             f"dimension must already have the target size or be 1")
        ty = tl.block_type(value.dtype, shape)
        return self._tensor(tt.BroadcastOp.build(operands=[value.handle], result_types=[self.ir_type(ty)]), ty)

    def broadcast_pair(self, a: tensor, b: tensor) -> tuple[tensor, tensor]:
        """Numpy-style broadcasting of two values (Triton's rules)."""
        if not a.type.is_block() and not b.type.is_block():
            return a, b
        if not a.type.is_block():
            return self.splat(a, _shape(b)), b
        if not b.type.is_block():
            return a, self.splat(b, _shape(a))
        sa, sb = _shape(a), _shape(b)
        while len(sa) < len(sb):
            a, sa = self.expand_dims(a, 0), [1] + sa
        while len(sb) < len(sa):
            b, sb = self.expand_dims(b, 0), [1] + sb
        shape = []
        for x, y in zip(sa, sb):
            if x != y and 1 not in (x, y):
                raise ValueError(f"cannot broadcast: the shapes {sa} and {sb} are incompatible "
                                 f"(dimension {len(shape)}: {x} vs {y}) -- fix: make the sizes "
                                 f"equal, or 1 in one operand (e.g. a[:, None] + b[None, :])")
            shape.append(max(x, y))
        return self.broadcast_to(a, shape), self.broadcast_to(b, shape)

    # -- binary operations ----------------------------------------------------------------------
    def binary(self, op: str, lhs: Any, rhs: Any) -> tensor:
        """``lhs op rhs`` where each side is a tensor or a Python number (Triton's rules:
        `naiad.language.promotion.binary_op_types`)."""
        def described(x: Any) -> Any:
            return x.dtype if isinstance(x, tensor) else x

        types = promotion.binary_op_types(_SYMBOL[op], described(lhs), described(rhs))
        if types.result.is_ptr():
            return self.pointer_arith(op, self.to_tensor(lhs), self.to_tensor(rhs))
        a = self.constant(lhs, types.lhs) if _is_python_number(lhs) else self.cast(lhs, types.lhs)
        b = self.constant(rhs, types.rhs) if _is_python_number(rhs) else self.cast(rhs, types.rhs)
        a, b = self.broadcast_pair(a, b)
        scalar = a.dtype
        if op in _COMPARE:
            fpred, spred, upred = _COMPARE[op]
            if scalar.is_floating():
                cmp = arith.CmpfOp(a.handle, b.handle, fpred)
            else:
                cmp = arith.CmpiOp(a.handle, b.handle, spred if scalar.is_int_signed() else upred)
            return self._tensor(cmp, self._like(a, tl.int1))
        if op == "truediv":
            return self._tensor(arith.DivfOp(a.handle, b.handle), a.type)
        if op == "shr":
            cls = arith.ShRSIOp if promotion.right_shift_is_arithmetic(described(lhs), described(rhs)) \
                else arith.ShRUIOp
        else:
            fop, sop, uop = _ARITH[op]
            cls = fop if scalar.is_floating() else sop if scalar.is_int_signed() else uop
        return self._tensor(cls(a.handle, b.handle), a.type)

    def compare(self, op: str, lhs: Any, rhs: Any) -> tensor:
        return self.binary(op, lhs, rhs)

    def pointer_arith(self, op: str, a: tensor, b: tensor) -> tensor:
        if b.dtype.is_ptr():
            a, b = b, a
        a, b = self.broadcast_pair(a, b)
        if op == "sub":
            b = self.neg(b)
        return self._tensor(tt.AddPtrOp(a.handle, b.handle), a.type)

    # -- unary -------------------------------------------------------------------------------------
    def neg(self, x: tensor) -> tensor:
        promotion.unary_op_type("-", x.dtype)
        if x.dtype.is_floating():
            return self._tensor(arith.NegfOp(x.handle), x.type)
        if x.dtype.is_ptr():
            raise TypeError(f"cannot negate a pointer ({x.dtype})")
        return self.binary("sub", self.broadcast_to(self.constant(0, x.dtype), _shape(x))
                           if x.type.is_block() else self.constant(0, x.dtype), x)

    def pos(self, x: tensor) -> tensor:
        """``+x``: Triton's tensors have no unary plus, so this raises and says so."""
        promotion.unary_op_type("+", x.dtype)
        return x

    def invert(self, x: tensor) -> tensor:
        promotion.unary_op_type("~", x.dtype)
        ones = self.constant(-1, x.dtype)
        return self.binary("xor", x, self.broadcast_to(ones, _shape(x)) if x.type.is_block() else ones)

    def logical_not(self, x: tensor) -> tensor:
        promotion.unary_op_type("not", x.dtype)
        return self.invert(x)

    def logical(self, op: str, a: tensor, b: tensor) -> tensor:
        a = a if a.dtype.is_int1() else self.compare("ne", a, 0)
        b = b if b.dtype.is_int1() else self.compare("ne", b, 0)
        return self.binary(op, a, b)

    # -- conversions --------------------------------------------------------------------------------
    def cast(self, x: tensor, dst: tl.dtype, rounding: str | None = None, bitcast: bool = False) -> tensor:
        """``x.to(dst)``: Triton's conversion rules, one IR operation per kind of conversion."""
        if isinstance(dst, tl.block_type):
            dst = dst.scalar
        if not isinstance(dst, tl.dtype):
            raise TypeError(f"cannot cast to {dst!r}: the target must be a dtype such as tl.float32")
        src = x.dtype
        promotion.check_cast(src, dst, bitcast=bitcast, fp_downcast_rounding=rounding)
        if bitcast:
            return self.bitcast(x, dst)
        if src == dst:
            return x
        out = self._like(x, dst)
        if rounding is not None and not (src.is_floating() and dst.is_floating()
                                         and src.primitive_bitwidth > dst.primitive_bitwidth):
            raise ValueError("fp_downcast_rounding applies only to float down-casts "
                             f"(got {src} -> {dst})")
        if src.is_ptr() or dst.is_ptr():
            return self.pointer_cast(x, dst)
        if dst.is_int1() and not src.is_int1():
            return self.compare("ne", x, 0)
        if src.is_floating() and dst.is_floating():
            return self.float_cast(x, dst, rounding)
        if src.is_int() and dst.is_int():
            if src.int_bitwidth == dst.int_bitwidth:
                return tensor(x.handle, out)   # same bits, signedness is a property of the type
            if src.int_bitwidth > dst.int_bitwidth:
                return self._tensor(arith.TruncIOp(x.handle, self.ir_type(out)), out)
            extend = arith.ExtUIOp if src.is_int_unsigned() or src.is_bool() else arith.ExtSIOp
            return self._tensor(extend(x.handle, self.ir_type(out)), out)
        if src.is_int() and dst.is_floating():
            if dst.is_fp8():
                return self.cast(self.cast(x, tl.float32), dst)
            convert = arith.UIToFPOp if src.is_int_unsigned() or src.is_bool() else arith.SIToFPOp
            return self._tensor(convert(x.handle, self.ir_type(out)), out)
        if src.is_floating() and dst.is_int():
            if src.is_fp8():
                return self.cast(self.cast(x, tl.float32), dst)
            convert = arith.FPToUIOp if dst.is_int_unsigned() else arith.FPToSIOp
            return self._tensor(convert(x.handle, self.ir_type(out)), out)
        raise TypeError(f"cannot cast {src} to {dst}")

    def float_cast(self, x: tensor, dst: tl.dtype, rounding: str | None) -> tensor:
        src, out = x.dtype, self._like(x, dst)
        if src.is_fp8() or dst.is_fp8():
            down = src.primitive_bitwidth > dst.primitive_bitwidth
            mode = (rounding or "rtne") if down else None
            return self._fp_to_fp(x, out, mode)
        if {src.name, dst.name} == {"fp16", "bf16"}:
            return self.cast(self.cast(x, tl.float32), dst)
        if src.primitive_bitwidth > dst.primitive_bitwidth:
            if rounding == "rtz":
                return self._fp_to_fp(x, out, "rtz")
            return self._tensor(arith.TruncFOp(x.handle, self.ir_type(out)), out)
        return self._tensor(arith.ExtFOp(x.handle, self.ir_type(out)), out)

    def _fp_to_fp(self, x: tensor, out: tl.dtype, rounding: str | None) -> tensor:
        props = {} if rounding is None else {"rounding": tt.RoundingModeAttr(tt.RoundingMode(rounding))}
        return self._tensor(tt.FpToFpOp.build(operands=[x.handle], result_types=[self.ir_type(out)],
                                              properties=props), out)

    def pointer_cast(self, x: tensor, dst: tl.dtype) -> tensor:
        src, out = x.dtype, self._like(x, dst)
        if src.is_ptr() and dst.is_ptr():
            return self._tensor(tt.BitcastOp.build(operands=[x.handle], result_types=[self.ir_type(out)]), out)
        if src.is_ptr() and dst.is_int():
            as_int = self._like(x, tl.int64)
            value = self._tensor(tt.PtrToIntOp.build(operands=[x.handle], result_types=[self.ir_type(as_int)]), as_int)
            return value if dst == tl.int64 else self.cast(value, dst)
        if src.is_int() and dst.is_ptr():
            value = self.cast(x, tl.int64)
            return self._tensor(tt.IntToPtrOp.build(operands=[value.handle], result_types=[self.ir_type(out)]), out)
        raise TypeError(f"cannot cast {src} to {dst}")

    def bitcast(self, x: tensor, dst: tl.dtype) -> tensor:
        src = x.dtype
        if src.is_ptr() or dst.is_ptr():
            return self.pointer_cast(x, dst)
        if src.primitive_bitwidth != dst.primitive_bitwidth:
            raise ValueError(f"cannot bitcast {src} ({src.primitive_bitwidth} bits) to {dst} "
                             f"({dst.primitive_bitwidth} bits) -- fix: bitcast between types of "
                             f"the same width")
        if src == dst:
            return x
        out = self._like(x, dst)
        return self._tensor(tt.BitcastOp.build(operands=[x.handle], result_types=[self.ir_type(out)]), out)

    # -- creation -----------------------------------------------------------------------------------
    def program_id(self, axis: int) -> tensor:
        return self._tensor(tt.GetProgramIdOp(axis), tl.int32)

    def num_programs(self, axis: int) -> tensor:
        return self._tensor(tt.GetNumProgramsOp(axis), tl.int32)

    def arange(self, start: Any, end: Any) -> tensor:
        if not isinstance(start, int) or not isinstance(end, int):
            raise TypeError("arange's arguments must be compile-time integers (tl.constexpr) -- fix: "
                            "pass the bounds as tl.constexpr parameters")
        if not (-(2**31) <= start < 2**31 and -(2**31) <= end < 2**31):
            raise ValueError("arange's bounds must fit in int32")
        if end <= start:
            raise ValueError(f"arange's end ({end}) must be greater than its start ({start}) -- "
                             f"fix: write tl.arange(start, end) with start < end")
        count = end - start
        if count & (count - 1):
            raise ValueError(f"arange's range must be a power of 2, got {count} ({start}..{end}) -- "
                             f"fix: round it up with triton.next_power_of_2 and mask the extra lanes")
        return self._tensor(tt.MakeRangeOp(start, end), tl.block_type(tl.int32, [count]))

    def full(self, shape: list[int], value: Any, dtype: tl.dtype) -> tensor:
        if isinstance(value, tensor):
            scalar = self.cast(value, dtype)
            if scalar.type.is_block():
                raise ValueError("tl.full's value must be a scalar")
        else:
            scalar = self.constant(value, dtype)
        return self.splat(scalar, shape) if shape else scalar

    # -- shapes -----------------------------------------------------------------------------------
    def expand_dims(self, x: tensor, axis: int) -> tensor:
        if not x.type.is_block():
            return self.splat(x, [1])
        shape = _shape(x)
        if not -len(shape) - 1 <= axis <= len(shape):
            raise ValueError(f"expand_dims axis {axis} is out of range for a tensor of rank "
                             f"{len(shape)} -- fix: use an axis from {-len(shape) - 1} to {len(shape)}")
        axis = axis + len(shape) + 1 if axis < 0 else axis
        new_shape = shape[:axis] + [1] + shape[axis:]
        ty = tl.block_type(x.dtype, new_shape)
        op = tt.ExpandDimsOp.build(operands=[x.handle], result_types=[self.ir_type(ty)],
                                   properties={"axis": IntegerAttr(axis, i32)})
        return self._tensor(op, ty)

    def reshape(self, x: tensor, shape: list[int], can_reorder: bool) -> tensor:
        numel = 1
        for s in shape:
            numel *= s
        if numel != (x.type.numel if x.type.is_block() else 1):
            raise ValueError(f"reshape cannot change the number of elements: {_shape(x)} -> {shape} "
                             f"-- fix: give a shape with {x.type.numel if x.type.is_block() else 1} "
                             f"elements in all")
        if not x.type.is_block():
            return self.splat(x, shape)
        if _shape(x) == list(shape):
            return x
        ty = tl.block_type(x.dtype, shape)
        return self._tensor(tt.ReshapeOp.build(operands=[x.handle], result_types=[self.ir_type(ty)]), ty)

    def permute(self, x: tensor, order: list[int]) -> tensor:
        shape = _shape(x)
        if sorted(order) != list(range(len(shape))):
            raise ValueError(f"permute order {order} is not a permutation of the {len(shape)} "
                             f"dimensions -- fix: name each dimension 0..{len(shape) - 1} exactly "
                             f"once, e.g. {tuple(reversed(range(len(shape))))}")
        ty = tl.block_type(x.dtype, [shape[i] for i in order])
        op = tt.TransOp.build(operands=[x.handle], result_types=[self.ir_type(ty)],
                              properties={"order": DenseArrayBase.from_list(i32, order)})
        return self._tensor(op, ty)

    def cat(self, a: tensor, b: tensor, dim: Any) -> tensor:
        """Concatenation along ``dim`` in order: ``tt.cat`` concatenates along dimension 0, so
        another ``dim`` is moved to the front and back with ``tt.trans``."""
        sa, sb = _shape(a), _shape(b)
        if not sa or not sb:
            raise ValueError(f"tl.cat needs two blocks, got {type_name(a.type)} and "
                             f"{type_name(b.type)} -- fix: use tl.join to pair two scalars")
        if sa != sb:
            raise ValueError(f"tl.cat needs two blocks of one shape, got {sa} and {sb} -- fix: "
                             f"broadcast or reshape one to the other's shape")
        if a.dtype != b.dtype:
            raise TypeError(f"tl.cat needs operands of one type, got {a.dtype} and {b.dtype} -- "
                            f"fix: cast one with .to(...)")
        rank = len(sa)
        if not isinstance(dim, int) or not -rank <= dim < rank:
            raise ValueError(f"invalid axis {dim}. Expected {-rank} <= axis < {rank}")
        dim %= rank
        front = [dim] + [d for d in range(rank) if d != dim]
        if dim:
            a, b = self.permute(a, front), self.permute(b, front)
        shape = _shape(a)
        ty = tl.block_type(a.dtype, [shape[0] * 2] + shape[1:])
        result = self._tensor(tt.CatOp.build(operands=[a.handle, b.handle], result_types=[self.ir_type(ty)]), ty)
        return self.permute(result, [front.index(d) for d in range(rank)]) if dim else result

    def join(self, a: tensor, b: tensor) -> tensor:
        """``tt.join`` along a new last dimension; two scalars join as two one-element blocks
        and the ``[1, 2]`` result becomes the block ``[2]`` (``tt.join`` takes tensors only)."""
        a, b = self.broadcast_pair(a, b)
        if a.dtype != b.dtype:
            raise TypeError(f"tl.join needs operands of one type, got {a.dtype} and {b.dtype}")
        if not a.type.is_block():
            return self.reshape(self.join(self.splat(a, [1]), self.splat(b, [1])), [2], False)
        ty = tl.block_type(a.dtype, _shape(a) + [2])
        return self._tensor(tt.JoinOp.build(operands=[a.handle, b.handle], result_types=[self.ir_type(ty)]), ty)

    def split(self, x: tensor) -> tuple[tensor, tensor]:
        shape = _shape(x)
        if not shape or shape[-1] != 2:
            raise ValueError(f"tl.split needs a last dimension of size 2, got shape {shape}")
        if len(shape) == 1:     # two scalars: split a [1, 2] block, then take each element
            first, second = self.split(self.reshape(x, [1, 2], False))
            return self._only_element(first), self._only_element(second)
        out = tl.block_type(x.dtype, shape[:-1])
        op = self.builder.insert(tt.SplitOp.build(operands=[x.handle], result_types=[self.ir_type(out)] * 2))
        return tensor(op.results[0], out), tensor(op.results[1], out)

    def _only_element(self, x: tensor) -> tensor:
        """The scalar in a one-element 1-D block (a reduction that keeps its only element)."""
        scalar = self.ir_type(x.dtype)
        block = Block(arg_types=[scalar, scalar])
        block.add_op(tt.ReduceReturnOp(block.args[0]))
        op = self.builder.insert(tt.ReduceOp.build(
            operands=[[x.handle]], result_types=[[scalar]],
            properties={"axis": IntegerAttr(0, i32)}, regions=[Region(block)]))
        return tensor(op.results[0], x.dtype)

    def gather(self, src: tensor, index: tensor, axis: int) -> tensor:
        """``tt.gather``: ``src`` indexed along ``axis`` by an integer tensor of the same rank."""
        shape, index_shape = _shape(src), _shape(index)
        if not index.dtype.is_int():
            raise TypeError(f"tl.gather's index must be an integer tensor, got {index.dtype}")
        if len(index_shape) != len(shape) or not shape:
            raise ValueError(f"tl.gather needs a source and an index of the same rank, got shapes "
                             f"{shape} and {index_shape}")
        if not -len(shape) <= axis < len(shape):
            raise ValueError(f"tl.gather axis {axis} is out of range for rank {len(shape)}")
        axis %= len(shape)
        if any(i != s for d, (i, s) in enumerate(zip(index_shape, shape)) if d != axis):
            raise ValueError(f"tl.gather: the index shape {index_shape} must match the source shape "
                             f"{shape} except along axis {axis}")
        ty = tl.block_type(src.dtype, index_shape)
        return self._tensor(tt.GatherOp.build(operands=[src.handle, index.handle],
                                              result_types=[self.ir_type(ty)],
                                              properties={"axis": IntegerAttr(axis, i32)}), ty)

    def histogram(self, x: tensor, num_bins: int, mask: tensor | None) -> tensor:
        """``tt.histogram``: counts of the values 0..num_bins-1 of a 1-D int32 tensor."""
        if len(_shape(x)) != 1 or x.dtype not in (tl.int32, tl.uint32):
            raise ValueError(f"tl.histogram needs a 1-D 32-bit integer tensor, got {type_name(x.type)}")
        if mask is not None:
            x = self._masked_out_of_bins(x, mask)
        ty = tl.block_type(tl.int32, [num_bins])
        return self._tensor(tt.HistogramOp.build(operands=[x.handle], result_types=[self.ir_type(ty)]), ty)

    def _masked_out_of_bins(self, x: tensor, mask: tensor) -> tensor:
        """``x`` with its masked-off values replaced by -1: ``tt.histogram`` does not count
        values outside its bins (-1 is outside as a signed and as an unsigned value)."""
        if not mask.dtype.is_int1():
            raise TypeError(f"tl.histogram's mask must be a boolean (int1) tensor, got {mask.dtype} "
                            f"-- fix: compare, e.g. mask=offsets < n")
        mask = self.broadcast_to(mask, _shape(x))
        outside = self.broadcast_to(self.constant(-1, x.dtype), _shape(x))
        return self._tensor(arith.SelectOp(mask.handle, x.handle, outside.handle), x.type)

    def subscript(self, x: tensor, index: Any) -> tensor:
        items = index if isinstance(index, tuple) else (index,)
        items = tuple(getattr(i, "value", i) for i in items)
        result, dim = x, 0
        for item in items:
            if item is None:
                result = self.expand_dims(result, dim)
                dim += 1
            elif isinstance(item, slice) and item == slice(None):
                dim += 1
            else:
                raise TypeError(f"unsupported tensor index {item!r} -- fix: tensors accept only "
                                f"None (new axis) and ':' in subscripts")
        return result

    def where(self, cond: tensor, x: Any, y: Any) -> tensor:
        """``tl.where``: ``x`` and ``y`` (tensors or Python numbers) are promoted like the
        operands of ``+``, so ``where(m, fp16_block, 0.0)`` stays fp16."""
        cond = self.cast(cond, tl.int1) if not cond.dtype.is_int1() else cond
        x, y = self.promote_pair(x, y)
        cond, x = self.broadcast_pair(cond, x)
        cond, y = self.broadcast_pair(cond, y)
        x, y = self.broadcast_pair(x, y)
        cond, x = self.broadcast_pair(cond, x)
        return self._tensor(arith.SelectOp(cond.handle, x.handle, y.handle), x.type)

    def promote_pair(self, x: Any, y: Any) -> tuple[tensor, tensor]:
        """Two operands (tensors or Python numbers) converted to their common type, by the
        rules of ``+`` (Python numbers do not widen a tensor's type).  Pointers must match."""
        def described(v: Any) -> Any:
            return v.dtype if isinstance(v, tensor) else v

        def convert(v: Any, ty: tl.dtype) -> tensor:
            return self.constant(v, ty) if _is_python_number(v) else self.cast(v, ty)

        if any(isinstance(v, tensor) and v.dtype.is_ptr() for v in (x, y)):
            if not (isinstance(x, tensor) and isinstance(y, tensor) and x.dtype == y.dtype):
                raise TypeError(f"both values must be pointers of one type, got "
                                f"{described(x)!r} and {described(y)!r}")
            return x, y
        ty = promotion.binary_op_types("+", described(x), described(y)).result
        return convert(x, ty), convert(y, ty)

    # -- min / max / clamp -------------------------------------------------------------------------------
    def no_bf16(self, x: tensor) -> tensor:
        """bf16 becomes fp32 before min/max/clamp, as in Triton (hardware lacks bf16 min/max),
        so their result is fp32 too."""
        return self.cast(x, tl.float32) if x.dtype.is_bf16() else x

    def minmax(self, which: str, x: tensor, y: tensor, propagate_nan: Any) -> tensor:
        x, y = self.no_bf16(x), self.no_bf16(y)
        ty = promotion.binary_op_types("+", x.dtype, y.dtype).result
        x, y = self.broadcast_pair(self.cast(x, ty), self.cast(y, ty))
        if ty.is_floating():
            nan = str(getattr(propagate_nan, "name", propagate_nan) or "NONE").upper()
            ops = {("min", True): arith.MinimumfOp, ("max", True): arith.MaximumfOp,
                   ("min", False): arith.MinnumfOp, ("max", False): arith.MaxnumfOp}
            cls = ops[(which, nan == "ALL")]
        else:
            unsigned = ty.is_int_unsigned() or ty.is_bool()
            cls = {("min", False): arith.MinSIOp, ("max", False): arith.MaxSIOp,
                   ("min", True): arith.MinUIOp, ("max", True): arith.MaxUIOp}[(which, unsigned)]
        return self._tensor(cls(x.handle, y.handle), x.type)

    def clamp(self, x: tensor, low: tensor, high: tensor, propagate_nan: Any) -> tensor:
        x, low, high = self.no_bf16(x), self.no_bf16(low), self.no_bf16(high)
        ty = promotion.binary_op_types("+", low.dtype, high.dtype).result
        ty = promotion.binary_op_types("+", x.dtype, ty).result
        if not ty.is_floating():
            raise TypeError(f"tl.clamp needs floating-point operands, got {ty} -- fix: use "
                            f"tl.minimum(tl.maximum(x, lo), hi) for integers")
        x, low, high = self.cast(x, ty), self.cast(low, ty), self.cast(high, ty)
        x, low = self.broadcast_pair(x, low)
        x, high = self.broadcast_pair(x, high)
        x, low = self.broadcast_pair(x, low)
        nan = str(getattr(propagate_nan, "name", propagate_nan) or "NONE").lower()
        op = tt.ClampFOp.build(operands=[x.handle, low.handle, high.handle], result_types=[x.handle.type],
                               properties={"propagateNan": tt.PropagateNanAttr(tt.PropagateNan(nan))})
        return self._tensor(op, x.type)

    # -- memory --------------------------------------------------------------------------------------------
    def _check_pointer(self, ptr: Any, what: str) -> tensor:
        if not isinstance(ptr, tensor) or not ptr.dtype.is_ptr():
            got = ptr.dtype if isinstance(ptr, tensor) else type(ptr).__name__
            raise TypeError(f"{what} needs a pointer (or a block of pointers), got {got} -- fix: pass "
                            f"a pointer argument plus offsets, e.g. ptr + tl.arange(0, BLOCK)")
        return ptr

    def load(self, ptr: tensor, mask: tensor | None, other: tensor | None, boundary_check: Any,
             padding: Any, cache: str, evict: str, volatile: bool) -> tensor:
        ptr = self._check_pointer(ptr, "tl.load")
        if ptr.dtype.element_ty.is_block():
            return self.load_block(ptr, mask, other, boundary_check, padding, cache, evict, volatile)
        if boundary_check or padding:
            raise ValueError("boundary_check and padding_option are only for block pointers "
                             "(tl.make_block_ptr) -- fix: use mask= and other= with ordinary pointers")
        elt = ptr.dtype.element_ty
        if mask is None and other is not None:
            raise ValueError("tl.load's `other` needs a `mask` -- fix: pass mask= as well")
        if mask is not None:
            ptr, mask = self._broadcast_mask(ptr, mask, "tl.load")
        if other is not None:
            other = self.broadcast_to(self.cast(other, elt), _shape(ptr)) if ptr.type.is_block() \
                else self.cast(other, elt)
        loaded_ty = self._like(ptr, elt)
        op = tt.LoadOp(ptr.handle, None if mask is None else mask.handle,
                       None if other is None else other.handle, cache=_cache(cache),
                       evict=_evict(evict), is_volatile=volatile)
        return self._tensor(op, loaded_ty)

    def _broadcast_mask(self, ptr: tensor, mask: tensor, what: str) -> tuple[tensor, tensor]:
        if not mask.dtype.is_int1():
            raise TypeError(f"{what}'s mask must be a boolean (int1) tensor, got {mask.dtype} -- "
                            f"fix: compare, e.g. mask=offsets < n")
        if mask.type.is_block() and not ptr.type.is_block():
            raise ValueError(f"{what}: the mask is a block but the pointer is a scalar")
        if ptr.type.is_block():
            mask = self.broadcast_to(mask, _shape(ptr))
        return ptr, mask

    def store(self, ptr: tensor, value: tensor, mask: tensor | None, boundary_check: Any,
              cache: str, evict: str) -> None:
        ptr = self._check_pointer(ptr, "tl.store")
        if ptr.dtype.is_const():
            raise TypeError("cannot store through a constant pointer")
        if ptr.dtype.element_ty.is_block():
            return self.store_block(ptr, value, mask, boundary_check, cache, evict)
        if boundary_check:
            raise ValueError("boundary_check is only for block pointers (tl.make_block_ptr)")
        elt = ptr.dtype.element_ty
        if value.type.is_block() and not ptr.type.is_block():
            raise ValueError("tl.store: the value is a block but the pointer is a scalar -- fix: "
                             "offset the pointer by a tl.arange to make a block of pointers")
        if ptr.type.is_block():
            value = self.broadcast_to(value, _shape(ptr))
        value = self.cast(value, elt)
        if mask is not None:
            ptr, mask = self._broadcast_mask(ptr, mask, "tl.store")
        self.builder.insert(tt.StoreOp(ptr.handle, value.handle, None if mask is None else mask.handle,
                                       cache=_cache(cache), evict=_evict(evict)))

    def make_block_ptr(self, base: tensor, shape: list[tensor], strides: list[tensor],
                       offsets: list[tensor], block_shape: list[int], order: list[int]) -> tensor:
        base = self._check_pointer(base, "tl.make_block_ptr")
        if base.type.is_block():
            raise ValueError("tl.make_block_ptr's base must be a scalar pointer")
        rank = len(block_shape)
        if not len(shape) == len(strides) == len(offsets) == len(order) == rank:
            raise ValueError(f"tl.make_block_ptr: shape, strides, offsets, block_shape and order must "
                             f"all have the same length ({rank})")
        if sorted(order) != list(range(rank)):
            raise ValueError(f"tl.make_block_ptr: order {order} is not a permutation")
        block = tl.block_type(base.dtype.element_ty, block_shape)
        ty = tl.pointer_type(block, base.dtype.address_space)
        op = tt.MakeTensorPtrOp.build(
            operands=[base.handle, [self.cast(s, tl.int64).handle for s in shape],
                      [self.cast(s, tl.int64).handle for s in strides],
                      [self.cast(o, tl.int32).handle for o in offsets]],
            result_types=[self.ir_type(ty)],
            properties={"order": DenseArrayBase.from_list(i32, order)})
        return self._tensor(op, ty)

    def check_tensor_descriptor(self, base: tensor, shape: list, strides: list,
                                block_shape: list[int]) -> None:
        """Triton's checks of ``tl.make_tensor_descriptor``'s arguments: 1 to 5 dimensions, a
        scalar pointer, at least 16 bytes in a block's last (contiguous) dimension, and a last
        stride of 1 (checked when it is known at compile time)."""
        base = self._check_pointer(base, "tl.make_tensor_descriptor")
        rank = len(shape)
        if not 1 <= rank <= 5:
            raise ValueError(f"tl.make_tensor_descriptor takes 1 to 5 dimensions, got {rank}")
        if len(strides) != rank or len(block_shape) != rank:
            raise ValueError(f"tl.make_tensor_descriptor: shape, strides and block_shape must have "
                             f"the same length, got {rank}, {len(strides)} and {len(block_shape)}")
        if base.type.is_block():
            raise ValueError("tl.make_tensor_descriptor's base must be a scalar pointer")
        element_bytes = base.dtype.element_ty.primitive_bitwidth // 8
        row_bytes = block_shape[-1] * element_bytes
        if row_bytes < 16:
            raise ValueError(f"Descriptor block shape must have at least 16 bytes in the last "
                             f"dimension, but got {block_shape[-1]} * {element_bytes} = {row_bytes} "
                             f"bytes -- fix: make the last dimension of block_shape at least "
                             f"{-(-16 // element_bytes)} elements")
        if isinstance(strides[-1], int) and strides[-1] != 1:
            raise ValueError(f"Tensor descriptor last dim must be 1 but got {strides[-1]} -- fix: "
                             f"describe a tensor whose last dimension is contiguous")

    def advance(self, ptr: tensor, offsets: list[tensor]) -> tensor:
        if not ptr.dtype.is_ptr() or not ptr.dtype.element_ty.is_block():
            raise TypeError("tl.advance needs a block pointer made by tl.make_block_ptr")
        rank = len(ptr.dtype.element_ty.get_block_shapes())
        if len(offsets) != rank:
            raise ValueError(f"tl.advance needs {rank} offsets, got {len(offsets)}")
        op = tt.AdvanceOp.build(operands=[ptr.handle, [self.cast(o, tl.int32).handle for o in offsets]],
                                result_types=[ptr.handle.type])
        return self._tensor(op, ptr.type)

    def _boundary(self, ptr: tensor, boundary_check: Any) -> list[int]:
        dims = [int(getattr(d, "value", d)) for d in (boundary_check or ())]
        rank = len(ptr.dtype.element_ty.get_block_shapes())
        for d in dims:
            if not 0 <= d < rank:
                raise ValueError(f"boundary_check dimension {d} is out of range for a block of rank {rank}")
        return sorted(set(dims))

    def load_block(self, ptr: tensor, mask: Any, other: Any, boundary_check: Any, padding: Any,
                   cache: str, evict: str, volatile: bool) -> tensor:
        if mask is not None or other is not None:
            raise ValueError("loads through block pointers take boundary_check and padding_option, "
                             "not mask and other")
        block = ptr.dtype.element_ty
        pad = str(padding or "")
        if pad not in ("", "zero", "nan"):
            raise ValueError(f"padding_option must be 'zero' or 'nan', not {pad!r}")
        if pad == "nan" and not block.scalar.is_floating():
            raise ValueError("padding_option='nan' needs a floating-point block")
        op = tt.LoadOp(ptr.handle, cache=_cache(cache), evict=_evict(evict), is_volatile=volatile,
                       boundary_check=self._boundary(ptr, boundary_check),
                       padding=tt.PaddingOption(pad) if pad else None)
        return self._tensor(op, block)

    def store_block(self, ptr: tensor, value: tensor, mask: Any, boundary_check: Any, cache: str,
                    evict: str) -> None:
        if mask is not None:
            raise ValueError("stores through block pointers take boundary_check, not mask")
        block = ptr.dtype.element_ty
        value = self.cast(self.broadcast_to(value, list(block.get_block_shapes())), block.scalar)
        self.builder.insert(tt.StoreOp(ptr.handle, value.handle, None, cache=_cache(cache),
                                       evict=_evict(evict),
                                       boundary_check=self._boundary(ptr, boundary_check)))

    def descriptor_reduce(self, ptr: tensor, value: tensor, kind: str) -> None:
        """``value`` reduced (``kind``) into the block that block pointer ``ptr`` names
        (``tt.descriptor_reduce``: a reduction the backend does natively, `tensor_descriptor`)."""
        block = ptr.dtype.element_ty
        value = self.cast(value, block.scalar)
        self.builder.insert(tt.DescriptorReduceOp(ptr.handle, value.handle, kind))

    # -- atomics ----------------------------------------------------------------------------------------
    def atomic_rmw(self, op: str, ptr: tensor, val: tensor, mask: tensor | None, sem: Any,
                   scope: Any) -> tensor:
        ptr = self._check_pointer(ptr, f"tl.atomic_{op}")
        elt = ptr.dtype.element_ty
        _check_atomic_type(op, elt)
        if ptr.type.is_block():
            val = self.broadcast_to(val, _shape(ptr))
        elif val.type.is_block():
            raise ValueError(f"tl.atomic_{op}: the value is a block but the pointer is a scalar")
        val = self.cast(val, elt)
        if mask is not None:
            ptr, mask = self._broadcast_mask(ptr, mask, f"tl.atomic_{op}")
        if elt.is_floating() and op in ("max", "min"):
            return self._float_atomic_minmax(op, ptr, val, mask, sem, scope)
        kind = {"add": "fadd" if elt.is_floating() else "add",
                "max": "umax" if elt.is_int_unsigned() else "max",
                "min": "umin" if elt.is_int_unsigned() else "min", "xchg": "exch"}.get(op, op)
        return self._rmw(kind, ptr, val, mask, sem, scope)

    def _rmw(self, kind: str, ptr: tensor, val: tensor, mask: tensor | None, sem: Any, scope: Any) -> tensor:
        op = tt.AtomicRMWOp.build(
            operands=[ptr.handle, val.handle, [] if mask is None else [mask.handle]],
            result_types=[val.handle.type],
            properties={"atomic_rmw_op": tt.RMWOpAttr(tt.RMWOp(kind)),
                        "sem": tt.MemSemanticAttr(_sem(sem)),
                        "scope": tt.MemSyncScopeAttr(_scope(scope))})
        return self._tensor(op, val.type)

    def _float_atomic_minmax(self, op: str, ptr: tensor, val: tensor, mask: tensor | None,
                             sem: Any, scope: Any) -> tensor:
        """Float atomic max/min through integer atomics on the bit patterns, as Triton does:
        floats with a clear sign bit order like signed ints, those with the sign bit set (-0.0
        included) like reversed unsigned ints."""
        elt = val.dtype
        sint = tl.int32 if elt.primitive_bitwidth == 32 else tl.int64
        uint = tl.uint32 if elt.primitive_bitwidth == 32 else tl.uint64
        iptr = self.cast(ptr, tl.pointer_type(sint, ptr.dtype.address_space), bitcast=True)
        uptr = self.cast(ptr, tl.pointer_type(uint, ptr.dtype.address_space), bitcast=True)
        ival, uval = self.bitcast(val, sint), self.bitcast(val, uint)
        negative = self.compare("ne", self.binary("shr", uval, elt.primitive_bitwidth - 1), 0)
        positive = self.logical_not(negative)
        pos_mask = positive if mask is None else self.logical("and", mask, positive)
        neg_mask = negative if mask is None else self.logical("and", mask, negative)
        signed_op, unsigned_op = ("max", "umin") if op == "max" else ("min", "umax")
        pos = self._rmw(signed_op, iptr, ival, pos_mask, sem, scope)
        neg = self._rmw(unsigned_op, uptr, uval, neg_mask, sem, scope)
        return self.where(positive, self.bitcast(pos, elt), self.bitcast(neg, elt))

    def atomic_cas(self, ptr: tensor, cmp: tensor, val: tensor, sem: Any, scope: Any) -> tensor:
        ptr = self._check_pointer(ptr, "tl.atomic_cas")
        elt = ptr.dtype.element_ty
        if elt.primitive_bitwidth not in (16, 32, 64):
            raise TypeError(f"tl.atomic_cas supports 16/32/64-bit types, not {elt}")
        if not ptr.type.is_block() and (cmp.type.is_block() or val.type.is_block()):
            raise ValueError("tl.atomic_cas: the pointer is a scalar but cmp or val is a block -- fix: "
                             "offset the pointer by a tl.arange to make a block of pointers")
        if ptr.type.is_block():
            cmp, val = self.broadcast_to(cmp, _shape(ptr)), self.broadcast_to(val, _shape(ptr))
        cmp, val = self.cast(cmp, elt), self.cast(val, elt)
        op = tt.AtomicCASOp.build(operands=[ptr.handle, cmp.handle, val.handle],
                                  result_types=[val.handle.type],
                                  properties={"sem": tt.MemSemanticAttr(_sem(sem)),
                                              "scope": tt.MemSyncScopeAttr(_scope(scope))})
        return self._tensor(op, val.type)

    def atomic_poll(self, ptr: tensor, expected: tensor, sem: Any, scope: Any, timeout_ns: Any) -> tensor:
        """``tt.atomic_poll``: wait until ``*ptr == expected`` (a scalar 16/32/64-bit integer),
        or until ``timeout_ns`` nanoseconds have passed; the result says whether it was seen."""
        ptr = self._check_pointer(ptr, "tl.atomic_poll")
        if ptr.type.is_block() or expected.type.is_block():
            raise ValueError("tl.atomic_poll polls one scalar: the pointer and the expected value "
                             "must not be blocks -- fix: poll a single flag")
        elt = ptr.dtype.element_ty
        if not elt.is_int() or elt.primitive_bitwidth not in (16, 32, 64):
            raise TypeError(f"tl.atomic_poll polls 16/32/64-bit integers, not {elt} -- fix: use an "
                            f"integer flag")
        if str(sem or "acquire") not in ("acquire", "relaxed"):
            raise ValueError(f"tl.atomic_poll's sem must be 'acquire' or 'relaxed', not {sem!r}")
        timeout = []
        if timeout_ns is not None:
            if isinstance(timeout_ns, int) and timeout_ns < 0:
                raise ValueError(f"tl.atomic_poll's timeout_ns must be non-negative, got {timeout_ns}")
            value = self.to_tensor(timeout_ns)
            if value.type.is_block() or not value.dtype.is_int():
                raise TypeError(f"tl.atomic_poll's timeout_ns must be a scalar integer, got "
                                f"{type_name(value.type)}")
            timeout = [self.cast(value, tl.uint64).handle]
        op = tt.AtomicPollOp.build(
            operands=[ptr.handle, self.cast(expected, elt).handle, timeout],
            result_types=[IntegerType(1)],
            properties={"sem": tt.MemSemanticAttr(_sem(sem or "acquire")),
                        "scope": tt.MemSyncScopeAttr(_scope(scope))})
        return self._tensor(op, tl.int1)

    # -- dot -------------------------------------------------------------------------------------------
    def dot(self, a: tensor, b: tensor, acc: tensor | None, precision: str | None,
            max_num_imprecise_acc: int | None, out_dtype: tl.dtype) -> tensor:
        sa, sb = _shape(a), _shape(b)
        if len(sa) < 2 or len(sa) != len(sb):
            raise ValueError(f"tl.dot needs two blocks of one rank, 2 (matrices) or more (batches "
                             f"of matrices), got shapes {sa} and {sb}")
        if sa[-1] != sb[-2]:
            raise ValueError(f"tl.dot: the inner dimensions differ: {sa} @ {sb} (K = {sa[-1]} vs "
                             f"{sb[-2]}) -- fix: the first operand must be M x K and the second "
                             f"K x N")
        if sa[:-2] != sb[:-2]:
            raise ValueError(f"tl.dot: the batch dimensions differ: {sa[:-2]} vs {sb[:-2]}")
        if len(sa) > 3:
            return self._flattened_batch_dot(a, b, acc, precision, max_num_imprecise_acc, out_dtype)
        self._check_dot_size(sa, sb, a.type, b.type)
        if a.dtype != b.dtype:
            if a.dtype.is_fp8() and b.dtype.is_fp8():
                pass
            else:
                raise TypeError(f"tl.dot needs operands of one type, got {a.dtype} and {b.dtype} -- "
                                f"fix: cast one with .to(...)")
        if out_dtype is None:
            out_dtype = tl.float32 if acc is None else acc.dtype
        out_scalar = _dot_result_type(a.dtype, out_dtype)
        shape = sa[:-1] + [sb[-1]]
        out_ty = tl.block_type(out_scalar, shape)
        if acc is None:
            acc = self.full(shape, 0, out_scalar)
        elif _shape(acc) != shape or acc.dtype != out_scalar:
            raise ValueError(f"tl.dot: the accumulator is {type_name(acc.type)} but the product is "
                             f"{type_name(out_ty)} "
                             f"-- fix: pass an accumulator of that shape and type (or out_dtype="
                             f"{acc.dtype} to accumulate in {acc.dtype})")
        if max_num_imprecise_acc is not None and a.dtype.is_fp8() and max_num_imprecise_acc > sa[-1]:
            raise ValueError(f"tl.dot: max_num_imprecise_acc ({max_num_imprecise_acc}) must be <= "
                             f"K ({sa[-1]})")
        precision = precision or getattr(self.options, "default_dot_input_precision", "ieee")
        if precision not in _DOT_PRECISIONS:
            raise ValueError(f"tl.dot: input_precision must be one of {', '.join(_DOT_PRECISIONS)}, "
                             f"not {precision!r}")
        if not a.dtype.is_fp32():
            precision = "ieee"
        op = tt.DotOp(a.handle, b.handle, acc.handle, input_precision=tt.InputPrecision(precision),
                      max_num_imprecise_acc=int(max_num_imprecise_acc or 0))
        return self._tensor(op, out_ty)

    def _flattened_batch_dot(self, a: tensor, b: tensor, acc: tensor | None, precision: str | None,
                             max_num_imprecise_acc: int | None, out_dtype: tl.dtype) -> tensor:
        """A dot over several batch dimensions, as Triton does it: ``tt.dot`` takes one batch
        dimension, so the batch dimensions are flattened into one and restored after."""
        sa, sb = _shape(a), _shape(b)
        out_shape = sa[:-1] + [sb[-1]]
        if acc is not None and _shape(acc) != out_shape:
            raise ValueError(f"tl.dot: the accumulator has shape {_shape(acc)} but the product has "
                             f"shape {out_shape} -- fix: pass an accumulator of that shape")
        batch = 1
        for d in sa[:-2]:
            batch *= d
        a, b = self.reshape(a, [batch] + sa[-2:], False), self.reshape(b, [batch] + sb[-2:], False)
        if acc is not None:
            acc = self.reshape(acc, [batch] + out_shape[-2:], False)
        product = self.dot(a, b, acc, precision, max_num_imprecise_acc, out_dtype)
        return self.reshape(product, out_shape, False)

    def _check_dot_size(self, sa: list[int], sb: list[int], a_type: tl.dtype, b_type: tl.dtype) -> None:
        """M, N and K must reach the backend's minimum (``min_dot_size`` of its
        ``get_codegen_implementation``); with no backend, 16 each, as GPUs need."""
        min_dot_size = self.codegen_fns.get("min_dot_size")
        minimum = tuple(min_dot_size(a_type, b_type)) if min_dot_size else (16, 16, 16)
        for dim, name, least in zip((sa[-2], sb[-1], sa[-1]), "MNK", minimum):
            if dim < least:
                need = "every dimension" if len(set(minimum)) == 1 else name
                raise ValueError(f"tl.dot: {need} must be >= {least}, but {name} = {dim} "
                                 f"(shapes {sa} @ {sb}) -- fix: use blocks of at least {least}")

    # -- reductions and scans -------------------------------------------------------------------------
    def _combine_region(self, inputs: Sequence[tensor], combine_fn: Any, n_args: int,
                        terminator: type) -> Region:
        scalars = [t.dtype for t in inputs]
        block = Block(arg_types=[self.ir_type(s) for s in scalars] * n_args)
        with self.builder.at_end(block):
            args = [tensor(arg, s) for arg, s in zip(block.args, scalars * n_args)]
            results = self.call_jit(combine_fn, args)
            results = list(results) if isinstance(results, tuple) else [results]
            if len(results) != len(inputs):
                raise TypeError(f"the combine function returns {len(results)} values for "
                                f"{len(inputs)} inputs")
            values = [self.cast(self.to_tensor(r), s) for r, s in zip(results, scalars)]
            self.builder.insert(terminator(*[v.handle for v in values]))
        return Region(block)

    def _reduction_inputs(self, inputs: list[tensor], axis: Any) -> tuple[list[tensor], int]:
        if any(not t.type.is_block() for t in inputs):
            raise ValueError("cannot reduce a scalar")
        if axis is None:
            inputs = [self.reshape(t, [t.type.numel], True) for t in inputs]
            axis = 0
        rank = len(_shape(inputs[0]))
        if not -rank <= axis < rank:
            raise ValueError(f"reduction axis {axis} is out of range for a tensor of rank {rank} "
                             f"-- fix: use an axis from {-rank} to {rank - 1}, or axis=None to "
                             f"reduce every element")
        shape = _shape(inputs[0])
        if any(_shape(t) != shape for t in inputs):
            raise ValueError("all inputs of a reduction must have the same shape")
        return inputs, axis % rank

    def reduce(self, inputs: list[tensor], axis: Any, combine_fn: Any, keep_dims: bool) -> tuple:
        """``tt.reduce`` of the inputs along ``axis`` (all elements when None) with the
        ``@jit`` combine function; ``keep_dims`` leaves the reduced dimensions as size 1."""
        reduce_all = axis is None
        original_rank = len(_shape(inputs[0]))
        inputs, axis = self._reduction_inputs(inputs, axis)
        shape = _shape(inputs[0])
        out_shape = shape[:axis] + shape[axis + 1:]
        out_types = [tl.block_type(t.dtype, out_shape) if out_shape else t.dtype for t in inputs]
        region = self._combine_region(inputs, combine_fn, 2, tt.ReduceReturnOp)
        op = self.builder.insert(tt.ReduceOp.build(
            operands=[[t.handle for t in inputs]], result_types=[[self.ir_type(t) for t in out_types]],
            properties={"axis": IntegerAttr(axis, i32)}, regions=[region]))
        results = [tensor(r, t) for r, t in zip(op.results, out_types)]
        if keep_dims and reduce_all:
            results = [self.splat(r, [1] * original_rank) for r in results]
        elif keep_dims:
            results = [self.expand_dims(r, axis) for r in results]
        return tuple(results)

    def scan(self, inputs: list[tensor], axis: Any, combine_fn: Any, reverse: bool) -> tuple:
        if axis is None:
            raise ValueError("a scan needs an axis")
        inputs, axis = self._reduction_inputs(inputs, axis)
        region = self._combine_region(inputs, combine_fn, 2, tt.ScanReturnOp)
        op = self.builder.insert(tt.ScanOp.build(
            operands=[[t.handle for t in inputs]], result_types=[[t.handle.type for t in inputs]],
            properties={"axis": IntegerAttr(axis, i32), "reverse": IntegerAttr.from_bool(reverse)},
            regions=[region]))
        return tuple(tensor(r, t.type) for r, t in zip(op.results, inputs))

    # -- debugging and hints ------------------------------------------------------------------------------
    def device_print(self, prefix: str, args: list[tensor], hex: bool) -> None:
        """``tt.print``; as in Triton a prefix followed by values ends in ": " (its last
        character, if not a space, is kept: "x:" and "x " both read "x: "), and a prefix longer
        than two characters starts with a space."""
        if args and not prefix.endswith(" "):
            prefix += " "
        if args and not prefix.endswith(": "):
            prefix = prefix[:-1] + ": "
        if len(prefix) > 2 and not prefix.startswith(" "):
            prefix = " " + prefix
        signed = [1 if a.dtype.is_int_signed() else 0 for a in args]
        self.builder.insert(tt.PrintOp.build(
            operands=[[a.handle for a in args]],
            properties={"prefix": StringAttr(prefix), "hex": IntegerAttr.from_bool(hex),
                        "isSigned": DenseArrayBase.from_list(i32, signed)}))

    def device_assert(self, cond: tensor, message: str, mask: tensor | None) -> None:
        if not getattr(self.options, "debug", False):
            return
        if mask is not None:
            cond = self.logical("or", cond, self.logical_not(mask))
        cond = cond if cond.dtype.is_int1() else self.compare("ne", cond, 0)
        self.builder.insert(tt.AssertOp.build(operands=[cond.handle],
                                              properties={"message": StringAttr(message)}))

    def assume(self, cond: tensor) -> None:
        cond = cond if cond.dtype.is_int1() else self.compare("ne", cond, 0)
        self.builder.insert(tt.AssumeOp.build(operands=[cond.handle]))

    def debug_barrier(self) -> None:
        self.builder.insert(gpu.BarrierOp())

    def hint(self, x: tensor, name: str, values: list[int]) -> tensor:
        rank = max(1, len(_shape(x)))
        if len(values) != rank:
            raise ValueError(f"the hint has {len(values)} values but the tensor has rank {rank}")
        owner = x.handle.owner
        if hasattr(owner, "attributes"):
            owner.attributes[name] = DenseArrayBase.from_list(i32, values)
        return x

    def inline_asm(self, asm: str, constraints: str, args: list[tensor], dtype: Any,
                   is_pure: bool, pack: int) -> Any:
        dtypes_ = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype]
        shape: list[int] = []
        for a in args:
            if a.type.is_block():
                shape = _shape(a)
        args = [self.broadcast_to(a, shape) if shape else a for a in args]
        out = [tl.block_type(d, shape) if shape else d for d in dtypes_]
        op = self.builder.insert(tt.ElementwiseInlineAsmOp.build(
            operands=[[a.handle for a in args]], result_types=[[self.ir_type(t) for t in out]],
            properties={"asm_string": StringAttr(asm), "constraints": StringAttr(constraints),
                        "pure": IntegerAttr.from_bool(is_pure), "packed_element": IntegerAttr(pack, i32)}))
        results = [tensor(r, t) for r, t in zip(op.results, out)]
        return tuple(results) if isinstance(dtype, (list, tuple)) else results[0]

    # -- math ---------------------------------------------------------------------------------------------
    def unary_math(self, name: str, x: tensor, allowed: Sequence[str] | None) -> tensor:
        if allowed is not None and x.dtype.name not in allowed:
            raise TypeError(f"tl.{name} expects {', '.join(allowed)} but got {x.dtype} -- fix: "
                            f"convert with .to(tl.float32) first")
        cls = _MATH_1[name]
        return self._tensor(cls(x.handle), x.type)

    def precise(self, which: str, x: tensor, y: tensor | None = None) -> tensor:
        """Correctly rounded fp32 division / square root (tt.precise_divf / tt.precise_sqrt)."""
        if which == "sqrt":
            return self._tensor(tt.PreciseSqrtOp.build(operands=[x.handle], result_types=[x.handle.type]), x.type)
        assert y is not None
        x, y = self.broadcast_pair(x, self.cast(y, x.dtype))
        return self._tensor(tt.PreciseDivFOp.build(operands=[x.handle, y.handle],
                                                   result_types=[x.handle.type]), x.type)

    def fma(self, x: tensor, y: tensor, z: tensor) -> tensor:
        ty = promotion.binary_op_types("+", x.dtype, y.dtype).result
        ty = promotion.binary_op_types("+", ty, z.dtype).result
        if not ty.is_floating():
            raise TypeError(f"tl.fma needs floating-point operands, got {ty}")
        x, y, z = (self.cast(v, ty) for v in (x, y, z))
        x, y = self.broadcast_pair(x, y)
        x, z = self.broadcast_pair(x, z)
        x, y = self.broadcast_pair(x, y)
        return self._tensor(xmath.FmaOp(x.handle, y.handle, z.handle), x.type)

    def mulhi(self, x: tensor, y: tensor) -> tensor:
        y = self.cast(y, x.dtype)
        x, y = self.broadcast_pair(x, y)
        return self._tensor(tt.MulhiUIOp.build(operands=[x.handle, y.handle],
                                               result_types=[x.handle.type]), x.type)

    def loop_bounds(self, *bounds: Any) -> tuple[tensor, tensor, tensor]:
        """The bounds of a runtime ``range`` as one integer type (i32, or i64 if any is i64)."""
        values = [self.to_tensor(getattr(b, "value", b)) for b in bounds]
        for v in values:
            if not v.dtype.is_int() or v.type.is_block():
                raise TypeError(f"range() bounds must be integer scalars, got {type_name(v.type)}")
        ty = tl.int64 if any(v.dtype.int_bitwidth == 64 for v in values) else tl.int32
        lb, ub, step = (self.cast(v, ty) for v in values)
        return lb, ub, step


_MATH_1 = {
    "exp": xmath.ExpOp, "exp2": xmath.Exp2Op, "log": xmath.LogOp, "log2": xmath.Log2Op,
    "sqrt": xmath.SqrtOp, "rsqrt": xmath.RsqrtOp, "sin": xmath.SinOp, "cos": xmath.CosOp,
    "floor": xmath.FloorOp, "ceil": xmath.CeilOp, "erf": xmath.ErfOp, "abs_f": xmath.AbsFOp,
    "abs_i": xmath.AbsIOp, "tanh": xmath.TanhOp, "log1p": xmath.Log1pOp,
}


_DOT_PRECISIONS = tuple(p.value for p in tt.InputPrecision)


def _dot_result_type(operand: tl.dtype, out_dtype: tl.dtype) -> tl.dtype:
    """Triton's result type of ``tl.dot``: int32 for int8; fp32 for fp32 and bf16 operands;
    fp64 for fp64; ``out_dtype`` (fp32 or fp16) for fp16 and fp8."""
    if operand.is_int():
        if operand != tl.int8:
            raise TypeError(f"tl.dot supports int8 integer operands only, got {operand} -- fix: "
                            f"convert them with .to(tl.int8) or to a float type")
        return tl.int32
    if not (operand.is_fp8() or operand.name in ("fp16", "bf16", "fp32", "fp64")):
        raise TypeError(f"tl.dot does not support {operand} operands")
    if out_dtype.is_bf16():
        raise ValueError("tl.dot: out_dtype=bfloat16 is unsupported -- fix: use out_dtype=tl.float32 "
                         "(or tl.float16) and convert the result with .to(tl.bfloat16)")
    if operand.name in ("fp32", "bf16"):
        return tl.float32
    if operand.is_fp64():
        return tl.float64
    return out_dtype


def _check_atomic_type(op: str, elt: tl.dtype) -> None:
    """Triton's element types for atomics: no 8/16-bit integers, no fp8, fp16/bf16 only for
    add; bitwise ones need integers; float max/min work on fp32 and fp64."""
    half = elt.name in ("fp16", "bf16")
    if elt.primitive_bitwidth < 16 or elt.name in ("int16", "uint16") or (half and op != "add") \
            or (elt.is_floating() and op in ("and", "or", "xor")):
        kinds = "32/64-bit integers" if op in ("and", "or", "xor") else \
            "32/64-bit integers and floats" if op != "add" else "32/64-bit integers and fp16/bf16/fp32/fp64"
        raise TypeError(f"tl.atomic_{op} does not support {elt} elements; it works on {kinds} -- "
                        f"fix: use a buffer of one of those types")


def _cache(value: str) -> Any:
    text = str(value or "")
    mapping = {"": "none", ".ca": "ca", ".cg": "cg", ".wb": "wb", ".cs": "cs", ".wt": "wt", ".cv": "cv"}
    if text not in mapping:
        raise ValueError(f"cache_modifier {text!r} is not one of {', '.join(repr(k) for k in mapping if k)}")
    return tt.CacheModifier(mapping[text])


def _evict(value: str) -> Any:
    text = str(value or "")
    mapping = {"": "evict_normal", "evict_normal": "evict_normal", "evict_first": "evict_first",
               "evict_last": "evict_last"}
    if text not in mapping:
        raise ValueError(f"eviction_policy {text!r} is not one of evict_normal, evict_first, evict_last")
    return tt.EvictionPolicy(mapping[text])


def _sem(value: Any) -> Any:
    text = str(value or "acq_rel")
    if text not in ("relaxed", "acquire", "release", "acq_rel"):
        raise ValueError(f"sem {text!r} is not one of relaxed, acquire, release, acq_rel")
    return tt.MemSemantic(text)


def _scope(value: Any) -> Any:
    text = str(value or "gpu")
    if text not in ("gpu", "cta", "sys"):
        raise ValueError(f"scope {text!r} is not one of gpu, cta, sys")
    return tt.MemSyncScope(text)
