"""Block pointers (``tt.make_tensor_ptr``, ``tt.advance``) and loads and stores through them.

A block pointer is a few scalars -- the base address, and per dimension the shape, the stride
(in elements) and the block's offset -- held together in a `BlockPointer`; ``tt.advance``
makes a new one with moved offsets, and `control` carries one through loops and branches as
one phi per scalar.  A load or store through it computes, for each chunk of the block, the
addresses ``base + sum_d (offset_d + i_d) * stride_d`` and, for the dimensions named in
``boundary_check``, the mask ``0 <= offset_d + i_d < shape_d``; what remains is an ordinary
masked load (lanes outside read the padding: zero, or NaN) or store, shared with `memory`.
When the innermost stride is the constant 1 and a chunk lies within one row, the chunk's
addresses are consecutive and the access is one vector load or store instead of a gather.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import llvmlite.ir as ir

from naiad.backends.cpu.lowering import memory
from naiad.backends.cpu.lowering.tiles import shape_of
from naiad.codegen import llvm_types as lt
from naiad.ir import tt


@dataclasses.dataclass
class BlockPointer:
    base: ir.Value               # i64 address of element (0, .., 0) of the view
    shape: list[ir.Value]        # i64 per dimension
    strides: list[ir.Value]      # i64 per dimension, in elements
    offsets: list[ir.Value]      # i32 per dimension: the block's first element
    unit_stride: bool            # the innermost dimension's stride is the constant 1

    def scalars(self) -> list[ir.Value]:
        """Every scalar, for phis (`with_scalars` inverts it)."""
        return [self.base, *self.shape, *self.strides, *self.offsets]

    def with_scalars(self, values: list[ir.Value]) -> "BlockPointer":
        rank = len(self.shape)
        return BlockPointer(values[0], list(values[1:1 + rank]), list(values[1 + rank:1 + 2 * rank]),
                            list(values[1 + 2 * rank:]), self.unit_stride)


def is_block_pointer(value: Any) -> bool:
    return getattr(value.type, "is_block_pointer", False)


def lower_make(kernel: Any, op: tt.MakeTensorPtrOp) -> None:
    strides = list(op.strides)
    kernel.env[op.result] = BlockPointer(
        kernel.scalar(op.base), [kernel.scalar(v) for v in op.shape],
        [kernel.scalar(v) for v in strides], [kernel.scalar(v) for v in op.offsets],
        kernel.constant_value(strides[-1]) == 1)


def lower_advance(kernel: Any, op: tt.AdvanceOp) -> None:
    ptr = kernel.lookup(op.ptr)
    offsets = [kernel.b.add(o, kernel.scalar(d)) for o, d in zip(ptr.offsets, op.offsets)]
    kernel.env[op.result] = dataclasses.replace(ptr, offsets=offsets)


def _access(kernel: Any, op: Any, index: ir.Value, lanes: int) -> tuple[ir.Value, ir.Value | None, bool]:
    """Addresses, mask (None without boundary checks) and contiguity of a chunk of the block."""
    ptr: BlockPointer = kernel.lookup(op.ptr)
    block = shape_of(op.ptr.type.pointee_type)
    ctx, b = kernel.ctx(lanes), kernel.b
    lane_index = ctx.splat(index)
    if lanes > 1:
        lane_index = b.add(lane_index, ir.Constant(ir.VectorType(lt.I32, lanes), list(range(lanes))))
    positions = [b.add(ctx.splat(offset), part)
                 for offset, part in zip(ptr.offsets, kernel.chunks.split_index(lane_index, block))]
    i64 = lt.vector(lt.I64, lanes)
    element = lt.byte_size(lt.memory_type(lt.element(op.ptr.type.pointee_type)))
    address = ctx.splat(ptr.base)
    for position, stride in zip(positions, ptr.strides):
        step = b.mul(b.sext(position, i64), ctx.splat(b.mul(stride, ir.Constant(lt.I64, element))))
        address = b.add(address, step)
    mask = None
    for dim in op.boundaryCheck.get_values():
        position = b.sext(positions[dim], i64)
        inside = b.and_(b.icmp_signed(">=", position, ctx.const(lt.I64, 0)),
                        b.icmp_signed("<", position, ctx.splat(ptr.shape[dim])))
        mask = inside if mask is None else b.and_(mask, inside)
    return address, mask, ptr.unit_stride and block[-1] >= lanes


def load_chunk(kernel: Any, op: tt.LoadOp, index: ir.Value, lanes: int) -> ir.Value:
    """A chunk of a load through a block pointer; lanes outside the checked bounds are padding."""
    addresses, mask, contiguous = _access(kernel, op, index, lanes)
    value_type = op.results[0].type
    nan = op.padding is not None and op.padding.data == tt.PaddingOption.NAN
    padding = kernel.scalar_constant(float("nan") if nan else 0, lt.element(value_type))
    return memory.emit_load(kernel, op, addresses, mask, kernel.ctx(lanes).splat(padding), lanes,
                            contiguous)


def lower_store(kernel: Any, op: tt.StoreOp) -> None:
    def chunk(index: ir.Value, lanes: int) -> None:
        addresses, mask, contiguous = _access(kernel, op, index, lanes)
        value = kernel.chunks.value_at(op.value, index, lanes)
        memory.store_chunk(kernel, op, addresses, value, mask, lanes, contiguous)

    kernel.for_each_chunk(op.value.type, chunk)
