"""GPU rules for reductions and scans.

A reduction along ``axis`` combines a thread's own elements first, then the lanes of a warp that
hold different elements along the axis (butterfly shuffles: every lane ends with the warp's
result), then the warps along the axis through shared memory.  The result has the slice layout
of the operand's, so ``expand_dims`` of it is free (softmax's ``x - max(x)[:, None]``).

A scan whose threads hold distinct elements along the axis works in the same three steps (in
the thread, ``shfl.up`` across lanes, shared memory across warps; mirrored when reversed).
Other layouts (a tensor narrower than the layout's tile along the axis) read the whole tensor
from shared memory and combine, for each element, the elements before it (a loop).
"""

from __future__ import annotations

from typing import Any, Sequence

import llvmlite.ir as ir

from naiad.codegen import elementwise, llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import GPUKernel, is_tensor, numel, rule, shape_of
from naiad.ir import tt


def combine(k: GPUKernel, region: Any, left: Sequence[ir.Value], right: Sequence[ir.Value]) -> list[ir.Value]:
    """Apply a combine region to scalars (its block arguments: the left values, then the right)."""
    return elementwise.apply_region(k.ctx(), region, list(left) + list(right))


def _shuffle(k: GPUKernel, value: ir.Value, offset: Any, up: bool = False, index: bool = False) -> ir.Value:
    """``value`` of the lane ``lane ^ offset`` (``lane - offset`` when ``up``; lane ``offset``,
    an i32, when ``index``), for any scalar type (moved as 32-bit words)."""
    move = k.hooks.shuffle_index if index else k.hooks.shuffle_up if up else k.hooks.shuffle_xor
    t = value.type
    width = lt.bit_width(t)
    as_int = lt.to_bits(k.b, value)
    if width <= 32:
        word = k.b.zext(as_int, lt.I32) if width < 32 else as_int
        moved = move(k.b, word, offset)
        back = k.b.trunc(moved, ir.IntType(width)) if width < 32 else moved
    else:
        low = k.b.trunc(as_int, lt.I32)
        high = k.b.trunc(k.b.lshr(as_int, ir.Constant(lt.I64, 32)), lt.I32)
        low, high = (move(k.b, w, offset) for w in (low, high))
        back = k.b.or_(k.b.zext(low, lt.I64), k.b.shl(k.b.zext(high, lt.I64), ir.Constant(lt.I64, 32)))
    return back if isinstance(t, ir.IntType) else k.b.bitcast(back, t)


@rule(tt.ReduceOp)
def _reduce(k: GPUKernel, op: Any) -> None:
    axis = op.axis.value.data
    operands = list(op.operands)
    results = list(op.results)
    wanted = k.layouts.get(results[0]) if is_tensor(results[0]) else None
    parent = wanted.parent if isinstance(wanted, L.Slice) and wanted.dim == axis else k.layout_of(operands[0])
    inputs = [k.tensor(v, parent) for v in operands]
    shape = inputs[0].shape
    linear = L.linear_of(parent, shape)
    if linear is None:
        blocked, removed = L.blocked_of(parent)
        full_axis = [d for d in range(blocked.rank) if d not in removed][axis]
    else:
        full_axis = axis
    # 1. within the thread
    partial: dict[tuple, list[ir.Value]] = {}
    for i, element in enumerate(L.elements(parent, shape)):
        key = tuple((0, 0) if d == full_axis else item for d, item in enumerate(element))
        vals = [inp.values[i] for inp in inputs]
        partial[key] = vals if key not in partial else combine(k, op.combineOp, partial[key], vals)
    keys = list(partial)
    # 2. across the lanes of a warp (butterflies over the lane bits that move along the axis)
    if linear is None:
        lane_steps, warps, warp_axis = _blocked_steps(k, blocked, L.parent_shape(parent, shape), full_axis)
    else:
        lane_steps, warps, warp_axis = _linear_steps(k, linear, axis)
    for offset in lane_steps:
        for key in keys:
            other = [_shuffle(k, v, offset) for v in partial[key]]
            partial[key] = combine(k, op.combineOp, partial[key], other)
    # 3. across warps, through shared memory
    result_layout = L.Slice(axis, parent)
    result_shape = tuple(s for d, s in enumerate(shape) if d != axis)
    if warps > 1:
        partial = _across_warps(k, op, partial, keys, warp_axis, warps, result_layout,
                                result_shape, [r.type for r in results])
    final = [[partial[key][j] for key in keys] for j in range(len(results))]
    for j, result in enumerate(results):
        if not is_tensor(result):
            k.env[result] = final[j][0]
            continue
        from naiad.codegen.gpu.kernel import Dist

        dist = Dist(result_layout, result_shape, final[j])
        layout = k.layout_of(result)
        k.env[result] = dist if layout == result_layout else k.convert(dist, layout, result.type)


def _blocked_steps(k: GPUKernel, blocked: L.Blocked, full: tuple, axis: int) -> tuple:
    """(lane shuffle offsets, distinct warps, this warp's position) along ``axis`` of a
    blocked layout."""
    lanes, warps = L.distinct_threads(blocked, full, axis)
    stride = 1
    for d in blocked.order:
        if d == axis:
            break
        stride *= blocked.threads_per_warp[d]
    steps = [stride << i for i in range(max(0, lanes.bit_length() - 1))]
    warp_ids = k._split(k.warp, [blocked.warps_per_cta[d] for d in blocked.order])
    # warps past the distinct ones repeat their elements: they write the same slots
    position = k.b.and_(warp_ids[blocked.order.index(axis)], ir.Constant(lt.I32, warps - 1))
    return steps, warps, position


def _linear_steps(k: GPUKernel, linear: L.Linear, axis: int) -> tuple:
    """The same for a `Linear` layout: the lane and warp bits whose bases move along ``axis``."""
    steps = [1 << bit for bit, base in enumerate(linear.lanes) if base[axis]]
    bits = [bit for bit, base in enumerate(linear.warps) if base[axis]]
    position = ir.Constant(lt.I32, 0)
    for i, bit in enumerate(bits):
        flag = k.b.and_(k.b.lshr(k.warp, ir.Constant(lt.I32, bit)), ir.Constant(lt.I32, 1))
        position = k.b.or_(position, k.b.shl(flag, ir.Constant(lt.I32, i)))
    return steps, 1 << len(bits), position


def _across_warps(k: GPUKernel, op: Any, partial: dict, keys: list, warp_axis: ir.Value,
                  warps: int, layout: L.Layout, shape: tuple, types: list) -> dict:
    """Combine the partial results of the ``warps`` warps along the reduced axis (this warp's
    position among them: ``warp_axis``) through shared memory: each warp writes its partials;
    then, for a reduction to one value where a warp has a lane for each partial, each lane reads
    one and butterflies over the lanes combine them, else each thread reads all."""
    count = numel(shape)
    storages = [_element(t) for t in types]
    sizes = [count * warps * lt.byte_size(s) for s in storages]
    offsets = k.shared_regions(sizes)
    coords = k.coordinates(layout, shape) if shape else [[]] * len(keys)
    k.hooks.barrier(k.b)
    for key, c in zip(keys, coords):
        index = k.b.add(k.b.mul(warp_axis, ir.Constant(lt.I32, count)), k.linear(c, shape))
        for j, value in enumerate(partial[key]):
            k.b.store(value, k.shared_pointer(index, storages[j], offsets[j]))
    k.hooks.barrier(k.b)

    def read(w: ir.Value, c: list) -> list[ir.Value]:
        index = k.b.add(k.b.mul(w, ir.Constant(lt.I32, count)), k.linear(c, shape))
        return [k.b.load(k.shared_pointer(index, storages[j], offsets[j]), typ=storages[j])
                for j in range(len(storages))]
    out = {}
    if not shape and warps <= k.warp_size:
        # a whole reduction (every lane holds the one result): lane l reads warp l % warps's
        # partial and butterflies over those lanes give every lane the whole: one read a thread
        # instead of one a warp (and as many registers)
        mine = k.b.and_(k.lane, ir.Constant(lt.I32, warps - 1))
        for key, c in zip(keys, coords):
            total = read(mine, c)
            step = warps // 2
            while step:
                total = combine(k, op.combineOp, total, [_shuffle(k, v, step) for v in total])
                step //= 2
            out[key] = total
        return out
    for key, c in zip(keys, coords):
        total = None
        for w in range(warps):
            vals = read(ir.Constant(lt.I32, w), c)
            total = vals if total is None else combine(k, op.combineOp, total, vals)
        out[key] = total
    return out


def _element(mlir_type: Any) -> ir.Type:
    return lt.scalar(mlir_type)


@rule(tt.ScanOp)
def _scan(k: GPUKernel, op: Any) -> None:
    axis = op.axis.value.data
    reverse = bool(op.reverse.value.data) if hasattr(op.reverse, "value") else bool(op.reverse)
    layout = k.layout_of(op.results[0])
    shape = shape_of(op.results[0])
    inputs = [k.tensor(v, layout) for v in op.operands]
    if isinstance(layout, L.Blocked) and shape[axis] >= layout.tile(axis):
        _define_scan(k, op, layout, shape, _scan_blocked(k, op, layout, shape, axis, inputs, reverse))
        return
    storages = [lt.scalar(v.type) for v in op.operands]
    count = numel(shape)
    sizes = [count * lt.byte_size(s) for s in storages]
    offsets = k.shared_regions(sizes)
    coords = k.coordinates(layout, shape)
    k.hooks.barrier(k.b)
    for i, c in enumerate(coords):
        for j, inp in enumerate(inputs):
            k.b.store(inp.values[i], k.shared_pointer(k.linear(c, shape), storages[j], offsets[j]))
    k.hooks.barrier(k.b)
    results: list[list[ir.Value]] = [[] for _ in inputs]
    for c in coords:
        totals = _scan_one(k, op, c, axis, shape, storages, offsets, reverse)
        for j, t in enumerate(totals):
            results[j].append(t)
    _define_scan(k, op, layout, shape, results)


def _define_scan(k: GPUKernel, op: Any, layout: L.Layout, shape: tuple, results: list) -> None:
    """Bind each result, computed in the first result's layout, converting where another was
    assigned to it (a multi-operand scan's later results may have uses that want another)."""
    from naiad.codegen.gpu.kernel import Dist

    for values, result in zip(results, op.results):
        dist = Dist(layout, shape, values)
        wanted = k.layout_of(result)
        k.env[result] = dist if wanted == layout else k.convert(dist, wanted, result.type)


def _scan_blocked(k: GPUKernel, op: Any, layout: L.Blocked, shape: tuple, axis: int,
                  inputs: list, reverse: bool) -> list[list[ir.Value]]:
    """A scan along ``axis`` when every thread holds distinct elements along it: each thread
    scans its consecutive elements, lanes add the totals of the lanes before them (``shfl.up``),
    warps those of the warps before them (shared memory), and each repetition of the tile the
    totals of the repetitions before it.  All repetitions' warp totals cross shared memory
    together (`_warp_totals`).

    A reverse scan is the same scan in the mirrored order: "before" means higher along the axis,
    the lanes' totals come down (an indexed shuffle from ``lane + d``), and the warps, the
    repetitions and a thread's own elements are taken from the last."""
    b = k.b
    elements = L.elements(layout, shape)
    rows: dict[tuple, list[int]] = {}
    for i, element in enumerate(elements):
        rows.setdefault(tuple((0, 0) if d == axis else item for d, item in enumerate(element)), []).append(i)
    lanes, warps = L.distinct_threads(layout, shape, axis)
    position = layout.order.index(axis)
    stride = 1
    for d in layout.order[:position]:
        stride *= layout.threads_per_warp[d]
    lane_ids = k._split(k.lane, [layout.threads_per_warp[d] for d in layout.order])
    warp_ids = k._split(k.warp, [layout.warps_per_cta[d] for d in layout.order])
    lane_a, warp_a = lane_ids[position], warp_ids[position]
    # positions in the order of the scan, and the lane along the axis that holds a warp's total
    lane_s = b.sub(ir.Constant(lt.I32, lanes - 1), lane_a) if reverse else lane_a
    warp_s = b.sub(ir.Constant(lt.I32, warps - 1), warp_a) if reverse else warp_a

    def from_earlier_lane(value: ir.Value, distance: int) -> ir.Value:
        """``value`` of the lane ``distance`` places before this one in the scan's order."""
        if not reverse:
            return _shuffle(k, value, stride * distance, up=True)
        return _shuffle(k, value, b.add(k.lane, ir.Constant(lt.I32, stride * distance)), index=True)
    row_count = 1
    for d, size in enumerate(shape):
        row_count *= 1 if d == axis else size
    row_shape = tuple(1 if d == axis else size for d, size in enumerate(shape))
    row_coords = k.coordinates(layout, row_shape)
    out = [[None] * len(elements) for _ in inputs]
    scanned = []     # per row and repetition: (row, repetition, row index, chunk, local, total)
    for key, indices in rows.items():
        row_index = k.linear(row_coords[list(rows).index(key)] if row_shape else [], row_shape)
        reps: dict[int, list[int]] = {}
        for i in indices:
            reps.setdefault(elements[i][axis][0], []).append(i)
        for position, rep in enumerate(sorted(reps, reverse=reverse)):
            chunk = reps[rep][::-1] if reverse else reps[rep]
            running = None
            local = []
            for i in chunk:                                   # 1. in the thread
                vals = [inp.values[i] for inp in inputs]
                running = vals if running is None else combine(k, op.combineOp, running, vals)
                local.append(running)
            total = running
            step = 1
            while step < lanes:                               # 2. lanes before this one
                moved = [from_earlier_lane(v, step) for v in total]
                merged = combine(k, op.combineOp, moved, total)
                take = b.icmp_unsigned(">=", lane_s, ir.Constant(lt.I32, step))
                total = [b.select(take, m, t) for m, t in zip(merged, total)]
                step *= 2
            before = [from_earlier_lane(v, 1) for v in total]
            has_before = b.icmp_unsigned(">", lane_s, ir.Constant(lt.I32, 0))
            local = [[b.select(has_before, m, v) for m, v in zip(combine(k, op.combineOp, before, vals), vals)]
                     for vals in local]
            scanned.append((key, position, row_index, chunk, local, total))
    totals = _warp_totals(k, op, scanned, lanes, warps, lane_a, warp_a, warp_s, row_count, stride, reverse)
    carries: dict[tuple, list[ir.Value]] = {}
    has_prefix = b.icmp_unsigned(">", warp_s, ir.Constant(lt.I32, 0))
    for (key, _, _, chunk, local, _), (prefix, rep_total) in zip(scanned, totals):
        if prefix is not None:                                # 3. warps before this one
            local = [[b.select(has_prefix, m, v) for m, v in zip(combine(k, op.combineOp, prefix, vals), vals)]
                     for vals in local]
        carry = carries.get(key)
        if carry is not None:                                 # 4. repetitions before this one
            local = [combine(k, op.combineOp, carry, vals) for vals in local]
            carries[key] = combine(k, op.combineOp, carry, rep_total)
        else:
            carries[key] = rep_total
        for i, vals in zip(chunk, local):
            for j, v in enumerate(vals):
                out[j][i] = v
    return out


def _warp_totals(k: GPUKernel, op: Any, scanned: list, lanes: int, warps: int, lane_a: ir.Value,
                 warp_a: ir.Value, warp_s: ir.Value, row_count: int, stride: int,
                 reverse: bool) -> list[tuple]:
    """For each (row, repetition) of `_scan_blocked`, in its order: the combined totals of the
    warps before this one (None with one warp) and of the whole repetition.  Every
    repetition's warp totals cross shared memory together, each repetition in a region of its
    own (warps x rows): two barriers for the scan, not two for each repetition."""
    b = k.b
    storages = [lt.scalar(v.type) for v in op.operands]
    last_a = 0 if reverse else lanes - 1
    if warps == 1:
        last_lane = b.add(k.lane, b.mul(b.sub(ir.Constant(lt.I32, last_a), lane_a), ir.Constant(lt.I32, stride)))
        return [(None, [_shuffle(k, v, last_lane, index=True) for v in total])
                for *_, total in scanned]
    slots = warps * row_count
    repetitions = 1 + max(position for _, position, *_ in scanned)
    offsets = k.shared_regions([repetitions * slots * lt.byte_size(st) for st in storages])
    last = b.icmp_unsigned("==", lane_a, ir.Constant(lt.I32, last_a))
    k.hooks.barrier(b)
    for _, position, row_index, _, _, total in scanned:
        slot = b.add(b.mul(warp_a, ir.Constant(lt.I32, row_count)),
                     b.add(row_index, ir.Constant(lt.I32, position * slots)))
        k.when(last, lambda slot=slot, total=total: [b.store(v, k.shared_pointer(slot, st, off))
                                                      for v, st, off in zip(total, storages, offsets)])
    k.hooks.barrier(b)
    result = []
    for _, position, row_index, *_ in scanned:
        prefix, rep_total = None, None
        for w in range(warps):                                # in the scan's order
            warp = warps - 1 - w if reverse else w
            at = b.add(ir.Constant(lt.I32, position * slots + warp * row_count), row_index)
            vals = [b.load(k.shared_pointer(at, st, off), typ=st) for st, off in zip(storages, offsets)]
            if w < warps - 1:
                earlier = b.icmp_unsigned(">", warp_s, ir.Constant(lt.I32, w))
                grown = vals if prefix is None else combine(k, op.combineOp, prefix, vals)
                prefix = grown if prefix is None else [b.select(earlier, g, p) for g, p in zip(grown, prefix)]
            rep_total = vals if rep_total is None else combine(k, op.combineOp, rep_total, vals)
        result.append((prefix, rep_total))
    return result


def _scan_one(k: GPUKernel, op: Any, coords: list, axis: int, shape: tuple, storages: list,
              offsets: list, reverse: bool) -> list[ir.Value]:
    """Combine the elements from the start of the axis (or its end) up to ``coords``."""
    b = k.b
    size = shape[axis]
    stride = 1
    for s in shape[axis + 1:]:
        stride *= s
    index = k.linear(coords, shape)
    position = coords[axis]
    base = b.sub(index, b.mul(position, ir.Constant(lt.I32, stride)))
    first = ir.Constant(lt.I32, size - 1) if reverse else ir.Constant(lt.I32, 0)

    def read(at: ir.Value) -> list[ir.Value]:
        where = b.add(base, b.mul(at, ir.Constant(lt.I32, stride)))
        return [b.load(k.shared_pointer(where, s, o), typ=s) for s, o in zip(storages, offsets)]

    distance = b.sub(ir.Constant(lt.I32, size - 1), position) if reverse else position

    def step(index: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
        return combine(k, op.combineOp, acc, read(b.sub(first, index) if reverse else index))

    return k.carried_loop("scan", 1, lambda index: b.icmp_unsigned("<=", index, distance),
                          read(first), step)
