"""Helpers over `scf.for`: its trip count when known, and copies of its body."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder
from xdsl.dialects import scf
from xdsl.ir import SSAValue

from naiad.passes.constants import splat_value


def constant_trip_count(loop: scf.ForOp) -> int | None:
    """How many times `loop` runs when its bounds and step are constants (signed, as
    scf.for compares them)."""
    lb, ub, step = (splat_value(v) for v in (loop.lb, loop.ub, loop.step))
    if lb is None or ub is None or step is None or step <= 0:
        return None
    return max(0, -(-(ub - lb) // step))


def clone_body(loop: scf.ForOp, iv: SSAValue, iter_values: Sequence[SSAValue],
               builder: Builder) -> list[SSAValue]:
    """Insert with `builder` a copy of one iteration of `loop` for induction value `iv` and
    loop-carried values `iter_values`; return what that iteration yields."""
    body = loop.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(body.args, [iv, *iter_values]))
    for op in body.ops:
        if op is body.last_op:
            return [mapping.get(v, v) for v in op.operands]
        builder.insert(op.clone(value_mapper=mapping))
    raise AssertionError("an scf.for body ends with scf.yield")
