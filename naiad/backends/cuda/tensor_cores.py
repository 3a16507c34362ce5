"""``tt.dot`` on NVIDIA tensor cores: the cuda backend's own rule for dots with a ``ttg.mma``
layout (`accelerate_matmul`); dots without one take the shared FMA rule.

**wgmma** (sm_90, mma version 3).  Each operand is in shared memory as a `SwizzledTile` --
copied there straight from global memory (`async_copies`), or stored from registers -- and the
threads wait for it; then each warpgroup issues one ``wgmma.mma_async`` per 64-row pass,
column block and K step, reading the tiles through matrix descriptors, commits them as one
group and waits for it.  A 16-bit operand is stored along whichever dimension its elements run
(the instruction's ``imm-trans`` flags say which); other types are stored K-major.  An A
operand already in an mma v3 layout of the dot's warps (attention's probabilities, computed
from the first dot's accumulator) is passed from registers: its accumulator registers are the
A fragments, two to a 32-bit register.

**mma.sync** (sm_80 on, version 2): both operands in `PaddedTile` s (A K-major, B along
whichever dimension its elements run when 16-bit, else K-major); each warp loads its A
fragments with ``ldmatrix.x4`` and its B fragments with ``ldmatrix.x2`` (``.trans`` for a B
whose rows run along N) -- 32 bytes of K per step, whatever the type -- then issues
``mma.sync.m16n8kK`` per 16x8 tile and K step (`accelerate_matmul.MMA_SYNC`).  A dot smaller
than the tile reads its rows and columns again for the tile's rest.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from xdsl.dialects import scf

from naiad.backends.cuda import async_copies
from naiad.backends.cuda.accelerate_matmul import MMA_SYNC, operand_kinds
from naiad.backends.cuda.async_copies import DeferredLoad, Staged
from naiad.backends.cuda.mma_layouts import NvidiaMma
from naiad.backends.cuda.shared_tiles import copy_global, padded_tile, store_registers, swizzled_tile
from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu import ops_control, ops_dot
from naiad.codegen.gpu.kernel import RULES as SHARED_RULES, Dist, GPUKernel, shape_of
from naiad.codegen.gpu.ptx_asm import asm, unpack
from naiad.ir import tt
from naiad.ir.ttg import AsyncLoadOp
from naiad.passes.constants import splat_value

#: PTX names of the operand kinds (`accelerate_matmul.kind`).
_PTX_TYPE = {"f16": "f16", "bf16": "bf16", "tf32": "tf32", "i8": "s8", "e4m3": "e4m3",
             "e5m2": "e5m2", "f32": "f32", "i32": "s32"}
#: Swizzle width in bytes -> the descriptor's layout-type field.
_SWIZZLE_CODE = {128: 1, 64: 2, 32: 3}


def _const(value: int) -> ir.Constant:
    return ir.Constant(lt.I32, value)


def lower_dot(k: GPUKernel, op: Any) -> None:
    """A dot on the instruction its ``ttg.mma`` layout names; on FMA without one."""
    layout = k.layout_of(op.results[0])
    if isinstance(layout, NvidiaMma) and layout.version == 3 and _wgmma(k, op, layout):
        return
    if isinstance(layout, NvidiaMma) and layout.version == 2 and _mma_sync(k, op, layout):
        return
    _fma(k, op)


def _fma(k: GPUKernel, op: Any) -> None:
    """The shared FMA rule, its operands in registers first."""
    for value in (op.a, op.b):
        async_copies.in_registers(k, value, k.layout_of(value))
    ops_dot.fma_dot(k, op)


def _place(k: GPUKernel, operand: Any, tile: Any, base: ir.Value) -> bool:
    """Put an operand into its tile at ``base`` (a staged one is there already).  True when it
    was stored from registers (the async proxy must then be fenced before wgmma reads it)."""
    if isinstance(operand, DeferredLoad):
        held = operand.op
        pointers = k.tensor(held.ptr, operand.layout).values
        masks = k.tensor(held.mask, operand.layout).values if held.mask is not None else None
        copy_global(k, pointers, masks, operand.layout, operand.shape, operand.vector, tile, base)
        return False
    if isinstance(operand, Staged):
        return False
    store_registers(k, operand, tile, base)
    return True


def _spread(operand: Any) -> tuple[L.Layout, tuple[int, int]]:
    """The layout and shape that say along which dimension an operand's elements run."""
    if isinstance(operand, Staged):
        return operand.ring.layout, operand.ring.tile.shape
    return operand.layout, operand.shape


def _tiles(k: GPUKernel, op: Any, operands: list[Any], make: Any) -> tuple[list[Any], list[ir.Value]] | None:
    """The tile and base of each operand: a staged operand's are its ring's and its slot;
    the others get tiles (``make(index, layout, shape)``) in the scratch; None when one
    cannot have a tile."""
    tiles: list[Any] = [None, None]
    bases: list[Any] = [None, None]
    scratch = []
    for i, operand in enumerate(operands):
        if operand is None:
            continue
        if isinstance(operand, Staged):
            tiles[i], bases[i] = operand.ring.tile, operand.offset
            continue
        tiles[i] = make(i, *_spread(operand))
        if tiles[i] is None:
            return None
        scratch.append(i)
    if scratch:
        offsets = k.shared_regions([tiles[i].size_bytes for i in scratch], align=1024)
        for i, offset in zip(scratch, offsets):
            bases[i] = _const(k.scratch_start + offset)
    return tiles, bases


def _stage(k: GPUKernel, op: Any, operands: list[Any], tiles: list[Any], bases: list[ir.Value],
           fence: bool) -> None:
    """Bring the operands into their tiles and make them visible to every thread (and, for
    wgmma, to the async proxy when stored from registers)."""
    b = k.b
    if any(not isinstance(o, Staged) for o in operands if o is not None):
        k.hooks.barrier(b)                     # the previous user of the scratch is done
    stored = False
    for operand, tile, base in zip(operands, tiles, bases):
        if operand is not None:
            stored = _place(k, operand, tile, base) or stored
    pending = op.attributes["ttg.pipeline_wait"].value.data if "ttg.pipeline_wait" in op.attributes else 0
    async_copies.wait(k, [o for o in operands if o is not None], pending)
    if stored and fence:
        asm(b, "fence.proxy.async.shared::cta;", [], [])
    k.hooks.barrier(b)


# -- wgmma ----------------------------------------------------------------------------------------

def _descriptor(k: GPUKernel, tile: Any, start: ir.Value) -> ir.Value:
    """The 64-bit shared-memory matrix descriptor of a block starting at byte ``start``."""
    b = k.b
    address = b.add(b.ptrtoint(k.hooks.shared_base(b), lt.I32), start)
    field = b.zext(b.and_(b.lshr(address, _const(4)), _const(0x3FFF)), lt.I64)
    fixed = ((tile.atom_bytes >> 4) << 16) | (((8 * tile.width) >> 4) << 32) | \
        (_SWIZZLE_CODE[tile.width] << 62)
    return b.or_(field, ir.Constant(lt.I64, fixed))


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
                    regs.append(_pack_pair(k, [a.values[i] for i in pair]))
            fragments[(r, q)] = regs
    return fragments


def _pack_pair(k: GPUKernel, values: list[ir.Value]) -> ir.Value:
    """Two 16-bit values (half or bf16 bits) in one 32-bit register, the first in the low half."""
    b = k.b
    low, high = (b.bitcast(v, lt.I16) if v.type == lt.F16 else v for v in values)
    return b.or_(b.zext(low, lt.I32), b.shl(b.zext(high, lt.I32), _const(16)))


def _flags(kind: str, trans_a: int | None, trans_b: int) -> str:
    """The immediates after the predicate: the scales of A and B (float types), and the
    transposition flags (16-bit types only; none for A when it comes from registers)."""
    if kind == "i8":
        return ""
    if kind in ("f16", "bf16"):
        return f", 1, 1{'' if trans_a is None else f', {trans_a}'}, {trans_b}"
    return ", 1, 1"


def _wgmma(k: GPUKernel, op: Any, layout: NvidiaMma) -> bool:
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
    placed = _tiles(k, op, [None if a_regs else a_held, b_held],
                    lambda i, spread, shape: swizzled_tile(spread, shape, types[i], 1 - i, transposable))
    if placed is None:
        return False
    (a_tile, b_tile), (a_base, b_base) = placed
    _stage(k, op, [None if a_regs else a_held, b_held], [a_tile, b_tile], [a_base, b_base], fence=True)
    acc_type = _ACC_REGISTER[c_kind]
    zero = splat_value(op.c) == 0
    acc = [] if zero else k.tensor(op.c, layout).values
    warps_m = layout.warps_per_cta[0]
    group_m = b.and_(b.lshr(k.warp, _const(2)), _const(warps_m // 4 - 1))
    group_n = b.lshr(k.warp, _const(warps_m.bit_length() - 1))
    rows, cols = layout.tile()
    reps_m, reps_n = layout.repetitions((m, n))
    elements = layout.n // 2                   # a thread's accumulator elements per instruction
    per = elements // 2 if c_kind == "f16" else elements     # ... in registers
    opcode = (f"wgmma.mma_async.sync.aligned.m64n{layout.n}k{k_instr}."
              f"{_PTX_TYPE[c_kind]}.{_PTX_TYPE[a_kind]}.{_PTX_TYPE[b_kind]}")
    trans_b = int(not b_tile.k_major)
    flags = _flags(a_kind, None if a_regs else int(not a_tile.k_major), trans_b)
    outputs = "{" + ", ".join(f"${i}" for i in range(per)) + "}"

    def issue(steps: range, start: list[ir.Value]) -> list[ir.Value]:
        """One group: the wgmma of the K ``steps`` for every block of rows and columns, from
        the accumulator elements ``start`` (none: from zero); committed."""
        results: list[ir.Value] = []
        asm(b, "wgmma.fence.sync.aligned;", [], [])
        for r in range(reps_m):
            row = b.add(b.mul(group_m, _const(64)), _const(r * rows))
            for s in range(reps_n):
                col = b.add(b.mul(group_n, _const(layout.n)), _const(s * cols))
                first = (r * reps_n + s) * elements
                regs = (_pack_accumulator(k, start[first:first + elements], c_kind) if start
                        else [ir.Constant(acc_type, 0)] * per)
                for i, q in enumerate(steps):
                    scale = _const(0 if (not start and i == 0) else 1)
                    b_desc = _descriptor(k, b_tile, b_tile.block_start(b, b_base, col, q * k_instr))
                    if a_regs is not None:
                        a_inputs = a_regs[(r, q)]
                        a_text = "{" + ", ".join(f"${per + i}" for i in range(4)) + "}"
                    else:
                        a_inputs = [_descriptor(k, a_tile, a_tile.block_start(b, a_base, row, q * k_instr))]
                        a_text = f"${per}"
                    b_text, scale_text = f"${per + len(a_inputs)}", f"${per + len(a_inputs) + 1}"
                    text = (f"{{\n.reg .pred p;\nsetp.ne.b32 p, {scale_text}, 0;\n"
                            f"{opcode} {outputs}, {a_text}, {b_text}, p{flags};\n}}")
                    regs = unpack(b, asm(b, text, [acc_type] * per, a_inputs + [b_desc, scale], tied=regs), per)
                results.extend(regs)
        asm(b, "wgmma.commit_group.sync.aligned;", [], [])
        return results

    def wait(results: list[ir.Value]) -> list[ir.Value]:
        waited = asm(b, "wgmma.wait_group.sync.aligned 0;", [acc_type] * len(results), [], tied=results)
        return _unpack_accumulator(k, unpack(b, waited, len(results)), c_kind)

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
    # A group may run on past its iteration only when the next iteration writes none of the
    # tiles it reads: its operands come from rings (the slot refilled next is the one the
    # group before used), not from the scratch, which the next iteration stores into.  (An
    # fp16 accumulator's registers are unpacked at once: its group is waited for here.)
    from_rings = a_regs is None and all(isinstance(o, Staged) for o in (a_held, b_held))
    carried = _carried_result(op) if from_rings and c_kind != "f16" else None
    if carried is None:
        k.define(result, wait(results))
        return True
    # The accumulator goes on to the next iteration's wgmma while this group runs: wait for the
    # previous group only (its tiles may then be overwritten, once every warpgroup is there),
    # and for this one after the loop (`lower_for`).
    waited = asm(b, "wgmma.wait_group.sync.aligned 1;", [acc_type] * len(results), [], tied=results)
    k.define(result, unpack(b, waited, len(results)))
    k.hooks.barrier(b)
    k.state.setdefault("wgmma_in_flight", set()).add(carried)
    return True


def _imprecise_steps(op: Any, a_kind: str, k_instr: int) -> int | None:
    """K steps one group may add up before its sum joins the accumulator in fp32: an fp8 dot
    with ``max_num_imprecise_acc`` (Hopper's fp8 wgmma adds with fewer mantissa bits than
    fp32); None for no limit."""
    limit = op.maxNumImpreciseAcc.value.data
    if a_kind not in ("e4m3", "e5m2") or limit <= 0:
        return None
    return max(1, limit // k_instr)


def _carried_result(op: Any) -> Any:
    """The loop result a dot's accumulator becomes when the dot is the one update of a loop's
    carried accumulator (``acc = tl.dot(a, b, acc)`` in a K loop), else None."""
    loop = op.parent_op()
    result = op.results[0]
    uses = list(result.uses)
    if not isinstance(loop, scf.ForOp) or len(uses) != 1 or not isinstance(uses[0].operation, scf.YieldOp):
        return None
    index = uses[0].index
    if op.c is not loop.body.block.args[index + 1] or len(list(op.c.uses)) != 1:
        return None
    return loop.results[index]


def lower_for(k: GPUKernel, op: Any) -> None:
    """The shared rule; then the loop's last copies are waited for, and so are the wgmma
    groups still running on its accumulators."""
    ops_control.lower_for(k, op)
    async_copies.drain(k, op)
    running = k.state.get("wgmma_in_flight", set())
    for result in op.results:
        if result in running:
            dist = k.env[result]
            waited = asm(k.b, "wgmma.wait_group.sync.aligned 0;", [dist.values[0].type] * len(dist.values),
                         [], tied=dist.values)
            k.env[result] = Dist(dist.layout, dist.shape, unpack(k.b, waited, len(dist.values)))


# -- mma.sync --------------------------------------------------------------------------------------

def _mma_sync(k: GPUKernel, op: Any, layout: NvidiaMma) -> bool:
    """Lower ``op`` on mma.sync; False (nothing emitted) for operand types it has no
    instruction for (an edited TTGIR's layout on an fp8 dot, say)."""
    b = k.b
    result = op.results[0]
    m, n = shape_of(result)
    depth = shape_of(op.a)[1]
    a_kind, _, c_kind = operand_kinds(op)
    if (a_kind, c_kind) not in MMA_SYNC:
        return False
    k_instr, suffix = MMA_SYNC[(a_kind, c_kind)]
    element = 32 // k_instr                    # bytes: each K step is 32 bytes of every row
    operands = [async_copies.operand(k, op.a), async_copies.operand(k, op.b)]
    types = (op.a.type, op.b.type)
    # B is read through ldmatrix.trans only when 16-bit and at least 8 columns wide
    (a_tile, b_tile), (a_base, b_base) = _tiles(
        k, op, operands, lambda i, spread, shape: padded_tile(spread, shape, types[i], 1 - i,
                                                                i == 1 and element == 2 and n >= 8))
    _stage(k, op, operands, [a_tile, b_tile], [a_base, b_base], fence=False)
    zero = splat_value(op.c) == 0
    acc = [] if zero else k.tensor(op.c, layout).values
    wm, wn = layout.warps_per_cta
    # (warps beyond the tensor's tiles repeat them, as the layout's wrapping warp bases say)
    warp_m = b.urem(k.warp, _const(min(wm, max(1, m // 16))))
    warp_n = b.urem(b.udiv(k.warp, _const(wm)), _const(min(wn, max(1, n // 8))))
    # ldmatrix: each lane gives the address of one 16-byte row of the 8x8 (b16) matrices it
    # loads; a thread's fragments are then 4 bytes of a row, whatever the element type
    row_in = b.and_(k.lane, _const(7))
    matrix = b.lshr(k.lane, _const(3))
    half = 16 // element                       # elements in 16 bytes: the second K half
    smem = b.ptrtoint(k.hooks.shared_base(b), lt.I32)
    rows, cols = layout.tile()
    reps_m, reps_n = layout.repetitions((m, n))

    def a_fragments(row0: ir.Value, q: int) -> list[ir.Value]:
        """a0..a3 of rows row0.. and the K step at q: (rows, K bytes) (0-7, 0-15), (8-15,
        0-15), (0-7, 16-31), (8-15, 16-31); rows past a smaller M repeat it."""
        row = b.add(b.add(row0, row_in), b.mul(b.and_(matrix, _const(1)), _const(8)))
        row = b.and_(row, _const(m - 1)) if m < 16 else row
        depth_ = b.add(_const(q), b.mul(b.lshr(matrix, _const(1)), _const(half)))
        address = b.add(smem, a_tile.address(b, a_base, [row, depth_]))
        return unpack(b, asm(b, "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];",
                             [lt.I32] * 4, [address]), 4)

    def b_fragments(col0: ir.Value, q: int) -> list[ir.Value]:
        """b0, b1 of columns col0.. and the K step at q: K bytes 0-15 and 16-31, through
        ``.trans`` when the tile's rows run along K (16-bit types only)."""
        if b_tile.k_major:               # rows are columns of B: lane l gives column l % 8
            col = b.add(col0, row_in)
            col = b.and_(col, _const(n - 1)) if n < 8 else col      # (a smaller N repeats)
            coords = [b.add(_const(q), b.mul(b.and_(matrix, _const(1)), _const(half))), col]
            opcode = "ldmatrix.sync.aligned.m8n8.x2.shared.b16"
        else:                            # rows are K: lane l gives K row l % 16
            coords = [b.add(_const(q), b.and_(k.lane, _const(15))), col0]
            opcode = "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16"
        address = b.add(smem, b_tile.address(b, b_base, coords))
        return unpack(b, asm(b, f"{opcode} {{$0, $1}}, [$2];", [lt.I32] * 2, [address]), 2)

    count = 2 if c_kind == "f16" else 4        # accumulator registers (fp16: two to one)
    register = _ACC_REGISTER[c_kind]
    outputs = ", ".join(f"${i}" for i in range(count))
    text = (f"mma.sync.aligned.m16n8k{k_instr}.{suffix} {{{outputs}}}, "
            f"{{${count}, ${count + 1}, ${count + 2}, ${count + 3}}}, {{${count + 4}, ${count + 5}}}, "
            f"{{{', '.join(f'${count + 6 + i}' for i in range(count))}}};")
    # A thread's 4 elements of a tile are (row, col), (row, col + 1), (row + 8, col), (row + 8,
    # col + 1); for N = 1 or M <= 8 some are repeats the layout does not hold (its register
    # bases wrap to zero): those bits of the index are dropped.
    dropped = (1 if n == 1 else 0) | (2 if m <= 8 else 0)
    kept = [j for j in range(4) if not j & dropped]
    results: list[ir.Value] = []
    for r in range(reps_m):
        row0 = b.add(b.mul(warp_m, _const(16)), _const(r * rows))
        for s in range(reps_n):
            col0 = b.add(b.mul(warp_n, _const(8)), _const(s * cols))
            first = (r * reps_n + s) * len(kept)
            held = acc[first:first + len(kept)]
            regs = (_pack_accumulator(k, [held[kept.index(j & ~dropped)] for j in range(4)], c_kind)
                    if acc else [ir.Constant(register, 0)] * count)
            for q in range(0, depth, k_instr):
                fragments = a_fragments(row0, q) + b_fragments(col0, q)
                regs = unpack(b, asm(b, text, [register] * count, fragments + regs, effects=False), count)
            values = _unpack_accumulator(k, regs, c_kind)
            results.extend(values[j] for j in kept)
    k.define(result, results)
    return True


#: The register type of each accumulator kind in the instructions (fp16: pairs in a b32).
_ACC_REGISTER = {"f32": lt.F32, "i32": lt.I32, "f16": lt.I32}


def _pack_accumulator(k: GPUKernel, values: list[ir.Value], c_kind: str) -> list[ir.Value]:
    """An accumulator's elements as the instruction's registers: fp16 column pairs packed."""
    if c_kind != "f16":
        return list(values)
    return [_pack_pair(k, values[i:i + 2]) for i in range(0, len(values), 2)]


def _unpack_accumulator(k: GPUKernel, registers: list[ir.Value], c_kind: str) -> list[ir.Value]:
    """The inverse of `_pack_accumulator`."""
    if c_kind != "f16":
        return list(registers)
    b = k.b
    values = []
    for register in registers:
        for shift in (0, 16):
            bits = b.trunc(b.lshr(register, _const(shift)) if shift else register, lt.I16)
            values.append(b.bitcast(bits, lt.F16))
    return values


#: The cuda backend's rule table: the shared rules, with tensor-core dots, the loads that feed
#: them, and the pipelined loads.
RULES = {**SHARED_RULES, tt.DotOp: lower_dot, tt.LoadOp: async_copies.lower_load,
         AsyncLoadOp: async_copies.lower_async_load, scf.ForOp: lower_for}
