"""``ttng.tensor_map_load`` / ``ttng.tensor_map_store`` as copies of the tensor memory
accelerator (``cp.async.bulk.tensor``, sm_90).

A load: the first thread arms an ``mbarrier`` with the block's bytes and asks the copy engine
for the block, which lands row-major in the op's shared-memory scratch (elements outside the
tensor as the map's fill); every thread waits on the barrier's phase, then reads its elements
in the result's layout.  A store: every thread writes its elements there, fences them for the
copy engine (``fence.proxy.async``: ordinary stores and the engine's reads are different
proxies), and after a barrier the first thread sends the block (the engine writes no element
outside the tensor) and waits until the engine has read it, so the scratch can be reused.

The barrier is initialized at each use, after the barrier that ends the scratch's previous use,
so its phase is always the first (parity 0).  Coordinates go innermost first, as the map's
dimensions do.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.backends.cuda.ptx_asm import asm
from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu.kernel import GPUKernel, numel, shape_of

#: Where a copy's block starts: the copy engine wants 128-byte aligned shared memory.
_BLOCK_ALIGN = 128


def _const(value: int) -> ir.Constant:
    return ir.Constant(lt.I32, value)


def _scratch(k: GPUKernel, nbytes: int) -> tuple[ir.Value, ir.Value]:
    """Shared addresses (32-bit) of a block of ``nbytes`` at the scratch's start and of the
    8-byte mbarrier after it."""
    block, barrier = k.shared_regions([nbytes, 8], align=_BLOCK_ALIGN)
    smem = k.b.ptrtoint(k.hooks.shared_base(k.b), lt.I32)
    return (k.b.add(smem, _const(k.scratch_start + block)),
            k.b.add(smem, _const(k.scratch_start + barrier)))


def _coordinates(k: GPUKernel, offsets: Any, first: int) -> tuple[list[ir.Value], str]:
    """The block's offsets innermost first, and their PTX operand list (``$first`` on)."""
    values = [k.scalar(o) for o in reversed(list(offsets))]
    return values, ", ".join(f"${first + i}" for i in range(len(values)))


def lower_load(k: GPUKernel, op: Any) -> None:
    result = op.results[0]
    layout, shape = k.layout_of(result), shape_of(result)
    storage = lt.scalar(result.type)
    nbytes = numel(shape) * lt.byte_size(lt.memory_type(result.type))
    b = k.b
    block, barrier = _scratch(k, nbytes)
    desc = k.scalar(op.desc)
    coords, operands = _coordinates(k, op.offsets, 2)
    indices = [k.linear(c, shape) for c in k.coordinates(layout, shape)]
    rank = len(shape)
    k.hooks.barrier(b)                       # the scratch's previous users are done

    def start() -> None:
        asm(b, "mbarrier.init.shared::cta.b64 [$0], 1;", [], [barrier])
        asm(b, "fence.mbarrier_init.release.cluster;", [], [])
        asm(b, f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {nbytes};", [], [barrier])
        asm(b, f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
               f"[$0], [$1, {{{operands}}}], [${rank + 2}];", [], [block, desc, *coords, barrier])
    k.when(k.is_thread0(), start)
    k.hooks.barrier(b)                       # the barrier is initialized before anyone waits
    _wait(k, barrier, 0)
    memory = lt.memory_type(result.type)
    k.define(result, [lt.from_memory(b, k.read_shared(index, memory), storage) for index in indices])


def _wait(k: GPUKernel, barrier: ir.Value, parity: int) -> None:
    """Spin until phase ``parity`` of the mbarrier at ``barrier`` has completed."""
    b = k.b
    spin, ready = b.append_basic_block("tma_wait"), b.append_basic_block("tma_ready")
    b.branch(spin)
    b.position_at_end(spin)
    done = asm(b, "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; "
                  "selp.u32 $0, 1, 0, p; }", [lt.I32], [barrier, _const(parity)])
    b.cbranch(b.icmp_unsigned("!=", done, _const(0)), ready, spin)
    b.position_at_end(ready)


def lower_store(k: GPUKernel, op: Any) -> None:
    value = op.value
    shape = shape_of(value)
    dist = k.tensor(value)
    nbytes = numel(shape) * lt.byte_size(lt.memory_type(value.type))
    b = k.b
    block, _ = _scratch(k, nbytes)
    desc = k.scalar(op.desc)
    coords, operands = _coordinates(k, op.offsets, 1)
    indices = [k.linear(c, shape) for c in k.coordinates(dist.layout, shape)]
    k.hooks.barrier(b)
    for index, element in zip(indices, dist.values):
        k.write_shared(index, element)
    asm(b, "fence.proxy.async.shared::cta;", [], [])
    k.hooks.barrier(b)

    def send() -> None:
        asm(b, f"cp.async.bulk.tensor.{len(shape)}d.global.shared::cta.tile.bulk_group "
               f"[$0, {{{operands}}}], [${len(coords) + 1}];", [], [desc, *coords, block])
        asm(b, "cp.async.bulk.commit_group;", [], [])
        asm(b, "cp.async.bulk.wait_group.read 0;", [], [])
    k.when(k.is_thread0(), send)
    k.hooks.barrier(b)                       # the scratch is free once the engine has read it
