"""Dot operands whose columns lie consecutively in memory, copied a square at a time.

The CPU's dot (`matmul`, `amx_matmul`) multiplies from buffers of rows.  Some operands arrive
the other way round: attention's K read as Kᵀ (``k[d, n]`` at ``n * D + d``), a linear layer's
weight ``w`` stored ``[N, K]`` and read as ``wᵀ`` -- through strides ``(1, K)``, a block
pointer over a transposed view, or rows of ``w`` turned over by ``tl.trans``.  Copied chunk by
chunk along the rows, each chunk was a gather of elements a row apart: ``x @ wᵀ`` ran at
0.33-0.58x numpy in fp32 and 0.15-0.36x torch in bf16 (docs/PERFORMANCE.md, session 33).
Here each column is one vector load, a square of ``lanes x lanes`` elements is turned over in
registers and stored as rows (`copy_in_squares`).  For the layout of bf16 and int8 products
(`dot_operands.grouped_rows`: each 32-bit word a group of consecutive k of one column) the
words of a column are consecutive in memory already, so the words' square is turned over
instead and the block lands in that layout in one pass (`grouped_in_squares`).

Which blocks are read this way (`column_runs`): a load whose axis information says it runs
down its columns (`affine_tiles.runs_down`), or ``tl.trans`` of a load of rows -- unmasked
where the axis information proves the runs long enough, else where the load tests whole at
run time (`affine_tiles.affine_tile`: columns one stride apart, nothing masked off or out of a
block pointer's bounds), the caller's own copy running otherwise.  Not under bounds checks,
whose checked loads take the chunks as they come.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import llvmlite.ir as ir

from naiad.backends.cpu.lowering.affine_tiles import affine_tile, runs_down
from naiad.backends.cpu.lowering.block_pointers import is_block_pointer
from naiad.backends.cpu.lowering.next_trip import next_step, prefetch
from naiad.backends.cpu.lowering.tiles import Buffer, Lazy, shape_of
from naiad.codegen import llvm_types as lt
from naiad.ir import tt


@dataclasses.dataclass(frozen=True)
class ColumnRuns:
    """How a block whose columns run consecutively in memory is read: ``element_at(row,
    column)`` (i32s) the address of an element (an i64), valid where ``whole`` (an i1 tested at
    run time; None where the axis information proved it); ``ahead`` the bytes the block of the
    loop's next trip lies past this one (`next_trip.next_step`), None where not known."""

    whole: ir.Value | None
    element_at: Callable[[ir.Value, ir.Value], ir.Value]
    ahead: ir.Value | None


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


def column_runs(kernel: Any, value: Any, run: int) -> ColumnRuns | None:
    """How ``value``'s 2-D block is read down its columns, each in runs of ``run`` consecutive
    elements at least (see the module's docstring); None where it is not such a block."""
    load = operand_load(kernel, value)
    if load is None or kernel.bounds_check or len(shape_of(value.type)) != 2:
        return None
    turned = load.results[0] is not value
    if not turned and not runs_down(kernel, load):
        return None
    bld = kernel.b
    rows, cols = shape_of(value.type)
    step = next_step(kernel, load)
    ahead = None if step is None else \
        bld.mul(step, ir.Constant(lt.I64, lt.byte_size(lt.memory_type(load.results[0].type))))
    if load.mask is None and not is_block_pointer(load.ptr):
        contiguity = kernel.axis_info(load.ptr).contiguity
        if (contiguity[1] if turned else contiguity[0]) % run == 0:
            def pointer_at(r: ir.Value, c: ir.Value) -> ir.Value:
                index = bld.add(bld.mul(c, ir.Constant(lt.I32, rows)), r) if turned \
                    else bld.add(bld.mul(r, ir.Constant(lt.I32, cols)), c)
                return kernel.chunks.value_at(load.ptr, index, 1)

            return ColumnRuns(None, pointer_at, ahead)
    tile = affine_tile(kernel, load)
    if tile is None or tile.down == turned:
        return None
    if turned:                              # element (r, c) is the load's (c, r)
        return ColumnRuns(tile.whole, lambda r, c: tile.address(kernel, c, r), ahead)
    return ColumnRuns(tile.whole, lambda r, c: tile.address(kernel, r, c), ahead)


def square_runs(kernel: Any, value: Any, lanes: int) -> ColumnRuns | None:
    """`column_runs` of ``value``'s block where squares of ``lanes x lanes`` tile it."""
    shape = shape_of(value.type)
    if lanes == 1 or len(shape) != 2 or shape[0] % lanes or shape[1] % lanes:
        return None
    return column_runs(kernel, value, lanes)


def copy_in_squares(kernel: Any, value: Any, lanes: int, runs: ColumnRuns, target: Buffer,
                    otherwise: Callable[[], None]) -> None:
    """``value``'s block into ``target`` a square of ``lanes x lanes`` at a time, read as
    ``runs`` (`square_runs`) says -- ``otherwise()`` where it turns out at run time not to be."""
    rows, cols = shape_of(value.type)
    element = lt.memory_type(value.type)
    _under(kernel, runs, lambda: _squares(kernel, rows, cols, element, lanes, runs, lt.byte_size(element),
                                          lambda place: kernel.chunks.element_pointer(target, place)), otherwise)


def word_runs(kernel: Any, value: Any, group: int) -> ColumnRuns | None:
    """`column_runs` of B (``value``, ``K x N``) as 32-bit words of ``group`` consecutive k,
    where 16 x 16 words tile it."""
    shape = shape_of(value.type)
    if lt.byte_size(lt.memory_type(value.type)) * group != 4 or len(shape) != 2 or shape[0] % (16 * group) \
            or shape[1] % 16:
        return None
    return column_runs(kernel, value, 16 * group)


def grouped_in_squares(kernel: Any, value: Any, group: int, runs: ColumnRuns, target: Buffer,
                       otherwise: Callable[[], None]) -> None:
    """B (``value``, ``K x N``) into ``target`` in `dot_operands.grouped_rows`' layout -- each
    32-bit word there ``group`` consecutive k of one column -- read as ``runs`` (`word_runs`)
    says: the block of words turned over, 16 x 16 words a square; ``otherwise()`` where it
    turns out at run time not to be."""
    k_dim, n = shape_of(value.type)
    bld = kernel.b

    def word_at(r: ir.Value, c: ir.Value) -> ir.Value:
        return runs.element_at(bld.mul(r, ir.Constant(lt.I32, group)), c)

    def words() -> None:
        _squares(kernel, k_dim // group, n, lt.I32, 16, dataclasses.replace(runs, element_at=word_at), 4 // group,
                 lambda place: kernel.chunks.element_pointer(target, bld.mul(place, ir.Constant(lt.I32, group))))

    _under(kernel, runs, words, otherwise)


def _under(kernel: Any, runs: ColumnRuns, copy: Callable[[], Any], otherwise: Callable[[], None]) -> None:
    """``copy()`` where ``runs`` holds (always, or as tested at run time), else ``otherwise()``."""
    if runs.whole is None:
        copy()
    else:
        kernel.choose(runs.whole, copy, otherwise, None)


def _squares(kernel: Any, rows: int, cols: int, element: ir.Type, lanes: int, runs: ColumnRuns, align: int,
             place_at: Callable[[ir.Value], ir.Value]) -> None:
    """A ``rows x cols`` block of ``element``s whose columns run consecutively in memory into
    rows, read ``lanes`` columns at a time: a vector load down each column (``runs.element_at(row,
    column)`` the address of an element, an i64, aligned to ``align`` bytes; the next trip's
    asked for, ``runs.ahead``), the ``lanes x lanes`` square turned over in registers
    (`_transpose_square`), a vector store along each row (``place_at(index)`` the pointer of the
    row-major element ``index``) -- instead of a gather per chunk."""
    bld = kernel.b
    size = lt.byte_size(element)
    vtype = lt.vector(element, lanes)

    def column(address: ir.Value) -> ir.Value:
        if runs.ahead is not None:
            prefetch(kernel, address, runs.ahead, 1)
        return bld.load(bld.inttoptr(address, lt.PTR), typ=vtype, align=align)

    def square(index: ir.Value) -> None:            # index: row block * (cols / lanes) + column block
        r0 = bld.mul(bld.udiv(index, ir.Constant(lt.I32, cols // lanes)), ir.Constant(lt.I32, lanes))
        c0 = bld.mul(bld.urem(index, ir.Constant(lt.I32, cols // lanes)), ir.Constant(lt.I32, lanes))
        columns = [column(runs.element_at(r0, bld.add(c0, ir.Constant(lt.I32, j)))) for j in range(lanes)]
        first = bld.add(bld.mul(r0, ir.Constant(lt.I32, cols)), c0)
        for i, row in enumerate(_transpose_square(bld, columns)):
            bld.store(row, place_at(bld.add(first, ir.Constant(lt.I32, i * cols))), align=size)

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
