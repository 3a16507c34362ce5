"""``tt.dot`` on the CPU: a register-blocked micro-kernel over buffers.

``D = A @ B + C`` with A ``[M, K]``, B ``[K, N]`` (optionally batched).  The output is computed
in tiles of ``MR`` rows by ``NR`` columns held in vector registers: for each k, ``NR / lanes``
vectors of B's row k are loaded once and multiplied by ``MR`` broadcast elements of A's column
k (fused multiply-add), so each loaded value is used ``MR`` or ``NR / lanes`` times.  Inputs
narrower than fp32 are widened as they are loaded; int8 accumulates in int32.  Operands that
are loads are first copied into buffers (`dot_operands`), in a K loop into copies kept for the
next programs that read the same tiles (`operand_cache`).

bf16 operands on a target that multiplies bf16 pairs (AVX-512 BF16's ``vdpbf16ps``: each fp32
lane adds ``a[k] b[k] + a[k+1] b[k+1]``) go two k at a time, twice the multiply-adds of an fp32
FMA per instruction: B's rows are interleaved in pairs first (`grouped_rows`), and A's two
consecutive elements are broadcast as one 32-bit word.  The products are exact in fp32 either
way; the instruction adds a pair's odd product first and treats denormal inputs and results
as zero (as it does on every processor that has it).  int8 operands with an int32 accumulator
go four k at a time the same way on AVX-512 VNNI (``vpdpbusd``, `INT8_QUADS`).  Where the
processor has AMX tiles, bf16 and int8 dots of whole tiles run on them instead
(`amx_matmul`), from the same buffers.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import llvmlite.ir as ir
from xdsl.dialects import scf
from xdsl.dialects.builtin import TensorType, i32

from naiad.backends.cpu.lowering import amx_matmul, k_panels
from naiad.backends.cpu.lowering.dot_operands import (grouped_offset, grouped_rows, loaded_in_groups,
                                                      operand_buffer)
from naiad.backends.cpu.lowering.operand_cache import copy_unless_kept, kept_trips
from naiad.backends.cpu.lowering.tiles import Buffer, numel, shape_of
from naiad.codegen import elementwise, llvm_types as lt, loops

MR = 4
#: LLVM's bfloat (`vdpbf16ps` takes vectors of it).
_BF16 = lt.BFloatType()


@dataclasses.dataclass(frozen=True)
class GroupedProduct:
    """An instruction that multiplies ``group`` consecutive k at once: each 32-bit lane of the
    accumulator adds the products of ``group`` pairs of ``element``s, A's broadcast from one
    32-bit word, B's from its rows interleaved ``group`` by ``group`` (`grouped_rows`).
    ``unsigned_a``: the instruction takes A's bytes as unsigned (``vpdpbusd``), so they are
    moved up by 128 and the product corrected by 128 times B's column sums."""

    group: int
    intrinsic: str
    element: ir.Type
    unsigned_a: bool = False


#: AVX-512 BF16's ``vdpbf16ps``: pairs of bf16, fp32 sums.
BF16_PAIRS = GroupedProduct(2, "x86.avx512bf16.dpbf16ps.512", _BF16)
#: AVX-512 VNNI's ``vpdpbusd``: fours of bytes (unsigned A, signed B), int32 sums, no saturation.
INT8_QUADS = GroupedProduct(4, "x86.avx512.vpdpbusd.512", lt.I8, unsigned_a=True)


def lower_dot(kernel: Any, op: Any) -> None:
    result = op.results[0]
    a_shape, b_shape = shape_of(op.a.type), shape_of(op.b.type)
    batch = a_shape[0] if len(a_shape) == 3 else 1
    m, k_dim = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    tiles = amx_matmul.tile_product(kernel, op, m, n, k_dim)
    grouped = None if tiles else _grouped_product(kernel, op, n, k_dim)
    group = tiles.group if tiles else grouped.group if grouped else 1
    destination = kernel.dot_destination(op)
    gathered = k_panels.panel(kernel, op, tiles.k_step, destination) if tiles else None
    if gathered:
        gathered.fill(kernel, 1, op.b, lambda into: _b_copy(kernel, op.b, group, 1, k_dim, n, into))
        gathered.fill(kernel, 0, op.a, lambda into: operand_buffer(kernel, op.a, into))
        c = operand_buffer(kernel, op.c)
        if destination.ptr is not c.ptr:
            kernel.copy(c, destination)
        k_panels.multiply(kernel, gathered, lambda blocks, a, b: amx_matmul.tiled_matmul(
            kernel, tiles, a, b, destination, m, n, k_dim, 0, blocks))
        kernel.env[result] = destination
        return
    unsigned_a = bool(grouped and grouped.unsigned_a)
    b_ = _kept_or(kernel, op, op.b, lambda into: _b_copy(kernel, op.b, group, batch, k_dim, n, into))
    a = _kept_or(kernel, op, op.a, lambda into: _a_copy(kernel, op.a, unsigned_a, into))
    c = operand_buffer(kernel, op.c)
    target = destination or kernel.buffer(result.type)
    if target.ptr is not c.ptr:
        kernel.copy(c, target)
    for index in range(batch):
        if tiles:
            amx_matmul.tiled_matmul(kernel, tiles, a, b_, target, m, n, k_dim, index)
        else:
            _matmul(kernel, a, b_, target, m, n, k_dim, index, grouped)
    kernel.env[result] = target


def _a_copy(kernel: Any, a: Any, unsigned: bool, into: Buffer | None) -> Buffer:
    """A in a buffer (``into`` when given), its bytes moved up by 128 where the product takes
    them ``unsigned`` (`_moved_up`): in place in ``into`` -- a kept copy's place or a buffer of
    the dot's own (`_kept_or`), so a kept copy is kept moved up and a program that finds it
    skips both passes -- else into a buffer of their own, the loaded value's buffer being
    perhaps another op's too."""
    copied = operand_buffer(kernel, a, into)
    if not unsigned:
        return copied
    return _moved_up(kernel, copied, copied if into is not None else None)


def _b_copy(kernel: Any, b: Any, group: int, batch: int, k_dim: int, n: int, into: Buffer | None) -> Buffer:
    """B (``[batch,] K x N``) in a buffer (``into`` when given), its rows interleaved in
    groups of ``group`` (`grouped_rows`) where it is more than 1: a 2-D B loaded straight
    into that layout where it can be, else copied and then grouped."""
    if group == 1:
        return operand_buffer(kernel, b, into)
    if len(shape_of(b.type)) == 2:
        loaded = loaded_in_groups(kernel, b, group, into)
        if loaded is not None:
            return loaded
    return grouped_rows(kernel, operand_buffer(kernel, b), batch, k_dim, n, group, into)


def _kept_or(kernel: Any, op: Any, value: Any, copy: Callable[[Buffer | None], Buffer]) -> Buffer:
    """Operand ``value`` of dot ``op``, ``copy(into)`` putting it in a buffer: its place among
    the copies kept across programs where its loop keeps them (`operand_cache`), else a
    buffer of its own (``copy(None)``)."""
    loop = op.parent_op()
    if not isinstance(loop, scf.ForOp) or len(shape_of(value.type)) != 2:
        return copy(None)
    kept = kept_trips(kernel, value, loop, 1)
    if kept is None:
        return copy(None)
    return copy_unless_kept(kernel, kept, value, k_panels.trip_number(kernel, loop), kernel.buffer(value.type), copy)


def _grouped_product(kernel: Any, op: Any, n: int, k_dim: int) -> GroupedProduct | None:
    """The instruction the dot multiplies groups of k with, if any: bf16 operands with an fp32
    accumulator on AVX-512 BF16, int8 with int32 on AVX-512 VNNI; 16 32-bit lanes, whole
    vectors of columns and K a multiple of the group (a dot's block sizes are powers of two
    from 16)."""
    if kernel.lanes != 16 or n % 16:
        return None
    accumulator = lt.scalar(op.c.type)
    if kernel.hooks.bf16_pairs and lt.is_bf16(op.a.type) and lt.is_bf16(op.b.type) \
            and accumulator == lt.F32 and k_dim % 2 == 0:
        return BF16_PAIRS
    if kernel.hooks.int8_quads and lt.is_int8(op.a.type) and lt.is_int8(op.b.type) \
            and accumulator == lt.I32 and k_dim % 4 == 0:
        return INT8_QUADS
    return None


def _matmul(kernel: Any, a: Buffer, b_: Buffer, d: Buffer, m: int, n: int, k_dim: int, batch: int,
            grouped: GroupedProduct | None) -> None:
    bld = kernel.b
    acc_type = lt.scalar(d.mlir_type)
    integer = isinstance(acc_type, ir.IntType)
    compute = acc_type if integer or acc_type == lt.F64 else lt.F32
    lanes = kernel.chunk_lanes(n)
    nr = min(2 * lanes, n)
    mr = min(2 * MR if grouped else MR, m)
    ctx = kernel.ctx(lanes)
    scalar_ctx = kernel.ctx(1)
    sums = _column_sums(kernel, b_, k_dim, n, batch, grouped) if grouped and grouped.unsigned_a else None

    def load(buf: Buffer, offset: ir.Value, count: int, context: Any) -> ir.Value:
        t = lt.vector(lt.scalar(buf.mlir_type), count)
        raw = bld.load(kernel.chunks.element_pointer(buf, offset), typ=t,
                       align=lt.byte_size(lt.scalar(buf.mlir_type)))
        return elementwise.widened(context, raw, buf.mlir_type, compute)

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
            if grouped:
                acc = _k_loop(kernel, k_dim // grouped.group, acc,
                              lambda kg, acc_: _group_step(kg, acc_, rows, j0))
            else:
                acc = _k_loop(kernel, k_dim, acc, lambda kk, acc_: _step(kk, acc_, rows, j0))
            if sums is not None:
                moved = [load(sums, bld.add(j0, ir.Constant(lt.I32, v * lanes)), lanes, ctx)
                         for v in range(nr // lanes)]
                acc = [[bld.sub(value, extra) for value, extra in zip(row_acc, moved)] for row_acc in acc]
            for row_offsets, row_acc in zip(offsets, acc):
                for off, value in zip(row_offsets, row_acc):
                    out = elementwise.narrowed(ctx, value, d.mlir_type)
                    bld.store(out, kernel.chunks.element_pointer(d, off),
                              align=lt.byte_size(lt.scalar(d.mlir_type)))

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

    def _group_step(kg: ir.Value, acc: list[list[ir.Value]], rows: list[ir.Value], j0: ir.Value):
        """``grouped.group`` k at once: each row's broadcast group of A by 16 columns' groups of
        the interleaved B."""
        g = grouped.group
        b_vecs = [_grouped_vector(kernel, b_, grouped_offset(bld, kg, j0, v * lanes, n, g, batch * k_dim),
                                  grouped) for v in range(nr // lanes)]
        new = []
        for row, row_acc in zip(rows, acc):
            a_off = bld.add(bld.add(bld.mul(row, ir.Constant(lt.I32, k_dim)),
                                    bld.mul(kg, ir.Constant(lt.I32, g))), ir.Constant(lt.I32, batch * m * k_dim))
            a_word = bld.load(kernel.chunks.element_pointer(a, a_off), typ=lt.I32, align=1)
            a_vec = bld.bitcast(ctx.splat(a_word), b_vecs[0].type)
            new.append([_multiply_groups(kernel, grouped, av, a_vec, bv) for bv, av in zip(b_vecs, row_acc)])
        return new

    kernel.counted_loop(m // mr, tile)


def _grouped_vector(kernel: Any, b_: Buffer, offset: ir.Value, grouped: GroupedProduct) -> ir.Value:
    """The 512 bits of the grouped B from element ``offset``, as the instruction's operand."""
    bld = kernel.b
    lanes = 64 // lt.byte_size(lt.scalar(b_.mlir_type))
    raw = bld.load(kernel.chunks.element_pointer(b_, offset), typ=lt.vector(lt.scalar(b_.mlir_type), lanes),
                   align=1)
    return bld.bitcast(raw, lt.vector(grouped.element, lanes))


def _multiply_groups(kernel: Any, grouped: GroupedProduct, acc: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    fn = lt.intrinsic(kernel.llmod, grouped.intrinsic, [], acc.type, [acc.type, a.type, b.type])
    return kernel.b.call(fn, [acc, a, b])


def _moved_up(kernel: Any, a: Buffer, out: Buffer | None = None) -> Buffer:
    """A (int8) with each byte moved up by 128 (its top bit flipped), as
    `GroupedProduct.unsigned_a` instructions take it, in ``out`` (``a`` itself, or a new
    buffer when None): once per dot, so the micro-kernel broadcasts A's words straight from
    memory (flipping each word there cost a quarter of an int8 matmul's time)."""
    bld = kernel.b
    out = out or kernel.buffer(a.mlir_type)
    chunk = lt.vector(lt.I8, 64)
    top = ir.Constant(chunk, [-128] * 64)

    def flip(i: ir.Value) -> None:
        at = bld.mul(i, ir.Constant(lt.I32, 64))
        value = bld.load(kernel.chunks.element_pointer(a, at), typ=chunk, align=1)
        bld.store(bld.xor(value, top), kernel.chunks.element_pointer(out, at), align=1)

    kernel.counted_loop(numel(a.mlir_type) // 64, flip)
    return out


def _column_sums(kernel: Any, b_: Buffer, k_dim: int, n: int, batch: int, grouped: GroupedProduct) -> Buffer:
    """128 times the sum of each column of B (int32, ``N`` of them), from its grouped rows: what
    moving A's bytes up by 128 added to each product (`GroupedProduct.unsigned_a`)."""
    bld = kernel.b
    ctx = kernel.ctx(16)
    sums = kernel.buffer(TensorType(i32, [n]))
    ones = bld.bitcast(ctx.splat(ir.Constant(lt.I32, 0x01010101)), lt.vector(grouped.element, 64))

    def column_block(j_block: ir.Value) -> None:
        j0 = bld.mul(j_block, ir.Constant(lt.I32, 16))

        def add_group(kg: ir.Value, total: list[ir.Value]) -> list[ir.Value]:
            offset = grouped_offset(bld, kg, j0, 0, n, grouped.group, batch * k_dim)
            return [_multiply_groups(kernel, grouped, total[0], ones, _grouped_vector(kernel, b_, offset, grouped))]

        total = kernel.carried_loop(0, k_dim // grouped.group, 1, [ctx.const(lt.I32, 0)], add_group)[0]
        bld.store(bld.shl(total, ctx.splat(ir.Constant(lt.I32, 7))), kernel.chunks.element_pointer(sums, j0), align=4)

    kernel.counted_loop(n // 16, column_block)
    return sums


def _k_loop(kernel: Any, k_dim: int, acc: list[list[ir.Value]], step: Any) -> list[list[ir.Value]]:
    """``for kk in range(k_dim): acc = step(kk, acc)``, the accumulator rows carried as phis."""
    b = kernel.b
    widths = [len(row) for row in acc]

    def rows(flat: list[ir.Value]) -> list[list[ir.Value]]:
        out, at = [], 0
        for width in widths:
            out.append(flat[at:at + width])
            at += width
        return out

    def flat_step(kk: ir.Value, flat: list[ir.Value]) -> list[ir.Value]:
        return [value for row in step(kk, rows(flat)) for value in row]

    flat = loops.carried_loop(b, "dot", 0, lambda kk: b.icmp_signed("<", kk, ir.Constant(lt.I32, k_dim)),
                              [value for row in acc for value in row], flat_step)
    return rows(flat)


def _fma(ctx: Any, a: ir.Value, b: ir.Value, acc: ir.Value, integer: bool) -> ir.Value:
    if integer:
        return ctx.b.add(ctx.b.mul(a, b), acc)
    return ctx.intrinsic("fma", [a, b, acc])
