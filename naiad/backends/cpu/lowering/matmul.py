"""``tt.dot`` on the CPU: a register-blocked micro-kernel over buffers.

``D = A @ B + C`` with A ``[M, K]``, B ``[K, N]`` (optionally batched).  The output is computed
in tiles of ``MR`` rows by ``NR`` columns held in vector registers: for each k, ``NR / lanes``
vectors of B's row k are loaded once and multiplied by ``MR`` broadcast elements of A's column
k (fused multiply-add), so each loaded value is used ``MR`` or ``NR / lanes`` times.  Inputs
narrower than fp32 are widened as they are loaded; int8 accumulates in int32.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.backends.cpu.lowering import memory
from naiad.backends.cpu.lowering.block_pointers import is_block_pointer
from naiad.backends.cpu.lowering.tiles import Buffer, Lazy, lane_stride, numel, shape_of
from naiad.codegen import elementwise, llvm_types as lt
from naiad.ir import tt

MR = 4


def _operand_buffer(kernel: Any, value: Any) -> Buffer:
    """A dot operand, in a buffer.

    A load whose pointers the static analysis cannot prove consecutive is checked at run time,
    chunk by chunk: the operands of a matmul are nearly always rows of consecutive elements,
    but pointers that were materialized (a loop-invariant pointer tensor used in a loop), or
    computed with ``% N`` (Triton's tutorial matmul), hide it, and a gather costs several
    times a vector load."""
    held = kernel.lookup(value)
    if isinstance(held, Buffer):
        return held
    if not _needs_check(kernel, held):
        return kernel.materialize(value)
    target = kernel.buffer(value.type)
    kernel.for_each_chunk(value.type, lambda index, lanes: kernel.chunks.store_chunk(
        target, index, _checked_load(kernel, held.op, index, lanes)))
    kernel.env[value] = target
    return target


def _needs_check(kernel: Any, held: Lazy) -> bool:
    op = held.op
    if not isinstance(op, tt.LoadOp) or is_block_pointer(op.ptr):
        return False
    lanes = kernel.chunk_lanes(numel(op.ptr.type))
    size = lt.byte_size(memory.memory_type(op.results[0].type))
    return lanes > 1 and lane_stride(kernel, op.ptr, lanes) != size


def _next_trip(kernel, op):
    from xdsl.dialects import scf
    from naiad.ir import arith
    ptr = op.ptr.owner
    if not isinstance(ptr, tt.AddPtrOp) or not isinstance(ptr.offset.owner, tt.SplatOp):
        return None
    acc = ptr.offset.owner.src
    block = getattr(acc, "block", None)
    if block is None or not isinstance(block.parent_op(), scf.ForOp):
        return None
    nxt = block.last_op.operands[acc.index - 1].owner
    if not isinstance(nxt, arith.AddiOp) or nxt.lhs is not acc:
        return None
    return kernel.scalar(nxt.rhs)


def _checked_load(kernel: Any, op: Any, index: ir.Value, lanes: int) -> ir.Value:
    """The chunk of load ``op`` at ``index``: a vector load when its pointers turn out to be
    consecutive, else a gather."""
    def at(value: Any) -> ir.Value:
        return kernel.chunks.value_at(value, index, lanes)

    b, ctx = kernel.b, kernel.ctx(lanes)
    element = memory.memory_type(op.results[0].type)
    addresses = at(op.ptr)
    mask = at(op.mask) if op.mask is not None else None
    passthru = at(op.other) if op.other is not None else ctx.const(element, 0)
    first_scalar = b.extract_element(addresses, ir.Constant(lt.I32, 0))
    first = ctx.splat(first_scalar)
    stride = _next_trip(kernel, op)
    import os
    if stride is not None and os.environ.get('PF', '1') == '1':
        ahead = b.add(first_scalar, b.mul(b.sext(stride, lt.I64) if stride.type != lt.I64 else stride, ir.Constant(lt.I64, lt.byte_size(element))))
        pf = lt.intrinsic(kernel.llmod, "prefetch", [lt.PTR], lt.VOID, [lt.PTR, lt.I32, lt.I32, lt.I32])
        b.call(pf, [b.inttoptr(ahead, lt.PTR), ir.Constant(lt.I32, 0), ir.Constant(lt.I32, 3), ir.Constant(lt.I32, 1)])
    ramp = ir.Constant(lt.vector(lt.I64, lanes), [k * lt.byte_size(element) for k in range(lanes)])
    equal = b.icmp_unsigned("==", addresses, b.add(first, ramp))
    consecutive = b.call(lt.intrinsic(kernel.llmod, "vector.reduce.and", [equal.type], lt.I1,
                                      [equal.type]), [equal])
    with b.if_else(consecutive) as (then, otherwise):
        with then:
            vector = memory.emit_load(kernel, op, addresses, mask, passthru, lanes, True)
            vector_end = b.block
        with otherwise:
            gathered = memory.emit_load(kernel, op, addresses, mask, passthru, lanes, False)
            gather_end = b.block
    loaded = b.phi(vector.type)
    loaded.add_incoming(vector, vector_end)
    loaded.add_incoming(gathered, gather_end)
    return loaded


def lower_dot(kernel: Any, op: Any) -> None:
    a, b_, c = (_operand_buffer(kernel, v) for v in (op.a, op.b, op.c))
    result = op.results[0]
    target = kernel.dot_destination(op) or kernel.buffer(result.type)
    if target.ptr is not c.ptr:
        kernel.copy(c, target)
    a_shape, b_shape = shape_of(op.a.type), shape_of(op.b.type)
    batch = a_shape[0] if len(a_shape) == 3 else 1
    m, k_dim = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    for index in range(batch):
        _matmul(kernel, a, b_, target, m, n, k_dim, index, op)
    kernel.env[result] = target


def _matmul(kernel: Any, a: Buffer, b_: Buffer, d: Buffer, m: int, n: int, k_dim: int, batch: int,
            op: Any) -> None:
    bld = kernel.b
    acc_type = lt.scalar(d.mlir_type)
    integer = isinstance(acc_type, ir.IntType)
    compute = acc_type if integer or acc_type == lt.F64 else lt.F32
    lanes = kernel.chunk_lanes(n)
    nr = min(2 * lanes, n)
    mr = min(MR, m)
    ctx = kernel.ctx(lanes)
    scalar_ctx = kernel.ctx(1)

    def element_ptr(buf: Buffer, offset: ir.Value) -> ir.Value:
        size = lt.byte_size(lt.scalar(buf.mlir_type))
        return bld.gep(buf.ptr, [bld.mul(bld.sext(offset, lt.I64), ir.Constant(lt.I64, size))],
                       source_etype=lt.I8)

    def load(buf: Buffer, offset: ir.Value, count: int, context: Any) -> ir.Value:
        t = lt.vector(lt.scalar(buf.mlir_type), count)
        raw = bld.load(element_ptr(buf, offset), typ=t, align=lt.byte_size(lt.scalar(buf.mlir_type)))
        return _widen(context, raw, buf.mlir_type, compute)

    def tile(i_block: ir.Value) -> None:
        i0 = bld.mul(i_block, ir.Constant(lt.I32, mr))

        def column_block(j_block: ir.Value) -> None:
            j0 = bld.mul(j_block, ir.Constant(lt.I32, nr))
            rows = [bld.add(i0, ir.Constant(lt.I32, r)) for r in range(mr)]
            d_base = batch * m * n
            offsets = [[bld.add(bld.add(bld.mul(row, ir.Constant(lt.I32, n)), j0),
                                ir.Constant(lt.I32, d_base + v * lanes)) for v in range(nr // lanes)]
                       for row in rows]
            acc = [[load(d, off, lanes, ctx) for off in row_offsets] for row_offsets in offsets]
            acc = _k_loop(kernel, k_dim, acc, lambda kk, acc_: _step(kk, acc_, rows, j0))
            for row_offsets, row_acc in zip(offsets, acc):
                for off, value in zip(row_offsets, row_acc):
                    out = _narrow(ctx, value, d.mlir_type)
                    bld.store(out, element_ptr(d, off), align=lt.byte_size(lt.scalar(d.mlir_type)))

        kernel.counted_loop(n // nr, column_block)

    def _step(kk: ir.Value, acc: list[list[ir.Value]], rows: list[ir.Value], j0: ir.Value):
        b_row = bld.add(bld.mul(kk, ir.Constant(lt.I32, n)), j0)
        b_row = bld.add(b_row, ir.Constant(lt.I32, batch * k_dim * n))
        b_vecs = [load(b_, bld.add(b_row, ir.Constant(lt.I32, v * lanes)), lanes, ctx)
                  for v in range(nr // lanes)]
        new = []
        for row, row_acc in zip(rows, acc):
            a_off = bld.add(bld.add(bld.mul(row, ir.Constant(lt.I32, k_dim)), kk),
                            ir.Constant(lt.I32, batch * m * k_dim))
            a_val = ctx.splat(load(a, a_off, 1, scalar_ctx))
            new.append([_fma(ctx, a_val, bv, av, integer) for bv, av in zip(b_vecs, row_acc)])
        return new

    kernel.counted_loop(m // mr, tile)


def _k_loop(kernel: Any, k_dim: int, acc: list[list[ir.Value]], step: Any) -> list[list[ir.Value]]:
    b = kernel.b
    pre = b.block
    header, body, done = (b.append_basic_block(f"dot.{n}") for n in ("header", "body", "done"))
    b.branch(header)
    b.position_at_end(header)
    kk = b.phi(lt.I32)
    kk.add_incoming(ir.Constant(lt.I32, 0), pre)
    phis = []
    for row in acc:
        row_phis = []
        for value in row:
            phi = b.phi(value.type)
            phi.add_incoming(value, pre)
            row_phis.append(phi)
        phis.append(row_phis)
    b.cbranch(b.icmp_signed("<", kk, ir.Constant(lt.I32, k_dim)), body, done)
    b.position_at_end(body)
    new = step(kk, phis)
    for row_phis, row_new in zip(phis, new):
        for phi, value in zip(row_phis, row_new):
            phi.add_incoming(value, b.block)
    kk.add_incoming(b.add(kk, ir.Constant(lt.I32, 1)), b.block)
    b.branch(header)
    b.position_at_end(done)
    return phis


def _widen(ctx: Any, raw: ir.Value, mlir_type: Any, compute: ir.Type) -> ir.Value:
    """Storage -> compute type (bf16/fp8 through the shared conversions, ints sign-extended)."""
    value = elementwise.to_compute(ctx, raw, mlir_type) if lt.is_bf16(mlir_type) or lt.is_fp8(mlir_type) else raw
    src = lt.scalar_of(value.type)
    target = lt.vector(compute, lt.lanes_of(value.type))
    if src == compute:
        return value
    if isinstance(compute, ir.IntType):
        return ctx.b.sext(value, target)
    return ctx.b.fpext(value, target) if lt.byte_size(src) < lt.byte_size(compute) else ctx.b.fptrunc(value, target)


def _narrow(ctx: Any, value: ir.Value, mlir_type: Any) -> ir.Value:
    storage = lt.scalar(mlir_type)
    if lt.is_bf16(mlir_type) or lt.is_fp8(mlir_type):
        return elementwise.to_storage(ctx, value, mlir_type)
    if lt.scalar_of(value.type) == storage:
        return value
    target = lt.vector(storage, lt.lanes_of(value.type))
    if isinstance(storage, ir.IntType):
        return ctx.b.trunc(value, target)
    return ctx.b.fptrunc(value, target)


def _fma(ctx: Any, a: ir.Value, b: ir.Value, acc: ir.Value, integer: bool) -> ir.Value:
    if integer:
        return ctx.b.add(ctx.b.mul(a, b), acc)
    return ctx.intrinsic("fma", [a, b, acc])
