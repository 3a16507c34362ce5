"""Remove-redundant-conversions: the TTGIR pass that decides which layout conversions remain.

`assign.assign_layouts` gives each tensor one layout (its last use's request wins); every other
use whose op wants another layout converts it through shared memory (`GPUKernel.tensor`).  This
pass removes the conversions that are not worth their barriers:

- **rematerialization**: a *cheap* value -- a ``make_range``, a ``splat``, a constant, or an
  ``expand_dims`` / ``broadcast`` / element-wise op of only cheap tensors -- costs nothing to
  compute again in any layout, so each group of uses that wants another layout gets its own copy
  of the ops that make it (inserted right after the original, so it dominates every use) and
  the copy gets that layout: no shared memory at all;
- **one conversion per value, layout and block**: the lowering converts a value to a layout once
  and reuses it where the conversion dominates (later ops of the same block, or of blocks nested
  in it: `GPUKernel.tensor`); the conversions this pass reports say which op emits each one and
  which reuse it.

The pass changes the module (the copies), so the next stage, which assigns layouts again, sees
its result; what remains is reported as `Conversion`s for the TTGIR to show (``ttg.convert``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from naiad.codegen import elementwise
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.assign import Request, assign_layouts
from naiad.ir import arith, tt
from naiad.ir.types import shape_of

#: Ops whose tensor result is cheap by itself (no tensor operands).
_SOURCES = (tt.MakeRangeOp, tt.SplatOp, arith.ConstantOp)
#: Element-wise ops that call out (a library or inline asm): not free to compute twice.
_NOT_CHEAP = (tt.ExternElementwiseOp, tt.ElementwiseInlineAsmOp)


@dataclasses.dataclass(frozen=True)
class Conversion:
    """``op``'s operand ``operand`` converted to ``layout`` through shared memory (``reused``:
    an earlier op of the same block converted it already and the lowering takes that)."""

    op: Any
    operand: int
    layout: L.Layout
    reused: bool

    def __str__(self) -> str:
        return f"operand {self.operand} -> {self.layout}" + (" (reused)" if self.reused else "")


def remove_redundant_conversions(func: Any, num_warps: int, warp_size: int
                                 ) -> tuple[dict[SSAValue, L.Layout], list[Conversion]]:
    """Rematerialize ``func``'s cheap values per wanted layout; return the final layouts and the
    conversions that remain."""
    while True:
        requests: list[Request] = []
        layouts = assign_layouts(func, num_warps, warp_size, requests)
        conflict = _first_cheap_conflict(requests, layouts)
        if conflict is None:
            return layouts, _conversions(requests, layouts)
        value, users = conflict
        _rematerialize(value, users)


def _tensor(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType)


def is_cheap(value: SSAValue, memo: dict | None = None) -> bool:
    """Whether ``value`` is made in registers from nothing but scalars and cheap tensors
    (``memo`` remembers the answers, for chains that share operands)."""
    memo = {} if memo is None else memo
    if value not in memo:
        op = value.owner
        if not isinstance(op, Operation) or isinstance(op, _NOT_CHEAP):
            memo[value] = False
        elif isinstance(op, _SOURCES):
            memo[value] = True
        elif isinstance(op, (tt.BroadcastOp, tt.ExpandDimsOp)) or type(op) in elementwise.RULES:
            memo[value] = all(is_cheap(v, memo) for v in op.operands if _tensor(v))
        else:
            memo[value] = False
    return memo[value]


def _holds(layouts: dict, value: SSAValue, layout: L.Layout) -> bool:
    """Whether ``value``'s assigned layout already places its elements as ``layout`` does."""
    held = layouts.get(value)
    return held is not None and L.equivalent(held, layout, shape_of(value.type))


def _wrong_requests(requests: list[Request], layouts: dict) -> dict[SSAValue, dict[Any, L.Layout]]:
    """Per value, the ops (using it as an operand) that want it in a layout it does not have."""
    wrong: dict[SSAValue, dict[Any, L.Layout]] = {}
    for op, value, layout in requests:
        if not _holds(layouts, value, layout) and any(v is value for v in op.operands):
            wrong.setdefault(value, {})[op] = layout
    return wrong


def _first_cheap_conflict(requests: list[Request], layouts: dict) -> tuple[SSAValue, list] | None:
    """A cheap value and the users that all want it in one other layout, or None."""
    memo: dict = {}
    for value, users in _wrong_requests(requests, layouts).items():
        if not is_cheap(value, memo):
            continue
        layout = next(iter(users.values()))
        return value, [op for op, wanted in users.items() if wanted == layout]
    return None


def _rematerialize(value: SSAValue, users: list) -> None:
    """Copies of the ops that make ``value`` (and its cheap tensor operands), right after its
    op; ``users`` take the copy instead."""
    mapping: dict[SSAValue, SSAValue] = {}
    clones: list[Operation] = []
    memo: dict = {}

    def copy(v: SSAValue) -> None:
        if v in mapping or not _tensor(v) or not is_cheap(v, memo):
            return
        for operand in v.owner.operands:
            copy(operand)
        clone = v.owner.clone(value_mapper=mapping)
        mapping.update(zip(v.owner.results, clone.results))
        clones.append(clone)

    copy(value)
    value.owner.parent_block().insert_ops_after(clones, value.owner)
    for op in users:
        op.operands = [mapping[value] if v is value else v for v in op.operands]


def _conversions(requests: list[Request], layouts: dict) -> list[Conversion]:
    """The conversions the lowering emits, in program order; an op reuses the conversion of an
    earlier op in its own block or in a block around it (whose code dominates its own)."""
    result, seen = [], set()
    for op, value, layout in reversed(requests):     # requests were made from the last op back
        if _holds(layouts, value, layout):
            continue
        for index, operand in enumerate(op.operands):
            if operand is not value:
                continue
            reused = any((value, layout, block) in seen for block in _enclosing_blocks(op))
            result.append(Conversion(op, index, layout, reused))
            seen.add((value, layout, op.parent_block()))
    return _unique(result)


def _enclosing_blocks(op: Any) -> list:
    """The block of ``op``, the block of the op around that block, and so on outwards."""
    blocks = []
    block = op.parent_block()
    while block is not None:
        blocks.append(block)
        parent = block.parent_op()
        block = parent.parent_block() if parent is not None else None
    return blocks


def _unique(conversions: list[Conversion]) -> list[Conversion]:
    """One entry per op and operand (a rule may ask for the same operand twice)."""
    kept: dict[tuple, Conversion] = {}
    for c in conversions:
        kept.setdefault((id(c.op), c.operand), c)
    return list(kept.values())
