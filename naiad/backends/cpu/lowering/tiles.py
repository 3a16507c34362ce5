"""How the CPU backend holds tensors: in memory buffers, or not at all until a loop needs them.

A TTIR tensor of 128x128 floats does not fit in registers, and unrolling every element-wise op
over 16384 lanes would take LLVM seconds.  So a tensor value is one of:

- `Buffer`: materialized, row-major, in a stack buffer of the kernel;
- `Lazy`: not computed yet; its defining op is evaluated *per chunk* of ``lanes`` consecutive
  elements inside the loop of whichever op consumes it, so chains of element-wise ops, loads and
  shape ops fuse into one pass with values kept in vector registers.

`ChunkEmitter.value_at` evaluates any tensor value at a chunk: a buffer is loaded, a lazy op's
operands are evaluated at the corresponding chunk (for shape ops: a remapped index) and its
element-wise rule applied.  Where lanes do not map to consecutive elements (a transpose, a
broadcast across rows narrower than the lane count) it falls back to one lane at a time.

`consecutive_lanes` says, from the kernel's axis information, whether the lanes of each chunk
of a tensor hold consecutive values: pointers one element apart make one vector load or store.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import llvmlite.ir as ir
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import SSAValue

from naiad.codegen import elementwise, llvm_types as lt
from naiad.codegen.axis_info import AxisInfo, innermost_dim
from naiad.ir import arith, tt


@dataclasses.dataclass
class Buffer:
    """A materialized tensor: ``ptr`` to ``numel`` row-major elements of its storage type."""

    ptr: ir.Value
    mlir_type: Any

    @property
    def shape(self) -> list[int]:
        return list(self.mlir_type.get_shape())


@dataclasses.dataclass
class Lazy:
    """A tensor defined by ``op`` (result ``index``) that is computed where it is consumed."""

    op: Any
    index: int = 0


def shape_of(mlir_type: Any) -> list[int]:
    return list(mlir_type.get_shape()) if isinstance(mlir_type, TensorType) else []


def numel(mlir_type: Any) -> int:
    n = 1
    for d in shape_of(mlir_type):
        n *= d
    return n


def strides(shape: list[int]) -> list[int]:
    out, step = [], 1
    for d in reversed(shape):
        out.append(step)
        step *= d
    return out[::-1]


def multi_index(linear: int, shape: list[int]) -> list[int]:
    return [(linear // s) % d for s, d in zip(strides(shape), shape)]


#: Ops evaluated lane by lane with their element-wise rule.
ELEMENTWISE = tuple(elementwise.RULES)


class ChunkEmitter:
    """Evaluates tensor values at chunks inside the loop that is being emitted."""

    def __init__(self, kernel: Any):
        self.kernel = kernel
        self._cache: dict[tuple, ir.Value] = {}

    @property
    def b(self) -> ir.IRBuilder:
        return self.kernel.b

    def reset_cache(self) -> None:
        """Forget evaluated chunks: a new block starts that the old values do not dominate."""
        self._cache.clear()

    def set_aside(self) -> dict:
        """Start a loop body: keep what was evaluated before (it dominates the body)."""
        saved = self._cache
        self._cache = dict(saved)
        return saved

    def restore(self, saved: dict) -> None:
        """Leave a loop body: only what was evaluated before it is still usable."""
        self._cache = saved

    # -- entry points ---------------------------------------------------------------------
    def value_at(self, value: SSAValue, index: ir.Value, lanes: int) -> ir.Value:
        """``value`` (a tensor) at linear elements ``index .. index+lanes-1``, storage-typed."""
        key = (value, index, lanes)
        if key not in self._cache:
            self._cache[key] = self._evaluate(value, index, lanes)
        return self._cache[key]

    def _evaluate(self, value: SSAValue, index: ir.Value, lanes: int) -> ir.Value:
        held = self.kernel.lookup(value)
        if isinstance(held, Buffer):
            return self.load_chunk(held, index, lanes)
        if not isinstance(held, Lazy):          # a scalar used where a tensor is expected
            return self.kernel.ctx(lanes).splat(held)
        op = held.op
        handler = _SHAPE_OPS.get(type(op))
        if handler is not None:
            return handler(self, op, index, lanes)
        if isinstance(op, ELEMENTWISE):
            args = [self.value_at(v, index, lanes) for v in op.operands]
            return elementwise.lower(self.kernel.ctx(lanes), op, args)
        return self.kernel.evaluate_special(op, held.index, index, lanes)

    # -- buffers ----------------------------------------------------------------------------------
    def element_pointer(self, buffer: Buffer, index: ir.Value) -> ir.Value:
        size = lt.byte_size(lt.memory_type(buffer.mlir_type))
        return self.b.gep(buffer.ptr, [self.b.mul(self._i64(index), ir.Constant(lt.I64, size))],
                          source_etype=lt.I8)

    def load_chunk(self, buffer: Buffer, index: ir.Value, lanes: int) -> ir.Value:
        element = lt.memory_type(buffer.mlir_type)
        t = lt.vector(element, lanes)
        value = self.b.load(self.element_pointer(buffer, index), typ=t, align=lt.byte_size(element))
        if element != lt.scalar(buffer.mlir_type):        # booleans are kept as bytes
            return self.b.icmp_unsigned("!=", value, self.kernel.ctx(lanes).const(lt.I8, 0))
        return value

    def load_lanes(self, buffer: Buffer, indices: ir.Value, lanes: int) -> ir.Value:
        """The elements of ``buffer`` at the (vector of) linear ``indices``: a gather."""
        if lanes == 1:
            return self.load_chunk(buffer, indices, 1)
        element = lt.memory_type(buffer.mlir_type)
        vec = lt.vector(element, lanes)
        i64 = lt.vector(lt.I64, lanes)
        ctx = self.kernel.ctx(lanes)
        offsets = self.b.mul(self.b.sext(indices, i64), ctx.const(lt.I64, lt.byte_size(element)))
        base = ctx.splat(self.b.ptrtoint(buffer.ptr, lt.I64))
        pointers = self.b.inttoptr(self.b.add(base, offsets), lt.vector(lt.PTR, lanes))
        fn = lt.intrinsic(self.kernel.llmod, "masked.gather", [vec, pointers.type], vec,
                          [pointers.type, lt.I32, lt.vector(lt.I1, lanes), vec])
        value = self.b.call(fn, [pointers, ir.Constant(lt.I32, lt.byte_size(element)),
                                 ctx.const(lt.I1, 1), ir.Constant(vec, ir.Undefined)])
        if element != lt.scalar(buffer.mlir_type):        # booleans are kept as bytes
            return self.b.icmp_unsigned("!=", value, ctx.const(lt.I8, 0))
        return value

    def store_chunk(self, buffer: Buffer, index: ir.Value, value: ir.Value) -> None:
        """Store a chunk into a kernel buffer.  The value is frozen first: a buffer updated as
        ``buffer = where(mask, new, buffer)`` (a loop-carried accumulator under a mask) would
        otherwise become a masked store in LLVM's code generator (x86 ``vmaskmovps``), which
        AMD processors run microcoded: a Welford loop took 4x as long.  The buffer is the
        kernel's own, so writing all lanes is always allowed."""
        element = lt.memory_type(buffer.mlir_type)
        if element != lt.scalar(buffer.mlir_type):
            value = self.b.zext(value, lt.vector(element, lt.lanes_of(value.type)))
        if isinstance(value.type, ir.VectorType):
            value = lt.freeze(self.b, value)
        self.b.store(value, self.element_pointer(buffer, index), align=lt.byte_size(element))

    def _i64(self, value: ir.Value) -> ir.Value:
        return value if value.type == lt.I64 else self.b.sext(value, lt.I64)

    # -- lane-wise fallback -------------------------------------------------------------------------
    def per_lane(self, lanes: int, scalar_at: Callable[[int, ir.Value], ir.Value],
                 index: ir.Value) -> ir.Value:
        """Build a vector from ``scalar_at(lane, linear index of that lane)``."""
        if lanes == 1:
            return scalar_at(0, index)
        values = [scalar_at(k, self.b.add(index, ir.Constant(index.type, k))) for k in range(lanes)]
        vec = ir.Constant(ir.VectorType(values[0].type, lanes), ir.Undefined)
        for k, v in enumerate(values):
            vec = self.b.insert_element(vec, v, ir.Constant(lt.I32, k))
        return vec

    def remap(self, value: SSAValue, index: ir.Value, lanes: int,
              source_index: Callable[[ir.Value], ir.Value], contiguous: bool,
              uniform: bool) -> ir.Value:
        """Evaluate ``value`` where element i of the result reads ``source_index(i)`` of it."""
        if uniform:
            return self.kernel.ctx(lanes).splat(self.value_at(value, source_index(index), 1))
        if contiguous:
            return self.value_at(value, source_index(index), lanes)
        return self.per_lane(lanes, lambda k, i: self.value_at(value, source_index(i), 1), index)

    # -- index arithmetic (shapes are powers of two: divisions are shifts) -------------------------
    def split_index(self, index: ir.Value, shape: list[int]) -> list[ir.Value]:
        parts = []
        for stride, dim in zip(strides(shape), shape):
            q = self.b.lshr(index, ir.Constant(index.type, stride.bit_length() - 1)) if stride > 1 else index
            parts.append(self.b.and_(q, ir.Constant(index.type, dim - 1)) if dim > 1 else ir.Constant(index.type, 0))
        return parts

    def join_index(self, parts: list[ir.Value], shape: list[int], like: ir.Value) -> ir.Value:
        total = ir.Constant(like.type, 0)
        for part, stride in zip(parts, strides(shape)):
            term = self.b.shl(part, ir.Constant(like.type, stride.bit_length() - 1)) if stride > 1 else part
            total = self.b.add(total, term)
        return total


# -- shape ops and sources: how a chunk of the result reads its operand ---------------------------
def _constant(em: ChunkEmitter, op: Any, index: ir.Value, lanes: int) -> ir.Value:
    value = op.value
    t = op.results[0].type
    if isinstance(value, DenseIntOrFPElementsAttr):      # a splat (others are buffers)
        scalar = value.get_values()[0]
    else:
        scalar = value.value.data
    return em.kernel.ctx(lanes).splat(em.kernel.scalar_constant(scalar, lt.element(t)))


def _splat(em: ChunkEmitter, op: Any, index: ir.Value, lanes: int) -> ir.Value:
    return em.kernel.ctx(lanes).splat(em.kernel.scalar(op.src))


def _make_range(em: ChunkEmitter, op: Any, index: ir.Value, lanes: int) -> ir.Value:
    start = op.start.value.data
    first = em.b.add(em.b.trunc(index, lt.I32) if index.type != lt.I32 else index,
                     ir.Constant(lt.I32, start))
    if lanes == 1:
        return first
    ramp = ir.Constant(ir.VectorType(lt.I32, lanes), list(range(lanes)))
    return em.b.add(em.kernel.ctx(lanes).splat(first), ramp)


def _same_index(em: ChunkEmitter, op: Any, index: ir.Value, lanes: int) -> ir.Value:
    """expand_dims / reshape: row-major data is unchanged, only the shape."""
    return em.value_at(op.src, index, lanes)


def _broadcast(em: ChunkEmitter, op: Any, index: ir.Value, lanes: int) -> ir.Value:
    dst, src = shape_of(op.result.type), shape_of(op.src.type)
    last = dst[-1]

    def source(i: ir.Value) -> ir.Value:
        parts = em.split_index(i, dst)
        zero = ir.Constant(i.type, 0)
        return em.join_index([p if s != 1 else zero for p, s in zip(parts, src)], src, i)

    whole_rows = last >= lanes
    return em.remap(op.src, index, lanes, source,
                    contiguous=whole_rows and src[-1] == last,
                    uniform=whole_rows and src[-1] == 1)


def _trans(em: ChunkEmitter, op: Any, index: ir.Value, lanes: int) -> ir.Value:
    order = list(op.order.get_values())
    dst, src = shape_of(op.result.type), shape_of(op.src.type)

    def source(i: ir.Value) -> ir.Value:
        parts = em.split_index(i, dst)
        src_parts = [None] * len(src)
        for d, o in enumerate(order):
            src_parts[o] = parts[d]
        return em.join_index(src_parts, src, i)

    keeps_last = order[-1] == len(src) - 1 and dst[-1] >= lanes
    return em.remap(op.src, index, lanes, source, contiguous=keeps_last, uniform=False)


_SHAPE_OPS: dict[type, Callable] = {
    arith.ConstantOp: _constant,
    tt.SplatOp: _splat,
    tt.MakeRangeOp: _make_range,
    tt.ExpandDimsOp: _same_index,
    tt.ReshapeOp: _same_index,
    tt.BroadcastOp: _broadcast,
    tt.TransOp: _trans,
}


# -- consecutive lanes -----------------------------------------------------------------------------
def consecutive_lanes(info: AxisInfo, shape: list[int], lanes: int) -> bool:
    """Whether the lanes of every chunk of a tensor of ``shape`` hold consecutive integers
    (pointers: addresses one element apart), by the tensor's axis information ``info``.

    A chunk is ``lanes`` consecutive elements of the row-major order, starting at a multiple of
    ``lanes``.  That order runs along the innermost dimension longer than 1; where that
    dimension is a multiple of ``lanes`` long, a chunk lies in one of its rows at a multiple of
    ``lanes``, so inside one run of consecutive values when the runs along it are a multiple of
    ``lanes`` long (runs start at multiples of their length).  A chunk across rows is not known
    to be consecutive: axis information says nothing of how one row follows another.
    """
    inner = innermost_dim(shape)
    return lanes > 1 and inner is not None and shape[inner] % lanes == 0 \
        and info.contiguity[inner] % lanes == 0


def uniform_lanes(info: AxisInfo, shape: list[int], lanes: int) -> bool:
    """Whether every chunk of ``lanes`` elements of a tensor of ``shape`` holds one value, by
    its axis information: the runs of equal values along the innermost dimension longer than 1
    are a multiple of ``lanes`` long (a chunk then lies inside one run, as in
    `consecutive_lanes`); a tensor whose dimensions are all 1 is one value."""
    inner = innermost_dim(shape)
    if inner is None:
        return True
    return lanes > 1 and shape[inner] % lanes == 0 and info.constancy[inner] % lanes == 0
