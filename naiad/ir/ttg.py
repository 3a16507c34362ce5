"""The ops of Triton's GPU dialect (``ttg``) that Naiad's TTGIR holds.

``ttg.async_load`` is what the pipelining pass of a GPU backend turns a dot operand's load into
(`naiad.backends.cuda.pipeline`): the value is fetched asynchronously into a slot of a ring of
shared-memory buffers and read from there by the dots it feeds, several iterations after it
was asked for, so that the loads of later iterations overlap the dots of earlier ones.  Its
meaning, for any other reader, is ``tt.load(ptr, mask, other)``.

``ttng.tensor_map_load`` and ``ttng.tensor_map_store`` move one block through a hardware tensor
map (NVIDIA's TMA: `naiad.backends.cuda.tensor_maps` makes them of block-pointer accesses
whose tensor the launch describes).  The map is a kernel parameter held in the parameter
space (a ``!tt.ptr<i8, 101>`` argument); the offsets are the block's, outermost first, and
elements outside the tensor read as the map's fill and are not written.
"""

from __future__ import annotations

from xdsl.dialects.builtin import I32, IntegerAttr, StringAttr, TensorType, i1, i32
from xdsl.ir import Dialect, SSAValue
from xdsl.irdl import (IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def,
                       opt_prop_def, prop_def, result_def, traits_def, var_operand_def)
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect
from xdsl.utils.exceptions import VerifyException

from naiad.ir.tt import BoolLike, PtrLike, loaded_type


@irdl_op_definition
class AsyncLoadOp(IRDLOperation):
    """``tt.load(ptr, mask, other)``, staged in slot ``slot`` (of ``stages``) of the ring buffer
    named ``ring``.  ``other`` is zeros (what an asynchronous copy leaves where the mask is off);
    the result is used only as tensor-core dot operands and carried by loops to them."""

    name = "ttg.async_load"

    ptr = operand_def(PtrLike)
    mask = operand_def(BoolLike)
    other = operand_def(TensorType)
    slot = operand_def(I32)
    result = result_def(TensorType)
    ring = prop_def(StringAttr)
    stages = prop_def(IntegerAttr)

    traits = traits_def(MemoryReadEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$ptr `,` $mask `,` $other `slot` $slot attr-dict `:` type($ptr) `,` "
                       "type($mask) `,` type($other) `->` type($result)")

    def __init__(self, ptr: SSAValue, mask: SSAValue, other: SSAValue, slot: SSAValue, ring: str,
                 stages: int):
        super().__init__(operands=[ptr, mask, other, slot], result_types=[loaded_type(ptr.type)],
                         properties={"ring": StringAttr(ring), "stages": IntegerAttr(stages, i32)})

    def verify_(self) -> None:
        if self.result.type != loaded_type(self.ptr.type) or self.other.type != self.result.type:
            raise VerifyException(f"ttg.async_load of {self.ptr.type} must give and fill "
                                  f"{loaded_type(self.ptr.type)}")


def _check_offsets(op: IRDLOperation, block: TensorType) -> None:
    """A tensor-map op names its block by one offset per dimension."""
    rank = len(block.get_shape())
    if len(op.offsets) != rank:
        raise VerifyException(f"{op.name} of a rank-{rank} block needs one offset per dimension")


@irdl_op_definition
class TensorMapLoadOp(IRDLOperation):
    """The block at ``offsets`` of the tensor that tensor map ``desc`` describes."""

    name = "ttng.tensor_map_load"

    desc = operand_def(PtrLike)
    offsets = var_operand_def(I32)
    result = result_def(TensorType)

    traits = traits_def(MemoryReadEffect())
    assembly_format = "$desc `[` $offsets `]` attr-dict `:` type($desc) `->` type($result)"

    def __init__(self, desc: SSAValue, offsets: list[SSAValue], result_type: TensorType):
        super().__init__(operands=[desc, offsets], result_types=[result_type])

    def verify_(self) -> None:
        _check_offsets(self, self.result.type)


@irdl_op_definition
class TensorMapStoreOp(IRDLOperation):
    """``value`` written as the block at ``offsets`` of the tensor that ``desc`` describes, or,
    with ``reduce`` (add, min, max...), combined into it element by element, atomically."""

    name = "ttng.tensor_map_store"

    desc = operand_def(PtrLike)
    offsets = var_operand_def(I32)
    value = operand_def(TensorType)
    reduce = opt_prop_def(StringAttr)

    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$desc `[` $offsets `]` `,` $value attr-dict `:` type($desc) `,` type($value)"

    def __init__(self, desc: SSAValue, offsets: list[SSAValue], value: SSAValue, reduce: str | None = None):
        super().__init__(operands=[desc, offsets, value],
                         properties={"reduce": StringAttr(reduce) if reduce is not None else None})

    def verify_(self) -> None:
        _check_offsets(self, self.value.type)


@irdl_op_definition
class AsyncTensorMapLoadOp(IRDLOperation):
    """``ttng.tensor_map_load(desc, offsets)`` staged by the pipelining pass: copied by the copy
    engine into slot ``slot`` of ring ``ring`` when ``valid`` (an iteration past the loop's end
    copies nothing), completing phase ``phase`` (0 or 1) of the slot's mbarrier, which the
    dots reading the value wait for.  Used only as tensor-core dot operands, as
    ``ttg.async_load``."""

    name = "ttng.async_tensor_map_load"

    desc = operand_def(PtrLike)
    offsets = var_operand_def(I32)
    valid = operand_def(i1)
    slot = operand_def(I32)
    phase = operand_def(I32)
    result = result_def(TensorType)
    ring = prop_def(StringAttr)
    stages = prop_def(IntegerAttr)

    traits = traits_def(MemoryReadEffect())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$desc `[` $offsets `]` `if` $valid `slot` $slot `phase` $phase attr-dict `:` "
                       "type($desc) `->` type($result)")

    def __init__(self, desc: SSAValue, offsets: list[SSAValue], valid: SSAValue, slot: SSAValue,
                 phase: SSAValue, result_type: TensorType, ring: str, stages: int):
        super().__init__(operands=[desc, offsets, valid, slot, phase], result_types=[result_type],
                         properties={"ring": StringAttr(ring), "stages": IntegerAttr(stages, i32)})


TTG = Dialect("ttg", [AsyncLoadOp])
TTNG = Dialect("ttng", [TensorMapLoadOp, TensorMapStoreOp, AsyncTensorMapLoadOp])
