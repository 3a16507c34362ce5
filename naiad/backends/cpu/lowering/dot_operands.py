"""Dot operands copied into buffers (`operand_buffer`), which the CPU's ``tt.dot`` (`matmul`,
`amx_matmul`) multiplies from; and B with its rows interleaved in groups of 2 or 4
(`grouped_rows`, `loaded_in_groups`), the layout of the instructions that multiply several k
at once, whose elements `grouped_offset` finds."""

from __future__ import annotations

from typing import Any, Callable

import llvmlite.ir as ir
from xdsl.dialects import scf
from xdsl.ir import BlockArgument

from naiad.backends.cpu.lowering import memory
from naiad.backends.cpu.lowering.affine_tiles import AffineTile, affine_tile, runs_down
from naiad.backends.cpu.lowering.block_pointers import is_block_pointer
from naiad.backends.cpu.lowering.tiles import Buffer, Lazy, numel, shape_of
from naiad.codegen import llvm_types as lt
from naiad.ir import arith, tt
from naiad.passes.effects import defined_outside


def operand_buffer(kernel: Any, value: Any, into: Buffer | None = None) -> Buffer:
    """A dot operand, in a buffer (``into`` when given: a slot of `k_panels`); a load is copied
    in chunk by chunk, as fast as it can be.

    The operands of a matmul are nearly always rows of consecutive elements: where the axis
    information proves it (`KernelLowering.consecutive`) each chunk is one vector load, or else
    it is checked at run time (the pointers may still be consecutive, which is cheaper to test
    than to gather); and a loop's next trip is prefetched (`next_step`): reading another part
    of a large matrix, rows apart, each trip stalls on memory otherwise.  A load that tests
    whole at run time is copied as strided rows instead (`_whole_tile_or_chunks`), through a
    pointer tensor or a block pointer alike."""
    held = kernel.lookup(value)
    if isinstance(held, Buffer):
        return kernel.materialize(value, into)
    load = held.op
    lanes = kernel.chunk_lanes(numel(value.type))
    turned = _turned_load(kernel, load, lanes)
    if turned is not None:
        target = into or kernel.buffer(value.type)
        _turned_copy(kernel, value, turned, lanes, target)
        kernel.remember(value, target)
        return target
    if not isinstance(load, tt.LoadOp) or lanes == 1:
        return kernel.materialize(value, into)
    target = into or kernel.buffer(value.type)
    if down_columns(kernel, load, lanes):
        _transposed_copy(kernel, value, load, lanes, target)
    else:
        _copy_rows(kernel, value, load, target)
    kernel.remember(value, target)
    return target


def _copy_rows(kernel: Any, value: Any, load: Any, target: Buffer) -> None:
    """``load``'s block into ``target`` chunk by chunk along its rows: each a vector load where
    the rows are consecutive (`_whole_tile_or_chunks`), else as its pointers have it."""
    chunk = copy_lanes(kernel, value, load)
    step = next_step(kernel, load)

    def copy_with(read: Callable[[ir.Value], ir.Value]) -> None:
        def copy(i: ir.Value) -> None:
            index = kernel.b.mul(i, ir.Constant(lt.I32, chunk))
            kernel.chunks.store_chunk(target, index, read(index))

        kernel.counted_loop(numel(value.type) // chunk, copy)

    _whole_tile_or_chunks(kernel, load, chunk, step, copy_with, _by_chunks(kernel, value, load, chunk, step))


def _by_chunks(kernel: Any, value: Any, load: Any, lanes: int, step: ir.Value | None) -> Callable[[ir.Value], ir.Value]:
    """``read(index)``: ``load``'s ``lanes`` elements from ``index``, each chunk's addresses and
    mask worked out as the load's kind of pointer has them (`block_pointers` or `load_chunk`)."""
    if is_block_pointer(load.ptr):
        return lambda index: kernel.chunks.value_at(value, index, lanes)
    consecutive = kernel.consecutive(load.ptr, lanes)
    return lambda index: load_chunk(kernel, load, index, lanes, consecutive, step)


def _in_runs(kernel: Any, load: Any, lanes: int) -> bool:
    """Whether each chunk of ``lanes`` elements ``load`` reads is consecutive in memory: by the
    axis information, or (a block pointer) by its innermost stride, the constant 1, where the
    chunk lies within a row."""
    if is_block_pointer(load.ptr):
        return kernel.lookup(load.ptr).unit_stride and shape_of(load.results[0].type)[-1] % lanes == 0
    return kernel.consecutive(load.ptr, lanes)


def _whole_tile_or_chunks(kernel: Any, load: Any, lanes: int, step: ir.Value | None,
                          run: Callable[[Callable[[ir.Value], ir.Value]], None],
                          by_chunks: Callable[[ir.Value], ir.Value]) -> None:
    """``run(read)``, ``read(index)`` giving ``load``'s ``lanes`` elements from ``index``: where
    the load tests whole at run time (`affine_tiles`: rows a stride apart, nothing masked off),
    one vector load at an address worked out from the row and column, else ``by_chunks``.

    Through pointer tensors, only for elements narrower than 4 bytes: a chunk of 32 or 64 of
    them takes two or four mask compares and their merging, where fp32's takes one, and fp32
    matmuls of 1024-2048^3 ran 3-8 % slower with the test than without it (512^3: 5-10 %
    faster; docs/PERFORMANCE.md, session 31).  Through block pointers, whose chunks work out
    every lane's position and bounds, always."""
    element_bytes = lt.byte_size(lt.memory_type(load.results[0].type))
    wanted = (is_block_pointer(load.ptr) or element_bytes < 4) and not runs_down(kernel, load)
    tile = affine_tile(kernel, load) if wanted else None
    if tile is None:
        run(by_chunks)
        return

    def whole(index: ir.Value) -> ir.Value:
        address, chunk = tile.chunk(kernel, index, lanes)
        if step is not None:
            _prefetch(kernel, address, step, lt.byte_size(tile.element))
        return chunk

    kernel.choose(tile.whole, lambda: run(whole), lambda: run(by_chunks), None)


def copy_lanes(kernel: Any, value: Any, load: Any) -> int:
    """Elements of each chunk an operand is copied in: a whole vector register of narrower data
    (twice the fp32 lanes of 16-bit data, four times of 8-bit) where its rows are consecutive
    runs that long -- fewer chunks, each with its address, mask and prefetch to work out (bf16
    matmuls of 32-wide tiles: 8 % faster; int8's A: 17 % of the time went to 16-byte chunks)
    -- else a chunk as `KernelLowering.for_each_chunk` takes them."""
    shape = shape_of(value.type)
    lanes = kernel.row_lanes(shape)
    size = lt.byte_size(lt.memory_type(value.type))
    wide = lanes * 4 // size
    if size < 4 and lanes == kernel.lanes and shape[-1] % wide == 0 and _in_runs(kernel, load, wide):
        return wide
    return lanes


def down_columns(kernel: Any, load: Any, lanes: int) -> bool:
    """Whether the 2-D block ``load`` reads runs of consecutive elements down its columns and
    not along its rows (`affine_tiles.runs_down`: attention's K read as Kᵀ, a linear layer's
    weight as Wᵀ), in whole chunks of ``lanes`` both ways.  Not under bounds checks, whose
    checked loads take the chunks as they come."""
    shape = shape_of(load.results[0].type)
    if len(shape) != 2 or shape[0] % lanes or shape[1] % lanes or kernel.bounds_check \
            or not runs_down(kernel, load):
        return False
    return is_block_pointer(load.ptr) or kernel.axis_info(load.ptr).contiguity[0] % lanes == 0


def _transposed_copy(kernel: Any, value: Any, load: Any, lanes: int, target: Buffer) -> None:
    """``load``'s block (see `down_columns`) into ``target`` a square at a time (`_squares`).
    A masked load, or one through a block pointer, does so where it tests whole at run time
    (`affine_tiles`: columns one stride apart, nothing masked off or out of bounds), else it
    is copied along its rows as its pointers and mask, or its block pointer, have it."""
    bld = kernel.b
    cols = shape_of(value.type)[1]
    if load.mask is None and not is_block_pointer(load.ptr):
        _squares(kernel, value, lanes, target, lambda r, c: kernel.chunks.value_at(
            load.ptr, bld.add(bld.mul(r, ir.Constant(lt.I32, cols)), c), 1))
        return
    tile = affine_tile(kernel, load)
    if tile is None:
        _copy_rows(kernel, value, load, target)
        return
    kernel.choose(tile.whole, lambda: _squares(kernel, value, lanes, target, _down_from(kernel, tile)),
                  lambda: _copy_rows(kernel, value, load, target), None)


def operand_load(kernel: Any, value: Any) -> Any | None:
    """The ``tt.load`` whose block dot operand ``value`` is -- the load itself, or its 2-D block
    turned over by ``tl.trans`` (``tl.dot(x, tl.trans(w))``, ``w`` loaded ``[N, K]``) -- where
    each is still to be computed where it is used (`Lazy`); else None."""
    held = kernel.lookup(value)
    if not isinstance(held, Lazy):
        return None
    op = held.op
    if isinstance(op, tt.TransOp) and list(op.order.get_values()) == [1, 0]:
        held = kernel.lookup(op.src)
        op = held.op if isinstance(held, Lazy) else None
    return op if isinstance(op, tt.LoadOp) else None


def _turned_load(kernel: Any, op: Any, lanes: int) -> Any | None:
    """The load whose block ``op`` turns over (`operand_load`), where ``op`` is a ``tl.trans``
    and squares of ``lanes`` tile its result; else None."""
    if not isinstance(op, tt.TransOp) or lanes == 1 or kernel.bounds_check:
        return None
    load = operand_load(kernel, op.result)          # a 2-D block: ``tl.trans`` of order [1, 0]
    return load if load is not None and all(d % lanes == 0 for d in shape_of(op.result.type)) else None


def _turned_copy(kernel: Any, value: Any, load: Any, lanes: int, target: Buffer) -> None:
    """``tl.trans`` (``value``) of ``load``'s rows into ``target`` a square at a time
    (`_squares`): each of the load's rows, a column of ``value``, read with vector loads --
    where the axis information proves the rows consecutive and nothing is masked, or the
    load tests whole at run time (`affine_tiles`); else element by element as before."""
    bld = kernel.b
    rows = shape_of(value.type)[0]                     # the length of the load's rows
    if load.mask is None and not is_block_pointer(load.ptr) and kernel.axis_info(load.ptr).contiguity[1] % lanes == 0:
        _squares(kernel, value, lanes, target, lambda r, c: kernel.chunks.value_at(
            load.ptr, bld.add(bld.mul(c, ir.Constant(lt.I32, rows)), r), 1))
        return
    tile = affine_tile(kernel, load)
    if tile is None or tile.down:
        kernel.materialize(value, target)
        return
    kernel.choose(tile.whole, lambda: _squares(kernel, value, lanes, target, _down_from(kernel, tile)),
                  lambda: kernel.materialize(value, target), None)


def _down_from(kernel: Any, tile: AffineTile) -> Callable[[ir.Value, ir.Value], ir.Value]:
    """The address of element ``(r, c)`` of a block whose columns lie one after another in
    memory, one ``tile.stride`` apart: a load down its columns, or one of rows turned over."""
    bld = kernel.b
    size = ir.Constant(lt.I64, lt.byte_size(tile.element))

    def at(r: ir.Value, c: ir.Value) -> ir.Value:
        along = bld.mul(bld.zext(c, lt.I64), tile.stride)
        return bld.add(bld.add(tile.base, along), bld.mul(bld.zext(r, lt.I64), size))

    return at


def _squares(kernel: Any, value: Any, lanes: int, target: Buffer,
             element_at: Callable[[ir.Value, ir.Value], ir.Value]) -> None:
    """``value``'s block, whose columns run consecutively in memory, into ``target``, read
    ``lanes`` columns at a time: a vector load down each column (``element_at(row, column)``
    the address of an element, an i64), the ``lanes x lanes`` square turned over in registers
    (`_transpose_square`), a vector store along each row -- instead of a gather per chunk."""
    bld = kernel.b
    rows, cols = shape_of(value.type)
    element = lt.memory_type(value.type)
    size = lt.byte_size(element)
    vtype = lt.vector(element, lanes)

    def square(index: ir.Value) -> None:            # index: row block * (cols / lanes) + column block
        r0 = bld.mul(bld.udiv(index, ir.Constant(lt.I32, cols // lanes)), ir.Constant(lt.I32, lanes))
        c0 = bld.mul(bld.urem(index, ir.Constant(lt.I32, cols // lanes)), ir.Constant(lt.I32, lanes))
        columns = [bld.load(bld.inttoptr(element_at(r0, bld.add(c0, ir.Constant(lt.I32, j))), lt.PTR),
                            typ=vtype, align=size) for j in range(lanes)]
        first = bld.add(bld.mul(r0, ir.Constant(lt.I32, cols)), c0)
        for i, row in enumerate(_transpose_square(bld, columns)):
            place = bld.add(first, ir.Constant(lt.I32, i * cols))
            bld.store(row, kernel.chunks.element_pointer(target, place), align=size)

    kernel.counted_loop(rows * cols // (lanes * lanes), square)


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


def next_step(kernel: Any, load: Any) -> ir.Value | None:
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


def load_chunk(kernel: Any, load: Any, index: ir.Value, lanes: int, consecutive: bool,
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
        _prefetch(kernel, first, step, size)

    def emit(contiguous: bool) -> ir.Value:
        return memory.emit_load(kernel, load, addresses, mask, passthru, lanes, contiguous)

    if consecutive:
        return emit(True)
    ramp = ir.Constant(lt.vector(lt.I64, lanes), [k * size for k in range(lanes)])
    equal = b.icmp_unsigned("==", addresses, b.add(ctx.splat(first), ramp))
    all_equal = lt.all_lanes(b, kernel.llmod, equal)
    return kernel.choose(all_equal, lambda: emit(True), lambda: emit(False), passthru.type)


def _prefetch(kernel: Any, address: ir.Value, step: ir.Value, size: int) -> None:
    """Ask for the line the next trip reads, ``step`` elements of ``size`` bytes past ``address``."""
    b = kernel.b
    ahead = b.inttoptr(b.add(address, b.mul(step, ir.Constant(lt.I64, size))), lt.PTR)
    prefetch = lt.intrinsic(kernel.llmod, "prefetch", [lt.PTR], lt.VOID, [lt.PTR, lt.I32, lt.I32, lt.I32])
    b.call(prefetch, [ahead, ir.Constant(lt.I32, 0), ir.Constant(lt.I32, 3),
                      ir.Constant(lt.I32, 1)])             # read, keep in cache, data


def loaded_in_groups(kernel: Any, value: Any, group: int, into: Buffer | None = None) -> Buffer | None:
    """B (``K x N``) loaded straight into `grouped_rows`' layout (into ``into`` when given) --
    each group of rows' chunks read and interleaved as they arrive, one pass instead of a copy
    and a second pass over it -- when it is a load of rows the dot alone uses; else None."""
    held = kernel.lookup(value)
    if not isinstance(held, Lazy) or not isinstance(held.op, tt.LoadOp) \
            or kernel.uses.get(value) != (1, False) or kernel.bounds_check:
        return None
    load = held.op
    k_dim, n = shape_of(value.type)
    if down_columns(kernel, load, 16) or not _in_runs(kernel, load, 16):
        return None
    step = next_step(kernel, load)
    lanes = copy_lanes(kernel, value, load)
    target = into or kernel.buffer(value.type)
    _whole_tile_or_chunks(kernel, load, lanes, step,
                          lambda read: _interleaved(kernel, value.type, k_dim, n, group,
                                                    lambda index, _: read(index), lanes, target),
                          _by_chunks(kernel, value, load, lanes, step))
    return target


def grouped_rows(kernel: Any, b_: Buffer, batch: int, k_dim: int, n: int, group: int,
                 into: Buffer | None = None) -> Buffer:
    """A copy of B (``[batch,] K x N``, into ``into`` when given) whose rows are interleaved
    ``group`` by ``group``:
    element ``(k, j)`` at ``(k // group * N + j) * group + k % group``, so that one 512-bit load
    holds 16 columns' groups of consecutive k, as the grouped products of `matmul` multiply them."""
    row = lt.vector(lt.scalar(b_.mlir_type), 16)
    return _interleaved(kernel, b_.mlir_type, batch * k_dim, n, group, lambda index, lanes: kernel.b.load(
        kernel.chunks.element_pointer(b_, index), typ=row, align=1), into=into)


def _interleaved(kernel: Any, mlir_type: Any, rows: int, n: int, group: int, chunk: Any,
                 width: int = 16, into: Buffer | None = None) -> Buffer:
    """A new buffer of ``mlir_type`` (or ``into``) holding ``rows`` rows of ``n`` elements interleaved
    ``group`` by ``group`` (`grouped_rows`), ``chunk(index, width)`` giving the ``width``
    elements from linear element ``index`` (16, or a whole 512-bit register of them where rows
    allow, `copy_lanes`: fewer chunks to read)."""
    bld = kernel.b
    out = into or kernel.buffer(mlir_type)

    def rows_of_group(first_row: ir.Value) -> None:
        start = bld.mul(first_row, ir.Constant(lt.I32, group * n))

        def columns(g: ir.Value) -> None:
            first = bld.add(start, bld.mul(g, ir.Constant(lt.I32, width)))
            parts = [chunk(bld.add(first, ir.Constant(lt.I32, r * n)), width) for r in range(group)]
            place = bld.add(start, bld.mul(g, ir.Constant(lt.I32, group * width)))
            bld.store(_interleave(bld, parts), kernel.chunks.element_pointer(out, place), align=1)

        kernel.counted_loop(n // width, columns)

    kernel.counted_loop(rows // group, rows_of_group)
    return out


def _interleave(bld: ir.IRBuilder, parts: list[ir.Value]) -> ir.Value:
    """Vectors ``v0 .. v(g-1)`` (``g`` a power of two) as one: ``v0[0] v1[0] .. v(g-1)[0]
    v0[1] ..``.  Each round interleaves neighbours element by element, then takes each pair as
    one element twice as wide, so the next round moves them together."""
    while len(parts) > 1:
        count = lt.lanes_of(parts[0].type)
        order = ir.Constant(lt.vector(lt.I32, 2 * count), [i // 2 + count * (i % 2) for i in range(2 * count)])
        bits = 2 * lt.byte_size(lt.scalar_of(parts[0].type)) * 8
        parts = [bld.bitcast(bld.shuffle_vector(lo, hi, order), lt.vector(ir.IntType(bits), count))
                 for lo, hi in zip(parts[::2], parts[1::2])]
    return parts[0]


def grouped_offset(bld: ir.IRBuilder, kg: ir.Value, j0: ir.Value, column: int, n: int, group: int,
                    first_row: int) -> ir.Value:
    """The element of `grouped_rows`' buffer where row group ``kg``'s columns from ``j0 +
    column`` start (rows counted from ``first_row``, a batch's first)."""
    row_group = bld.add(kg, ir.Constant(lt.I32, first_row // group))
    return bld.mul(bld.add(bld.add(bld.mul(row_group, ir.Constant(lt.I32, n)), j0), ir.Constant(lt.I32, column)),
                   ir.Constant(lt.I32, group))
