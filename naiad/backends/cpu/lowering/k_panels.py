"""A loop's tile dots gathered over several trips into panels of K, multiplied once per panel.

A matmul kernel's K loop runs ``acc = tl.dot(a, b, acc)`` over K blocks of 32-64.  On AMX tiles
(`amx_matmul`) each dot loads every 16 x 16 accumulator tile of ``acc`` from memory and stores
it back, around as few as one tile multiply per block: with the tutorial's K block of 32 in
bf16, the accumulator's traffic costs more than the multiplies.  Where the loop's accumulator
is this dot's alone -- it feeds only this dot, whose result only goes back into it
(`control.dot_destination`) -- nothing reads it between trips, so the multiply can wait: each
trip copies its operands into its slot of a panel (A's ``[M, K]`` blocks one after another,
B's grouped ``[K, N]`` blocks likewise, which together read as one grouped ``[slots * K, N]``),
and every ``slots``-th trip multiplies the whole panel, each accumulator tile loaded and stored
once.  After the loop, a panel left part full is multiplied too.  The sums are added in the
same order as trip by trip, so the results are the same to the bit.

On the Xeon of the lent machine, the bench's matmul with four times the K per dot ran
1.12-1.46x faster in bf16 and 1.11-1.25x in int8; with panels, at the K block of 32 (bf16) or
64 (int8), 2048^3 ran 1.10-1.35x faster, best against best of four noisy runs each
(docs/PERFORMANCE.md, session 30).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import llvmlite.ir as ir
from xdsl.dialects import scf

from naiad.backends.cpu.lowering.operand_cache import KeptTrips, copy_unless_kept, kept_trips
from naiad.backends.cpu.lowering.tiles import Buffer, numel
from naiad.codegen import llvm_types as lt

#: Tile steps of K a panel holds (4 x 32 bf16, 4 x 64 int8).
PANEL_STEPS = 4
#: ... and where the accumulator is larger than `L1_ACCUMULATOR` bytes (a 128 x 128 fp32 block):
#: it no longer stays in the first-level cache between panels, so each panel loads and stores it
#: from the second; longer panels do that less often.  On the Xeon, one thread, bf16 2048^3
#: with 128-wide tiles: 353-381 -> 425-437 GFLOP/s; 64-wide tiles lost 10 % this way
#: (docs/PERFORMANCE.md, session 31).
WIDE_PANEL_STEPS = 16
L1_ACCUMULATOR = 32 << 10
#: The most bytes of operands a panel keeps on the stack (A's and B's slots together).
PANEL_BYTES = 256 << 10


@dataclasses.dataclass(frozen=True)
class Panel:
    """The slots of one dot's operands: ``a`` and ``b`` the first slot of each (later slots
    follow, one operand's size apart), ``slot`` this trip's (an i32) and ``trip`` the trip's
    number (from 0); ``loop`` the dot's `scf.for` and ``counter`` its induction variable,
    lower bound and step; ``kept`` A's and B's copies kept across programs
    (`operand_cache`), where they are: trips that have a place there are copied there
    instead, a whole panel of them being one after another there as in the slots."""

    a: Buffer
    b: Buffer
    slots: int
    slot: ir.Value
    trip: ir.Value
    loop: scf.ForOp
    counter: tuple[ir.Value, ir.Value, ir.Value]
    kept: tuple[KeptTrips | None, KeptTrips | None]

    def fill(self, kernel: Any, operand: int, value: Any, copy: Callable[[Buffer], None]) -> Buffer:
        """Operand ``operand`` (0: A, 1: B) of this trip, ``value``, copied by ``copy(slot)``
        into its slot, or its kept place -- unless a program before kept the same tile
        there; returns where it is."""
        first, kept = (self.a, self.b)[operand], self.kept[operand]
        slot = _slot(kernel, first, self.slot)
        if kept is None:
            copy(slot)
            return slot
        return copy_unless_kept(kernel, kept, value, self.trip, slot, copy)

    def first_slots(self, kernel: Any, trip: ir.Value) -> tuple[Buffer, Buffer]:
        """A's and B's first slot of the panel whose first trip is ``trip``."""
        def first(slot: Buffer, kept: KeptTrips | None) -> Buffer:
            if kept is None:
                return slot
            place = kernel.b.select(kept.keeps(kernel, trip), kept.place(kernel, kept.slot(kernel, trip)), slot.ptr)
            return Buffer(place, slot.mlir_type)

        return first(self.a, self.kept[0]), first(self.b, self.kept[1])


def panel(kernel: Any, op: Any, k_step: int, destination: Buffer | None) -> Panel | None:
    """The panel ``op`` (a 2-D dot, one of ``k_step`` K per tile step) gathers its trips in,
    or None where it multiplies as it goes: its accumulator is not the loop's alone (no
    ``destination``, `control.dot_destination`), or its K block already makes a panel, or two
    would not fit `PANEL_BYTES`."""
    if len(op.a.type.get_shape()) != 2 or destination is None:
        return None
    k_dim = op.a.type.get_shape()[1]
    operand_bytes = sum(numel(v.type) * lt.byte_size(lt.memory_type(v.type)) for v in (op.a, op.b))
    accumulator_bytes = numel(op.c.type) * lt.byte_size(lt.memory_type(op.c.type))
    steps = WIDE_PANEL_STEPS if accumulator_bytes > L1_ACCUMULATOR else PANEL_STEPS
    slots = min(steps * k_step // k_dim, PANEL_BYTES // operand_bytes)
    if slots < 2:
        return None
    loop = op.parent_op()
    counter = _counter(kernel, loop)
    trip = trip_number(kernel, loop)
    slot = kernel.b.urem(trip, ir.Constant(lt.I32, slots))
    a, b = (kernel.buffer(v.type, copies=slots) for v in (op.a, op.b))
    kept = tuple(kept_trips(kernel, v, loop, slots) for v in (op.a, op.b))
    return Panel(a, b, slots, slot, trip, loop, counter, kept)


def multiply(kernel: Any, gathered: Panel, run: Callable[[int | ir.Value, Buffer, Buffer], None]) -> None:
    """``run(k_blocks, a, b)`` (the dot over the panel's first ``k_blocks`` slots, from A's and
    B's first) when this trip fills the panel, and after the loop over the slots its last
    trips filled, if any."""
    bld = kernel.b
    full = bld.icmp_unsigned("==", gathered.slot, ir.Constant(lt.I32, gathered.slots - 1))
    first = bld.sub(gathered.trip, gathered.slot)
    kernel.choose(full, lambda: run(gathered.slots, *gathered.first_slots(kernel, first)), lambda: None, None)

    def rest() -> None:                     # at the loop's exit: the induction variable's last value
        trips = _trip(bld, *gathered.counter)
        filled = bld.urem(trips, ir.Constant(lt.I32, gathered.slots))
        kernel.choose(bld.icmp_unsigned("!=", filled, ir.Constant(lt.I32, 0)),
                      lambda: run(filled, *gathered.first_slots(kernel, bld.sub(trips, filled))),
                      lambda: None, None)

    kernel.after_loop(gathered.loop, rest)


def trip_number(kernel: Any, loop: scf.ForOp) -> ir.Value:
    """Which trip of ``loop`` this is, counted from 0 (an i32)."""
    return _trip(kernel.b, *_counter(kernel, loop))


def _counter(kernel: Any, loop: scf.ForOp) -> tuple[ir.Value, ir.Value, ir.Value]:
    """``loop``'s induction variable (its phi in the loop's header), lower bound and step."""
    return tuple(kernel.scalar(v) for v in (loop.body.block.args[0], loop.lb, loop.step))


def _trip(bld: ir.IRBuilder, iv: ir.Value, lb: ir.Value, step: ir.Value) -> ir.Value:
    """Which trip of a loop ``iv`` is at, counted from 0 (an i32): ``(iv - lb) / step``."""
    trip = bld.sdiv(bld.sub(iv, lb), step)
    return trip if trip.type == lt.I32 else bld.trunc(trip, lt.I32)


def _slot(kernel: Any, first: Buffer, slot: ir.Value) -> Buffer:
    start = kernel.b.mul(slot, ir.Constant(lt.I32, numel(first.mlir_type)))
    return Buffer(kernel.chunks.element_pointer(first, start), first.mlir_type)
