"""What loop-rewriting passes share (the hip backend's load prefetch, the cuda backend's
pipeliner): the slice of a loop body a value is computed from, cloning ops elsewhere, and a
loop rebuilt with more carried values."""

from __future__ import annotations

from typing import Any

from xdsl.dialects import scf
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue

from naiad.ir import tt
from naiad.passes.effects import is_pure


class Slice:
    """The ops of a loop body that a value is computed from (in block order), and the loop's
    carried values among its sources; ``ok`` is False when one of them reads memory, has
    regions or is a dot (it cannot be computed again for another iteration)."""

    def __init__(self, body: Block, roots: list[SSAValue]):
        self.ops: list[Operation] = []
        self.carried: set[BlockArgument] = set()
        self.ok = True
        seen: set[Operation] = set()
        stack = list(roots)
        while stack:
            value = stack.pop()
            if isinstance(value, BlockArgument):
                if value.block is body and value.index > 0:
                    self.carried.add(value)
                continue
            op = value.owner
            if op.parent_block() is not body or op in seen:
                continue                      # defined outside the loop: invariant
            seen.add(op)
            if op.regions or not is_pure(op) or isinstance(op, tt.DotOp):
                self.ok = False
                return
            stack.extend(op.operands)
        self.ops = [op for op in body.ops if op in seen]


def insert_before(before: Operation, op: Operation) -> SSAValue:
    """Put ``op`` before ``before``; its first result."""
    before.parent_block().insert_op_before(op, before)
    return op.results[0]


def clone_before(ops: list[Operation], mapping: dict[SSAValue, SSAValue], before: Operation) -> None:
    """Clone ``ops`` before ``before``, their operands through ``mapping`` (which receives the
    clones' results)."""
    for op in ops:
        copy = op.clone(value_mapper=dict(mapping))
        before.parent_block().insert_op_before(copy, before)
        for old, new in zip(op.results, copy.results):
            mapping[old] = new


def moved_body(body: Block, extra: list[Attribute]) -> Block:
    """A new block holding ``body``'s ops, with its arguments and then ``extra`` more (their
    types): the old arguments' uses moved to the new ones."""
    block = Block(arg_types=[a.type for a in body.args] + list(extra))
    for old, new in zip(body.args, block.args):
        old.replace_all_uses_with(new)
    for op in list(body.ops):
        op.detach()
        block.add_op(op)
    return block


def replace_loop(loop: scf.ForOp, block: Block, inits: list[Any], yielded: list[SSAValue]) -> scf.ForOp:
    """``block`` (from `moved_body`) as the body of a new ``scf.for`` with ``inits``, yielding
    ``yielded``, in ``loop``'s place: its bounds, attributes and the uses of its results."""
    old_yield = block.last_op
    block.insert_op_before(scf.YieldOp(*yielded), old_yield)
    old_yield.detach()
    old_yield.erase()
    new_loop = scf.ForOp(loop.lb, loop.ub, loop.step, inits, Region([block]))
    new_loop.attributes.update(loop.attributes)
    loop.parent_block().insert_op_before(new_loop, loop)
    for old, new in zip(loop.results, new_loop.results):
        old.replace_all_uses_with(new)
    loop.detach()
    loop.erase()
    return new_loop
