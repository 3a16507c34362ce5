"""Which wgmma groups keep running past the dot that issued them, and where they are waited for.

A wgmma group runs asynchronously until a ``wgmma.wait_group``; a dot's result is only usable
after one.  Waiting right after each dot serializes the tensor cores with everything around
them, so a loop's dots leave their groups running where nothing reads the result meanwhile:

- **a K loop's accumulator** (``acc = tl.dot(a, b, acc)``, its one update): the next
  iteration's wgmma takes the accumulator as it is (the hardware chains the groups); each dot
  waits for the group before its own (``wait_group 1``) and the loop's last after the loop;
- **an accumulator updated in between** (attention's ``acc = tl.dot(p, v, acc * alpha)``): the
  dot's group runs on into the next iteration, over that iteration's first dot (``q @ k``),
  whose own ``wait_group 0`` waits for both; only then is the accumulator read (``acc *
  alpha``).  As Triton's pipeliner does, this overlaps the second dot with the loads and the
  first dot of the next iteration.

The tiles such a group reads must stay as they are until its wait: its operands come from rings
(whose slot is refilled after a later dot's barrier), or A from registers, which nothing writes
before the next iteration's first dot.  Groups whose wait is deferred into the next iteration
are kept as the loop's results in ``k.state["wgmma_in_flight"]`` and waited for after the loop.
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects import scf
from xdsl.ir import Operation

from naiad.backends.cuda.dot_operands import mma_version
from naiad.codegen.gpu.kernel import Dist, GPUKernel
from naiad.backends.cuda.ptx_asm import asm, unpack
from naiad.codegen import llvm_types as lt
from naiad.ir import tt
from naiad.ir.ttg import AsyncLoadOp, AsyncTensorMapLoadOp
from naiad.ir.types import shape_of

#: Registers of a thread that a deferred wait may keep live across the earlier dot (of 255;
#: the rest hold the softmax's row statistics and the loop's other values): the accumulators,
#: the A operand from registers, and the 64-bit chunk addresses of the loop's pointer loads.
_HELD_REGISTERS = 224
_IN_FLIGHT = "wgmma_in_flight"
_WAITED_EARLY = "wgmma_waited_early"


def carried_result(op: Any) -> Any:
    """The loop result a dot's accumulator becomes when the dot is the one update of a loop's
    carried accumulator (``acc = tl.dot(a, b, acc)`` in a K loop), else None."""
    loop, index = _yielded(op)
    if loop is None:
        return None
    if op.c is not loop.body.block.args[index + 1] or len(list(op.c.uses)) != 1:
        return None
    return loop.results[index]


def deferred_wait(op: Any, threads: int) -> tuple[Any, Any] | None:
    """(the earlier dot that waits for ``op``'s group, the loop-carried value it becomes) when
    ``op``'s result only goes on to the next iteration and every use of that value there comes
    after an earlier wgmma dot of the loop body; None otherwise.  Every staged load of the body
    must follow ``op``: the barrier ``op`` makes before reading its tiles comes after that
    earlier dot's wait, so no slot is refilled while the group still reads it.  And the
    registers that stay live across the earlier dot (`_held_registers`, for ``threads``
    threads) must leave room for the rest: tutorial 06's D128 forward on 4 warps holds 224
    with its K and V tiles from the copy engine (245 registers, no spills; 229 without the
    deferral), 256 with them from pointers (it spilled 340 bytes, 148 without)."""
    loop, index = _yielded(op)
    if loop is None or carried_result(op) is not None:
        return None
    block = loop.body.block
    carried = block.args[index + 1]
    ops = list(block.ops)
    here = ops.index(op)
    if any(isinstance(o, (AsyncLoadOp, AsyncTensorMapLoadOp)) for o in ops[:here]):
        return None
    users = [_in_block(use.operation, block) for use in carried.uses]
    first_use = min((ops.index(u) for u in users), default=len(ops))
    for earlier in reversed(ops[:min(here, first_use)]):
        if isinstance(earlier, tt.DotOp) and mma_version(earlier) == 3 and _yielded(earlier)[0] is None:
            held = _held_registers(op, earlier, threads) + _address_registers(block, threads)
            fits = held <= _HELD_REGISTERS
            return (earlier, carried) if fits else None
    return None


def _held_registers(op: Any, earlier: Any, threads: int) -> int:
    """32-bit registers a thread holds across ``earlier`` while ``op``'s group runs over it:
    both accumulators, and ``op``'s A operand (it may come from registers)."""
    return sum(_bytes(v) for v in (op.results[0], earlier.results[0], op.a)) // (4 * threads)


def _address_registers(block: Any, threads: int) -> int:
    """32-bit registers a thread holds for the addresses of the pointer loads that ``block``
    stages (two for each 16-byte chunk it copies); the copy engine's need none."""
    return 2 * sum(-(-_bytes(load.results[0]) // (16 * threads))
                   for load in block.ops if isinstance(load, AsyncLoadOp))


def _bytes(value: Any) -> int:
    """Bytes of a tensor value, all threads' together."""
    return math.prod(shape_of(value.type)) * lt.byte_size(lt.scalar(value.type))


def waited_with(k: GPUKernel, op: Any) -> list[Any]:
    """The loop-carried values whose groups ``op``'s wait also waits for (`deferred_wait`):
    those of the later dots of its block that defer to it.  Marks them as waited for."""
    block = op.parent_block()
    found = []
    for later in block.ops if block is not None else ():
        if isinstance(later, tt.DotOp) and later is not op:
            deferral = deferred_wait(later, 32 * k.num_warps)
            if deferral is not None and deferral[0] is op and deferral[1] in k.env:
                found.append(deferral[1])
    k.state.setdefault(_WAITED_EARLY, set()).update(found)
    return found


def may_defer(k: GPUKernel, op: Any) -> Any:
    """The loop result ``op``'s group runs on as, when its wait may be left to the next
    iteration's earlier dot (which did tie the carried value into its wait); else None."""
    deferral = deferred_wait(op, 32 * k.num_warps)
    if deferral is None or deferral[1] not in k.state.get(_WAITED_EARLY, ()):
        return None
    loop, index = _yielded(op)
    return loop.results[index]


def wait_for(k: GPUKernel, results: list[Any], carried: list[Any], text: str) -> list[Any]:
    """``text`` (a ``wgmma.wait_group``) tying the registers of ``results`` and of the
    ``carried`` values (which are rebound to what comes out); returns ``results``' values."""
    extra = [v for value in carried for v in k.env[value].values]
    every = list(results) + extra
    waited = unpack(k.b, asm(k.b, text, [v.type for v in every], [], tied=every), len(every))
    at = len(results)
    for value in carried:
        dist = k.env[value]
        k.env[value] = Dist(dist.layout, dist.shape, waited[at:at + len(dist.values)])
        at += len(dist.values)
    return waited[:len(results)]


def running(k: GPUKernel, loop_result: Any) -> None:
    """``loop_result``'s group is still running when the loop ends."""
    k.state.setdefault(_IN_FLIGHT, set()).add(loop_result)


def wait_in_flight(k: GPUKernel, loop: Any) -> None:
    """After ``loop``: wait for the wgmma groups still running on its accumulators."""
    groups = k.state.get(_IN_FLIGHT, set())
    for result in loop.results:
        if result in groups:
            dist = k.env[result]
            waited = wait_for(k, dist.values, [], "wgmma.wait_group.sync.aligned 0;")
            k.env[result] = Dist(dist.layout, dist.shape, waited)


def _yielded(op: Any) -> tuple[Any, int]:
    """(the scf.for whose body holds ``op``, the index its result has among the yielded
    values) when the result's one use is that yield; (None, -1) otherwise."""
    loop = op.parent_op()
    uses = list(op.results[0].uses)
    if not isinstance(loop, scf.ForOp) or op.parent_block() is not loop.body.block or len(uses) != 1 \
            or not isinstance(uses[0].operation, scf.YieldOp):
        return None, -1
    return loop, uses[0].index


def _in_block(op: Operation, block: Any) -> Operation:
    """``op``, or the op around it that lies in ``block``."""
    while op.parent_block() is not block:
        op = op.parent_op()
    return op
