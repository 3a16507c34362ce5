"""2-D loads found, at run time, to read rows of consecutive elements one stride apart with
nothing masked off: the operand copies of a dot then run as plain strided copies.

A matmul kernel's operand load is ``ptr + rows[:, None] * stride + cols[None, :]`` under a mask
``(rows[:, None] < M) & (cols[None, :] < K)``.  Evaluated chunk by chunk (`ChunkEmitter`), each
chunk works out its row and column index, its addresses and its mask lane by lane: some 25
instructions a 64-byte chunk, which an int8 copy (64 elements a chunk, a mask bit each) feels
(docs/PERFORMANCE.md, session 31: int8 matmuls 1.05-1.3x).  Both the address and the mask of
such a load *separate*: the address is a sum of terms that vary along one axis only
(broadcasts of ``[R, 1]`` and ``[1, C]`` tensors) or none (splats), and the mask an ``and`` of
such terms.  So the row terms are evaluated once per row and the column terms once per column,
a vector of each at a time, and checked: rows one stride apart, columns one element apart,
every mask term true.  Where they are (`AffineTile.whole`), element ``(i, j)`` is at ``base +
i * row_stride + j * size`` and nothing is masked off; elsewhere the chunk-by-chunk copy runs
as before.  A load through a block pointer (``tl.make_block_ptr``, tensor descriptors) is
whole where its block lies inside the bounds it checks (`_block_tile`): its chunks otherwise
work out every lane's position and bounds, and such matmuls ran at 0.4-0.6x the same kernel
through pointer tensors.

Only values still to be computed where they are used (`Lazy`) are taken apart, or held ones
that read no memory all the way down (`_taken_apart`): one held in a buffer was computed
earlier, perhaps before a store its terms would now read past -- but index arithmetic alone
(Triton's tutorial matmul holds B's pointers before its K loop, their column term a ``%`` too
costly to compute again each trip) comes out the same at every point.  Offsets
are added in their own integer width by the kernel (``int32`` wraps) and here in 64 bits, so
each offset's row, column and fixed parts are checked to stay within a third of that width's
range: their sum then never wraps, and the two agree.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import llvmlite.ir as ir
from xdsl.ir import Operation, SSAValue

from naiad.backends.cpu.lowering.block_pointers import BlockPointer, is_block_pointer
from naiad.backends.cpu.lowering.tiles import Lazy, shape_of
from naiad.codegen import llvm_types as lt
from naiad.ir import arith, tt
from naiad.passes.effects import is_pure


@dataclasses.dataclass
class _Sum:
    """Terms added in ``width`` bits, the sum counting ``factor`` bytes a unit: ``rows`` vary
    along the first axis (``[R, 1]`` tensors), ``cols`` along the second (``[1, C]``),
    ``fixed`` along neither (scalars, ``[1, 1]`` tensors and constant splats); each term with
    its sign."""

    width: int
    factor: int
    rows: list[tuple[SSAValue, int]] = dataclasses.field(default_factory=list)
    cols: list[tuple[SSAValue, int]] = dataclasses.field(default_factory=list)
    fixed: list[tuple[SSAValue, int]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class AffineTile:
    """A 2-D load's run-time shape: ``whole`` (an i1) when element ``(i, j)`` is at ``base + i *
    stride + j * element size`` (i64 bytes) -- or, ``down`` its columns, at ``base + j * stride
    + i * element size`` -- and its mask, if any, is true everywhere."""

    whole: ir.Value
    base: ir.Value
    stride: ir.Value
    columns: int
    element: ir.Type
    down: bool = False

    def chunk(self, kernel: Any, index: ir.Value, lanes: int) -> tuple[ir.Value, ir.Value]:
        """The address (i64) and the value of the ``lanes`` elements from linear element
        ``index`` (within one row), read with one vector load: valid where ``whole`` holds, for
        a tile of rows (not ``down``)."""
        assert not self.down, "a tile down its columns is read a column at a time"
        bld = kernel.b
        row = bld.udiv(index, ir.Constant(index.type, self.columns))
        column = bld.urem(index, ir.Constant(index.type, self.columns))
        address = self.address(kernel, row, column)
        size = lt.byte_size(self.element)
        value = bld.load(bld.inttoptr(address, lt.PTR), typ=lt.vector(self.element, lanes), align=size)
        return address, value

    def address(self, kernel: Any, row: ir.Value, column: ir.Value) -> ir.Value:
        """The address (i64) of element ``(row, column)`` (unsigned i32s), where ``whole``."""
        bld = kernel.b
        lines, runs = (column, row) if self.down else (row, column)
        return bld.add(bld.add(self.base, bld.mul(bld.zext(lines, lt.I64), self.stride)),
                       bld.mul(bld.zext(runs, lt.I64), ir.Constant(lt.I64, lt.byte_size(self.element))))


def affine_tile(kernel: Any, load: Any) -> AffineTile | None:
    """The run-time test of ``load`` (an unchecked 2-D ``tt.load`` of pointers, or through a
    block pointer), or None where its address or mask does not separate into row and column
    terms.  A load of pointers whose axis information says it runs down its columns
    (`runs_down`: ``b.T`` read as a ``[K, N]`` block of ``[N, K]`` rows) is tested that way."""
    if is_block_pointer(load.ptr):
        return _block_tile(kernel, load) if _block_2d(kernel, load) else None
    separated = _separated(kernel, load)
    if separated is None:
        return None
    sums, masks = separated
    rows, columns = shape_of(load.ptr.type)
    element = lt.memory_type(load.results[0].type)
    size = lt.byte_size(element)
    bld = kernel.b
    checks: list[ir.Value] = []
    row_at = [_axis_total(kernel, sums, "rows", i, rows, checks) for i in range(0, rows, kernel.chunk_lanes(rows))]
    col_at = [_axis_total(kernel, sums, "cols", j, columns, checks)
              for j in range(0, columns, kernel.chunk_lanes(columns))]
    fixed = _axis_total(kernel, sums, "fixed", 0, 1, checks)
    first_row, first_col = (_lane(bld, v[0], 0) for v in (row_at, col_at))
    down = runs_down(kernel, load)
    (lines, line_at, first_line), (_, run_at, first_run) = \
        ((columns, col_at, first_col), (rows, row_at, first_row)) if down else \
        ((rows, row_at, first_row), (columns, col_at, first_col))
    stride = bld.sub(_lane(bld, line_at[0], 1), first_line) if lines > 1 else ir.Constant(lt.I64, 0)
    checks += [_steps_by(kernel, line_at, first_line, stride),
               _steps_by(kernel, run_at, first_run, ir.Constant(lt.I64, size))]
    checks += _masks_true(kernel, masks, rows, columns)
    whole = checks[0]
    for check in checks[1:]:
        whole = bld.and_(whole, check)
    base = bld.add(bld.add(first_row, first_col), fixed)
    return AffineTile(whole, base, stride, columns, element, down)


def runs_down(kernel: Any, load: Any) -> bool:
    """Whether a 2-D load may read runs of consecutive elements down its columns and not along
    its rows (``k[d, n]`` at ``n * D + d``): by the axis information for pointers; for a block
    pointer, where its innermost stride is not the constant 1 (whether the other is 1 is
    tested at run time, `_block_tile`)."""
    if is_block_pointer(load.ptr):
        return _block_2d(kernel, load) and not kernel.lookup(load.ptr).unit_stride
    info = kernel.axis_info(load.ptr)
    return info.contiguity[0] > 1 and info.contiguity[1] == 1


def separates(kernel: Any, load: Any) -> bool:
    """Whether `affine_tile` tests ``load`` at run time (else it gives None), known without
    emitting anything."""
    if is_block_pointer(load.ptr):
        return _block_2d(kernel, load)
    return _separated(kernel, load) is not None


def _separated(kernel: Any, load: Any) -> tuple[list[_Sum], tuple[list, list, list]] | None:
    """The terms of an unchecked 2-D load's address (`_address_sums`) and mask (`_mask_terms`),
    where both separate."""
    if kernel.bounds_check or len(shape_of(load.ptr.type)) != 2:
        return None
    sums = _address_sums(kernel, load.ptr)
    masks = _mask_terms(kernel, load.mask) if load.mask is not None else ([], [], [])
    return None if sums is None or masks is None else (sums, masks)


def _block_2d(kernel: Any, load: Any) -> bool:
    """Whether an unchecked load through a block pointer reads a 2-D block."""
    return not kernel.bounds_check and len(shape_of(load.ptr.type.pointee_type)) == 2


def _block_tile(kernel: Any, load: Any) -> AffineTile:
    """A load through a 2-D block pointer (`_block_2d`): whole where the block lies within the
    bounds of each dimension it checks -- its address is the block pointer's own arithmetic,
    ``base + (offset + i) * stride`` per dimension -- and, where its innermost stride is not the
    constant 1, the other stride is 1 (a block down its columns, `runs_down`)."""
    pointer: BlockPointer = kernel.lookup(load.ptr)
    block = shape_of(load.ptr.type.pointee_type)
    bld = kernel.b
    element = lt.memory_type(load.results[0].type)
    size = ir.Constant(lt.I64, lt.byte_size(element))
    offsets = [o if o.type == lt.I64 else bld.sext(o, lt.I64) for o in pointer.offsets]
    down = not pointer.unit_stride
    whole = bld.icmp_signed("==", pointer.strides[0], ir.Constant(lt.I64, 1)) if down else ir.Constant(lt.I1, 1)
    for dim in load.boundaryCheck.get_values():
        end = bld.add(offsets[dim], ir.Constant(lt.I64, block[dim]))
        inside = bld.and_(bld.icmp_signed(">=", offsets[dim], ir.Constant(lt.I64, 0)),
                          bld.icmp_signed("<=", end, pointer.shape[dim]))
        whole = bld.and_(whole, inside)
    first = bld.add(bld.mul(offsets[0], pointer.strides[0]), bld.mul(offsets[1], pointer.strides[1]))
    return AffineTile(whole, bld.add(pointer.base, bld.mul(first, size)),
                      bld.mul(pointer.strides[1 if down else 0], size), block[1], element, down)


def _address_sums(kernel: Any, value: SSAValue) -> list[_Sum] | None:
    """``value`` (a 2-D tensor of pointers) as sums of separated terms: one `_Sum` for the
    pointers and one for each ``tt.addptr``'s offsets; None where some part varies along both
    axes, or was computed earlier from memory (`_taken_apart`)."""
    top = _Sum(64, 1)
    sums = [top]
    if not _collect(kernel, value, 1, top, sums):
        return None
    return sums


def _taken_apart(kernel: Any, value: SSAValue) -> bool:
    """Whether ``value``'s terms may be computed again where a load uses them: it is still to
    be computed there (`Lazy`), or what holds it read no memory (`_reads_nothing`)."""
    return isinstance(kernel.env.get(value), Lazy) or _reads_nothing(value)


def _reads_nothing(value: SSAValue) -> bool:
    """Whether ``value`` is computed from SSA values by ops that neither read nor write memory,
    all the way down (block arguments the leaves): computed again anywhere it is seen, it is
    the same.  Each op is looked at once, however many paths lead to it."""
    seen: set[int] = set()
    pending = [value]
    while pending:
        op = pending.pop().owner
        if not isinstance(op, Operation) or id(op) in seen:
            continue
        if op.regions or not is_pure(op):
            return False
        seen.add(id(op))
        pending.extend(op.operands)
    return True


def _collect(kernel: Any, value: SSAValue, sign: int, into: _Sum, sums: list[_Sum]) -> bool:
    op = value.owner
    if not _taken_apart(kernel, value):
        return False
    if isinstance(op, tt.AddPtrOp):
        pointee = lt.element(op.ptr.type).pointee_type
        if hasattr(pointee, "element_type"):
            return False
        offsets = _Sum(lt.element(op.offset.type).width.data, sign * into.factor * lt.byte_size(lt.scalar(pointee)))
        sums.append(offsets)
        return _collect(kernel, op.ptr, sign, into, sums) and _collect(kernel, op.offset, 1, offsets, sums)
    if isinstance(op, (arith.AddiOp, arith.SubiOp)):
        rhs_sign = -sign if isinstance(op, arith.SubiOp) else sign
        return _collect(kernel, op.lhs, sign, into, sums) and _collect(kernel, op.rhs, rhs_sign, into, sums)
    axis = _axis_of(value)
    if axis is None:
        return False
    getattr(into, axis).append((value, sign))
    return True


def _axis_of(value: SSAValue) -> str | None:
    """Which axis a 2-D term varies along: a broadcast of a ``[R, 1]`` tensor ("rows"), of a
    ``[1, C]`` one ("cols"), a splat or constant splat ("fixed"); None for anything else."""
    op = value.owner
    if isinstance(op, tt.SplatOp) or (isinstance(op, arith.ConstantOp) and _is_splat(op)):
        return "fixed"
    if not isinstance(op, tt.BroadcastOp):
        return None
    source = shape_of(op.src.type)
    if len(source) != 2:
        return None
    return {(True, True): "fixed", (False, True): "rows", (True, False): "cols"}.get(
        (source[0] == 1, source[1] == 1))


def _is_splat(op: Any) -> bool:
    value = op.value
    return not hasattr(value, "get_values") or len(set(value.get_values())) <= 1


def _mask_terms(kernel: Any, value: SSAValue) -> tuple[list, list, list] | None:
    """A 2-D mask as the ``and`` of terms along rows, columns and neither; None otherwise."""
    op = value.owner
    if not _taken_apart(kernel, value):
        return None
    if isinstance(op, arith.AndIOp):
        left, right = _mask_terms(kernel, op.lhs), _mask_terms(kernel, op.rhs)
        if left is None or right is None:
            return None
        return tuple(a + b for a, b in zip(left, right))
    axis = _axis_of(value)
    if axis is None:
        return None
    terms: tuple[list, list, list] = ([], [], [])
    terms[("rows", "cols", "fixed").index(axis)].append(value)
    return terms


def _along(kernel: Any, term: SSAValue, index: int, lanes: int) -> ir.Value:
    """The ``lanes`` values of a term (of an address or a mask) from row or column ``index``:
    the source of its broadcast, whose elements lie along that axis one after another; a
    splat's or a constant's one value."""
    if isinstance(term.owner, tt.SplatOp):
        return kernel.ctx(lanes).splat(kernel.scalar(term.owner.src))
    source = term.owner.src if isinstance(term.owner, tt.BroadcastOp) else term
    at = 0 if isinstance(term.owner, arith.ConstantOp) else index
    return kernel.chunks.value_at(source, ir.Constant(lt.I32, at), lanes)


def _term(kernel: Any, value: SSAValue, index: int, lanes: int) -> ir.Value:
    """`_along` as i64 (sign-extended), the width addresses are summed in."""
    chunk = _along(kernel, value, index, lanes)
    wide = lt.vector(lt.I64, lanes)
    return chunk if chunk.type == wide else kernel.b.sext(chunk, wide)


def _axis_total(kernel: Any, sums: list[_Sum], axis: str, index: int, count: int,
                checks: list[ir.Value]) -> ir.Value:
    """Byte offsets (i64s) of rows or columns ``index ..`` along ``axis`` ("fixed": the one
    offset of the terms along neither, ``count`` 1): each sum's terms there, times its factor,
    added; notes in ``checks`` that narrow sums keep in range (`_in_width`)."""
    lanes = kernel.chunk_lanes(count)
    ctx = kernel.ctx(lanes)
    total = ctx.const(lt.I64, 0)
    for part in sums:
        terms = getattr(part, axis)
        if not terms:
            continue
        value = ctx.const(lt.I64, 0)
        for term, sign in terms:
            chunk = _term(kernel, term, index, lanes)
            value = kernel.b.add(value, chunk) if sign > 0 else kernel.b.sub(value, chunk)
        if part.width < 64:
            checks.append(_in_width(kernel, value, part))
        total = kernel.b.add(total, kernel.b.mul(value, ctx.const(lt.I64, part.factor)))
    return total


def _in_width(kernel: Any, value: ir.Value, part: _Sum) -> ir.Value:
    """Whether every lane of a narrow sum's part fits a third of its width's range: the three
    parts (rows, columns, neither) of each element's offset then add up without wrapping, so
    the 64-bit sum here is the kernel's own."""
    bld = kernel.b
    limit = 1 << (part.width - 3)
    lanes = lt.lanes_of(value.type)
    ctx = kernel.ctx(lanes)
    shifted = bld.add(value, ctx.const(lt.I64, limit))
    return lt.all_lanes(kernel.b, kernel.llmod, bld.icmp_unsigned("<", shifted, ctx.const(lt.I64, 2 * limit)))


def _steps_by(kernel: Any, chunks: list[ir.Value], first: ir.Value, step: ir.Value) -> ir.Value:
    """Whether the values of ``chunks`` (vectors, one after another) are ``first + i * step``."""
    bld = kernel.b
    lanes = lt.lanes_of(chunks[0].type)
    ok = ir.Constant(lt.I1, 1)
    for c, chunk in enumerate(chunks):
        if lanes == 1:
            want = bld.add(first, bld.mul(step, ir.Constant(lt.I64, c)))
            ok = bld.and_(ok, bld.icmp_unsigned("==", chunk, want))
            continue
        ctx = kernel.ctx(lanes)
        ramp = ir.Constant(lt.vector(lt.I64, lanes), [c * lanes + k for k in range(lanes)])
        want = bld.add(ctx.splat(first), bld.mul(ramp, ctx.splat(step)))
        ok = bld.and_(ok, lt.all_lanes(kernel.b, kernel.llmod, bld.icmp_unsigned("==", chunk, want)))
    return ok


def _masks_true(kernel: Any, masks: tuple[list, list, list], rows: int, columns: int) -> list[ir.Value]:
    """Whether each mask term is true at every row, column, or (neither) its one value."""
    checks = []
    for axis_terms, count in zip(masks, (rows, columns, 1)):
        lanes = kernel.chunk_lanes(count)
        checks += [lt.all_lanes(kernel.b, kernel.llmod, _along(kernel, term, index, lanes))
                   for term in axis_terms for index in range(0, count, lanes)]
    return checks


def _lane(bld: ir.IRBuilder, value: ir.Value, lane: int) -> ir.Value:
    """Lane ``lane`` of a vector (a one-lane value is its own lane 0)."""
    if not isinstance(value.type, ir.VectorType):
        return value
    return bld.extract_element(value, ir.Constant(lt.I32, lane))
