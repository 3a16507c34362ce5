"""Dot operands that go from global memory straight into shared memory, never into registers.

A tensor-core dot reads its operands from shared memory; staging a tile through registers
costs as many registers as the tile has elements per thread, which is what large tiles run
short of.  Two kinds of operand skip the registers (``cp.async`` copies, zero-filled where the
mask is off):

- a `DeferredLoad`: a ``tt.load`` whose one use is as an operand of the tensor-core dot next to
  it (no store in between) is not lowered where it stands; the dot copies it into its tile;
- a `Staged` value: a ``ttg.async_load`` of the pipelining pass (`pipeline`) copies into a slot
  of its ring of shared-memory buffers when it runs, commits its copies as one group, and its
  value -- the slot -- is carried by the loop to the dot, which waits for that group.

The rings live for the whole kernel: `prepare` reserves them before any op is lowered.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import llvmlite.ir as ir
from xdsl.dialects import scf

from naiad.backends.cuda import tma
from naiad.backends.cuda.dot_operands import readers_of_use
from naiad.backends.cuda.shared_tiles import (copy_global, mma_sync_tile, read_registers, slot_bytes,
                                             swizzled_tile)
from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu import ops_memory
from naiad.codegen.gpu.kernel import Dist, GPUKernel, is_tensor, shape_of
from naiad.codegen.gpu.ops_control import Carried
from naiad.ir import tt
from naiad.ir.ttg import AsyncLoadOp, AsyncTensorMapLoadOp
from naiad.passes.constants import splat_value
from naiad.passes.effects import Effect, effect_of


@dataclasses.dataclass(frozen=True)
class DeferredLoad:
    """A ``tt.load`` left for the dot that is its one use to copy; ``layout`` is its
    pointers' (which thread copies which chunk), ``vector`` the elements of one copy."""

    op: Any
    layout: L.Layout
    shape: tuple[int, int]
    vector: int


@dataclasses.dataclass(frozen=True)
class Ring:
    """The shared memory of one pipelined load: ``stages`` slots of ``tile``, from ``base``."""

    tile: Any
    base: int
    stages: int
    layout: L.Layout
    vector: int

    @property
    def slot_bytes(self) -> int:
        return slot_bytes(self.tile)


@dataclasses.dataclass(frozen=True)
class Staged(Carried):
    """A tile in a slot of a ring: ``offset`` is the slot's byte in shared memory (an i32).
    A tile the copy engine brings (`naiad.backends.cuda.tma`) also has the shared address of
    the slot's mbarrier and the phase (0 or 1) its copy completes: what a reader waits for."""

    ring: Any
    offset: ir.Value
    #: The ring's tile as this value reads it: transposed, for a ``tt.trans`` of a staged tile.
    tile: Any
    barrier: ir.Value | None = None
    phase: ir.Value | None = None

    def carried_values(self) -> list[ir.Value]:
        return [self.offset] if self.barrier is None else [self.offset, self.barrier, self.phase]

    def rebuilt(self, values: list[ir.Value]) -> "Staged":
        return dataclasses.replace(self, offset=values[0], **(
            {} if self.barrier is None else {"barrier": values[1], "phase": values[2]}))

    def transposed(self) -> "Staged":
        return dataclasses.replace(self, tile=self.tile.transposed())


def copy_vector(k: GPUKernel, op: Any, layout: L.Layout, shape: tuple[int, int]) -> int:
    """Elements one copy of ``op``'s chunks may move (4, 8 or 16 bytes), or 0 when none may."""
    element = lt.byte_size(lt.memory_type(op.results[0].type))
    vector = ops_memory.vector_width(k, op, layout, shape, element)
    return vector if vector * element in (4, 8, 16) else 0


def tile_vector(tile: Any, layout: L.Layout, shape: tuple[int, int], vector: int) -> int:
    """Elements one copy moves into ``tile`` when ``vector`` may move together: ``vector``
    where a thread's chunks run along the tile's rows; 1 where they run across them and one
    element is 4 bytes (each copied to its place in its row, as a tf32 dot's N-major B goes
    into the K-major tile wgmma reads); 0 when no copy fits."""
    if L.run_length(layout, shape, tile.inner) >= vector:
        return vector
    return 1 if tile.element_bytes == 4 else 0


def _reached_uses(value: Any) -> list[Any]:
    """Every use of ``value``, directly or carried on through loops (into a loop's body as an
    iteration argument, and on to the next iteration through its yield)."""
    seen, stack, reached = set(), [value], []
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        for use in current.uses:
            reached.append(use)
            user = use.operation
            if isinstance(user, scf.YieldOp) and isinstance(user.parent_op(), scf.ForOp):
                stack.append(user.parent_op().body.block.args[use.index + 1])
            elif isinstance(user, scf.ForOp) and use.index >= 3:
                stack.append(user.body.block.args[use.index - 2])
    return reached


def _consumer(value: Any) -> tuple[tt.DotOp, int] | None:
    """The tensor-core dot ``value`` ends up as an operand of -- directly, through a 2-D
    transpose, or carried through loops -- and the dimension of ``value`` it sums over."""
    for use in _reached_uses(value):
        found = readers_of_use(use)
        if found:
            return found[0].dot, found[0].k_dim
    return None


def tile_for(k: GPUKernel, dot: tt.DotOp, k_dim: int, layout: L.Layout, shape: tuple[int, int],
             mlir_type: Any) -> Any:
    """The tile an operand of ``dot`` that sums over its dimension ``k_dim``, spread by
    ``layout``, goes to; None when wgmma cannot read one."""
    mma = L.parse_layout(dot.attributes["ttg.mma"].data)
    transposable = lt.byte_size(lt.memory_type(mlir_type)) == 2
    if mma.version == 2:                 # only B (summing over its rows), through ldmatrix.trans
        return mma_sync_tile(layout, shape, mlir_type, k_dim, k_dim == 0 and transposable)
    return swizzled_tile(layout, shape, mlir_type, k_dim, transposable)


def prepare(k: GPUKernel) -> None:
    """Reserve each ring of the kernel's ``ttg.async_load`` ops, live from its first copy to
    the end of the loop that carries it (rings whose loops follow one another share memory)."""
    spans: dict[str, list[Any]] = {}
    for op in k.func_op.walk():
        if isinstance(op, (AsyncLoadOp, AsyncTensorMapLoadOp)):
            spans.setdefault(op.ring.data, []).extend(_live_span(op))
    for op in k.func_op.walk():
        if isinstance(op, AsyncTensorMapLoadOp) and ("ring", op.ring.data) not in k.state:
            k.state[("ring", op.ring.data)] = tma.map_ring(k, op, _consumer(op.results[0]), spans[op.ring.data])
        if not isinstance(op, AsyncLoadOp) or ("ring", op.ring.data) in k.state:
            continue
        result = op.results[0]
        layout, shape = k.layout_of(result), shape_of(result)
        consumer = _consumer(result)
        tile = tile_for(k, *consumer, layout, shape, result.type) if consumer is not None else None
        vector = tile_vector(tile, layout, shape, copy_vector(k, op, layout, shape)) if tile is not None else 0
        if not vector:
            raise NotImplementedError(f"ttg.async_load of {result.type} that cannot be copied "
                                      f"into a tile its dot reads")
        stages = op.stages.value.data
        slot = slot_bytes(tile)
        base = k.reserve_shared(stages * slot, spans[op.ring.data], 1024)
        k.state[("ring", op.ring.data)] = Ring(tile, base, stages, layout, vector)


def _live_span(op: Any) -> list[Any]:
    """The ops of ``op``'s block from ``op`` on to the last one that holds a use of its value
    (a loop carrying it, or a later loop whose dots read the same tile: a tile hoisted out of
    two loops lives through both); while they are lowered its ring is live.  A load inside a
    loop: the loop."""
    loop = op.parent_op()
    if isinstance(loop, scf.ForOp):
        return [loop]
    block = op.parent_block()
    holders = set()
    for use in _reached_uses(op.results[0]):
        holder = use.operation
        while holder is not None and holder.parent_block() is not block:
            holder = holder.parent_op()
        holders.add(holder)
    ops = list(block.ops)
    start = ops.index(op)
    last = max((i for i, o in enumerate(ops) if o in holders), default=start)
    return ops[start:last + 1]


def lower_async_load(k: GPUKernel, op: AsyncLoadOp) -> None:
    """Copy into the slot, commit the copies as one group; the value is the slot.  The ring's
    first copies (a prologue's, or a tile's hoisted out of its loop) wait at a barrier for
    every thread: the ring's memory may have served something before -- the scratch of an
    epilogue's conversion, a ring of an earlier loop -- that a slower warp still reads (tutorial
    06's backward: its dQ part's Q tile lands where the dK/dV stores' conversion is read)."""
    ring: Ring = k.state[("ring", op.ring.data)]
    b = k.b
    if ("started", op.ring.data) not in k.state:
        k.state[("started", op.ring.data)] = True
        k.hooks.barrier(b)
    result = op.results[0]
    layout, shape = k.layout_of(result), shape_of(result)
    offset = b.add(b.mul(k.scalar(op.slot), ir.Constant(lt.I32, ring.slot_bytes)), ir.Constant(lt.I32, ring.base))
    pointers = k.tensor(op.ptr, layout).values
    masks = k.tensor(op.mask, layout).values
    copy_global(k, pointers, masks, layout, shape, ring.vector, ring.tile, offset)
    commit_group(b)
    k.env[result] = Staged(ring, offset, ring.tile)


def lower_async_map_load(k: GPUKernel, op: AsyncTensorMapLoadOp) -> None:
    """The copy engine's copies into the slot; the value is the slot, with its mbarrier and
    the phase its copies complete."""
    offset, barrier = tma.start_slot(k, op)
    ring = k.state[("ring", op.ring.data)]
    k.env[op.results[0]] = Staged(ring, offset, ring.tile, barrier, k.scalar(op.phase))


def commit_group(b: ir.IRBuilder) -> None:
    """``cp.async.commit_group`` through LLVM's intrinsic (as Triton's PTX has it): LLVM
    orders it with every memory access, as the inline assembly's clobber did."""
    b.call(lt.function(b.module, "llvm.nvvm.cp.async.commit.group", lt.VOID, []), [])


def wait_group(b: ir.IRBuilder, pending: int) -> None:
    """``cp.async.wait_group pending`` through LLVM's intrinsic."""
    b.call(lt.function(b.module, "llvm.nvvm.cp.async.wait.group", lt.VOID, [lt.I32]),
           [ir.Constant(lt.I32, pending)])


def drain(k: GPUKernel, loop: scf.ForOp) -> None:
    """After a pipelined loop: its last copies (for iterations past the end, zero-filling
    their slots) may still be landing, in shared memory the rings give back to what follows
    the loop; every thread waits for its own, then for all the others'."""
    if any(isinstance(op, AsyncLoadOp) for op in loop.body.block.ops):
        wait_group(k.b, 0)
        k.hooks.barrier(k.b)


def lower_load(k: GPUKernel, op: Any) -> None:
    """A load in a loop (one the pipeliner left alone) that only feeds the tensor-core dot
    next to it is deferred to the dot, which copies it straight into shared memory; any other
    is the shared rule's (outside loops, as in Triton: vector loads into registers, then
    stores into the tile -- as fast, once)."""
    deferred = _deferrable(k, op)
    if deferred is None:
        ops_memory.load(k, op)
    else:
        k.env[op.results[0]] = deferred


def _deferrable(k: GPUKernel, op: Any) -> DeferredLoad | None:
    result = op.results[0]
    if not is_tensor(result) or len(shape_of(result)) != 2 or op.isVolatile.value.data or \
            not isinstance(op.parent_op(), scf.ForOp):
        return None
    uses = list(result.uses)
    if len(uses) != 1:
        return None
    dot = uses[0].operation
    if not isinstance(dot, tt.DotOp) or "ttg.mma" not in dot.attributes or uses[0].index > 1 or \
            dot.parent_block() is not op.parent_block():
        return None
    between = op.next_op
    while between is not dot:
        if effect_of(between) is Effect.WRITE:
            return None                  # a store could change what the load reads
        between = between.next_op
    if op.other is not None and splat_value(op.other) != 0:
        return None                      # masked-off elements of a copy are zeros
    layout, shape = k.layout_of(result), shape_of(result)
    vector = copy_vector(k, op, layout, shape)
    tile = tile_for(k, dot, 1 - uses[0].index, layout, shape, result.type) if vector > 1 else None
    if tile is None or L.run_length(layout, shape, tile.inner) < vector:
        return None                      # the copies' chunks must run along the tile's rows
    return DeferredLoad(op, layout, shape, vector)


def operand(k: GPUKernel, value: Any) -> Any:
    """A dot operand as it is held: a `DeferredLoad`, a `Staged` tile, or its `Dist`."""
    held = k.env[value]
    return held if isinstance(held, (DeferredLoad, Staged)) else k.tensor(value)


def in_registers(k: GPUKernel, value: Any, layout: L.Layout) -> Any:
    """A dot operand as a `Dist` after all (for the FMA path)."""
    held = k.env[value]
    if isinstance(held, DeferredLoad):
        ops_memory.load(k, held.op)
        return k.tensor(value, layout)
    if isinstance(held, Staged):
        wait(k, [held], 0)
        k.hooks.barrier(k.b)
        values = read_registers(k, held.tile, held.offset, layout, shape_of(value), lt.scalar(value.type))
        k.env[value] = Dist(layout, shape_of(value), values)
        return k.env[value]
    return k.tensor(value, layout)


def wait(k: GPUKernel, operands: list[Any], pending: int) -> None:
    """Wait for the copies of ``operands``: those of a deferred load were just issued (commit
    them, wait for all); a staged tile's group is older than ``pending`` later ones; a tile
    of the copy engine's has its mbarrier's phase."""
    if any(isinstance(o, DeferredLoad) for o in operands):
        commit_group(k.b)
        wait_group(k.b, 0)
    elif any(isinstance(o, Staged) and o.barrier is None for o in operands):
        wait_group(k.b, pending)
    for o in operands:
        if isinstance(o, Staged) and o.barrier is not None:
            tma.wait(k, o.barrier, o.phase)
