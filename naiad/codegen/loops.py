"""The loop shapes both backends build, as LLVM IR.

`carried_loop`: the CPU and GPU lowerings loop over a dot's K, a scan's axis or a tile's
chunks; each needs an index, values carried from one step to the next (phis in the loop's
header) and the values as the loop leaves.  What each backend remembers across the loop (the
CPU's chunks, the GPU's thread coordinates) stays with the backend, around its call.

`poll`: ``tl.atomic_poll``'s spin on a flag, with the target's own load and clock.
"""

from __future__ import annotations

from typing import Callable

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt


def carried_loop(b: ir.IRBuilder, name: str, start: int, keep_going: Callable[[ir.Value], ir.Value],
                 values: list[ir.Value], body: Callable[[ir.Value, list[ir.Value]], list[ir.Value]],
                 step: int = 1) -> list[ir.Value]:
    """``k = start; while keep_going(k): values = body(k, values); k += step``, with the
    blocks ``<name>.header``, ``<name>.body`` and ``<name>.done``; returns the values as the
    loop leaves (``values`` when it runs no step), with the builder after the loop."""
    before = b.block
    header, loop, done = (b.append_basic_block(f"{name}.{part}") for part in ("header", "body", "done"))
    b.branch(header)
    b.position_at_end(header)
    k = b.phi(lt.I32)
    k.add_incoming(ir.Constant(lt.I32, start), before)
    phis = [b.phi(v.type) for v in values]
    for phi, v in zip(phis, values):
        phi.add_incoming(v, before)
    b.cbranch(keep_going(k), loop, done)
    b.position_at_end(loop)
    updated = body(k, list(phis))
    end = b.block
    for phi, v in zip(phis, updated):
        phi.add_incoming(v, end)
    k.add_incoming(b.add(k, ir.Constant(lt.I32, step)), end)
    b.branch(header)
    b.position_at_end(done)
    return phis


def poll(b: ir.IRBuilder, load: Callable[[], ir.Value], expected: ir.Value,
         clock: Callable[[], ir.Value], timeout: ir.Value | None) -> ir.Value:
    """Repeat ``load()`` until it gives ``expected`` (an i1 true) or, with ``timeout`` (ns),
    until ``clock()`` (ns) says that much has passed since the first load (false); the first
    load always happens, even for a timeout of 0."""
    start = None if timeout is None else clock()
    spin, missed, done = (b.append_basic_block(f"poll.{part}") for part in ("spin", "missed", "done"))
    b.branch(spin)
    b.position_at_end(spin)
    b.cbranch(b.icmp_unsigned("==", load(), expected), done, missed)
    b.position_at_end(missed)
    if start is None:
        b.branch(spin)
    else:
        b.cbranch(b.icmp_unsigned(">=", b.sub(clock(), start), timeout), done, spin)
    b.position_at_end(done)
    seen = b.phi(lt.I1)
    seen.add_incoming(ir.Constant(lt.I1, 1), spin)
    if start is not None:
        seen.add_incoming(ir.Constant(lt.I1, 0), missed)
    return seen
