"""Rings of shared memory for the operands of dots in loops: one barrier a trip.

A dot's operands reach it through shared memory: every thread writes its elements, a barrier,
every thread reads the elements it needs.  The next write must wait for every thread to have
read the last, so a staging made in the scratch costs a barrier before its writes and one after;
two operands converted one after the other, four.

A dot rule stages all its operands at once (`stage`: one barrier before the writes, one
after).  Where a loop runs a dot once a trip (the dot directly in its body), `plan` moves the
conversions of operands defined outside the loop before it (`enter_loop`: attention's Q is
converted once, not each trip) and, when asked, gives the dot two slots that the trips take in
turn, each holding all it stages.  A trip writes its slot and waits once: the slot was last
read two trips before, and every thread finished those reads before it passed the previous
trip's barrier.  A barrier on each side of such a loop keeps the scratch of the ops around it,
which may share the ring's bytes, apart.  This is what Triton's ``num_stages`` buys in shared
memory (``num_stages - 1`` buffers), here for the register-prefetched loads of
`naiad.passes.prefetch_loads`.

A backend asks for rings with `naiad.codegen.gpu.stages.make_llir`'s ``rings`` and says what
its dot rule stages with a ``staging`` function (the shared FMA rule's:
`naiad.codegen.gpu.ops_dot.fma_staging`); `make_llir` calls `plan` before any op is lowered;
the rule stages through `stage` (raw regions) or `convert` (layout conversions).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import llvmlite.ir as ir
from xdsl.dialects import scf
from xdsl.ir import Block, SSAValue

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import Dist, GPUKernel, aligned_regions, conversion_padding, numel, shape_of
from naiad.ir import tt

#: Where a slot's regions start: 16-byte aligned (a region of 2-byte values before one of
#: 4-byte values, vector accesses of 16 bytes).
_ALIGN = 16


@dataclasses.dataclass(frozen=True)
class Staging:
    """What a dot's rule puts in shared memory each trip: the bytes of each region it writes,
    and the conversions of loop-invariant operands to make once before the loop."""

    sizes: tuple[int, ...]
    before_loop: tuple[tuple[SSAValue, L.Layout], ...] = ()


@dataclasses.dataclass(frozen=True)
class Ring:
    """A dot's two slots: from byte ``offset`` of shared memory, ``slot`` bytes each, regions
    of ``sizes`` bytes at ``regions`` within a slot."""

    loop: Any
    offset: int
    slot: int
    sizes: tuple[int, ...]
    regions: tuple[int, ...]


@dataclasses.dataclass
class LoopPlan:
    """What a loop's entry does for its dots: the conversions made before it, and whether a
    ring of its dots lives across it."""

    hoisted: list = dataclasses.field(default_factory=list)
    rings: bool = False


def plan(k: GPUKernel, staging: Callable[[GPUKernel, Any], Staging | None], rings: bool) -> None:
    """For every dot that its loop runs once a trip and whose rule stages operands
    (``staging(k, dot)``: what it stages, None for nothing): its loop-invariant operands'
    conversions moved before the loop, and where ``rings``, a ring for what it stages each
    trip.  From a backend's ``prepare``: the layouts are known, no op is lowered yet."""
    for op in k.func_op.walk():
        if not isinstance(op, tt.DotOp) or not _once_a_trip(op):
            continue
        staged = staging(k, op)
        if staged is None:
            continue
        loop = op.parent_op()
        loop_plan = k.state.setdefault((LoopPlan, loop), LoopPlan())
        loop_plan.hoisted.extend(c for c in staged.before_loop if c not in loop_plan.hoisted)
        if rings and staged.sizes:
            regions, end = aligned_regions(staged.sizes, _ALIGN)
            offset = k.reserve_shared(2 * end, [loop])
            k.state[(Ring, op)] = Ring(loop, offset, end, tuple(staged.sizes), regions)
            loop_plan.rings = True


def _once_a_trip(op: Any) -> bool:
    loop = op.parent_op()
    return isinstance(loop, scf.ForOp) and op.parent_block() is loop.body.block


def _hoisted(k: GPUKernel, op: Any) -> list:
    """The conversions made before the loop that runs ``op`` once a trip."""
    loop_plan = k.state.get((LoopPlan, op.parent_op())) if _once_a_trip(op) else None
    return loop_plan.hoisted if loop_plan is not None else []


def invariant(op: Any, value: SSAValue) -> bool:
    """Whether ``value`` is defined outside the loop that runs ``op`` once a trip."""
    loop = op.parent_op()
    owner = value.owner
    block = owner if isinstance(owner, Block) else owner.parent_block()
    while block is not None:
        if block is loop.body.block:
            return False
        parent = block.parent_op()
        block = parent.parent_block() if parent is not None else None
    return True


def stage(k: GPUKernel, op: Any, sizes: Sequence[int], write: Callable[[list[ir.Value]], None]) -> list[ir.Value]:
    """Stage ``op``'s regions of ``sizes`` bytes: ``write(bases)`` fills them (``bases``:
    pointers into shared memory), then every thread waits; the bases, for reading.  In this
    trip's slot of the dot's ring when it has one for these sizes (a rule that stages other
    than its ``staging`` said uses the scratch), else in the scratch after a barrier."""
    ring = k.state.get((Ring, op))
    if ring is None or ring.sizes != tuple(sizes):
        offsets = k.shared_regions(sizes, _ALIGN)
        k.hooks.barrier(k.b)
        bases = [k.shared_pointer(ir.Constant(lt.I32, 0), lt.I8, offset) for offset in offsets]
    else:
        start = k.b.add(ir.Constant(lt.I32, ring.offset), k.b.mul(_parity(k, ring.loop), ir.Constant(lt.I32, ring.slot)))
        slot = k.b.gep(k.hooks.shared_base(k.b), [start], source_etype=lt.I8)
        bases = [k.b.gep(slot, [ir.Constant(lt.I32, region)], source_etype=lt.I8) if region else slot
                 for region in ring.regions]
    write(bases)
    k.hooks.barrier(k.b)
    return bases


def _parity(k: GPUKernel, loop: Any) -> ir.Value:
    """The trip's number modulo 2, as an i32: ``(iv - lb) / step`` (a positive step)."""
    iv, lb, step = (k.scalar(v) for v in (loop.body.block.args[0], loop.lb, loop.step))
    trip = k.b.udiv(k.b.sub(iv, lb), step)
    bit = k.b.and_(trip, ir.Constant(trip.type, 1))
    return k.b.trunc(bit, lt.I32) if trip.type.width > 32 else bit


def convert(k: GPUKernel, op: Any, operands: Sequence[tuple[SSAValue, L.Layout]]) -> list[Dist]:
    """``op``'s operands in the layouts it reads them in: those already there as they are,
    loop-invariant ones as converted before the loop (`plan`), the others through one staging
    (`stage`)."""
    out: list[Dist | None] = []
    staged = []
    hoisted = _hoisted(k, op)
    for value, layout in operands:
        held = k.env[value]
        if L.equivalent(held.layout, layout, held.shape) or (value, layout) in hoisted:
            out.append(k.tensor(value, layout))
        else:
            out.append(None)
            staged.append((len(out) - 1, value, held, layout,
                           conversion_padding(held.layout, layout, held.shape, value.type)))
    if staged:
        sizes = [padding.size_bytes(numel(held.shape)) for _, _, held, _, padding in staged]

        def write(bases: list[ir.Value]) -> None:
            for (_, value, held, _, padding), base in zip(staged, bases):
                k.write_tile(held, value.type, padding, base)
        bases = stage(k, op, sizes, write)
        for (i, value, held, layout, padding), base in zip(staged, bases):
            out[i] = Dist(layout, held.shape, k.read_tile(value.type, padding, layout, held.shape, base=base))
    return out  # type: ignore[return-value]


def conversions(k: GPUKernel, op: Any, operands: Sequence[tuple[SSAValue, L.Layout]]) -> Staging:
    """The `Staging` of a rule that reads ``operands`` through `convert` in a ring."""
    sizes, before = [], []
    for value, layout in operands:
        held = k.layouts[value]
        shape = shape_of(value)
        if L.equivalent(held, layout, shape):
            continue
        if invariant(op, value):
            before.append((value, layout))
        else:
            sizes.append(conversion_padding(held, layout, shape, value.type).size_bytes(numel(shape)))
    return Staging(tuple(sizes), tuple(before))


def enter_loop(k: GPUKernel, op: Any) -> bool:
    """Before ``scf.for`` ``op`` (the shared loop rule calls it): the conversions moved out of
    it; where its dots have rings and nothing was converted, a barrier (the rings may share
    bytes with the scratch of the ops before the loop: a conversion begins with one).  Whether
    the loop holds rings (then `leave_loop` after it)."""
    loop_plan = k.state.get((LoopPlan, op))
    if loop_plan is None:
        return False
    if loop_plan.rings and not loop_plan.hoisted:
        k.hooks.barrier(k.b)
    for value, layout in loop_plan.hoisted:
        k.tensor(value, layout)
    return loop_plan.rings


def leave_loop(k: GPUKernel) -> None:
    """After a loop that holds rings: every thread done with them before the scratch of the
    ops after it takes their bytes."""
    k.hooks.barrier(k.b)
