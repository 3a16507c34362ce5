"""Software pipelining of the loads that feed tensor-core dots (a TTGIR pass; Triton's pipeliner).

In a loop such as the K loop of a matmul, each iteration loads its tiles and then multiplies
them: the loads' latency is exposed.  With ``S`` stages (``num_stages``, or ``tl.range(...,
num_stages=)`` on the loop), the loads of iteration ``t + S - 1`` are issued in iteration ``t``,
as ``ttg.async_load`` into slot ``(t + S - 1) % S`` of a ring of ``S`` shared-memory buffers,
and their values reach the dot of their own iteration as loop-carried values:

    prologue:  the loads of iterations 0 .. S-2 (slots 0 .. S-2)
    iteration t:  dot(t) on the values carried for it (waiting for their copies only)
                  loads of iteration t + S - 1, into the slot dot(t - 1) just released
                  carry the values of t + 1 .. t + S - 1 on

A load qualifies when every use of it is an operand of a tensor-core dot of the same loop body
(one with ``ttg.mma``) -- directly or through a 2-D ``tt.trans``, and one tile must serve them
all (`dot_operands.one_tile_serves`) --, fills masked-off elements with zeros, and its pointers, mask and the loop
values they come from are computed without reading memory or reaching the dot's results: the
loop values it depends on must follow a recurrence of their own (``ptrs += step``), which the
pass runs ahead, ``S - 1`` iterations in front of the loop's own (a pointer that advances by
a step the loop does not change, in a wgmma loop, as one 64-bit offset: `_offset_recurrences`).  Loads of iterations past the
loop's end are masked off.  Each dot that takes pipelined operands gets ``ttg.pipeline_wait``,
the number of later copy groups that may still be in flight when it starts.

A ``ttng.tensor_map_load`` (a descriptor's load that the copy engine can make,
`naiad.backends.cuda.tensor_maps`) is staged the same way, as ``ttng.async_tensor_map_load``:
its slot fills with the engine's copies and completes a phase of the slot's mbarrier, which
the dots wait for; the loop carries the phase the next copies complete (it flips each time the
slots wrap around), and such loads commit no ``cp.async`` group.
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects import scf
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerAttr, IntegerType, i1, i32, i64
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from naiad.backends.cuda.dot_operands import Reader, is_transpose, mma_version, one_tile_serves, readers
from naiad.backends.cuda.shared_tiles import swizzle_bytes
from naiad.backends.cuda.tensor_maps import copy_geometry
from naiad.codegen import llvm_types as lt
from naiad.codegen.axis_info import analyze, info_of
from naiad.ir import arith, tt
from naiad.ir.ttg import AsyncLoadOp, AsyncTensorMapLoadOp, TensorMapLoadOp
from naiad.ir.types import element_type, is_tensor
from naiad.passes.constants import splat_value
from naiad.passes.loop_slices import Slice, clone_before, insert_before, moved_body, replace_loop

NUM_STAGES = "tt.num_stages"


#: The shared memory a block may opt in to, by compute capability (bytes).
_SHARED_BYTES = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448, 120: 101376}


def shared_bytes(arch: int) -> int:
    """The shared memory a block of ``arch`` may have (that of the nearest older one listed)."""
    return _SHARED_BYTES[max((a for a in _SHARED_BYTES if a <= arch), default=80)]


def pipeline(func: Any, num_stages: int, arch: int = 90) -> bool:
    """Pipeline every loop of ``func`` whose tensor-core dots take loads that qualify, for
    compute capability ``arch``; True when one was."""
    changed = False
    for loop in [op for op in func.walk() if isinstance(op, scf.ForOp)]:
        stages = loop.attributes[NUM_STAGES].value.data if NUM_STAGES in loop.attributes else num_stages
        if stages >= 2:
            changed |= _pipeline_loop(loop, stages, f"ring{_count(func)}_", analyze(func), shared_bytes(arch))
    return changed


_STAGED = (AsyncLoadOp, AsyncTensorMapLoadOp)


def _count(func: Any) -> int:
    return sum(1 for op in func.walk() if isinstance(op, _STAGED))


def _staged_readers(load: tt.LoadOp, info: dict, across: bool = True) -> list[Reader] | None:
    """The tensor-core dots that would read ``load``'s tile, when one tile copied from global
    memory can serve them all (`dot_operands.one_tile_serves`, and `_copyable` for each);
    None otherwise."""
    if not is_tensor(load.results[0].type) or len(load.results[0].type.get_shape()) != 2 or \
            load.isVolatile.value.data or \
            (load.other is not None and splat_value(load.other) != 0):
        return None
    found = readers(load.results[0])
    element = lt.byte_size(lt.memory_type(load.results[0].type))
    if found is None or not one_tile_serves(found, element) or \
            not all(_copyable(load, info, r.dot, r.k_dim, across) for r in found):
        return None
    return found


def _map_readers(load: TensorMapLoadOp) -> list[Reader] | None:
    """The wgmma dots that would read a tensor-map load's tile, when the copy engine's
    geometry (`tensor_maps.copy_geometry`: swizzled along the block's last dimension) is one
    they read: K-major, or N-major for 16-bit elements, which wgmma reads transposed; None
    otherwise."""
    result = load.results[0]
    shape = tuple(result.type.get_shape())
    element = lt.byte_size(lt.memory_type(result.type))
    found = readers(result)
    if len(shape) != 2 or found is None or not one_tile_serves(found, element) or \
            not copy_geometry(shape, element)[0]:
        return None
    if not all(mma_version(r.dot) == 3 and (element == 2 or r.k_dim == 1) for r in found):
        return None
    return found


def _load_readers(op: Any, info: dict, across: bool = True) -> list[Reader] | None:
    """The dots that would read a load's staged tile (`_staged_readers`, `_map_readers`);
    None for anything but a load the pipeliner can stage."""
    if isinstance(op, TensorMapLoadOp):
        return _map_readers(op)
    return _staged_readers(op, info, across) if isinstance(op, tt.LoadOp) else None


def _loads_of(load: Any) -> list[SSAValue]:
    """The values a load's address comes from: its pointers and mask, or a map load's offsets."""
    if isinstance(load, TensorMapLoadOp):
        return list(load.offsets)
    return [v for v in (load.ptr, load.mask) if v is not None]


def _copyable(load: tt.LoadOp, info: dict, dot: tt.DotOp, k_dim: int, across: bool = True) -> bool:
    """Whether the lowering can copy ``load`` into a tile that ``dot`` reads summing over the
    load's dimension ``k_dim``: 16-byte (at least 4-byte) chunks along the dimension its
    pointers run, which must be K unless the elements are 16-bit (those tiles may be
    transposed) or 4-byte (copied one element at a time across the rows of a K-major tile,
    as tf32 dots need: their tiles cannot be read transposed; unless ``across`` is False), and
    a swizzle that fits the tile."""
    shape = load.results[0].type.get_shape()
    element = lt.byte_size(lt.memory_type(load.results[0].type))
    ptr = info_of(info, load.ptr)
    mask = info.get(load.mask) if load.mask is not None else None
    along = max((0, 1), key=lambda d: (ptr.contiguity[d], d))
    vector = min(ptr.contiguity[along], 16 // element, max(1, ptr.divisibility[along] // element))
    if mask is not None:
        vector = min(vector, mask.constancy[along])
    if vector * element < 4:
        return False
    if along != k_dim and element != 2:
        if element != 4 or not across:
            return False
        along = k_dim                            # a K-major tile, one element a copy
    if mma_version(dot) == 2:
        return along == k_dim or k_dim == 0      # mma.sync: B may be transposed (ldmatrix.trans)
    inner = along if element == 2 else k_dim
    return bool(swizzle_bytes(shape[inner] * element)) and shape[1 - inner] % 8 == 0


def _candidates(body: Block, info: dict, across: bool = True) -> tuple[list[tt.LoadOp], set[BlockArgument]]:
    """The loads to pipeline and the carried values their recurrences run ahead (``across``:
    `_copyable`)."""
    loads = []
    for op in body.ops:
        found = _load_readers(op, info, across)
        if found is not None and all(r.dot.parent_block() is body for r in found):
            loads.append(op)
    yields = body.last_op
    while True:
        slices = {load: Slice(body, _loads_of(load)) for load in loads}
        loads = [load for load in loads if slices[load].ok]
        recurrences = set().union(*(slices[load].carried for load in loads)) if loads else set()
        bad = set()
        for arg in recurrences:
            update = Slice(body, [yields.operands[arg.index - 1]])
            if not update.ok or not update.carried <= recurrences:
                bad.add(arg)
        if not bad:
            return loads, recurrences
        loads = [load for load in loads if not slices[load].carried & bad]


def _constant(before: Operation, value: int, type_: Any) -> SSAValue:
    return insert_before(before, arith.ConstantOp(IntegerAttr(value, type_)))


def _iteration(before: Operation, loop: scf.ForOp, base: SSAValue, ahead: int) -> tuple[SSAValue, SSAValue]:
    """(the induction variable ``ahead`` iterations after ``base``, whether it is in range)."""
    if ahead:
        distance = insert_before(before, arith.MuliOp(loop.step, _constant(before, ahead, loop.step.type)))
        base = insert_before(before, arith.AddiOp(base, distance))
    return base, insert_before(before, arith.CmpiOp(base, loop.ub, "slt"))


def _async_load(load: Any, mapping: dict, valid: SSAValue, slot: SSAValue, phase: SSAValue,
                ring: str, stages: int, body: Block, before: Operation) -> SSAValue:
    """``load`` for another iteration (its sources through ``mapping``), staged in ``slot``
    (completing ``phase`` of its mbarrier, for a map load); off where ``valid`` is false."""
    clone_before(Slice(body, _loads_of(load)).ops, mapping, before)
    if isinstance(load, TensorMapLoadOp):
        offsets = [mapping.get(o, o) for o in load.offsets]
        return insert_before(before, AsyncTensorMapLoadOp(load.desc, offsets, valid, slot, phase,
                                                    load.results[0].type, ring, stages))
    ptr = mapping.get(load.ptr, load.ptr)
    shape = load.results[0].type.get_shape()
    mask = insert_before(before, tt.SplatOp(valid, shape))
    if load.mask is not None:
        mask = insert_before(before, arith.AndIOp(mapping.get(load.mask, load.mask), mask))
    value_type = load.results[0].type
    zero = 0 if isinstance(element_type(value_type), IntegerType) else 0.0
    other = insert_before(before, arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(value_type, [zero])))
    return insert_before(before, AsyncLoadOp(ptr, mask, other, slot, ring, stages))


def _hoist_invariant_operands(loop: scf.ForOp, ring_prefix: str, info: dict) -> bool:
    """A load before the loop whose value the loop's dots read in every iteration (the Q tile
    of attention; the K and V tiles of its backward, read by two loops) goes to shared memory
    once, as a one-slot ``ttg.async_load``, rather than being stored there again in every
    iteration."""
    changed = False
    for load in list(loop.parent_block().ops):
        found = _load_readers(load, info)
        if found is None or not any(loop.is_ancestor(r.dot) for r in found):
            continue
        zero = _constant(load, 0, i32)
        valid = insert_before(load, arith.ConstantOp(IntegerAttr(1, i1)))
        staged = _async_load(load, {}, valid, zero, zero, f"{ring_prefix}q{_count_ops(loop)}", 1,
                             load.parent_block(), load)
        load.results[0].replace_all_uses_with(staged)
        load.detach()
        load.erase()
        changed = True
    return changed


def _count_ops(loop: scf.ForOp) -> int:
    return sum(1 for op in loop.parent_block().ops if isinstance(op, _STAGED))


def _ring_bytes(loads: list[Any], stages: int) -> int:
    """The shared memory the rings of ``loads`` take, ``stages`` slots each (1024-byte aligned)."""
    sizes = [lt.byte_size(lt.memory_type(load.results[0].type)) * math.prod(load.results[0].type.get_shape())
             for load in loads]
    return stages * sum(-(-size // 1024) * 1024 for size in sizes)


def _pipeline_loop(loop: scf.ForOp, stages: int, ring_prefix: str, info: dict, shared_limit: int) -> bool:
    """Pipeline ``loop``'s loads, ``stages`` deep.  Copies across a tile's rows (4-byte
    elements into a K-major tile) put a tile in the ring that would otherwise go through
    registers into one scratch tile: where the rings would not fit in ``shared_limit`` bytes
    (the most a block has on the target), that tile goes the register way (a tf32 128x256x64
    matmul, 3 stages: 288 KiB of rings, 160 KiB so)."""
    body = loop.body.block
    hoisted = _hoist_invariant_operands(loop, ring_prefix, info)
    loads, recurrences = _candidates(body, info)
    if _ring_bytes(loads, stages) > shared_limit:
        loads, recurrences = _candidates(body, info, across=False)
    if not loads:
        return hoisted
    ahead = stages - 1
    recurrences = sorted(recurrences, key=lambda a: a.index)
    yields = body.last_op
    updates = {arg: Slice(body, [yields.operands[arg.index - 1]]) for arg in recurrences}
    rings = [f"{ring_prefix}{i}" for i in range(len(loads))]
    # -- prologue: the loads of iterations 0 .. ahead-1, the recurrences run ahead
    values = {arg: loop.iter_args[arg.index - 1] for arg in recurrences}
    prologue: list[list[SSAValue]] = [[] for _ in loads]
    phase0 = _constant(loop, 0, i32)
    for j in range(ahead):
        iv, valid = _iteration(loop, loop, loop.lb, j)
        mapping: dict[SSAValue, SSAValue] = {body.args[0]: iv, **values}
        slot = _constant(loop, j, i32)
        for f, load in enumerate(loads):
            prologue[f].append(_async_load(load, dict(mapping), valid, slot, phase0, rings[f], stages,
                                           body, loop))
        step: dict[SSAValue, SSAValue] = dict(mapping)
        for arg in recurrences:
            clone_before(updates[arg].ops, step, loop)
        values = {arg: step.get(yields.operands[arg.index - 1], yields.operands[arg.index - 1])
                  for arg in recurrences}
    # pointers that advance by a step the loop does not change are carried as one offset
    strides = _offset_recurrences(body, recurrences, yields)
    bases = {arg: values[arg] for arg in strides}
    for arg in strides:
        values[arg] = _constant(loop, 0, i64)
    # -- the new loop: the old carried values, the recurrences ahead, the staged loads, the
    # slot the next copies go to and the phase they complete (0 until the slots wrap around)
    inits = list(loop.iter_args) + [values[arg] for arg in recurrences] + \
        [v for row in prologue for v in row] + [_constant(loop, ahead % stages, i32), phase0]
    block = moved_body(body, [values[a].type for a in recurrences] +
                       [v.type for row in prologue for v in row] + [i32, i32])
    n_old = len(body.args)
    future = dict(zip(recurrences, block.args[n_old:n_old + len(recurrences)]))
    staged = block.args[n_old + len(recurrences):-2]
    slot, phase = block.args[-2], block.args[-1]
    new_yield = block.last_op
    # each load's value for this iteration is the first it carries
    carried = [list(staged[f * ahead:(f + 1) * ahead]) for f in range(len(loads))]
    for f, load in enumerate(loads):
        load.results[0].replace_all_uses_with(carried[f][0])
    # the loads of iteration t + ahead, at the end of the body
    iv_ahead, valid = _iteration(new_yield, loop, block.args[0], ahead)
    mapping = {block.args[0]: iv_ahead, **{block.args[arg.index]: future[arg] for arg in recurrences}}
    for arg in strides:
        offsets = insert_before(new_yield, tt.SplatOp(future[arg], bases[arg].type.get_shape()))
        mapping[block.args[arg.index]] = insert_before(new_yield, tt.AddPtrOp(bases[arg], offsets))
    issued = [_async_load(load, dict(mapping), valid, slot, phase, rings[f], stages, block, new_yield)
              for f, load in enumerate(loads)]
    step = dict(mapping)
    for arg in recurrences:
        if arg not in strides:
            clone_before(Slice(block, [new_yield.operands[arg.index - 1]]).ops, step, new_yield)
    for arg, stride in strides.items():
        if isinstance(stride, int):
            wide = _constant(new_yield, stride, i64)
        else:
            wide = stride if stride.type == i64 else insert_before(new_yield, arith.ExtSIOp(stride, i64))
        step[arg] = insert_before(new_yield, arith.AddiOp(future[arg], wide))
    futures_next = [step[arg] if arg in strides else
                    step.get(new_yield.operands[arg.index - 1], new_yield.operands[arg.index - 1])
                    for arg in recurrences]
    one = _constant(new_yield, 1, i32)
    bumped = insert_before(new_yield, arith.AddiOp(slot, one))
    wrap = insert_before(new_yield, arith.CmpiOp(bumped, _constant(new_yield, stages, i32), "eq"))
    slot_next = insert_before(new_yield, arith.SelectOp(wrap, _constant(new_yield, 0, i32), bumped))
    flipped = insert_before(new_yield, arith.XOrIOp(phase, one))
    phase_next = insert_before(new_yield, arith.SelectOp(wrap, flipped, phase))
    operands = list(new_yield.operands) + futures_next + \
        [v for f in range(len(loads)) for v in carried[f][1:] + [issued[f]]] + [slot_next, phase_next]
    for load in loads:
        load.detach()
        load.erase()
    replace_loop(loop, block, inits, operands)
    _mark_waits(block, [c for c, load in zip(carried, loads) if isinstance(load, tt.LoadOp)], ahead)
    return True


def _offset_recurrences(body: Block, recurrences: list[BlockArgument], yields: Operation) -> dict:
    """The pointer recurrences ``ptrs = ptrs + step`` (``step`` a splat of a constant or of a
    value defined before the loop) of a loop whose dots are all on wgmma, each with its step
    (an int for a constant): the loop carries their distance from the prologue's last
    pointers as one 64-bit offset, and each copy's address is made from it and that invariant
    pointer (one 64-bit add a chunk, into a register of its own, as Triton's loop has it)
    instead of a pointer that advances in place -- which the loop's branch waited for until
    every copy of the iteration had read it (ptxas's read barrier).  Under ncu on the H200 (in place / this way / Triton): 8192^3
    fp16 2.42 M / 2.24 M / 2.24 M cycles, bf16 2.42 M / 2.24 M / 2.24 M, 4096^3 379 k / 367 k /
    358 k, M = 64 66.5 k / 63.5 k / 63.1 k, M = 128 89.1 k / 87.1 k / 85.7 k; tf32 4096^3 3.04 M /
    3.10 M / 2.95 M (the one that lost)."""
    dots = [op for op in body.ops if isinstance(op, tt.DotOp)]
    if not dots or any(mma_version(d) != 3 for d in dots):
        return {}
    found = {}
    for arg in recurrences:
        update = yields.operands[arg.index - 1].owner
        if not isinstance(update, tt.AddPtrOp) or update.ptr is not arg:
            continue
        if splat_value(update.offset) is not None:
            found[arg] = int(splat_value(update.offset))
            continue
        if not isinstance(update.offset.owner, tt.SplatOp):
            continue
        stride = update.offset.owner.operands[0]
        inside = stride.block is body if isinstance(stride, BlockArgument) else \
            stride.owner.parent_block() is body and not isinstance(stride.owner, arith.ConstantOp)
        if inside:
            continue
        found[arg] = stride
    return found


def strength_reduction(module: Any) -> bool:
    """Whether the kernel's PTX is emitted with LLVM's loop strength reduction on
    (`target.emit_ptx`): when its tensor-core dots are all on mma.sync.  Without it each
    copy's pointer advances in place, and the loop's branch waits until every copy of the
    iteration has read its pointer; with it the copies read addresses made afresh from one
    advancing base.  Under ncu on the H200 (one launch each; without / with): the M = 16
    skinny matmul (mma.sync) 90.0 k / 64.6 k cycles (Triton 68.1 k); wgmma, before its loops
    made their addresses themselves (`_offset_recurrences`): M = 64 65.4 k / 80.9 k, M = 128
    90.1 k / 95.8 k, 4096^3 370 k / 387 k, 8192^3 2.40 M / 2.58 M -- LSR's addresses from
    32-bit offsets cost more there than the wait did."""
    versions = {mma_version(op) for op in module.walk() if isinstance(op, tt.DotOp)} - {None}
    return versions == {2}


def _mark_waits(block: Block, carried: list[list[SSAValue]], ahead: int) -> None:
    """``ttg.pipeline_wait`` on each dot taking staged values: the copy groups issued after
    those of its own iteration -- the later families of this iteration and the other loads of
    ``ahead - 1`` later iterations -- may still be in flight.  ``carried``: the values of the
    families that copy with ``cp.async`` (a map load's copies complete on their mbarrier and
    commit no group)."""
    families = len(carried)
    first = {values[0]: f for f, values in enumerate(carried)}
    for op in block.ops:
        if isinstance(op, tt.DotOp):
            sources = [v.owner.src if is_transpose(v.owner) else v for v in (op.a, op.b)]
            used = [first[v] for v in sources if v in first]
            if used:
                pending = (ahead - 1) * families + (families - 1 - max(used))
                op.attributes["ttg.pipeline_wait"] = IntegerAttr(pending, i32)

