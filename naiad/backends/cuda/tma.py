"""``ttng.tensor_map_load`` / ``ttng.tensor_map_store`` as copies of the tensor memory
accelerator (``cp.async.bulk.tensor``, sm_90).

A load: the first thread arms an ``mbarrier`` with the block's bytes and asks the copy engine
for the block, which lands in the op's shared-memory scratch (elements outside the tensor as
the map's fill) -- swizzled, one copy per swizzle atom, where its rows allow
(`naiad.backends.cuda.tensor_maps.copy_geometry`), else row-major; every thread waits on the
barrier's phase, then reads its elements in the result's layout.  A store: every thread writes
its elements there, fences them for the copy engine (``fence.proxy.async``: ordinary stores and
the engine's reads are different proxies), and after a barrier the first thread sends the
block and waits until the engine has read it, so the scratch can be reused.

The barrier is initialized at each use, after the barrier that ends the scratch's previous use,
so its phase is always the first (parity 0).  Coordinates go innermost first, as the map's
dimensions do.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import llvmlite.ir as ir

from naiad.backends.cuda.ptx_asm import asm
from naiad.backends.cuda.matrix_stores import store_tile
from naiad.backends.cuda.shared_tiles import SwizzledTile, read_registers, slot_bytes, store_registers
from naiad.backends.cuda.tensor_maps import copy_geometry
from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu.kernel import GPUKernel, numel, shape_of

#: Where a copy's block starts: 1024-byte aligned, where a swizzle's pattern starts (the
#: copy engine and wgmma swizzle on address bits).
_BLOCK_ALIGN = 1024


def _const(value: int) -> ir.Constant:
    return ir.Constant(lt.I32, value)


def _block(k: GPUKernel, shape: tuple[int, ...], element_bytes: int) -> "_Block":
    """Where one op's block lies: its scratch (the shared-memory byte of the block, and the
    32-bit shared addresses of the block and of the 8-byte mbarrier after it) and geometry."""
    nbytes = numel(shape) * element_bytes
    block, barrier = k.shared_regions([nbytes, 8], align=_BLOCK_ALIGN)
    smem = k.b.ptrtoint(k.hooks.shared_base(k.b), lt.I32)
    offset = k.scratch_start + block
    swizzle, box = copy_geometry(shape, element_bytes)
    tile = SwizzledTile(tuple(shape), 1, 1, element_bytes, swizzle) if swizzle else None
    return _Block(_const(offset), k.b.add(smem, _const(offset)),
                  k.b.add(smem, _const(k.scratch_start + barrier)), tile, box, tuple(shape),
                  element_bytes, nbytes)


@dataclasses.dataclass(frozen=True)
class _Block:
    offset: ir.Value
    address: ir.Value
    barrier: ir.Value
    tile: SwizzledTile | None
    box: tuple[int, ...]
    shape: tuple[int, ...]
    element_bytes: int
    nbytes: int

    def copies(self, b: ir.IRBuilder, coords: list[ir.Value]) -> list[tuple[ir.Value, list[ir.Value]]]:
        return _copies(b, self.tile, self.box, self.address, coords, self.shape, self.element_bytes)


def _coordinates(k: GPUKernel, op: Any) -> list[ir.Value]:
    """An op's block offsets innermost first, as the map's dimensions go."""
    return [k.scalar(o) for o in reversed(list(op.offsets))]


def _copies(b: ir.IRBuilder, tile: SwizzledTile | None, box: tuple[int, ...], address: ir.Value,
            coords: list[ir.Value], shape: tuple[int, ...], element_bytes: int
            ) -> list[tuple[ir.Value, list[ir.Value]]]:
    """(shared address, coordinates innermost first) of each copy of a block of ``shape`` at
    ``address`` whose first element is at ``coords``: one per swizzle atom of ``tile``; without
    a tile, one per ``box`` along the last dimension (more than one only for a single row:
    `copy_geometry`), one after another -- and each of those once per ``box[0]`` rows of a
    block of more rows than a box has."""
    step = box[-1]
    pitch = tile.atom_bytes if tile is not None else step * element_bytes
    rows = box[0] if len(shape) > 1 else shape[0]
    row_pitch = tile.width if tile is not None else numel(shape[1:]) * element_bytes
    copies = []
    for row in range(0, shape[0], rows):
        for a in range(shape[-1] // step):
            at = [b.add(coords[0], _const(a * step)) if a else coords[0], *coords[1:]]
            if row:
                at[-1] = b.add(at[-1], _const(row))
            offset = a * pitch + row * row_pitch
            copies.append((b.add(address, _const(offset)) if offset else address, at))
    return copies


def _issue(b: ir.IRBuilder, desc: ir.Value, barrier: ir.Value, nbytes: int,
           copies: list[tuple[ir.Value, list[ir.Value]]]) -> None:
    """Arm ``barrier`` with the bytes to come and ask the copy engine for each copy."""
    asm(b, f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {nbytes};", [], [barrier])
    for address, at in copies:
        rank = len(at)
        asm(b, f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
               f"[$0], [$1, {{{_operands(2, rank)}}}], [${rank + 2}];", [], [address, desc, *at, barrier])


def _init_barriers(b: ir.IRBuilder, barriers: list[ir.Value]) -> None:
    for barrier in barriers:
        asm(b, "mbarrier.init.shared::cta.b64 [$0], 1;", [], [barrier])
    asm(b, "fence.mbarrier_init.release.cluster;", [], [])


def _operands(first: int, count: int) -> str:
    return ", ".join(f"${first + i}" for i in range(count))


def lower_load(k: GPUKernel, op: Any) -> None:
    result = op.results[0]
    layout, shape = k.layout_of(result), shape_of(result)
    storage, memory = lt.scalar(result.type), lt.memory_type(result.type)
    b = k.b
    block = _block(k, shape, lt.byte_size(memory))
    desc = k.scalar(op.desc)
    coords = _coordinates(k, op)
    indices = None if block.tile is not None else [k.linear(c, shape) for c in k.coordinates(layout, shape)]
    k.hooks.barrier(b)                       # the scratch's previous users are done

    def start() -> None:
        _init_barriers(b, [block.barrier])
        _issue(b, desc, block.barrier, block.nbytes, block.copies(b, coords))
    k.when(k.is_thread0(), start)
    k.hooks.barrier(b)                       # the barrier is initialized before anyone waits
    wait(k, block.barrier, _const(0))
    if block.tile is not None:
        values = read_registers(k, block.tile, block.offset, layout, shape, storage)
    else:
        values = [lt.from_memory(b, k.read_shared(index, memory), storage) for index in indices]
    k.define(result, values)


def wait(k: GPUKernel, barrier: ir.Value, parity: ir.Value) -> None:
    """Spin until the phase of parity ``parity`` (an i32, 0 or 1) of the mbarrier at shared
    address ``barrier`` has completed."""
    b = k.b
    spin, ready = b.append_basic_block("tma_wait"), b.append_basic_block("tma_ready")
    b.branch(spin)
    b.position_at_end(spin)
    done = asm(b, "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; "
                  "selp.u32 $0, 1, 0, p; }", [lt.I32], [barrier, parity])
    b.cbranch(b.icmp_unsigned("!=", done, _const(0)), ready, spin)
    b.position_at_end(ready)


def lower_store(k: GPUKernel, op: Any) -> None:
    value = op.value
    shape = shape_of(value)
    dist = k.tensor(value)
    b = k.b
    block = _block(k, shape, lt.byte_size(lt.memory_type(value.type)))
    desc = k.scalar(op.desc)
    coords = _coordinates(k, op)
    rank = len(shape)
    indices = None if block.tile is not None else [k.linear(c, shape) for c in k.coordinates(dist.layout, shape)]
    k.hooks.barrier(b)
    if block.tile is not None:
        if not store_tile(k, dist, block.tile, block.offset):
            store_registers(k, dist, block.tile, block.offset)
    else:
        for index, element in zip(indices, dist.values):
            k.write_shared(index, element)
    asm(b, "fence.proxy.async.shared::cta;", [], [])
    k.hooks.barrier(b)

    opcode = (f"cp.async.bulk.tensor.{rank}d.global.shared::cta" if op.reduce is None else
              f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{op.reduce.data}")

    def send() -> None:
        for address, at in block.copies(b, coords):
            asm(b, f"{opcode}.tile.bulk_group [$0, {{{_operands(1, rank)}}}], [${rank + 1}];", [],
                [desc, *at, address])
        asm(b, "cp.async.bulk.commit_group;", [], [])
        asm(b, "cp.async.bulk.wait_group.read 0;", [], [])
    k.when(k.is_thread0(), send)
    k.hooks.barrier(b)                       # the scratch is free once the engine has read it


# == pipelined loads ================================================================================
@dataclasses.dataclass(frozen=True)
class MapRing:
    """The shared memory of one pipelined map load (`naiad.backends.cuda.pipeline`):
    ``stages`` slots of ``tile`` from byte ``base``, then an 8-byte mbarrier per slot from byte
    ``barriers``; ``box`` is what one copy moves."""

    tile: SwizzledTile
    base: int
    stages: int
    barriers: int
    box: tuple[int, ...]

    @property
    def slot_bytes(self) -> int:
        return slot_bytes(self.tile)


def map_ring(k: GPUKernel, op: Any, consumer: tuple[Any, int] | None, span: list[Any]) -> MapRing:
    """Reserve the ring of ``ttng.async_tensor_map_load`` ``op`` (live while ``span`` is
    lowered): its tile is the copy engine's swizzled geometry, read by ``consumer`` (the dot and
    the dimension it sums over)."""
    result = op.results[0]
    shape = shape_of(result)
    element = lt.byte_size(lt.memory_type(result.type))
    swizzle, box = copy_geometry(tuple(shape), element)
    if consumer is None or not swizzle:
        raise NotImplementedError(f"ttng.async_tensor_map_load of {result.type} that no "
                                  f"tensor-core dot reads from a swizzled tile")
    tile = SwizzledTile(tuple(shape), 1, consumer[1], element, swizzle)
    stages = op.stages.value.data
    slot = slot_bytes(tile)
    base = k.reserve_shared(stages * slot + 8 * stages, span, 1024)
    return MapRing(tile, base, stages, base + stages * slot, box)


def start_slot(k: GPUKernel, op: Any) -> tuple[ir.Value, ir.Value]:
    """The copies of one slot of ``ttng.async_tensor_map_load`` ``op``'s ring: the first thread
    arms the slot's mbarrier and asks for them, where ``op.valid``; (the slot's byte in shared
    memory, its mbarrier's shared address).  The ring's first op (a prologue's, before its
    loop) starts its mbarriers, after a barrier: each entry to the loop finds them at phase 0."""
    ring: MapRing = k.state[("ring", op.ring.data)]
    b = k.b
    smem = b.ptrtoint(k.hooks.shared_base(b), lt.I32)
    if ("started", op.ring.data) not in k.state:
        k.state[("started", op.ring.data)] = True
        barriers = [b.add(smem, _const(ring.barriers + 8 * s)) for s in range(ring.stages)]
        k.hooks.barrier(b)
        k.when(k.is_thread0(), lambda: _init_barriers(b, barriers))
        k.hooks.barrier(b)
    slot = k.scalar(op.slot)
    offset = b.add(b.mul(slot, _const(ring.slot_bytes)), _const(ring.base))
    barrier = b.add(smem, b.add(b.mul(slot, _const(8)), _const(ring.barriers)))
    desc = k.scalar(op.desc)
    coords = _coordinates(k, op)
    copies = _copies(b, ring.tile, ring.box, b.add(smem, offset), coords, ring.tile.shape,
                     ring.tile.element_bytes)
    k.when(b.and_(k.is_thread0(), k.scalar(op.valid)),
           lambda: _issue(b, desc, barrier, ring.tile.size_bytes, copies))
    return offset, barrier
