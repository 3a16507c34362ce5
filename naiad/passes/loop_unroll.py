"""Loop unrolling (Triton's ``ttir.loop_unroll``): `scf.for` loops carrying
``tt.loop_unroll_factor = F`` (``tl.range(..., loop_unroll_factor=F)``) run F iterations per
trip.

The unrolled loop covers the largest multiple of F iterations, ``lb`` to
``lb + (tc - tc % F) * step`` with step ``F * step`` (tc, the trip count, is computed in the IR
when the bounds are not constants); the original loop, now starting where the unrolled one
stops, runs the remaining ``tc % F`` iterations and is marked ``tt.num_stages = 1`` so that
pipeliners leave it alone, as Triton does.  When the trip count is a constant that divides
evenly the remainder loop is dropped, and when it is at most F the loop is replaced by its
iterations written out.  Loops without the attribute are never unrolled.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from naiad.ir import arith
from naiad.passes.constants import make_constant
from naiad.passes.loops import clone_body, constant_trip_count
from naiad.passes.rewrite import located

UNROLL_FACTOR = "tt.loop_unroll_factor"
NUM_STAGES = "tt.num_stages"


def unroll_factor(loop: scf.ForOp) -> int:
    factor = loop.attributes.get(UNROLL_FACTOR)
    return factor.value.data if isinstance(factor, IntegerAttr) else 1


class _Emitter:
    """Inserts ops with the loop's location in front of the loop."""

    def __init__(self, loop: scf.ForOp):
        self.loop = loop
        self.builder = Builder(InsertPoint.before(loop))

    def op(self, op: Operation) -> SSAValue:
        return self.builder.insert(located(op, self.loop)).results[0]

    def constant(self, value: int) -> SSAValue:
        return self.op(make_constant(value, self.loop.lb.type))


def _iterations(loop: scf.ForOp, iv: SSAValue, values: list[SSAValue], count: int,
                builder: Builder) -> list[SSAValue]:
    """`count` copies of the body in a row, the first at induction value `iv`."""
    for i in range(count):
        if i:
            iv = builder.insert(located(arith.AddiOp(iv, loop.step), loop)).result
        values = clone_body(loop, iv, values, builder)
    return values


def _unrolled_upper_bound(loop: scf.ForOp, factor: int, emit: _Emitter) -> SSAValue:
    """``lb + (tc - tc % factor) * step``, the end of the iterations the unrolled loop runs."""
    trips = emit.op(arith.CeilDivSIOp(emit.op(arith.SubiOp(loop.ub, loop.lb)), loop.step))
    remainder = emit.op(arith.RemSIOp(trips, emit.constant(factor)))
    span = emit.op(arith.MuliOp(emit.op(arith.SubiOp(trips, remainder)), loop.step))
    return emit.op(arith.AddiOp(loop.lb, span))


def _unrolled_loop(loop: scf.ForOp, factor: int, emit: _Emitter) -> scf.ForOp:
    upper = _unrolled_upper_bound(loop, factor, emit)
    step = emit.op(arith.MuliOp(loop.step, emit.constant(factor)))
    old = loop.body.block
    block = Block(arg_types=old.arg_types)
    for new_arg, old_arg in zip(block.args, old.args):
        new_arg.name_hint = old_arg.name_hint
    yielded = _iterations(loop, block.args[0], list(block.args[1:]), factor,
                          Builder(InsertPoint.at_end(block)))
    block.add_op(located(scf.YieldOp(*yielded), old.last_op))
    new = scf.ForOp(loop.lb, upper, step, list(loop.iter_args), Region(block))
    new.attributes |= loop.attributes
    return located(emit.builder.insert(new), loop)


def unroll(loop: scf.ForOp, factor: int) -> None:
    """Unroll `loop` by `factor`, keeping a remainder loop unless it never runs."""
    del loop.attributes[UNROLL_FACTOR]
    trips = constant_trip_count(loop)
    if trips is not None and trips <= factor:
        values = _iterations(loop, loop.lb, list(loop.iter_args), trips,
                             Builder(InsertPoint.before(loop)))
        Rewriter.replace_op(loop, [], values)
        return
    emit = _Emitter(loop)
    main = _unrolled_loop(loop, factor, emit)
    if trips is not None and trips % factor == 0:
        Rewriter.replace_op(loop, [], list(main.res))
        return
    loop.operands = (main.ub, loop.ub, loop.step, *main.res)
    loop.attributes[NUM_STAGES] = IntegerAttr(1, i32)


def loop_unroll(module: Operation) -> bool:
    """Unroll every loop of `module` that asks for it (inner loops first)."""
    loops = [op for op in module.walk(region_first=True)
             if isinstance(op, scf.ForOp) and unroll_factor(op) > 1]
    for loop in loops:
        unroll(loop, unroll_factor(loop))
    return bool(loops)


@dataclass(frozen=True)
class LoopUnroll(ModulePass):
    name = "loop-unroll"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        loop_unroll(op)
