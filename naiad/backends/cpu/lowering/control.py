"""``scf.for``, ``scf.while`` and ``scf.if`` on the CPU.

Scalars cross region boundaries as LLVM phis.  Tensors cross them in memory: each tensor that a
loop carries gets one buffer for the whole loop, which the body reads as its block argument and
overwrites with the yielded value; an ``scf.if`` writes its tensor results into buffers from
either branch.  ``acc = tl.dot(a, b, acc)`` accumulates straight into the carried buffer
(`dot_destination`), so the usual matmul loop copies nothing.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import scf
from xdsl.dialects.builtin import TensorType

from naiad.backends.cpu.lowering.tiles import Buffer, Lazy
from naiad.codegen import llvm_types as lt


def _is_tensor(value: Any) -> bool:
    return isinstance(value.type, TensorType)


def _carry(kernel: Any, init: Any) -> Buffer:
    """A loop-long buffer holding a carried tensor, filled with its initial value."""
    buffer = kernel.buffer(init.type)
    kernel.materialize(init, into=buffer)
    return buffer


def _write_yield(kernel: Any, value: Any, target: Buffer) -> None:
    held = kernel.lookup(value)
    if isinstance(held, Buffer) and held.ptr is target.ptr:
        return
    if isinstance(held, Lazy) and not _reads_other_elements(kernel, value, target):
        kernel.materialize(value, into=target)      # element i reads element i: in place is safe
        return
    scratch = kernel.materialize(value) if not isinstance(held, Buffer) else held
    kernel.copy(scratch, target)


def _reads_other_elements(kernel: Any, value: Any, buffer: Buffer, depth: int = 0) -> bool:
    """Whether computing ``value`` element by element could read another element of ``buffer``."""
    held = kernel.lookup(value)
    if isinstance(held, Buffer):
        return False
    if not isinstance(held, Lazy) or depth > 64:
        return False
    remaps = held.op.name in ("tt.broadcast", "tt.trans", "tt.load")
    for operand in held.op.operands:
        if not _is_tensor(operand):
            continue
        source = kernel.env.get(operand)
        if isinstance(source, Buffer) and source.ptr is buffer.ptr and remaps:
            return True
        if _reads_other_elements(kernel, operand, buffer, depth + 1):
            return True
    return False


def dot_destination(kernel: Any, op: Any) -> Buffer | None:
    """The carried buffer a dot may accumulate into: its accumulator is a loop's block argument
    used only by this dot, and its result is only yielded back into the same position."""
    result, acc = op.results[0], op.c
    uses = list(result.uses)
    if len(uses) != 1 or not isinstance(uses[0].operation, scf.YieldOp):
        return None
    block = uses[0].operation.parent_block()
    loop = block.parent_op() if block is not None else None
    if not isinstance(loop, scf.ForOp) or acc not in block.args:
        return None
    if block.args.index(acc) != uses[0].index + 1 or len(list(acc.uses)) != 1:
        return None
    held = kernel.env.get(acc)
    return held if isinstance(held, Buffer) else None


def _bind(kernel: Any, args: Any, values: list[Any]) -> None:
    for arg, value in zip(args, values):
        kernel.env[arg] = value


def lower_for(kernel: Any, op: scf.ForOp) -> None:
    b = kernel.b
    lb, ub, step = (kernel.scalar(v) for v in (op.lb, op.ub, op.step))
    carried = [(_carry(kernel, v) if _is_tensor(v) else kernel.scalar(v)) for v in op.iter_args]
    pre = b.block
    fn = b.function
    header, body, done = (fn.append_basic_block(f"for.{n}") for n in ("header", "body", "done"))
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lb.type)
    iv.add_incoming(lb, pre)
    phis = {}
    for i, value in enumerate(carried):
        if not isinstance(value, Buffer):
            phi = b.phi(value.type)
            phi.add_incoming(value, pre)
            phis[i] = phi
    b.cbranch(b.icmp_signed("<", iv, ub), body, done)
    b.position_at_end(body)
    kernel.chunks.reset_cache()
    block = op.body.block
    _bind(kernel, block.args, [iv] + [phis.get(i, v) for i, v in enumerate(carried)])
    terminator = block.last_op
    _lower_body(kernel, block)
    yielded = list(terminator.operands)
    for i, value in enumerate(yielded):
        if isinstance(carried[i], Buffer):
            _write_yield(kernel, value, carried[i])
    for i, phi in phis.items():
        phi.add_incoming(kernel.scalar(yielded[i]), b.block)
    iv.add_incoming(b.add(iv, step), b.block)
    b.branch(header)
    b.position_at_end(done)
    kernel.chunks.reset_cache()
    _bind(kernel, op.results, [phis.get(i, v) for i, v in enumerate(carried)])


def _lower_body(kernel: Any, block: Any) -> None:
    """Lower a region's ops except its terminator (the caller consumes the yielded values)."""
    saved = kernel.position
    ops = list(block.ops)[:-1]
    for position, op in enumerate(ops):
        kernel.position = position
        kernel.lower_op(op)
    kernel.position = saved


def lower_if(kernel: Any, op: scf.IfOp) -> None:
    b = kernel.b
    cond = kernel.scalar(op.cond)
    results = list(op.results)
    targets = [kernel.buffer(r.type) if _is_tensor(r) else None for r in results]
    fn = b.function
    then_block, else_block, merge = (fn.append_basic_block(f"if.{n}") for n in ("then", "else", "merge"))
    b.cbranch(cond, then_block, else_block)
    incoming: list[list[tuple]] = [[] for _ in results]
    for region, llblock in ((op.true_region, then_block), (op.false_region, else_block)):
        b.position_at_end(llblock)
        kernel.chunks.reset_cache()
        if region.blocks:
            block = region.block
            _lower_body(kernel, block)
            for i, value in enumerate(block.last_op.operands):
                if targets[i] is not None:
                    _write_yield(kernel, value, targets[i])
                else:
                    incoming[i].append((kernel.scalar(value), b.block))
        b.branch(merge)
    b.position_at_end(merge)
    kernel.chunks.reset_cache()
    for i, result in enumerate(results):
        if targets[i] is not None:
            kernel.env[result] = targets[i]
            continue
        phi = b.phi(lt.scalar(result.type))
        for value, block in incoming[i]:
            phi.add_incoming(value, block)
        kernel.env[result] = phi


def lower_while(kernel: Any, op: scf.WhileOp) -> None:
    b = kernel.b
    carried = [(_carry(kernel, v) if _is_tensor(v) else kernel.scalar(v)) for v in op.arguments]
    pre = b.block
    fn = b.function
    header, body, done = (fn.append_basic_block(f"while.{n}") for n in ("header", "body", "done"))
    b.branch(header)
    b.position_at_end(header)
    phis = {}
    for i, value in enumerate(carried):
        if not isinstance(value, Buffer):
            phi = b.phi(value.type)
            phi.add_incoming(value, pre)
            phis[i] = phi
    kernel.chunks.reset_cache()
    before = op.before_region.block
    _bind(kernel, before.args, [phis.get(i, v) for i, v in enumerate(carried)])
    _lower_body(kernel, before)
    condition = before.last_op
    forwarded = list(condition.arguments)
    forwarded_values = [kernel.materialize(v) if _is_tensor(v) else kernel.scalar(v) for v in forwarded]
    b.cbranch(kernel.scalar(condition.cond), body, done)
    b.position_at_end(body)
    kernel.chunks.reset_cache()
    after = op.after_region.block
    _bind(kernel, after.args, forwarded_values)
    _lower_body(kernel, after)
    yielded = list(after.last_op.operands)
    for i, value in enumerate(yielded):
        if isinstance(carried[i], Buffer):
            _write_yield(kernel, value, carried[i])
    for i, phi in phis.items():
        phi.add_incoming(kernel.scalar(yielded[i]), b.block)
    b.branch(header)
    b.position_at_end(done)
    kernel.chunks.reset_cache()
    _bind(kernel, op.results, forwarded_values)

