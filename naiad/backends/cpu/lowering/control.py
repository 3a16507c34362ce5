"""``scf.for``, ``scf.while`` and ``scf.if`` on the CPU.

Scalars cross region boundaries as LLVM phis.  Tensors cross them in memory: each tensor that a
loop carries gets one buffer for the whole loop, which the body reads as its block argument and
overwrites with the yielded value; an ``scf.if`` writes its tensor results into buffers from
either branch.  Carried tensors yielded as element-wise functions of their elements are all
written in one pass over their chunks (`_write_fused`), each chunk of every yield computed
before any is stored, so values they share (a load, a Welford update's delta) are computed
once a chunk and never stored in between.  Block pointers cross them as one phi per scalar.
``acc = tl.dot(a, b, acc)`` accumulates straight into the carried buffer (`dot_destination`),
so the usual matmul loop copies nothing.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import scf
from xdsl.dialects.builtin import TensorType

from naiad.backends.cpu.lowering.block_pointers import BlockPointer
from naiad.backends.cpu.lowering.tiles import ELEMENTWISE, Buffer, Lazy, numel
from naiad.ir import arith, tt


def _is_tensor(value: Any) -> bool:
    return isinstance(value.type, TensorType)


def _carry(kernel: Any, init: Any) -> Buffer:
    """A loop-long buffer holding a carried tensor, filled with its initial value."""
    buffer = kernel.buffer(init.type)
    kernel.materialize(init, into=buffer)
    return buffer


def _write_yields(kernel: Any, yields: list[tuple[Any, Buffer]]) -> None:
    """Write each yielded tensor into its carried buffer.

    The writes mean a parallel assignment (``prev, cur = cur, prev + cur``).  When every
    yield is computed element by element (`_fusable`), one pass over the chunks computes each
    chunk of all of them, then stores it.  Otherwise they are written one after another, and
    before a buffer is overwritten, each value still to be written that reads it is first
    computed into a scratch buffer.
    """
    if _fusable(kernel, yields):
        _write_fused(kernel, yields)
        return
    sources: list[Any] = [value for value, _ in yields]
    for i, (_, target) in enumerate(yields):
        for j in range(i + 1, len(sources)):
            if _reads(kernel, sources[j], target):
                sources[j] = _scratch_copy(kernel, sources[j])
        _write_yield(kernel, sources[i], target)


def _fusable(kernel: Any, yields: list[tuple[Any, Buffer]]) -> bool:
    """Whether several yields are all lazy, of one element count, and read the carried buffers
    only at the element they write (so computing a chunk of each before storing any is the
    parallel assignment)."""
    if len(yields) < 2 or len({numel(value.type) for value, _ in yields}) != 1:
        return False
    if not all(isinstance(kernel.lookup(value), Lazy) for value, _ in yields):
        return False
    return not any(_reads_other_elements(kernel, value, target)
                   for value, _ in yields for _, target in yields)


def _write_fused(kernel: Any, yields: list[tuple[Any, Buffer]]) -> None:
    def chunk(index: Any, lanes: int) -> None:
        values = [kernel.chunks.value_at(value, index, lanes) for value, _ in yields]
        for (_, target), value in zip(yields, values):
            kernel.chunks.store_chunk(target, index, value)

    kernel.for_each_chunk(yields[0][0].type, chunk)


def fused_values(block: Any) -> set[Any]:
    """The tensors of a loop body that `_write_fused` computes once a chunk anyway: element-wise
    results and loads of the yields' shape whose every use is a yield or another such value.
    Kept lazy (not materialized for their several uses), they cost nothing between chunks."""
    terminator = block.last_op
    shapes = {tuple(v.type.get_shape()) for v in terminator.operands if _is_tensor(v)}
    fused: set[Any] = set()
    if len(shapes) != 1:
        return fused
    for op in reversed(list(block.ops)[:-1]):
        if not isinstance(op, ELEMENTWISE + (tt.LoadOp,)) or len(op.results) != 1:
            continue
        result = op.results[0]
        if _is_tensor(result) and tuple(result.type.get_shape()) in shapes and all(
                use.operation is terminator or use.operation.results and
                use.operation.results[0] in fused for use in result.uses):
            fused.add(result)
    return fused


def _scratch_copy(kernel: Any, source: Any) -> Buffer:
    if isinstance(source, Buffer):
        scratch = kernel.buffer(source.mlir_type)
        kernel.copy(source, scratch)
        return scratch
    held = kernel.lookup(source)
    return _scratch_copy(kernel, held) if isinstance(held, Buffer) else kernel.materialize(source)


def _reads(kernel: Any, source: Any, buffer: Buffer) -> bool:
    """Whether computing ``source`` (a value, or a buffer) reads ``buffer``."""
    return any(held.ptr is buffer.ptr for held, _ in _sources(kernel, source))


#: Ops whose element i is computed from element i of their operands (as element-wise ones).
_SAME_INDEX = (tt.ExpandDimsOp, tt.ReshapeOp, tt.SplatOp, tt.MakeRangeOp, arith.ConstantOp, tt.LoadOp)


def _sources(kernel: Any, source: Any) -> list[tuple[Buffer, bool]]:
    """The buffers computing ``source`` reads, each with whether it is read through an op that
    moves elements (then element i may read another element of it)."""
    found, seen = [], set()
    pending = [(source, False)]
    while pending:
        value, remapped = pending.pop()
        held = value if isinstance(value, Buffer) else kernel.lookup(value)
        if isinstance(held, Buffer):
            found.append((held, remapped))
        elif isinstance(held, Lazy) and (held.op, remapped) not in seen:
            seen.add((held.op, remapped))
            remapped = remapped or not isinstance(held.op, ELEMENTWISE + _SAME_INDEX)
            pending.extend((v, remapped) for v in held.op.operands if _is_tensor(v))
    return found


def _write_yield(kernel: Any, source: Any, target: Buffer) -> None:
    held = source if isinstance(source, Buffer) else kernel.lookup(source)
    if isinstance(held, Buffer) and held.ptr is target.ptr:
        return
    if isinstance(held, Lazy) and not _reads_other_elements(kernel, source, target):
        kernel.materialize(source, into=target)     # element i reads element i: in place is safe
        return
    scratch = kernel.materialize(source) if not isinstance(held, Buffer) else held
    kernel.copy(scratch, target)


def _reads_other_elements(kernel: Any, value: Any, buffer: Buffer) -> bool:
    """Whether computing ``value`` element by element could read another element of ``buffer``:
    whether ``buffer`` is reached through an op that moves elements (broadcast, trans, ...)."""
    return any(held.ptr is buffer.ptr and remapped for held, remapped in _sources(kernel, value))


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


def _phi(b: Any, value: Any) -> Any:
    """A phi for a scalar, or a block pointer of phis (one per scalar) for a block pointer."""
    if isinstance(value, BlockPointer):
        return value.with_scalars([b.phi(v.type) for v in value.scalars()])
    return b.phi(value.type)


def _add_incoming(phi: Any, value: Any, block: Any) -> None:
    if not isinstance(phi, BlockPointer):
        phi.add_incoming(value, block)
        return
    if phi.unit_stride and not value.unit_stride:
        raise NotImplementedError("a block pointer whose innermost stride changes from the "
                                  "constant 1 inside a loop is not supported on the CPU yet")
    for p, v in zip(phi.scalars(), value.scalars()):
        p.add_incoming(v, block)


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
            phis[i] = _phi(b, value)
            _add_incoming(phis[i], value, pre)
    b.cbranch(b.icmp_signed("<", iv, ub), body, done)
    b.position_at_end(body)
    kernel.chunks.reset_cache()
    block = op.body.block
    _bind(kernel, block.args, [iv] + [phis.get(i, v) for i, v in enumerate(carried)])
    terminator = block.last_op
    kernel.fused |= fused_values(block)
    lower_body(kernel, block)
    yielded = list(terminator.operands)
    _write_yields(kernel, [(v, c) for v, c in zip(yielded, carried) if isinstance(c, Buffer)])
    for i, phi in phis.items():
        _add_incoming(phi, kernel.scalar(yielded[i]), b.block)
    iv.add_incoming(b.add(iv, step), b.block)
    b.branch(header)
    b.position_at_end(done)
    kernel.chunks.reset_cache()
    kernel.loop_exits(op)
    _bind(kernel, op.results, [phis.get(i, v) for i, v in enumerate(carried)])


def lower_body(kernel: Any, block: Any) -> None:
    """Lower a block's ops except its terminator (the caller consumes the yielded values)."""
    saved = kernel.position
    ops = list(block.ops)[:-1]
    with kernel.region(block):
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
            lower_body(kernel, block)
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
        phi = _phi(b, incoming[i][0][0])
        if isinstance(phi, BlockPointer):
            phi.unit_stride = all(value.unit_stride for value, _ in incoming[i])
        for value, block in incoming[i]:
            _add_incoming(phi, value, block)
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
            phis[i] = _phi(b, value)
            _add_incoming(phis[i], value, pre)
    kernel.chunks.reset_cache()
    before = op.before_region.block
    _bind(kernel, before.args, [phis.get(i, v) for i, v in enumerate(carried)])
    lower_body(kernel, before)
    condition = before.last_op
    forwarded = list(condition.args)
    forwarded_values = [kernel.materialize(v) if _is_tensor(v) else kernel.scalar(v) for v in forwarded]
    b.cbranch(kernel.scalar(condition.condition), body, done)
    b.position_at_end(body)
    kernel.chunks.reset_cache()
    after = op.after_region.block
    _bind(kernel, after.args, forwarded_values)
    lower_body(kernel, after)
    yielded = list(after.last_op.operands)
    _write_yields(kernel, [(v, c) for v, c in zip(yielded, carried) if isinstance(c, Buffer)])
    for i, phi in phis.items():
        _add_incoming(phi, kernel.scalar(yielded[i]), b.block)
    b.branch(header)
    b.position_at_end(done)
    kernel.chunks.reset_cache()
    _bind(kernel, op.results, forwarded_values)

