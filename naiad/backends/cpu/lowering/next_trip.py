"""What a loop's next trip will read: how far a load's pointers move from one trip of its
`scf.for` to the next (`next_step`), and asking for that line early (`prefetch`).  A dot's
operand copies read another part of a large matrix each trip, rows apart: each trip stalled on
memory without it."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from xdsl.dialects import scf
from xdsl.ir import BlockArgument

from naiad.codegen import llvm_types as lt
from naiad.ir import arith, tt
from naiad.passes.effects import defined_outside


def next_step(kernel: Any, load: Any) -> ir.Value | None:
    """How many elements the pointers of ``load`` move by the next trip of the `scf.for`
    around it (an i64), when they move by the same amount everywhere: pointers computed from
    the loop's induction variable (``a_ptr + (k + rk) * stride``) or carried by it (``ptrs +=
    step``, which the loop-carried-pointers pass makes a carried offset)."""
    parent = load.parent_op()
    if not isinstance(parent, scf.ForOp):
        return None
    moved = _per_trip(kernel, load.ptr, parent)
    return None if moved is None or isinstance(moved, int) else moved


def _per_trip(kernel: Any, value: Any, loop: Any) -> ir.Value | int | None:
    """What ``value`` gains from one trip of ``loop`` to the next: 0 for a value the loop does
    not change, an i64 when every element gains the same, None when not known."""
    if defined_outside(value, loop):
        return 0
    bld = kernel.b
    if isinstance(value, BlockArgument):
        if value.block is not loop.body.block:
            return None
        if value.index == 0:
            return _as_i64(bld, kernel.scalar(loop.step))
        following = loop.body.block.last_op.operands[value.index - 1].owner
        if isinstance(following, arith.AddiOp) and following.lhs is value:
            gain = _invariant_scalar(kernel, following.rhs, loop)
            return None if gain is None else _as_i64(bld, gain)
        return None
    op = value.owner
    if isinstance(op, (tt.SplatOp, tt.BroadcastOp, tt.ExpandDimsOp, arith.ExtSIOp)):
        return _per_trip(kernel, op.operands[0], loop)
    if isinstance(op, (tt.AddPtrOp, arith.AddiOp, arith.SubiOp)):
        lhs, rhs = (_per_trip(kernel, v, loop) for v in op.operands)
        if lhs is None or rhs is None:
            return None
        if isinstance(rhs, int):
            return lhs
        if isinstance(op, arith.SubiOp):
            return bld.sub(ir.Constant(lt.I64, 0) if isinstance(lhs, int) else lhs, rhs)
        return rhs if isinstance(lhs, int) else bld.add(lhs, rhs)
    if isinstance(op, arith.MuliOp):
        for moving, factor in (op.operands, op.operands[::-1]):
            gain = _per_trip(kernel, moving, loop)
            scale = _invariant_scalar(kernel, factor, loop)
            if gain is not None and scale is not None:
                return 0 if isinstance(gain, int) else bld.mul(gain, _as_i64(bld, scale))
    return None


def _invariant_scalar(kernel: Any, value: Any, loop: Any) -> ir.Value | None:
    """The one number a value the loop does not change holds everywhere: a scalar, a splat of
    one or a constant splat; else None."""
    if not defined_outside(value, loop):
        return None
    known = kernel.constant_value(value)
    if known is not None:
        return ir.Constant(lt.I64, known)
    while isinstance(value.owner, tt.SplatOp):
        value = value.owner.src
    held = kernel.lookup(value)
    return held if isinstance(held, ir.Value) and isinstance(held.type, ir.IntType) else None


def _as_i64(bld: ir.IRBuilder, value: ir.Value) -> ir.Value:
    return value if value.type == lt.I64 else bld.sext(value, lt.I64)


def prefetch(kernel: Any, address: ir.Value, step: ir.Value, size: int) -> None:
    """Ask for the line the next trip reads, ``step`` elements of ``size`` bytes past ``address``."""
    b = kernel.b
    ahead = b.inttoptr(b.add(address, b.mul(step, ir.Constant(lt.I64, size))), lt.PTR)
    prefetch = lt.intrinsic(kernel.llmod, "prefetch", [lt.PTR], lt.VOID, [lt.PTR, lt.I32, lt.I32, lt.I32])
    b.call(prefetch, [ahead, ir.Constant(lt.I32, 0), ir.Constant(lt.I32, 3),
                      ir.Constant(lt.I32, 1)])             # read, keep in cache, data
