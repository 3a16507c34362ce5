"""A dot operand's trip-by-trip copies kept for the next programs a thread runs.

A matmul's programs share operands: every program of one row of C blocks reads the same rows
of A, trip after trip of its K loop, and every program of one column the same columns of B.
Copied into a buffer (`dot_operands`) afresh by each program -- B of bf16 and int8 also
interleaved for their products -- the shared operand is read again from wherever it lies:
from the third-level cache, in rows a power of two apart that fall into a few cache sets, in a
2048^3 matmul (docs/PERFORMANCE.md, sessions 30-31).  So each trip's copy goes to a slot of
memory the thread keeps across its programs (`KernelLowering.share_memory`), tagged with what
was copied: the tile's first element's address and row stride, where the load tested whole
(`affine_tiles`).  A later program whose trip finds its own tile's tag there skips the copy
and multiplies the one kept, packed and contiguous.  The grid runs squares of 8 x 8 programs
(`kernel._grouped_ids`): 8 panels of rows of A and 8 of columns of B, each read by 8 of the
square's programs, not one after another: each operand's copies are kept in `WAYS` places, a
program's in one of them.

Kept only where that is the same as copying again: the load is a dot operand's alone, in an
`scf.for` that no loop encloses, and nothing the kernel does before the loop ends writes
memory -- so every program reads what the first one copied (programs writing what others
read race on any target; within a program, a write before the load is what would make a kept
copy stale).  The memory is a thread's for one launch, cleared at its start: a launch never
sees a copy of the memory of one before it.  Trips past `OPERAND_BYTES` of copies, and tiles
that do not test whole (an edge's, partly masked off), are copied into the program's own
buffer as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import llvmlite.ir as ir
from xdsl.dialects import scf

from naiad.backends.cpu.lowering.affine_tiles import AffineTile, affine_tile, separates
from naiad.backends.cpu.lowering.column_blocks import operand_load
from naiad.backends.cpu.lowering.tiles import Buffer, numel
from naiad.codegen import llvm_types as lt
from naiad.passes.effects import Effect, effect_of

#: Bytes of copies kept for one operand (a thread's), their tags besides: 128 trips of a
#: 128 x 32 bf16 tile, so a K of 4096 (64 trips of a 128 x 32 fp32 tile).  Memory no trip
#: reaches is never touched.  Half of it kept the last trips of a K of 2048 out (with the tags
#: counted in, 63 trips fitted, and 48 on AMX, whose panels keep 16 trips at a time): 1 MB ran
#: bf16 2048^3 on AMX tiles 10-25 % faster (docs/PERFORMANCE.md, session 34).
OPERAND_BYTES = 1 << 20
#: Bytes of a trip's tag: the address of the tile's first element and its row stride (i64 each).
TAG_BYTES = 16
#: Programs' worth of copies kept an operand, each program's trips in one of them (a way): the
#: one whose first trip holds the program's first tile, else the next in turn.  A square of the
#: grid's order (`kernel._grouped_ids`) reads 8 panels of each operand: with 8 ways each is
#: copied once a square.  At the grid's edges, where the order is 8 programs of a column group
#: for each column, B is shared by programs one after another and A by the same 8 at the next
#: column: found there too.
WAYS = 8
#: Programs in a row that found none of their tiles kept, after which a thread's later programs
#: copy into buffers of their own: where programs share no tiles (a batch of matmuls, each its
#: own), the copies kept -- a new place every trip, and its tag -- cost 7-8 % of a fp32 one
#: with 64-wide tiles on the 2-core EPYC (docs/PERFORMANCE.md, session 32).  One more than
#: `WAYS`: at the grid's edges A's copies are found only from the ninth program of a column
#: group on.
IDLE_PROGRAMS = WAYS + 1


@dataclasses.dataclass(frozen=True)
class KeptTrips:
    """Where one operand's copies are kept: ``data`` (an i64 address: trip ``t``'s copy in way
    ``w`` at ``data + (w * trips + t) * tile_bytes``) and ``tags`` (``TAG_BYTES`` a trip, in
    the same order), for trips below ``trips``, `WAYS` ways; both 0 where the thread has no
    such memory.  ``state``: four i64, the programs in a row that found nothing kept before
    this one, whether this one has not found anything yet, its way's first trip (``w *
    trips``), and the ways filled so far (the next to fill is that modulo `WAYS`)."""

    data: ir.Value
    tags: ir.Value
    state: ir.Value
    trips: int
    tile_bytes: int

    def keeps(self, kernel: Any, trip: ir.Value) -> ir.Value:
        """Whether trip ``trip`` of this program goes to the kept copies (an i1), as `_keeping`
        decided at the program's first trip: the thread has their memory, the trip a place
        there, and fewer than `IDLE_PROGRAMS` programs in a row before this one found nothing."""
        bld = kernel.b
        have = bld.icmp_unsigned("!=", self.state, ir.Constant(lt.I64, 0))

        def active() -> ir.Value:
            idle = bld.load(_field(bld, self.state, 0), typ=lt.I64, align=8)
            return bld.icmp_unsigned("<", idle, ir.Constant(lt.I64, IDLE_PROGRAMS))

        still = kernel.choose(have, active, lambda: ir.Constant(lt.I1, 0), lt.I1)
        return bld.and_(bld.icmp_unsigned("<", trip, ir.Constant(lt.I32, self.trips)), still)

    def place(self, kernel: Any, slot: ir.Value) -> ir.Value:
        """The copy of `slot` ``slot`` (a pointer), where `_keeping`."""
        bld = kernel.b
        return bld.inttoptr(bld.add(self.data, bld.mul(slot, ir.Constant(lt.I64, self.tile_bytes))), lt.PTR)

    def tag(self, kernel: Any, slot: ir.Value) -> ir.Value:
        """The address (an i64) of `slot` ``slot``'s tag, where `_keeping`."""
        bld = kernel.b
        return bld.add(self.tags, bld.mul(slot, ir.Constant(lt.I64, TAG_BYTES)))

    def slot(self, kernel: Any, trip: ir.Value) -> ir.Value:
        """Trip ``trip``'s number among all ways' (an i64): its way's first, as `_keeping`
        chose it at the program's first trip, plus ``trip``; just ``trip`` without memory."""
        bld = kernel.b
        have = bld.icmp_unsigned("!=", self.state, ir.Constant(lt.I64, 0))
        first = kernel.choose(have, lambda: bld.load(_field(bld, self.state, 16), typ=lt.I64, align=8),
                              lambda: ir.Constant(lt.I64, 0), lt.I64)
        return bld.add(first, bld.zext(trip, lt.I64))


def kept_trips(kernel: Any, value: Any, loop: scf.ForOp, multiple: int) -> KeptTrips | None:
    """The kept copies of dot operand ``value`` (a tile copied once a trip of ``loop``), as many
    trips as fit `OPERAND_BYTES` rounded down to a ``multiple``; None where they cannot be kept
    (see the module's docstring)."""
    load = operand_load(kernel, value)
    if load is None or load.parent_op() is not loop or kernel.uses.get(load.results[0]) != (1, False) \
            or kernel.uses.get(value) != (1, False) or not separates(kernel, load) \
            or not _nothing_written_first(kernel.func_op, loop):
        return None
    tile_bytes = numel(value.type) * lt.byte_size(lt.memory_type(value.type))
    trips = OPERAND_BYTES // tile_bytes // multiple * multiple
    if trips == 0:
        return None
    kernel.keeps_operand_copies = True
    return KeptTrips(kernel.share_memory(WAYS * trips * tile_bytes, zeroed=False),
                     kernel.share_memory(WAYS * trips * TAG_BYTES, zeroed=True),
                     kernel.share_memory(32, zeroed=True), trips, tile_bytes)


def copy_unless_kept(kernel: Any, kept: KeptTrips, value: Any, trip: ir.Value, own: Buffer,
                     copy: Callable[[Buffer], None]) -> Buffer:
    """Where this trip's copy of ``value`` is: ``copy(into)`` into `KeptTrips.place` where the
    trip has one and the thread still keeps copies (`_keeping`), else into ``own`` -- unless
    the kept copy is of the same tile: tagged with its address and row stride, where the load
    tests whole (else tagged as nothing: an edge tile's masked-off elements are not in
    memory)."""
    bld = kernel.b
    tile: AffineTile = affine_tile(kernel, operand_load(kernel, value))   # `kept_trips` made sure
    holds = _keeping(kernel, kept, trip, tile)
    slot = kept.slot(kernel, trip)
    into = Buffer(bld.select(holds, kept.place(kernel, slot), own.ptr), own.mlir_type)
    zero = ir.Constant(lt.I64, 0)
    whole, base, stride = tile.whole, tile.base, tile.stride
    tag = kept.tag(kernel, slot)
    tag_base, tag_stride = _field(bld, tag, 0), _field(bld, tag, 8)
    found = kernel.choose(bld.and_(holds, whole), lambda: _tagged(bld, tag, tile), lambda: ir.Constant(lt.I1, 0), lt.I1)
    with bld.if_then(found):
        bld.store(ir.Constant(lt.I64, 0), _field(bld, kept.state, 8), align=8)

    def fresh() -> None:
        copy(into)

        def tag_it() -> None:
            bld.store(bld.select(whole, base, zero), tag_base, align=8)
            bld.store(bld.select(whole, stride, zero), tag_stride, align=8)

        kernel.choose(holds, tag_it, lambda: None, None)

    kernel.choose(found, lambda: None, fresh, None)
    return into


def _keeping(kernel: Any, kept: KeptTrips, trip: ir.Value, tile: AffineTile) -> ir.Value:
    """Whether trip ``trip`` (of ``tile``) goes to the kept copies (an i1): the thread has their
    memory (the state's, the tags' and the copies' are one allocation: all there or none), the
    trip has a place there, and fewer than `IDLE_PROGRAMS` programs in a row before this one
    found nothing kept.  The count is brought up to date at each program's first trip (the
    loop runs once a program), and the program's way chosen (`_choose_way`), so the answer
    and the way are the same for all of a program's trips; a share's memory starts with the
    count at 0, nothing missed, no way filled."""
    bld = kernel.b
    zero, one = ir.Constant(lt.I64, 0), ir.Constant(lt.I64, 1)
    have = bld.icmp_unsigned("!=", kept.state, zero)
    idle_at, missed_at = _field(bld, kept.state, 0), _field(bld, kept.state, 8)
    with bld.if_then(bld.and_(have, bld.icmp_unsigned("==", trip, ir.Constant(lt.I32, 0)))):
        missed = bld.icmp_unsigned("!=", bld.load(missed_at, typ=lt.I64, align=8), zero)
        idle = bld.load(idle_at, typ=lt.I64, align=8)
        bld.store(bld.select(missed, bld.add(idle, one), zero), idle_at, align=8)
        bld.store(one, missed_at, align=8)
        _choose_way(kernel, kept, tile)

    return kept.keeps(kernel, trip)


def _choose_way(kernel: Any, kept: KeptTrips, tile: AffineTile) -> None:
    """At a program's first trip: the way whose first trip is tagged with this trip's tile,
    else the next way in turn (counting the ways filled), into the state."""
    bld = kernel.b
    filled_at, way_at = _field(bld, kept.state, 24), _field(bld, kept.state, 16)
    filled = bld.load(filled_at, typ=lt.I64, align=8)
    way = bld.urem(filled, ir.Constant(lt.I64, WAYS))
    found = ir.Constant(lt.I1, 0)
    for w in range(WAYS):
        tag = kept.tag(kernel, ir.Constant(lt.I64, w * kept.trips))
        same = bld.and_(bld.and_(_tagged(bld, tag, tile), tile.whole), bld.not_(found))
        way = bld.select(same, ir.Constant(lt.I64, w), way)
        found = bld.or_(found, same)
    bld.store(bld.mul(way, ir.Constant(lt.I64, kept.trips)), way_at, align=8)
    bld.store(bld.select(found, filled, bld.add(filled, ir.Constant(lt.I64, 1))), filled_at, align=8)


def _tagged(bld: ir.IRBuilder, tag: ir.Value, tile: AffineTile) -> ir.Value:
    """Whether the tag at ``tag`` (an i64 address) names ``tile``: its first address and stride."""
    first = bld.load(_field(bld, tag, 0), typ=lt.I64, align=8)
    step = bld.load(_field(bld, tag, 8), typ=lt.I64, align=8)
    return bld.and_(bld.icmp_unsigned("==", first, tile.base), bld.icmp_unsigned("==", step, tile.stride))


def _field(bld: ir.IRBuilder, address: ir.Value, offset: int) -> ir.Value:
    """A pointer to the i64 ``offset`` bytes past ``address`` (an i64)."""
    return bld.inttoptr(bld.add(address, ir.Constant(lt.I64, offset)), lt.PTR)


def _nothing_written_first(func: Any, loop: scf.ForOp) -> bool:
    """Whether ``loop`` runs once a program (no loop encloses it) and no op that may write
    memory comes before its end."""
    around = loop.parent_op()
    while around is not None and around is not func:
        if isinstance(around, (scf.ForOp, scf.WhileOp)):
            return False
        around = around.parent_op()
    seen = False
    for op in func.walk():
        if op is loop:
            seen = True
        elif seen and not loop.is_ancestor(op):
            return True
        elif not op.regions and effect_of(op) is Effect.WRITE:
            return False
    return True
