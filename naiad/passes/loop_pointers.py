"""Loop-carried pointer tensors become a loop-invariant base plus a loop-carried offset.

Triton kernels advance tensors of pointers through their loops (tutorial 03's matmul)::

    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, ...)
        a_ptrs += BLOCK_SIZE_K * stride_ak

A backend that keeps loop-carried tensors in memory (the CPU) sees, inside the loop, pointers
read back from memory: nothing is known about them, so every load through them is a gather.
This pass rewrites an iter_arg ``p`` of ``scf.for`` or ``scf.while`` whose next value is
``tt.addptr(p, off)``, ``off`` loop-invariant, into an i64 offset ``acc``, 0 on entry and
``acc + off`` on each trip; ``p`` becomes ``tt.addptr(p_init, acc)`` inside the loop and after
it.  The loads then go through ``p_init``, an expression of ranges and splats that the backend
can analyse.  When ``off`` is the same scalar in every element (``BLOCK_SIZE_K * stride``,
splatted, broadcast, or a constant) the carried offset is that scalar's sum, splatted where
used; otherwise it is a tensor.

Offsets accumulate in i64 whatever their width: pointer arithmetic is modulo 2^64, so
``p_init + (off_1 + ... + off_n)`` is exactly the pointer the repeated additions reach, and an
i32 sum could overflow where the additions did not.

Not in the shared TTIR pipeline: GPU backends hold tensors in registers and analyse pointer
tensors through loops themselves, so the CPU backend runs this pass on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp, TensorType, i64
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from naiad.ir import arith, tt
from naiad.ir.types import element_type, shape_of
from naiad.passes.constants import make_constant, splat_value
from naiad.passes.effects import defined_outside
from naiad.passes.rewrite import located

_SAME_SCALAR = (tt.BroadcastOp, tt.ExpandDimsOp, tt.ReshapeOp)
"""Shape ops: a tensor whose elements are all one scalar stays so through them."""


def _is_pointer_tensor(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType) and isinstance(element_type(value.type),
                                                             tt.PointerType)


def _uniform_scalar(value: SSAValue) -> SSAValue | int | None:
    """The scalar every element of `value` is (a splat's source, or a constant's number)."""
    while isinstance(value.owner, _SAME_SCALAR):
        value = value.owner.src
    if isinstance(value.owner, tt.SplatOp):
        return value.owner.src
    number = splat_value(value)
    return number if isinstance(number, int) else None


def _step(advanced: SSAValue, pointer: BlockArgument, loop: Operation) -> SSAValue | int | None:
    """What the loop adds to `pointer` each trip, when `advanced` is ``tt.addptr(pointer,
    off)`` with `off` loop-invariant: the scalar all of `off` is, or `off` itself."""
    op = advanced.owner
    if not isinstance(op, tt.AddPtrOp) or op.ptr is not pointer:
        return None
    scalar = _uniform_scalar(op.offset)
    if isinstance(scalar, int) or (scalar is not None and defined_outside(scalar, loop)):
        return scalar
    return op.offset if defined_outside(op.offset, loop) else None


class _Emitter:
    """Builds the new ops with the location of the loop they serve."""

    def __init__(self, loop: Operation):
        self.loop = loop

    def op(self, op: Operation, at: InsertPoint) -> SSAValue:
        return Builder(at).insert(located(op, self.loop)).results[0]

    def step_i64(self, step: SSAValue | int) -> SSAValue:
        """The step as i64, computed in front of the loop."""
        at = InsertPoint.before(self.loop)
        if isinstance(step, int):
            return self.op(make_constant(step, i64), at)
        if element_type(step.type) == i64:
            return step
        t = TensorType(i64, shape_of(step.type)) if isinstance(step.type, TensorType) else i64
        return self.op(arith.ExtSIOp(step, t), at)

    def rebased(self, init: SSAValue, offset: SSAValue, at: InsertPoint) -> SSAValue:
        """``tt.addptr(init, offset)``, splatting a scalar offset to the pointers' shape."""
        if not isinstance(offset.type, TensorType):
            offset = self.op(tt.SplatOp(offset, shape_of(init.type)), at)
        return self.op(tt.AddPtrOp(init, offset), at)

    def carry(self, block: Block, index: int, init: SSAValue, step: SSAValue) -> BlockArgument:
        """Make block argument `index` the carried offset, and rebuild the pointer it replaces
        from `init` at the start of the block."""
        old = block.args[index]
        offset = block.insert_arg(step.type, index)
        old.replace_all_uses_with(self.rebased(init, offset, InsertPoint.at_start(block)))
        block.erase_arg(old)
        return offset

    def advance(self, terminator: Operation, position: int, offset: SSAValue,
                step: SSAValue) -> None:
        """`terminator` passes on ``offset + step`` at `position` instead of the advanced
        pointer, which goes if nothing else uses it."""
        operands = list(terminator.operands)
        advanced = operands[position].owner
        operands[position] = self.op(arith.AddiOp(offset, step), InsertPoint.before(terminator))
        terminator.operands = operands
        if not any(advanced.results[0].uses):
            Rewriter.erase_op(advanced)

    def replace_loop(self, new: Operation, position: int, init: SSAValue) -> Operation:
        """Put `new` in place of the loop; its result `position` is the final offset, from
        which the pointer result is rebuilt after it."""
        old = self.loop
        new.attributes |= old.attributes
        Builder(InsertPoint.before(old)).insert(located(new, old))
        for i, (old_result, new_result) in enumerate(zip(old.results, new.results)):
            if i != position:
                old_result.replace_all_uses_with(new_result)
            elif old_result.uses:
                old_result.replace_all_uses_with(
                    self.rebased(init, new_result, InsertPoint.after(new)))
        Rewriter.erase_op(old)
        return new


def _rewrite_for(loop: scf.ForOp) -> scf.ForOp | None:
    """Rewrite the first carried pointer of `loop` that advances by an invariant offset;
    None when there is none."""
    body = loop.body.block
    terminator = body.last_op
    for index, init in enumerate(loop.iter_args):
        if not _is_pointer_tensor(init):
            continue
        step = _step(terminator.operands[index], body.args[index + 1], loop)
        if step is None:
            continue
        emit = _Emitter(loop)
        step = emit.step_i64(step)
        zero = emit.op(make_constant(0, step.type), InsertPoint.before(loop))
        offset = emit.carry(body, index + 1, init, step)
        emit.advance(terminator, index, offset, step)
        iter_args = [zero if i == index else v for i, v in enumerate(loop.iter_args)]
        new = scf.ForOp(loop.lb, loop.ub, loop.step, iter_args, loop.detach_region(loop.body))
        return emit.replace_loop(new, index, init)
    return None


def _rewrite_while(loop: scf.WhileOp) -> scf.WhileOp | None:
    """The same for `scf.while`: the before region's argument ``p`` must be passed on by
    ``scf.condition`` as the after region's argument that the yield advances."""
    before, after = loop.before_region.block, loop.after_region.block
    condition, terminator = before.last_op, after.last_op
    for index, init in enumerate(loop.arguments):
        advanced = terminator.operands[index].owner
        if not _is_pointer_tensor(init) or not isinstance(advanced, tt.AddPtrOp) \
                or advanced.ptr not in after.args:
            continue
        forward = after.args.index(advanced.ptr)
        step = _step(advanced.result, after.args[forward], loop)
        if condition.args[forward] is not before.args[index] or step is None:
            continue
        emit = _Emitter(loop)
        step = emit.step_i64(step)
        zero = emit.op(make_constant(0, step.type), InsertPoint.before(loop))
        offset = emit.carry(before, index, init, step)
        condition.operands = [offset if i == forward + 1 else v
                              for i, v in enumerate(condition.operands)]
        emit.advance(terminator, index, emit.carry(after, forward, init, step), step)
        arguments = [zero if i == index else v for i, v in enumerate(loop.arguments)]
        regions = [loop.detach_region(r) for r in (loop.before_region, loop.after_region)]
        new = scf.WhileOp(arguments, [v.type for v in condition.args], *regions)
        return emit.replace_loop(new, forward, init)
    return None


def loop_carried_pointers(module: Operation) -> bool:
    """Rewrite every carried pointer tensor of every loop of `module` that advances by an
    invariant offset (inner loops first); True if any was."""
    loops = [op for op in module.walk(region_first=True)
             if isinstance(op, (scf.ForOp, scf.WhileOp))]
    changed = False
    for loop in loops:
        rewrite = _rewrite_for if isinstance(loop, scf.ForOp) else _rewrite_while
        while (new := rewrite(loop)) is not None:
            loop, changed = new, True
    return changed


@dataclass(frozen=True)
class LoopCarriedPointers(ModulePass):
    name = "loop-carried-pointers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        loop_carried_pointers(op)
