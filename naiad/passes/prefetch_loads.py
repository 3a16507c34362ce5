"""Loads that feed dots, issued one iteration ahead (a TTGIR pass; AMD's "stream pipelining").

In a matmul's K loop each iteration loads its tiles and multiplies them; the loads' latency is
exposed unless the next tiles are already on their way.  This pass rewrites

    for k: a = load(p(k)); ...; acc = dot(a, b, acc); p(k+1) = next(p(k))

into

    a0 = load(p(lb), mask & lb < ub)                                # the prologue
    for k (carrying a_k): a_next = load(p(k + step), mask & k + step < ub)   # first in the body
                          ...; acc = dot(a_k, b_k, acc); carry a_next

so that each iteration's loads are in flight while the previous tiles are multiplied (on AMD
GPUs a load does not stop the wavefront until its value is used).  A load qualifies when it is
a load through a tensor of pointers at the top of the loop body whose every use is a ``tt.dot`` (directly or through
layout-free ops the dot reads), and its pointers, mask and ``other`` are computed without
reading memory from the induction variable, loop-invariant values and loop-carried values that
follow a recurrence of the same kind (``ptrs += step``).  The next iteration's pointers are the
recurrences' own updates, computed again at the top of the body; the loads of an iteration past
the end are masked off, so they read nothing.  Where the loop does not qualify nothing changes.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import scf
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from naiad.ir import arith, tt
from naiad.ir.types import is_tensor
from naiad.passes.loop_slices import Slice, clone_before, insert_before, moved_body, replace_loop


def prefetch_loads(func: Any) -> bool:
    """Rewrite every qualifying ``scf.for`` of ``func``; whether any changed."""
    changed = False
    for loop in [op for op in func.walk() if isinstance(op, scf.ForOp)]:
        changed |= _prefetch(loop)
    return changed


def _feeds_dots(load: tt.LoadOp) -> bool:
    """Whether every use of ``load`` is a dot's A or B operand."""
    uses = list(load.results[0].uses)
    return bool(uses) and all(isinstance(u.operation, tt.DotOp) and u.index < 2 for u in uses)


def _qualifying(body: Block) -> tuple[list[tt.LoadOp], list[BlockArgument]] | None:
    """The loads to prefetch and the carried values their sources follow (closed under the
    recurrences' own sources), or None."""
    loads = [op for op in body.ops if isinstance(op, tt.LoadOp) and is_tensor(op.ptr.type)
             and _feeds_dots(op) and Slice(body, list(op.operands)).ok]
    if not loads:
        return None
    yields = body.last_op
    needed: set[BlockArgument] = set()
    for load in loads:
        needed |= Slice(body, list(load.operands)).carried
    pending = list(needed)
    while pending:
        update = Slice(body, [yields.operands[pending.pop().index - 1]])
        if not update.ok:
            return None
        for arg in update.carried - needed:
            needed.add(arg)
            pending.append(arg)
    return loads, sorted(needed, key=lambda a: a.index)


def _load_for(load: tt.LoadOp, body: Block, mapping: dict[SSAValue, SSAValue], valid: SSAValue,
              before: Operation) -> SSAValue:
    """``load`` for another iteration (its sources through ``mapping``), masked off unless
    ``valid`` (an i1)."""
    mapping = dict(mapping)
    clone_before(Slice(body, list(load.operands)).ops, mapping, before)

    def mapped(value: SSAValue | None) -> SSAValue | None:
        return None if value is None else mapping.get(value, value)
    shape = load.results[0].type.get_shape()
    in_range = insert_before(before, tt.SplatOp(valid, shape))
    mask = mapped(load.mask)
    mask = in_range if mask is None else insert_before(before, arith.AndIOp(mask, in_range))
    copy = tt.LoadOp(mapped(load.ptr), mask, mapped(load.other), cache=load.cache.data,
                     evict=load.evict.data, is_volatile=bool(load.isVolatile.value.data))
    return insert_before(before, copy)


def _prefetch(loop: scf.ForOp) -> bool:
    body = loop.body.block
    found = _qualifying(body)
    if found is None:
        return False
    loads, recurrences = found
    yields = body.last_op
    # -- the prologue: the first iteration's loads, before the loop
    first = {body.args[0]: loop.lb, **{arg: loop.iter_args[arg.index - 1] for arg in recurrences}}
    runs = insert_before(loop, arith.CmpiOp(loop.lb, loop.ub, "slt"))
    prologue = [_load_for(load, body, first, runs, loop) for load in loads]
    # -- the new body: the old one, each load's value carried in, the next loads at its top
    block = moved_body(body, [v.type for v in prologue])
    for load, current in zip(loads, block.args[len(body.args):]):
        load.results[0].replace_all_uses_with(current)
    top = block.first_op
    iv = block.args[0]
    after = insert_before(top, arith.AddiOp(iv, loop.step))
    valid = insert_before(top, arith.CmpiOp(after, loop.ub, "slt"))
    step: dict[SSAValue, SSAValue] = {}
    for arg in recurrences:
        update = yields.operands[arg.index - 1]
        clone_before(Slice(block, [update]).ops, step, top)
    mapping = {iv: after, **{block.args[arg.index]: step.get(yields.operands[arg.index - 1],
                                                              yields.operands[arg.index - 1])
                             for arg in recurrences}}
    issued = [_load_for(load, block, mapping, valid, top) for load in loads]
    for load in loads:
        load.detach()
        load.erase()
    replace_loop(loop, block, list(loop.iter_args) + prologue, [*yields.operands, *issued])
    return True

