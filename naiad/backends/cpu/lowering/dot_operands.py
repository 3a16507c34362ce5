"""Dot operands copied into buffers (`operand_buffer`), which the CPU's ``tt.dot`` (`matmul`,
`amx_matmul`) multiplies from; and B with its rows interleaved in groups of 2 or 4
(`grouped_rows`, `loaded_in_groups`), the layout of the instructions that multiply several k
at once, whose elements `grouped_offset` finds."""

from __future__ import annotations

from typing import Any, Callable

import llvmlite.ir as ir

from naiad.backends.cpu.lowering import memory
from naiad.backends.cpu.lowering.affine_tiles import affine_tile, runs_down
from naiad.backends.cpu.lowering.block_pointers import is_block_pointer
from naiad.backends.cpu.lowering.column_blocks import (copy_in_squares, grouped_in_squares, operand_load,
                                                       square_runs, word_runs)
from naiad.backends.cpu.lowering.next_trip import next_step, prefetch
from naiad.backends.cpu.lowering.tiles import Buffer, numel, shape_of
from naiad.codegen import llvm_types as lt
from naiad.ir import tt


def operand_buffer(kernel: Any, value: Any, into: Buffer | None = None) -> Buffer:
    """A dot operand, in a buffer (``into`` when given: a slot of `k_panels`); a load is copied
    in chunk by chunk, as fast as it can be.

    The operands of a matmul are nearly always rows of consecutive elements: where the axis
    information proves it (`KernelLowering.consecutive`) each chunk is one vector load, or else
    it is checked at run time (the pointers may still be consecutive, which is cheaper to test
    than to gather); and a loop's next trip is prefetched (`next_step`): reading another part
    of a large matrix, rows apart, each trip stalls on memory otherwise.  A load that tests
    whole at run time is copied as strided rows instead (`_whole_tile_or_chunks`), through a
    pointer tensor or a block pointer alike.  An operand whose columns run consecutively in
    memory -- a load down its columns, ``tl.trans`` of a load of rows -- is copied a square at a
    time (`column_blocks`)."""
    held = kernel.lookup(value)
    if isinstance(held, Buffer):
        return kernel.materialize(value, into)
    load = held.op
    lanes = kernel.chunk_lanes(numel(value.type))
    loaded = isinstance(load, tt.LoadOp)
    runs = square_runs(kernel, value, lanes)
    if runs is None and (not loaded or lanes == 1):
        return kernel.materialize(value, into)
    target = into or kernel.buffer(value.type)
    if runs is None:
        _copy_rows(kernel, value, load, target)
    else:
        copy_in_squares(kernel, value, lanes, runs, target, (lambda: _copy_rows(kernel, value, load, target))
                        if loaded else (lambda: kernel.materialize(value, target)))
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
            prefetch(kernel, address, step, lt.byte_size(tile.element))
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
        prefetch(kernel, first, step, size)

    def emit(contiguous: bool) -> ir.Value:
        return memory.emit_load(kernel, load, addresses, mask, passthru, lanes, contiguous)

    if consecutive:
        return emit(True)
    ramp = ir.Constant(lt.vector(lt.I64, lanes), [k * size for k in range(lanes)])
    equal = b.icmp_unsigned("==", addresses, b.add(ctx.splat(first), ramp))
    all_equal = lt.all_lanes(b, kernel.llmod, equal)
    return kernel.choose(all_equal, lambda: emit(True), lambda: emit(False), passthru.type)


def loaded_in_groups(kernel: Any, value: Any, group: int, into: Buffer | None = None) -> Buffer | None:
    """B (``K x N``) loaded straight into `grouped_rows`' layout (into ``into`` when given), one
    pass instead of a copy and a second pass over it, when it is a load the dot alone uses: of
    rows, each group of rows' chunks read and interleaved as they arrive; down its columns or
    turned over by ``tl.trans``, a square of words at a time (`column_blocks.grouped_in_squares`).
    Else None."""
    load = operand_load(kernel, value)
    if load is None or kernel.uses.get(value) != (1, False) or kernel.bounds_check:
        return None
    k_dim, n = shape_of(value.type)
    runs = word_runs(kernel, value, group)
    if runs is not None:
        grouped = into or kernel.buffer(value.type)

        def otherwise() -> None:
            rows = kernel.buffer(value.type)
            if load.results[0] is value:
                _copy_rows(kernel, value, load, rows)
            else:
                kernel.materialize(value, rows)
            grouped_rows(kernel, rows, 1, k_dim, n, group, grouped)

        grouped_in_squares(kernel, value, group, runs, grouped, otherwise)
        return grouped
    if load.results[0] is not value or runs_down(kernel, load) or not _in_runs(kernel, load, 16):
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
