"""Kernels whose 2-D blocks lie along memory's first axis are turned over, for the CPU.

The CPU backend puts a block's last axis in vector lanes: a load of ``[XBLOCK, RBLOCK]``
elements whose addresses run consecutively along the last axis is one vector load per chunk.
Some kernels index the other way: torch.compile's batch norm over channels-last activations
loads ``x[c + 64 * r]`` into a ``[channels, pixels]`` block, consecutive along the first axis
and 64 elements apart along the last, so every chunk became a gather (a 32x64 convnet's
statistics kernel took 4x as long as Inductor's C++ one).

When most of a kernel's memory accesses are consecutive along the first axis of their blocks
only, this pass swaps the two axes of every 2-D tensor in the kernel: types ``[a, b]`` become
``[b, a]``, ``expand_dims``, ``reduce`` and ``scan`` take the other axis, splat constants take
the new type.  Element-wise ops, loads and stores do not care how their elements are laid out,
so the kernel computes the same values; its accesses now run along the last axis.  Kernels
holding anything whose meaning depends on the order of elements (dot, join, split, cat, gather,
histogram, block pointers, a reshape of a 2-D tensor with no unit axis, printing) or tensors of
another rank above 1 are left alone.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, TensorType, i32
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from naiad.codegen import elementwise
from naiad.codegen.axis_info import analyze, info_of
from naiad.ir import arith, tt
from naiad.passes.constants import reshaped_constant

#: Ops that may see 2-D tensors turned over: their meaning is the same in either layout
#: (element-wise ops through the shared rules, control flow, memory accesses, assertions (their
#: report names no element), shape ops whose axes `_turn_axes` remaps).
_ORDER_FREE: tuple[type, ...] = (
    *elementwise.RULES, tt.SplatOp, tt.BroadcastOp, tt.ExpandDimsOp, tt.TransOp, tt.ReduceOp,
    tt.ScanOp, tt.LoadOp, tt.StoreOp, tt.AtomicRMWOp, tt.AtomicCASOp, tt.AddPtrOp, tt.AssumeOp,
    tt.ReduceReturnOp, tt.ScanReturnOp, tt.AssertOp, arith.ConstantOp, scf.ForOp, scf.IfOp, scf.WhileOp,
    scf.YieldOp, scf.ConditionOp,
)
#: How much more an access inside a loop counts than one outside (it runs once a trip).
_LOOP_WEIGHT = 16


def transpose_blocks(module: Any) -> bool:
    """Turn over the 2-D blocks of each kernel of ``module`` whose accesses run along their
    blocks' first axis; whether any kernel changed."""
    changed = False
    for func in [op for op in module.walk() if isinstance(op, tt.FuncOp)]:
        if _applies(func) and _mostly_columns(func):
            _turn(func)
            changed = True
    return changed


def _rank(value: SSAValue) -> int:
    return len(value.type.get_shape()) if isinstance(value.type, TensorType) else 0


def _values(op: Operation) -> list[SSAValue]:
    return [*op.operands, *op.results] + [a for r in op.regions for blk in r.blocks for a in blk.args]


def _applies(func: Any) -> bool:
    """Whether every op that sees a 2-D tensor keeps its meaning when they are turned over,
    and no tensor has more than two axes."""
    seen_2d = False
    for op in func.walk():
        ranks = [_rank(v) for v in _values(op)]
        if any(r > 2 for r in ranks):
            return False
        if 2 not in ranks:
            continue
        seen_2d = True
        if isinstance(op, tt.ReshapeOp):
            if not all(1 in v.type.get_shape() for v in (op.src, op.result) if _rank(v) == 2):
                return False
        elif isinstance(op, arith.ConstantOp):
            if reshaped_constant(op.value, op.result.type, op) is None:
                return False
        elif not isinstance(op, _ORDER_FREE):
            return False
    return seen_2d


def _depth(op: Operation, func: Any) -> int:
    depth, parent = 0, op.parent_op()
    while parent is not None and parent is not func:
        depth += isinstance(parent, (scf.ForOp, scf.WhileOp))
        parent = parent.parent_op()
    return depth


def _mostly_columns(func: Any) -> bool:
    """Whether the kernel's 2-D accesses, weighted by their elements and loops, run along the
    first axis only (consecutive down a column) more than along the last."""
    infos = analyze(func)
    columns = rows = 0
    for op in func.walk():
        if not isinstance(op, (tt.LoadOp, tt.StoreOp, tt.AtomicRMWOp, tt.AtomicCASOp)) \
                or _rank(op.ptr) != 2:
            continue
        shape = op.ptr.type.get_shape()
        contiguity = info_of(infos, op.ptr).contiguity
        weight = shape[0] * shape[1] * _LOOP_WEIGHT ** _depth(op, func)
        if shape[1] > 1 and contiguity[1] > 1:
            rows += weight
        elif shape[0] > 1 and contiguity[0] > 1:
            columns += weight
    return columns > rows


def _turned(t: TensorType) -> TensorType:
    rows, cols = t.get_shape()
    return TensorType(t.element_type, [cols, rows])


def _turn(func: Any) -> None:
    for op in list(func.walk()):
        for region in op.regions:
            for block in region.blocks:
                for arg in list(block.args):
                    if _rank(arg) == 2:
                        Rewriter.replace_value_with_new_type(arg, _turned(arg.type))
        for result in list(op.results):
            if _rank(result) == 2:
                Rewriter.replace_value_with_new_type(result, _turned(result.type))
        _turn_axes(op)


def _turn_axes(op: Operation) -> None:
    """The attributes of ``op`` that name an axis of a 2-D tensor, or carry its type."""
    if isinstance(op, tt.ExpandDimsOp) and _rank(op.result) == 2:
        op.axis = IntegerAttr(1 - op.axis.value.data, i32)
    elif isinstance(op, (tt.ReduceOp, tt.ScanOp)) and _rank(op.operands[0]) == 2:
        op.axis = IntegerAttr(1 - op.axis.value.data, i32)
    elif isinstance(op, arith.ConstantOp) and _rank(op.result) == 2:
        constant = reshaped_constant(op.value, op.result.type, op)
        Rewriter.insert_op(constant, InsertPoint.before(op))
        op.result.replace_all_uses_with(constant.result)
        Rewriter.erase_op(op)
