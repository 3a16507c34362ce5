"""Loops that test for their first iteration run it apart, so that the test leaves the loop.

Inductor's Welford reductions update their accumulators with ``welford_reduce(..., roffset == 0)``:
the first trip takes the values as they come, every later trip does the update.  On a GPU the
branch is uniform and costs nothing; on the CPU, once the branch is made selects
(`naiad.passes.speculate_ifs`), every trip computes both sides and blends three whole blocks
(a third of the loop's time in a batch norm's statistics).  When an ``scf.for`` with a constant
positive step compares its induction variable for equality with its lower bound, the first
iteration is written out in front of the loop (inside ``if lb < ub`` unless the loop surely
runs), the loop starts one step later, and inside it the comparison is a constant: the
canonicalizer then folds the selects or branches on it, in the copy and in the loop.
"""

from __future__ import annotations

from typing import Any

from xdsl.builder import Builder
from xdsl.dialects import scf
from xdsl.dialects.builtin import i1
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from naiad.ir import arith
from naiad.passes.constants import make_constant, splat_value
from naiad.passes.loops import clone_body, constant_trip_count
from naiad.passes.rewrite import located

#: cmpi predicates this pass settles: whether the induction variable equals the lower bound.
_SETTLED = {"eq": False, "ne": True}        # the value inside the loop, after the first trip


def peel_first_iterations(module: Any) -> bool:
    """Peel the first iteration of every loop that tests for it; whether any was peeled."""
    loops = [op for op in module.walk(region_first=True)
             if isinstance(op, scf.ForOp) and _first_iteration_tests(op)]
    for loop in loops:
        _peel(loop, _first_iteration_tests(loop))
    return bool(loops)


def _first_iteration_tests(loop: scf.ForOp) -> list[arith.CmpiOp]:
    """The ``iv == lb`` / ``iv != lb`` comparisons of `loop`, when its step is a positive
    constant (so every later trip has ``iv > lb``)."""
    step = splat_value(loop.step)
    if step is None or step <= 0:
        return []
    iv = loop.body.block.args[0]
    tests = []
    for use in iv.uses:
        op = use.operation
        if isinstance(op, arith.CmpiOp) and op.PREDICATES[op.predicate.value.data] in _SETTLED:
            other = op.rhs if op.lhs is iv else op.lhs
            if other is loop.lb or (splat_value(other) is not None
                                    and splat_value(other) == splat_value(loop.lb)):
                tests.append(op)
    return tests


def _peel(loop: scf.ForOp, tests: list[arith.CmpiOp]) -> None:
    builder = Builder(InsertPoint.before(loop))
    inits = list(loop.iter_args)
    trips = constant_trip_count(loop)
    if trips is not None and trips >= 1:
        first = clone_body(loop, loop.lb, inits, builder)
    else:
        first = _guarded_first_iteration(loop, inits, builder)
    later = builder.insert(located(arith.AddiOp(loop.lb, loop.step), loop)).result
    for test in tests:
        settled = _SETTLED[test.PREDICATES[test.predicate.value.data]]
        constant = builder.insert(make_constant(int(settled), i1, like=test)).results[0]
        test.result.replace_all_uses_with(constant)
        Rewriter.erase_op(test)
    loop.operands = (later, loop.ub, loop.step, *first)


def _guarded_first_iteration(loop: scf.ForOp, inits: list[SSAValue], builder: Builder) -> list[SSAValue]:
    """``if lb < ub {first iteration} else {inits}``: the loop may not run at all."""
    runs = builder.insert(located(arith.CmpiOp(loop.lb, loop.ub, "slt"), loop)).result
    then_block, else_block = Block(), Block()
    yielded = clone_body(loop, loop.lb, inits, Builder(InsertPoint.at_end(then_block)))
    then_block.add_op(located(scf.YieldOp(*yielded), loop))
    else_block.add_op(located(scf.YieldOp(*inits), loop))
    branch = located(scf.IfOp(runs, [v.type for v in inits], Region(then_block), Region(else_block)), loop)
    return list(builder.insert(branch).results)
