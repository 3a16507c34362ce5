"""What loop-rewriting passes share (the hip backend's load prefetch, the cuda backend's
pipeliner): the slice of a loop body a value is computed from, and cloning ops elsewhere."""

from __future__ import annotations

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

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
