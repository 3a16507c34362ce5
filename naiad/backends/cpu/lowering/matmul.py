"""``tt.dot`` on the CPU: a register-blocked micro-kernel over buffers.

``D = A @ B + C`` with A ``[M, K]``, B ``[K, N]`` (optionally batched).  The output is computed
in tiles of ``MR`` rows by ``NR`` columns held in vector registers: for each k, ``NR / lanes``
vectors of B's row k are loaded once and multiplied by ``MR`` broadcast elements of A's column
k (fused multiply-add), so each loaded value is used ``MR`` or ``NR / lanes`` times.  Inputs
narrower than fp32 are widened as they are loaded; int8 accumulates in int32.  Operands that
are loads are first copied into buffers with vector loads wherever their rows are consecutive
in memory (`_operand_buffer`).

bf16 operands on a target that multiplies bf16 pairs (AVX-512 BF16's ``vdpbf16ps``: each fp32
lane adds ``a[k] b[k] + a[k+1] b[k+1]``) go two k at a time, twice the multiply-adds of an fp32
FMA per instruction: B's rows are interleaved in pairs first (`_paired_rows`), and A's two
consecutive elements are broadcast as one 32-bit word.  The products are exact in fp32 either
way; the instruction adds a pair's odd product first and treats denormal inputs and results
as zero (as it does on every processor that has it).
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from xdsl.dialects import scf
from xdsl.ir import BlockArgument

from naiad.backends.cpu.lowering import memory
from naiad.backends.cpu.lowering.block_pointers import is_block_pointer
from naiad.backends.cpu.lowering.tiles import Buffer, Lazy, numel, shape_of
from naiad.codegen import elementwise, llvm_types as lt, loops
from naiad.ir import arith, tt
from naiad.passes.effects import defined_outside

MR = 4
#: LLVM's bfloat (`vdpbf16ps` takes vectors of it).
_BF16 = lt.BFloatType()


def _operand_buffer(kernel: Any, value: Any) -> Buffer:
    """A dot operand, in a buffer; a load is copied in chunk by chunk, as fast as it can be.

    The operands of a matmul are nearly always rows of consecutive elements: where the axis
    information proves it (`KernelLowering.consecutive`) each chunk is one vector load, or else
    it is checked at run time (the pointers may still be consecutive, which is cheaper to test
    than to gather); and a loop's next trip is prefetched (`_next_step`): reading another part
    of a large matrix, rows apart, each trip stalls on memory otherwise."""
    held = kernel.lookup(value)
    if isinstance(held, Buffer):
        return held
    load = held.op
    lanes = kernel.chunk_lanes(numel(value.type))
    if not isinstance(load, tt.LoadOp) or is_block_pointer(load.ptr) or lanes == 1:
        return kernel.materialize(value)
    if _down_columns(kernel, load, lanes):
        return _transposed_copy(kernel, value, load, lanes)
    chunk = _copy_lanes(kernel, value, load)
    consecutive = kernel.consecutive(load.ptr, chunk)
    step = _next_step(kernel, load)
    target = kernel.buffer(value.type)

    def copy(i: ir.Value) -> None:
        index = kernel.b.mul(i, ir.Constant(lt.I32, chunk))
        kernel.chunks.store_chunk(target, index, _load_chunk(kernel, load, index, chunk, consecutive, step))

    kernel.counted_loop(numel(value.type) // chunk, copy)
    kernel.remember(value, target)
    return target


def _copy_lanes(kernel: Any, value: Any, load: Any) -> int:
    """Elements of each chunk an operand is copied in: a whole 512-bit vector of 16-bit data
    (twice the fp32 lanes) where its rows are consecutive runs that long -- half the chunks,
    each with its address, mask and prefetch to work out (bf16 matmuls of 32-wide tiles: 8 %
    faster) -- else a chunk as `KernelLowering.for_each_chunk` takes them."""
    shape = shape_of(value.type)
    lanes = kernel.row_lanes(shape)
    wide = 2 * lanes
    if lt.byte_size(lt.memory_type(value.type)) == 2 and lanes == kernel.lanes \
            and shape[-1] % wide == 0 and kernel.consecutive(load.ptr, wide):
        return wide
    return lanes


def _down_columns(kernel: Any, load: Any, lanes: int) -> bool:
    """Whether the unmasked 2-D block ``load`` reads runs of consecutive elements down its
    columns and not along its rows (``k[d, n]`` at ``n * D + d``: attention's K read as Kᵀ), in
    whole chunks of ``lanes`` both ways.  Not under bounds checks, whose checked loads take the
    chunks as they come."""
    shape = shape_of(load.ptr.type)
    if len(shape) != 2 or load.mask is not None or shape[0] % lanes or shape[1] % lanes \
            or kernel.bounds_check:
        return False
    info = kernel.axis_info(load.ptr)
    return info.contiguity[0] % lanes == 0 and info.contiguity[1] == 1


def _transposed_copy(kernel: Any, value: Any, load: Any, lanes: int) -> Buffer:
    """``load``'s block (see `_down_columns`) in a buffer, read ``lanes`` columns at a time: a
    vector load down each column, the ``lanes x lanes`` square turned over in registers
    (`_transpose_square`), a vector store along each row -- instead of a gather per chunk."""
    bld = kernel.b
    rows, cols = shape_of(value.type)
    target = kernel.buffer(value.type)
    element = lt.memory_type(load.results[0].type)
    vtype = lt.vector(element, lanes)

    def square(index: ir.Value) -> None:            # index: row block * (cols / lanes) + column block
        r0 = bld.mul(bld.udiv(index, ir.Constant(lt.I32, cols // lanes)), ir.Constant(lt.I32, lanes))
        c0 = bld.mul(bld.urem(index, ir.Constant(lt.I32, cols // lanes)), ir.Constant(lt.I32, lanes))
        first = bld.add(bld.mul(r0, ir.Constant(lt.I32, cols)), c0)
        columns = []
        for j in range(lanes):
            address = kernel.chunks.value_at(load.ptr, bld.add(first, ir.Constant(lt.I32, j)), 1)
            columns.append(bld.load(bld.inttoptr(address, lt.PTR), typ=vtype, align=lt.byte_size(element)))
        for i, row in enumerate(_transpose_square(bld, columns)):
            place = bld.add(first, ir.Constant(lt.I32, i * cols))
            bld.store(row, kernel.chunks.element_pointer(target, place), align=lt.byte_size(element))

    kernel.counted_loop(rows * cols // (lanes * lanes), square)
    kernel.remember(value, target)
    return target


def _transpose_square(bld: ir.IRBuilder, vectors: list[ir.Value]) -> list[ir.Value]:
    """The ``n`` vectors of ``n`` lanes (``n`` a power of two), rows of a square, as its
    columns: one round per bit of the index swaps that bit of the row with that bit of the
    column -- in a round of bit ``h``, rows ``i`` and ``i + h`` become
    ``[a[c] if c & h == 0 else b[c - h]]`` and ``[a[c + h] if c & h == 0 else b[c]]``."""
    n = len(vectors)
    rows = list(vectors)
    h = 1
    while h < n:
        low = ir.Constant(lt.vector(lt.I32, n), [c if not c & h else n + c - h for c in range(n)])
        high = ir.Constant(lt.vector(lt.I32, n), [c + h if not c & h else n + c for c in range(n)])
        for i in range(n):
            if not i & h:
                a, b = rows[i], rows[i + h]
                rows[i], rows[i + h] = bld.shuffle_vector(a, b, low), bld.shuffle_vector(a, b, high)
        h *= 2
    return rows


def _next_step(kernel: Any, load: Any) -> ir.Value | None:
    """How many elements the pointers of ``load`` move by the next trip of the `scf.for`
    around it (an i64), when they move by the same amount everywhere: pointers computed from
    the loop's induction variable (``a_ptr + (k + rk) * stride``) or carried by it (``ptrs +=
    step``, which the loop-carried-pointers pass makes a carried offset)."""
    parent = load.parent_op()
    if not isinstance(parent, scf.ForOp):
        return None
    moved = _per_trip(kernel, load.ptr, parent)
    return None if moved is None or isinstance(moved, int) else moved


def _per_trip(kernel: Any, value: Any, loop: Any) -> ir.Value | int | None:
    """What ``value`` gains from one trip of ``loop`` to the next: 0 for a value the loop does
    not change, an i64 when every element gains the same, None when not known."""
    if defined_outside(value, loop):
        return 0
    bld = kernel.b
    if isinstance(value, BlockArgument):
        if value.block is not loop.body.block:
            return None
        if value.index == 0:
            return _as_i64(bld, kernel.scalar(loop.step))
        following = loop.body.block.last_op.operands[value.index - 1].owner
        if isinstance(following, arith.AddiOp) and following.lhs is value:
            gain = _invariant_scalar(kernel, following.rhs, loop)
            return None if gain is None else _as_i64(bld, gain)
        return None
    op = value.owner
    if isinstance(op, (tt.SplatOp, tt.BroadcastOp, tt.ExpandDimsOp, arith.ExtSIOp)):
        return _per_trip(kernel, op.operands[0], loop)
    if isinstance(op, (tt.AddPtrOp, arith.AddiOp, arith.SubiOp)):
        lhs, rhs = (_per_trip(kernel, v, loop) for v in op.operands)
        if lhs is None or rhs is None:
            return None
        if isinstance(rhs, int):
            return lhs
        if isinstance(op, arith.SubiOp):
            return bld.sub(ir.Constant(lt.I64, 0) if isinstance(lhs, int) else lhs, rhs)
        return rhs if isinstance(lhs, int) else bld.add(lhs, rhs)
    if isinstance(op, arith.MuliOp):
        for moving, factor in (op.operands, op.operands[::-1]):
            gain = _per_trip(kernel, moving, loop)
            scale = _invariant_scalar(kernel, factor, loop)
            if gain is not None and scale is not None:
                return 0 if isinstance(gain, int) else bld.mul(gain, _as_i64(bld, scale))
    return None


def _invariant_scalar(kernel: Any, value: Any, loop: Any) -> ir.Value | None:
    """The one number a value the loop does not change holds everywhere: a scalar, a splat of
    one or a constant splat; else None."""
    if not defined_outside(value, loop):
        return None
    known = kernel.constant_value(value)
    if known is not None:
        return ir.Constant(lt.I64, known)
    while isinstance(value.owner, tt.SplatOp):
        value = value.owner.src
    held = kernel.lookup(value)
    return held if isinstance(held, ir.Value) and isinstance(held.type, ir.IntType) else None


def _as_i64(bld: ir.IRBuilder, value: ir.Value) -> ir.Value:
    return value if value.type == lt.I64 else bld.sext(value, lt.I64)


def _load_chunk(kernel: Any, load: Any, index: ir.Value, lanes: int, consecutive: bool,
                step: ir.Value | None) -> ir.Value:
    """A chunk of ``load``: one vector load when its pointers are ``consecutive``, or turn out
    to be at run time; else a gather.  Prefetches the chunk of the next trip when ``step``
    says where it is."""
    def at(value: Any) -> ir.Value:
        return kernel.chunks.value_at(value, index, lanes)

    b, ctx = kernel.b, kernel.ctx(lanes)
    element = lt.memory_type(load.results[0].type)
    size = lt.byte_size(element)
    addresses = at(load.ptr)
    mask = at(load.mask) if load.mask is not None else None
    passthru = at(load.other) if load.other is not None else ctx.const(element, 0)
    first = b.extract_element(addresses, ir.Constant(lt.I32, 0))
    if step is not None:
        ahead = b.inttoptr(b.add(first, b.mul(step, ir.Constant(lt.I64, size))), lt.PTR)
        prefetch = lt.intrinsic(kernel.llmod, "prefetch", [lt.PTR], lt.VOID,
                                [lt.PTR, lt.I32, lt.I32, lt.I32])
        b.call(prefetch, [ahead, ir.Constant(lt.I32, 0), ir.Constant(lt.I32, 3),
                          ir.Constant(lt.I32, 1)])             # read, keep in cache, data

    def emit(contiguous: bool) -> ir.Value:
        return memory.emit_load(kernel, load, addresses, mask, passthru, lanes, contiguous)

    if consecutive:
        return emit(True)
    ramp = ir.Constant(lt.vector(lt.I64, lanes), [k * size for k in range(lanes)])
    equal = b.icmp_unsigned("==", addresses, b.add(ctx.splat(first), ramp))
    all_equal = b.call(lt.intrinsic(kernel.llmod, "vector.reduce.and", [equal.type], lt.I1,
                                    [equal.type]), [equal])
    return kernel.choose(all_equal, lambda: emit(True), lambda: emit(False), passthru.type)


def lower_dot(kernel: Any, op: Any) -> None:
    result = op.results[0]
    a_shape, b_shape = shape_of(op.a.type), shape_of(op.b.type)
    batch = a_shape[0] if len(a_shape) == 3 else 1
    m, k_dim = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    pairs = _multiplies_bf16_pairs(kernel, op, n, k_dim)
    b_ = _loaded_in_pairs(kernel, op.b) if pairs and batch == 1 else None
    a, c = (_operand_buffer(kernel, v) for v in (op.a, op.c))
    if b_ is None:
        b_ = _operand_buffer(kernel, op.b)
        if pairs:
            b_ = _paired_rows(kernel, b_, batch, k_dim, n)
    target = kernel.dot_destination(op) or kernel.buffer(result.type)
    if target.ptr is not c.ptr:
        kernel.copy(c, target)
    for index in range(batch):
        _matmul(kernel, a, b_, target, m, n, k_dim, index, op, pairs)
    kernel.env[result] = target


def _multiplies_bf16_pairs(kernel: Any, op: Any, n: int, k_dim: int) -> bool:
    """Whether the dot goes two k at a time through ``vdpbf16ps``: bf16 operands, an fp32
    accumulator, a target that has the instruction and 16 fp32 lanes, whole vectors of columns
    and an even K (a dot's block sizes are powers of two from 16)."""
    return kernel.hooks.bf16_pairs and kernel.lanes == 16 and lt.is_bf16(op.a.type) \
        and lt.is_bf16(op.b.type) and lt.scalar(op.c.type) == lt.F32 and n % 16 == 0 \
        and k_dim % 2 == 0


def _loaded_in_pairs(kernel: Any, value: Any) -> Buffer | None:
    """B (bf16, ``K x N``) loaded straight into `_paired_rows`' layout -- each pair of rows'
    chunks read and interleaved as they arrive, one pass instead of a copy and a second pass
    over it -- when it is a load of rows the dot alone uses; else None."""
    held = kernel.lookup(value)
    if not isinstance(held, Lazy) or not isinstance(held.op, tt.LoadOp) or is_block_pointer(held.op.ptr) \
            or kernel.uses.get(value) != (1, False) or kernel.bounds_check:
        return None
    load = held.op
    k_dim, n = shape_of(value.type)
    if _down_columns(kernel, load, 16) or not kernel.consecutive(load.ptr, 16):
        return None
    step = _next_step(kernel, load)
    return _interleaved(kernel, value.type, k_dim, n,
                        lambda index, lanes: _load_chunk(kernel, load, index, lanes, True, step),
                        _copy_lanes(kernel, value, load))


def _paired_rows(kernel: Any, b_: Buffer, batch: int, k_dim: int, n: int) -> Buffer:
    """A copy of B (bf16, ``[batch,] K x N``) whose rows are interleaved two by two: element
    ``(k, j)`` at ``(k // 2 * N + j) * 2 + k % 2``, so that one 512-bit load holds 16 columns'
    pairs of consecutive k, as ``vdpbf16ps`` multiplies them."""
    half = lt.vector(lt.I16, 16)
    return _interleaved(kernel, b_.mlir_type, batch * k_dim, n, lambda index, lanes: kernel.b.load(
        kernel.chunks.element_pointer(b_, index), typ=half, align=2))


def _interleaved(kernel: Any, mlir_type: Any, rows: int, n: int, chunk: Any, width: int = 16) -> Buffer:
    """A new buffer of ``mlir_type`` holding ``rows`` rows of ``n`` bf16 interleaved two by two
    (`_paired_rows`), ``chunk(index, width)`` giving the ``width`` elements from linear element
    ``index`` (16, or 32 where rows allow: half the chunks to read)."""
    bld = kernel.b
    out = kernel.buffer(mlir_type)
    interleave = [ir.Constant(lt.vector(lt.I32, 32), [h + i // 2 + width * (i % 2) for i in range(32)])
                  for h in range(0, width, 16)]

    def pair(row_pair: ir.Value) -> None:
        start = bld.mul(row_pair, ir.Constant(lt.I32, 2 * n))

        def group(g: ir.Value) -> None:
            first = bld.add(start, bld.mul(g, ir.Constant(lt.I32, width)))
            lo, hi = chunk(first, width), chunk(bld.add(first, ir.Constant(lt.I32, n)), width)
            place = bld.add(start, bld.mul(g, ir.Constant(lt.I32, 2 * width)))
            for h, order in enumerate(interleave):
                bld.store(bld.shuffle_vector(lo, hi, order), kernel.chunks.element_pointer(
                    out, bld.add(place, ir.Constant(lt.I32, 32 * h))), align=2)

        kernel.counted_loop(n // width, group)

    kernel.counted_loop(rows // 2, pair)
    return out


def _matmul(kernel: Any, a: Buffer, b_: Buffer, d: Buffer, m: int, n: int, k_dim: int, batch: int,
            op: Any, pairs: bool) -> None:
    bld = kernel.b
    acc_type = lt.scalar(d.mlir_type)
    integer = isinstance(acc_type, ir.IntType)
    compute = acc_type if integer or acc_type == lt.F64 else lt.F32
    lanes = kernel.chunk_lanes(n)
    nr = min(2 * lanes, n)
    mr = min(2 * MR if pairs else MR, m)
    ctx = kernel.ctx(lanes)
    scalar_ctx = kernel.ctx(1)

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
            if pairs:
                acc = _k_loop(kernel, k_dim // 2, acc, lambda kp, acc_: _pair_step(kp, acc_, rows, j0))
            else:
                acc = _k_loop(kernel, k_dim, acc, lambda kk, acc_: _step(kk, acc_, rows, j0))
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

    def _pair_step(kp: ir.Value, acc: list[list[ir.Value]], rows: list[ir.Value], j0: ir.Value):
        """Two k at once: ``vdpbf16ps`` of each row's broadcast pair of A and 16 columns' pairs
        of the interleaved B."""
        pair_type, word = lt.vector(_BF16, 32), lt.vector(lt.I16, 32)
        b_row = bld.add(bld.mul(bld.add(bld.mul(kp, ir.Constant(lt.I32, n)), j0), ir.Constant(lt.I32, 2)),
                        ir.Constant(lt.I32, batch * k_dim * n))
        b_words = [bld.load(kernel.chunks.element_pointer(b_, bld.add(b_row, ir.Constant(lt.I32, 32 * v))),
                            typ=word, align=2) for v in range(nr // lanes)]
        b_vecs = [bld.bitcast(w, pair_type) for w in b_words]
        dot = lt.intrinsic(kernel.llmod, "x86.avx512bf16.dpbf16ps.512", [], lt.vector(lt.F32, 16),
                           [lt.vector(lt.F32, 16), pair_type, pair_type])
        new = []
        for row, row_acc in zip(rows, acc):
            a_off = bld.add(bld.add(bld.mul(row, ir.Constant(lt.I32, k_dim)),
                                    bld.mul(kp, ir.Constant(lt.I32, 2))), ir.Constant(lt.I32, batch * m * k_dim))
            a_pair = bld.load(kernel.chunks.element_pointer(a, a_off), typ=lt.I32, align=2)
            a_vec = bld.bitcast(ctx.splat(a_pair), pair_type)
            new.append([bld.call(dot, [av, a_vec, bv]) for bv, av in zip(b_vecs, row_acc)])
        return new

    kernel.counted_loop(m // mr, tile)


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
