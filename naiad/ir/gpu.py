"""The one op of MLIR's ``gpu`` dialect that TTIR holds: ``gpu.barrier`` (``tl.debug_barrier``).

Defined here rather than taken from xDSL, whose ``gpu`` dialect imports ``memref`` with it: the
two cost a cold compile about 30 ms of imports for an op with no operands.  No traits: the
passes treat it as an op with unknown effects, never removed or moved (`naiad.passes.effects`).
"""

from __future__ import annotations

from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation, irdl_op_definition


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """Every thread of the program waits until all have arrived."""

    name = "gpu.barrier"
    assembly_format = "attr-dict"


GPU = Dialect("gpu", [BarrierOp])
