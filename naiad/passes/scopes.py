"""Which regions may use values defined outside them.

A `tt.func` is isolated from above.  The combine regions of `tt.reduce` and `tt.scan` are not,
formally, but backends lower them by cloning the region per element pair, so the passes keep
them self-contained too: constants are not hoisted out of them, nor do CSE's replacements
reach into them from outside.
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.traits import IsolatedFromAbove

from naiad.ir import tt

CLOSED_REGION_OPS = (tt.ReduceOp, tt.ScanOp)


def is_closed_scope(op: Operation) -> bool:
    """True when the regions of `op` use only values defined inside them."""
    return isinstance(op, CLOSED_REGION_OPS) or op.has_trait(IsolatedFromAbove)


def enclosing_scope(op: Operation) -> Operation | None:
    """The nearest ancestor of `op` that is a closed scope."""
    parent = op.parent_op()
    while parent is not None and not is_closed_scope(parent):
        parent = parent.parent_op()
    return parent
