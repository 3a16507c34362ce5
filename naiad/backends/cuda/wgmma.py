"""``tt.dot`` on wgmma (sm_90, mma version 3).

Each operand is in shared memory as a `SwizzledTile` (`operand_staging`); then each warpgroup
issues one ``wgmma.mma_async`` per 64-row pass, column block and K step, reading the tiles
through matrix descriptors, commits them as one group and waits for it -- or leaves it running
into the next iteration where nothing reads the result meanwhile (`wgmma_groups`: a K loop's
accumulator, attention's second dot).  A 16-bit operand is stored along whichever dimension its elements run (the instruction's ``imm-trans``
flags say which); other types are stored K-major.  An A operand already in an mma v3 layout
of the dot's warps (attention's probabilities, computed from the first dot's accumulator) is
passed from registers: its accumulator registers are the A fragments, two to a 32-bit
register.  An fp8 dot with ``max_num_imprecise_acc`` adds each group of that many K into the
accumulator in fp32.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.backends.cuda import async_copies, wgmma_groups
from naiad.backends.cuda.accelerate_matmul import operand_kinds
from naiad.backends.cuda.accumulators import ACC_REGISTER, pack_accumulator, pack_pair, unpack_accumulator
from naiad.backends.cuda.async_copies import Staged
from naiad.backends.cuda.mma_layouts import NvidiaMma
from naiad.backends.cuda.operand_staging import operand_tiles, stage_operands
from naiad.backends.cuda.shared_tiles import swizzled_tile
from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import Dist, GPUKernel, shape_of
from naiad.backends.cuda.ptx_asm import asm, unpack
from naiad.passes.constants import splat_value

#: PTX names of the operand kinds (`accelerate_matmul.kind`).
PTX_TYPE = {"f16": "f16", "bf16": "bf16", "tf32": "tf32", "i8": "s8", "e4m3": "e4m3",
            "e5m2": "e5m2", "f32": "f32", "i32": "s32"}
#: Swizzle width in bytes -> the descriptor's layout-type field.
_SWIZZLE_CODE = {128: 1, 64: 2, 32: 3}


def _const(value: int) -> ir.Constant:
    return ir.Constant(lt.I32, value)


def _descriptor(k: GPUKernel, tile: Any, start: ir.Value, fixed: bool) -> tuple[ir.Value, int]:
    """The shared-memory matrix descriptor of a tile whose first byte is ``start``, as its low
    32 bits (a value) and its high 32 bits (a constant: the stride and the swizzle).  A
    shared-memory address is below 2^18 bytes, so its 16-byte units fill the 14-bit address
    field without a mask and never carry into the leading-byte offset above it: the low word
    is one shift-and-add, and each instruction's block (`_block_descriptor`) one 32-bit add --
    no 64-bit carries (the masked, or-ed 64-bit form cost the 8-warp matmul 15 of its 114
    loop instructions).

    A tile at a ``fixed`` place (hoisted out of the loop, or in the scratch) has a low word
    that does not change in a loop: it comes through a ``mov`` LLVM may not move, so that its
    blocks' descriptors are built where they are used.  LLVM hoisted every instruction's
    64-bit descriptor out of the loop, and ptxas kept them in two registers each or spilled
    them (tutorial 06's D128 causal backward: 26 of the 27 reloads from local memory in each
    dQ loop, 1,160 bytes of stack; 920 this way)."""
    b = k.b
    address = b.add(b.ptrtoint(k.hooks.shared_base(b), lt.I32), start)
    low = b.add(b.lshr(address, _const(4)), _const((tile.atom_bytes >> 4) << 16))
    if fixed:
        low = asm(b, "mov.b32 $0, $1;", [lt.I32], [low])
    return low, ((8 * tile.width) >> 4) | (_SWIZZLE_CODE[tile.width] << 30)


def _fixed(held: Any) -> bool:
    """Whether an operand's tile stays at one place: anything but a slot of a ring of several."""
    return not (isinstance(held, Staged) and held.ring.stages > 1)


def _block_descriptor(k: GPUKernel, tile: Any, descriptor: tuple[ir.Value, int], index: ir.Value,
                      depth: int) -> ir.Value:
    """The 64-bit descriptor of one instruction's block (M or N ``index``, K ``depth``): the
    tile's ``descriptor`` with the block's offset (in 16-byte units) added to its address."""
    b = k.b
    low, high = descriptor
    offset = b.lshr(tile.block_start(b, _const(0), index, depth), _const(4))
    return b.or_(b.zext(b.add(low, offset), lt.I64), ir.Constant(lt.I64, high << 32))


def _a_from_registers(k: GPUKernel, op: Any, a: Any, layout: NvidiaMma) -> dict | None:
    """(m-pass, k-step) -> the four 32-bit A fragments, when ``a`` is a `Dist` in an mma v3
    layout whose thread mapping the instruction's A fragments share (the warps along M, one
    column of warpgroups); None otherwise."""
    if not isinstance(a, Dist):
        return None
    source = a.layout
    if not isinstance(source, NvidiaMma) or source.version != 3 or lt.byte_size(lt.scalar(op.a.type)) != 2:
        return None
    if source.warps_per_cta[0] != layout.warps_per_cta[0] or source.warps_per_cta[1] != 1:
        return None
    where = {offset: i for i, offset in enumerate(L.linear_of(source, a.shape).offsets())}
    m, depth = a.shape
    rows = 16 * layout.warps_per_cta[0]
    fragments = {}
    for r in range(m // rows):
        for q in range(depth // 16):
            regs = []
            for half in (0, 8):            # a0/a1: columns 16q..; a2/a3: 16q + 8..
                for h in (0, 8):           # the row and the row 8 below
                    pair = [where.get((r * rows + h, 16 * q + half + j)) for j in (0, 1)]
                    if None in pair:
                        return None
                    regs.append(pack_pair(k, [a.values[i] for i in pair]))
            fragments[(r, q)] = regs
    return fragments


def _uniform_warp(k: GPUKernel) -> ir.Value:
    """The warp index broadcast from lane 0 by a shuffle, made once, in the entry block: ptxas
    then knows it is the same in every lane, and the wgmma descriptors of a warpgroup after the
    first, built from it, stay in uniform registers.  From the plain quotient they were built in
    vector registers and moved over by an R2UR before every wgmma of the loop (the 8-warp
    128x256x64 matmul: 190 registers, 134 SASS instructions in the loop; 186 and 114 this way).
    Only the descriptors take it: as the warp index of every layout, it cost tutorial 06's
    D128 forward 13 registers, and spills in the causal one."""
    warp = k.state.get("uniform warp")
    if warp is None:
        with k.b.goto_entry_block():
            warp = k.state["uniform warp"] = k.hooks.shuffle_index(k.b, k.warp, _const(0))
    return warp


def _flags(kind: str, trans_a: int | None, trans_b: int) -> str:
    """The immediates after the predicate: the scales of A and B (float types), and the
    transposition flags (16-bit types only; none for A when it comes from registers)."""
    if kind == "i8":
        return ""
    if kind in ("f16", "bf16"):
        return f", 1, 1{'' if trans_a is None else f', {trans_a}'}, {trans_b}"
    return ", 1, 1"


def lower_wgmma(k: GPUKernel, op: Any, layout: NvidiaMma) -> bool:
    """Lower ``op`` on wgmma; False (nothing emitted) when an operand cannot have a tile."""
    b = k.b
    result = op.results[0]
    m, n = shape_of(result)
    a_kind, b_kind, c_kind = operand_kinds(op)
    k_instr = layout.instr_shape[2]
    depth = shape_of(op.a)[1]
    a_held, b_held = async_copies.operand(k, op.a), async_copies.operand(k, op.b)
    a_regs = _a_from_registers(k, op, a_held, layout)
    transposable = a_kind in ("f16", "bf16")
    types = (op.a.type, op.b.type)
    placed = operand_tiles(k, op, [None if a_regs else a_held, b_held],
                    lambda i, spread, shape: swizzled_tile(spread, shape, types[i], 1 - i, transposable))
    if placed is None:
        return False
    (a_tile, b_tile), (a_base, b_base) = placed
    # The accumulator in this layout first: a conversion goes through the scratch that operand
    # tiles stored from registers take, and after them it overwrote what the wgmma then read.
    zero = splat_value(op.c) == 0
    acc = [] if zero else k.tensor(op.c, layout).values
    # A group may run on past its iteration only when the next iteration writes none of the
    # tiles it reads before its wait: its operands come from rings (the slot refilled next is
    # the one the group before used), not from the scratch, which the next iteration stores
    # into.  (An fp16 accumulator's registers are unpacked at once: its group is waited for
    # here.)  `wgmma_groups` says which groups qualify.
    from_rings = a_regs is None and all(isinstance(o, Staged) for o in (a_held, b_held))
    carried = wgmma_groups.carried_result(op) if from_rings and c_kind != "f16" else None
    kept = isinstance(b_held, Staged) and (a_regs is not None or isinstance(a_held, Staged))
    deferred = wgmma_groups.may_defer(k, op) if carried is None and kept and c_kind != "f16" else None
    stage_operands(k, op, [None if a_regs else a_held, b_held], [a_tile, b_tile], [a_base, b_base], fence=True,
                   waits_at_once=carried is None and deferred is None)
    acc_type = ACC_REGISTER[c_kind]
    warps_m = layout.warps_per_cta[0]
    warp = _uniform_warp(k) if k.num_warps > 4 else k.warp
    group_m = b.and_(b.lshr(warp, _const(2)), _const(warps_m // 4 - 1))
    group_n = b.lshr(warp, _const(warps_m.bit_length() - 1))
    rows, cols = layout.tile()
    reps_m, reps_n = layout.repetitions((m, n))
    elements = layout.n // 2                   # a thread's accumulator elements per instruction
    per = elements // 2 if c_kind == "f16" else elements     # ... in registers
    opcode = (f"wgmma.mma_async.sync.aligned.m64n{layout.n}k{k_instr}."
              f"{PTX_TYPE[c_kind]}.{PTX_TYPE[a_kind]}.{PTX_TYPE[b_kind]}")
    trans_b = int(not b_tile.k_major)
    flags = _flags(a_kind, None if a_regs else int(not a_tile.k_major), trans_b)
    outputs = "{" + ", ".join(f"${i}" for i in range(per)) + "}"

    def issue(steps: range, start: list[ir.Value]) -> list[ir.Value]:
        """One group: the wgmma of the K ``steps`` for every block of rows and columns, from
        the accumulator elements ``start`` (none: from zero); committed."""
        results: list[ir.Value] = []
        b_whole = _descriptor(k, b_tile, b_base, _fixed(b_held))
        a_whole = None if a_regs is not None else _descriptor(k, a_tile, a_base, _fixed(a_held))
        asm(b, "wgmma.fence.sync.aligned;", [], [])
        for r in range(reps_m):
            row = b.add(b.mul(group_m, _const(64)), _const(r * rows))
            for s in range(reps_n):
                col = b.add(b.mul(group_n, _const(layout.n)), _const(s * cols))
                first = (r * reps_n + s) * elements
                regs = (pack_accumulator(k, start[first:first + elements], c_kind) if start
                        else [ir.Constant(acc_type, 0)] * per)
                for i, q in enumerate(steps):
                    scale = _const(0 if (not start and i == 0) else 1)
                    b_desc = _block_descriptor(k, b_tile, b_whole, col, q * k_instr)
                    if a_regs is not None:
                        a_inputs = a_regs[(r, q)]
                        a_text = "{" + ", ".join(f"${per + i}" for i in range(4)) + "}"
                    else:
                        a_inputs = [_block_descriptor(k, a_tile, a_whole, row, q * k_instr)]
                        a_text = f"${per}"
                    b_text, scale_text = f"${per + len(a_inputs)}", f"${per + len(a_inputs) + 1}"
                    text = (f"{{\n.reg .pred p;\nsetp.ne.b32 p, {scale_text}, 0;\n"
                            f"{opcode} {outputs}, {a_text}, {b_text}, p{flags};\n}}")
                    regs = unpack(b, asm(b, text, [acc_type] * per, a_inputs + [b_desc, scale], tied=regs), per)
                results.extend(regs)
        asm(b, "wgmma.commit_group.sync.aligned;", [], [])
        return results

    def wait(results: list[ir.Value]) -> list[ir.Value]:
        """Wait for every group: this one, and those of later dots that defer to it."""
        waited = wgmma_groups.wait_for(k, results, wgmma_groups.waited_with(k, op),
                                       "wgmma.wait_group.sync.aligned 0;")
        return unpack_accumulator(k, waited, c_kind)

    steps = depth // k_instr
    chunk = _imprecise_steps(op, a_kind, k_instr)
    if chunk is not None:
        # each group's sum joins the fp32 accumulator by an add of its own
        total = acc
        for first_step in range(0, steps, chunk):
            partial = wait(issue(range(first_step, min(first_step + chunk, steps)), []))
            # ("contract": there is no product to fuse with; PTX then says add.f32, as Triton's)
            total = [b.fadd(t, p, flags=("contract",)) for t, p in zip(total, partial)] if total else partial
        k.define(result, total)
        return True
    results = issue(range(steps), acc)
    if carried is not None:
        # The accumulator goes on to the next iteration's wgmma while this group runs: wait for
        # the previous group only (its tiles may then be overwritten, once every warpgroup is
        # there), and for this one after the loop.
        k.define(result, wgmma_groups.wait_for(k, results, [], "wgmma.wait_group.sync.aligned 1;"))
        k.hooks.barrier(b)
        wgmma_groups.running(k, carried)
        return True
    if deferred is not None:
        # waited for by the next iteration's first dot (`wgmma_groups.deferred_wait`)
        k.define(result, results)
        wgmma_groups.running(k, deferred)
        return True
    k.define(result, wait(results))
    return True


def _imprecise_steps(op: Any, a_kind: str, k_instr: int) -> int | None:
    """K steps one group may add up before its sum joins the accumulator in fp32: an fp8 dot
    with ``max_num_imprecise_acc`` (Hopper's fp8 wgmma adds with fewer mantissa bits than
    fp32); None for no limit."""
    limit = op.maxNumImpreciseAcc.value.data
    if a_kind not in ("e4m3", "e5m2") or limit <= 0:
        return None
    return max(1, limit // k_instr)
