"""Which layout each tensor value of a kernel gets (the TTGIR step of a GPU backend).

Layouts flow backwards from the ops that fix them, as Triton's layout propagation does: a store
(or a value nobody constrains) takes `layouts.default_blocked` of its shape, vectorized for its
element size; every op then asks its operands for the layout that makes it free -- element-wise
ops the same layout, ``broadcast`` the same parameters, ``expand_dims`` the slice of its result,
a reduction the parent of its result's slice (unless that parent suits the operand worse than
its own default).  The first request a value gets (from its last
use) wins; other uses convert (`GPUKernel.convert`).  Every request is also reported (``requests``)
so that `naiad.codegen.gpu.conversions` can see which uses convert and remove the conversions it
can.

Loads and stores are coalesced first, as Triton's Coalesce pass does: when the axis
information says an access's pointers are consecutive along another dimension than the layout
it was given runs along (a transposing copy), the access gets a layout along that dimension,
and the value changes layout through shared memory instead of memory being read or written
one element at a time.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from xdsl.dialects import scf
from xdsl.dialects.builtin import TensorType
from xdsl.ir import BlockArgument, SSAValue

from naiad.codegen import elementwise, llvm_types as lt
from naiad.codegen.axis_info import AxisInfo, analyze
from naiad.codegen.gpu import layouts as L
from naiad.codegen.registry import registrar
from naiad.ir import tt
from naiad.ir.ttg import AsyncLoadOp

#: Ops whose tensor operands simply take the result's layout.
_SAME = (tt.LoadOp, AsyncLoadOp, tt.BroadcastOp, tt.AtomicRMWOp, tt.AtomicCASOp, tt.ScanOp, tt.ClampFOp)


def _tensor(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType)


def _shape(value: SSAValue) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


#: One layout request: (the op asking, the value, the layout the op wants it in).
Request = tuple[Any, SSAValue, L.Layout]


def assign_layouts(func: Any, num_warps: int, warp_size: int,
                   requests: list[Request] | None = None,
                   axis: dict[SSAValue, AxisInfo] | None = None) -> dict[SSAValue, L.Layout]:
    """Each tensor value's layout; ``requests`` (when given) receives every request made.
    ``axis`` is the function's axis information (`axis_info.analyze`, computed when not given):
    a load or store whose pointers run along another dimension than the last gets a layout
    along that dimension (Triton's coalescing), and its users convert."""
    axis = analyze(func) if axis is None else axis
    layouts: dict[SSAValue, L.Layout] = anchored_layouts(func, axis, num_warps, warp_size)
    asking: list[Any] = [None]           # the op whose rule is running

    def default(value: SSAValue) -> L.Layout:
        return L.default_blocked(_shape(value), num_warps, warp_size, _vector(value))

    def want(value: SSAValue, layout: L.Layout) -> None:
        if not _tensor(value):
            return
        if requests is not None:
            requests.append((asking[0], value, layout))
        if value not in layouts:
            layouts[value] = layout

    def own(value: SSAValue) -> L.Layout:
        if value not in layouts:
            layouts[value] = _operands_layout(value, layouts) or L.default_blocked(
                _shape(value), num_warps, warp_size, fitted(value, *_source_vectors(value, axis)))
        return layouts[value]

    def fitted(value: SSAValue, wide: int, narrow: int) -> int:
        """``narrow`` elements a thread (what the accesses move at once) where a block of
        ``wide`` elements a thread would still give every thread of the program some: the same
        threads, coalesced.  A smaller block keeps ``wide``: spread over more threads, its loads
        and stores would land in different warps, which run in no set order (a kernel shifting
        64 elements in place, ``x[i + 1] = x[i]``, read what another warp had written)."""
        return narrow if math.prod(_shape(value)) >= num_warps * warp_size * wide else wide

    for op in reversed(list(func.walk())):
        asking[0] = op
        if isinstance(op, (tt.LoadOp, tt.StoreOp, AsyncLoadOp)) and _tensor(op.ptr):
            accessed = op.results[0] if isinstance(op, (tt.LoadOp, AsyncLoadOp)) else op.ptr
            along = _coalesced(op.ptr, layouts.get(accessed), axis, num_warps, warp_size)
            if along is not None:
                layouts[accessed] = along        # a load's users convert
                layouts.setdefault(op.ptr, along)
            elif isinstance(op, tt.StoreOp) and op.ptr not in layouts:
                layouts[op.ptr] = L.default_blocked(_shape(op.ptr), num_warps, warp_size, fitted(
                    op.ptr, _vector(op.ptr), _access_vector(op, axis)))
        rule = _RULES.get(type(op))
        results = [r for r in op.results if _tensor(r)]
        if rule is not None:
            rule(op, own, want, default)
            continue
        if not results:
            continue
        layout = own(results[0])
        for r in results[1:]:
            want(r, layout)
        for operand in op.operands:
            if _tensor(operand) and _shape(operand) == _shape(results[0]):
                want(operand, layout)
    for arg in func.body.block.args:
        if _tensor(arg):
            own(arg)
    for op in func.walk():           # values never used: their own default
        for r in op.results:
            if _tensor(r):
                own(r)
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    if _tensor(arg):
                        own(arg)
    return layouts


def anchored_layouts(func: Any, axis: dict[SSAValue, AxisInfo], num_warps: int,
                     warp_size: int) -> dict[SSAValue, L.Layout]:
    """The layouts that ops fix, before any request: a tensor-core dot's accumulator (its
    ``ttg.mma`` attribute, written by the backend's TTGIR stage); the pointers of a load or
    store consecutive along another dimension than the last, in a layout along it (Triton's
    coalescing); and what follows from those -- element-wise ops of an accumulator (the
    epilogue, attention's scaled scores), and the loop-carried values they become (the
    accumulator across the K loop, pointers advanced by each iteration), so that a value keeps
    its layout from iteration to iteration instead of converting twice in each."""
    anchors: dict[SSAValue, L.Layout] = {}
    for op in func.walk():
        if isinstance(op, (tt.LoadOp, tt.StoreOp, AsyncLoadOp)) and _tensor(op.ptr):
            along = _coalesced(op.ptr, None, axis, num_warps, warp_size)
            if along is None and isinstance(op, tt.LoadOp):
                along = _byte_load(op.ptr, axis, num_warps, warp_size)
            if along is not None:
                anchors.setdefault(op.ptr, along)
                if not isinstance(op, tt.StoreOp):
                    anchors.setdefault(op.results[0], along)
    changed = True
    while changed:
        changed = False
        for op in func.walk():
            for value, layout in _anchors_of(op, anchors):
                if value not in anchors:
                    anchors[value] = layout
                    changed = True
    return anchors


def _anchors_of(op: Any, anchors: dict[SSAValue, L.Layout]) -> list[tuple[SSAValue, L.Layout]]:
    """(value, layout) pairs that ``op`` fixes, given the anchors found so far."""
    text = op.attributes.get("ttg.mma") if isinstance(op, tt.DotOp) else None
    if text is not None:
        return [(op.results[0], L.parse_layout(text.data))]
    if isinstance(op, tt.ReduceOp) and op.operands[0] in anchors:
        # a reduction of an accumulator (attention's row maximum and sum) in its slice
        slice_ = L.Slice(op.axis.value.data, anchors[op.operands[0]])
        return [(r, slice_) for r in op.results if _tensor(r)]
    if type(op) in elementwise.RULES and len(op.results) == 1 and _tensor(op.results[0]):
        for operand in op.operands:
            if operand in anchors and _shape(operand) == _shape(op.results[0]):
                return [(op.results[0], anchors[operand])]
        return []
    if isinstance(op, scf.YieldOp) and isinstance(op.parent_op(), scf.ForOp):
        loop = op.parent_op()
        found = []
        for i, value in enumerate(op.operands):
            # one loop-carried value: what the body yields, the block argument, the first value
            # and the result share a layout; the first of them anchored gives it
            group = (value, loop.body.block.args[i + 1], loop.results[i], loop.iter_args[i])
            anchored = next((v for v in group if v in anchors), None)
            if anchored is not None:
                found += [(v, anchors[anchored]) for v in group]
        return found
    if isinstance(op, scf.YieldOp) and isinstance(op.parent_op(), scf.IfOp):
        # an ``if`` that yields an anchored value in one branch (a persistent matmul's
        # accumulator, stored and reset in the other) keeps its layout: the other branch's
        # value converts once there, not the accumulator in every iteration
        return [(result, anchors[value]) for value, result in zip(op.operands, op.parent_op().results)
                if value in anchors and _tensor(value)]
    return []


def _operands_layout(value: SSAValue, layouts: dict[SSAValue, L.Layout]) -> L.Layout | None:
    """For a value no later op constrains (the operand of a reduction to a scalar), the layout
    an operand of its element-wise op already has: ``tl.sum(x * x)`` beside a store of ``x``
    then squares ``x`` where it lies, instead of converting the whole tile to the default layout
    through shared memory (a 16384-element bf16 layer norm's row: 64 KB of shared memory)."""
    op = value.owner
    if not isinstance(op, tuple(elementwise.RULES)) or len(op.results) != 1:
        return None
    for operand in op.operands:
        if _tensor(operand) and _shape(operand) == _shape(value) \
                and isinstance(layouts.get(operand), L.Blocked):
            return layouts[operand]      # a tensor-core accumulator's layout is not inherited
    return None


def _source_vectors(value: SSAValue, axis: dict[SSAValue, AxisInfo]) -> tuple[int, int]:
    """Elements per thread for a value no later op constrains, from the loads it is computed
    from element by element: (a 128-bit access's worth of the narrowest, as many as they move
    at once (`_access_vector`)).  So ``tl.sum(x.to(tl.float32))`` of 16-bit ``x`` reads 8
    elements a thread in one access, not 4 in a 64-bit one, and a row it cannot read in vectors
    can be read a coalesced element a thread."""
    vector, loads, pending, seen = _vector(value), [], [value], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        op = current.owner
        if isinstance(op, (tt.LoadOp, AsyncLoadOp)) and _tensor(op.ptr):
            loads.append(op)
        elif isinstance(op, tuple(elementwise.RULES)):
            pending.extend(v for v in op.operands if _tensor(v) and _shape(v) == _shape(value))
        else:
            pending.extend(_carried_from(current))
    wide = max([vector] + [_vector(op.ptr) for op in loads])
    return wide, max((_access_vector(op, axis) for op in loads), default=vector)


def _carried_from(value: SSAValue) -> list[SSAValue]:
    """What a ``for`` loop's result or loop-carried block argument accumulates in the loop: the
    value its body yields, where an element-wise op makes it (an accumulator ``acc +=
    x.to(tl.float32)`` takes the layout its loads want, as Triton's does, not the one of its own
    fp32 elements).  A yielded load (a tile loaded for the next trip) is left to its users."""
    owner = value.owner
    if isinstance(owner, scf.ForOp):
        yielded = owner.body.block.last_op.operands[list(owner.results).index(value)]
    elif isinstance(value, BlockArgument) and isinstance(owner.parent_op(), scf.ForOp) and value.index > 0:
        yielded = owner.parent_op().body.block.last_op.operands[value.index - 1]
    else:
        return []
    return [yielded] if isinstance(yielded.owner, tuple(elementwise.RULES)) else []


def _access_vector(op: Any, axis: dict[SSAValue, AxisInfo]) -> int:
    """How many elements of a thread one access of the load or store ``op`` can move along the
    last dimension (`L.widest_access`): a thread's share of a layout made for it.  Where the
    access cannot be wide (a row of 3,000 elements: masks and row starts not multiples of 8),
    one element a thread keeps a warp's access coalesced, as Triton's coalescing gives it;
    eight 16-bit elements a thread, each read on its own, span eight times the bytes a warp
    reads at once (the row read at 40 % of Triton's speed)."""
    info, shape = axis.get(op.ptr), _shape(op.ptr)
    if info is None or not shape:
        return _vector(op.ptr)
    d = len(shape) - 1
    mask = None                                      # none, or one scalar for every lane
    if op.mask is not None and _tensor(op.mask):
        mask_info = axis.get(op.mask)
        mask = mask_info.constancy[d] if mask_info is not None else 1
    return L.widest_access(info.contiguity[d], info.divisibility[d], mask, _element_bytes(op.ptr))


def _coalesced(pointers: SSAValue, current: L.Layout | None, axis: dict[SSAValue, AxisInfo],
               num_warps: int, warp_size: int) -> L.Layout | None:
    """A layout whose threads run along the dimension the accesses through ``pointers`` are
    consecutive in (dimensions ordered by contiguity, most first), where ``current`` (the layout
    the accessed value has so far) is a blocked layout running along another; None otherwise."""
    info = axis.get(pointers)
    shape = _shape(pointers)
    if info is None or len(shape) < 2 or (current is not None and not isinstance(current, L.Blocked)):
        return None
    order = sorted(range(len(shape)), key=lambda d: (-info.contiguity[d], -d))
    if info.contiguity[order[0]] < 2:
        return None
    if current is not None and current.order[0] == order[0]:
        return None
    if current is None and order[0] == len(shape) - 1:
        return None                      # the default layout runs along it
    return L.default_blocked(shape, num_warps, warp_size, _vector(pointers), order)


def _byte_load(pointers: SSAValue, axis: dict[SSAValue, AxisInfo], num_warps: int,
               warp_size: int) -> L.Layout | None:
    """A 2-D or wider load of 1-byte elements (fp8, int8 operands) consecutive along its last
    dimension: 16 of them per thread (one 128-bit access, as Triton's coalescing gives it), fixed
    before its users ask, so that the wider type they convert to (bf16, fp16) takes the load's
    layout instead of narrowing it to 8 bytes per thread; None for any other load."""
    info = axis.get(pointers)
    shape = _shape(pointers)
    if info is None or len(shape) < 2 or _element_bytes(pointers) != 1 or info.contiguity[-1] < 2:
        return None
    return L.default_blocked(shape, num_warps, warp_size, _vector(pointers))


def _vector(value: SSAValue) -> int:
    """Elements of ``value`` one thread holds consecutively: a 128-bit access's worth (16 for
    bytes, as Triton's coalescing gives them)."""
    return max(1, 16 // _element_bytes(value))


def _element_bytes(value: SSAValue) -> int:
    """Bytes of one element (of the pointee, for pointer tensors: what a load moves)."""
    element = lt.element(value.type)
    pointee = getattr(element, "pointee_type", None)
    storage = lt.scalar(pointee if pointee is not None else element)
    return max(1, lt.byte_size(storage) if storage != lt.I1 else 1)


Rule = Callable[[Any, Callable, Callable, Callable], None]
_RULES: dict[type, Rule] = {}
_rule = registrar(_RULES)


@_rule(*_SAME)
def _same(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    results = [r for r in op.results if _tensor(r)]
    if not results:                        # a scalar load or atomic: no layout
        return
    layout = own(results[0])
    for value in list(op.operands) + results[1:]:
        want(value, layout)


@_rule(tt.StoreOp)
def _store(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    layout = own(op.ptr) if _tensor(op.ptr) else None
    if layout is not None:
        for operand in op.operands:
            want(operand, layout)


@_rule(tt.ExpandDimsOp)
def _expand_dims(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    want(op.src, L.Slice(op.axis.value.data, own(op.result)))


@_rule(tt.ReduceOp)
def _reduce(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    axis = op.axis.value.data
    results = [r for r in op.results if _tensor(r)]
    layout = own(results[0]) if results else None
    for r in results[1:]:
        want(r, layout)
    parent = layout.parent if isinstance(layout, L.Slice) and layout.dim == axis else None
    operands = list(op.operands)
    if parent is not None and _repeats_more(parent, operands[0], default):
        parent = None       # the result converts (a few values), not the operand (a whole tile)
    wanted = parent or own(operands[0])      # as the lowering: the first operand's own layout
    for operand in operands:
        want(operand, wanted)


def _repeats_more(layout: L.Layout, value: SSAValue, default: Callable) -> bool:
    """Whether ``layout`` (a reduction's result slice's parent) would have more threads repeat
    each other's elements of ``value`` than its own default layout does: a ``[X, 1]`` result
    (Inductor's ``tl.sum(x, 1)[:, None]``) defaults to every warp along X, and an ``[X, R]``
    operand taking that parent runs each row on one lane, or, where X is 1, the whole
    reduction on every warp at once."""
    return isinstance(layout, L.Blocked) and \
        L.repeated_threads(layout, _shape(value)) > L.repeated_threads(default(value), _shape(value))


@_rule(scf.ForOp)
def _for(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    args = op.body.block.args[1:]
    for result, arg, init in zip(op.results, args, op.iter_args):
        if _tensor(result):
            layout = own(result)
            want(arg, layout)
            want(init, layout)


@_rule(scf.WhileOp)
def _while(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    for result, before, init in zip(op.results, op.before_region.block.args, op.arguments):
        if _tensor(result):
            layout = own(result)
            want(before, layout)
            want(init, layout)


@_rule(scf.YieldOp, scf.ConditionOp)
def _yield(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    """A yield's operands take the layout of what they become: the loop's block arguments
    and results, or the ``if``'s results (assigned already: their uses come later)."""
    values = list(op.operands)[1:] if isinstance(op, scf.ConditionOp) else list(op.operands)
    for value, target in zip(values, op.parent_op().results):
        if _tensor(value):
            want(value, own(target))


@_rule(tt.DotOp)
def _dot(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    """The accumulator in the result's layout; a tensor-core dot (``ttg.mma``) takes its
    operands in any layout (it stages them in shared memory, or reads an mma-layout A from
    registers), the FMA rule in the default one."""
    layout = own(op.results[0])
    want(op.c, layout)
    if "ttg.mma" not in op.attributes:
        want(op.a, default(op.a))
        want(op.b, default(op.b))


@_rule(tt.MakeRangeOp, tt.SplatOp)
def _source(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    own(op.results[0])


@_rule(tt.TransOp, tt.ReshapeOp, tt.JoinOp, tt.SplitOp, tt.CatOp, tt.HistogramOp)
def _through_shared(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    """Ops that move elements through shared memory read their operands in any layout: they ask
    nothing of them (a transpose of a square tile must not make its operand transposed)."""
    layout = own(op.results[0])
    for r in op.results[1:]:
        want(r, layout)


@_rule(tt.GatherOp)
def _gather(op: Any, own: Callable, want: Callable, default: Callable) -> None:
    """The indices in the result's layout; the source through shared memory, in any layout."""
    want(op.indices, own(op.results[0]))
