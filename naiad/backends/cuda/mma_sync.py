"""``tt.dot`` on mma.sync (sm_80 on, mma version 2).

Both operands in shared-memory tiles (`shared_tiles.mma_sync_tile`: swizzled, or padded where
the rows are too short to swizzle; A K-major, B along whichever dimension its elements run when
16-bit, else K-major; `operand_staging`); each warp loads its A fragments with ``ldmatrix.x4``
and its B fragments with ``ldmatrix.x4`` for two K steps at once (``.x2`` for a last odd one;
``.trans`` for a B whose rows run along N) -- 32 bytes of K per step, whatever the type -- once
per block of rows or columns, then issues ``mma.sync.m16n8kK`` per 16x8 tile and
K step (`accelerate_matmul.MMA_SYNC`).  A dot smaller than the tile reads its rows and
columns again for the tile's rest; warps beyond the tiles repeat them.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.backends.cuda import async_copies
from naiad.backends.cuda.accelerate_matmul import MMA_SYNC, operand_kinds
from naiad.backends.cuda.accumulators import ACC_REGISTER, pack_accumulator, unpack_accumulator
from naiad.backends.cuda.mma_layouts import NvidiaMma
from naiad.backends.cuda.operand_staging import operand_tiles, stage_operands
from naiad.backends.cuda.shared_tiles import mma_sync_tile
from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu.kernel import GPUKernel, shape_of
from naiad.backends.cuda.ptx_asm import asm, unpack
from naiad.passes.constants import splat_value


def _const(value: int) -> ir.Constant:
    return ir.Constant(lt.I32, value)


def lower_mma_sync(k: GPUKernel, op: Any, layout: NvidiaMma) -> bool:
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
    (a_tile, b_tile), (a_base, b_base) = operand_tiles(
        k, op, operands, lambda i, spread, shape: mma_sync_tile(spread, shape, types[i], 1 - i,
                                                                  i == 1 and element == 2 and n >= 8))
    # the accumulator in this layout before the operands land: its conversion's scratch is theirs
    zero = splat_value(op.c) == 0
    acc = [] if zero else k.tensor(op.c, layout).values
    stage_operands(k, op, operands, [a_tile, b_tile], [a_base, b_base], fence=False)
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

    def b_fragments(col0: ir.Value, q: int, steps: int) -> list[list[ir.Value]]:
        """b0, b1 of columns col0.. for ``steps`` (1 or 2) K steps from q: K bytes 0-15 and
        16-31 of each, one ``ldmatrix`` (``.x4`` for two steps, as Triton loads them: half the
        instructions), through ``.trans`` when the tile's rows run along K (16-bit types
        only)."""
        count = 2 * steps
        if b_tile.k_major:               # rows are columns of B: lane l gives column l % 8
            col = b.add(col0, row_in)
            col = b.and_(col, _const(n - 1)) if n < 8 else col      # (a smaller N repeats)
            # matrix j of the lane's group: K half j % 2 of step j // 2
            depth_ = b.add(b.mul(b.and_(matrix, _const(1)), _const(half)),
                           b.mul(b.and_(b.lshr(matrix, _const(1)), _const(steps - 1)), _const(k_instr)))
            coords = [b.add(_const(q), depth_), col]
            opcode = f"ldmatrix.sync.aligned.m8n8.x{count}.shared.b16"
        else:                            # rows are K: lane l gives K row l % (16 * steps)
            coords = [b.add(_const(q), b.and_(k.lane, _const(16 * steps - 1))), col0]
            opcode = f"ldmatrix.sync.aligned.m8n8.x{count}.trans.shared.b16"
        address = b.add(smem, b_tile.address(b, b_base, coords))
        outputs = ", ".join(f"${i}" for i in range(count))
        loaded = unpack(b, asm(b, f"{opcode} {{{outputs}}}, [${count}];", [lt.I32] * count, [address]), count)
        return [loaded[2 * i:2 * i + 2] for i in range(steps)]

    count = 2 if c_kind == "f16" else 4        # accumulator registers (fp16: two to one)
    register = ACC_REGISTER[c_kind]
    outputs = ", ".join(f"${i}" for i in range(count))
    text = (f"mma.sync.aligned.m16n8k{k_instr}.{suffix} {{{outputs}}}, "
            f"{{${count}, ${count + 1}, ${count + 2}, ${count + 3}}}, {{${count + 4}, ${count + 5}}}, "
            f"{{{', '.join(f'${count + 6 + i}' for i in range(count))}}};")
    # A thread's 4 elements of a tile are (row, col), (row, col + 1), (row + 8, col), (row + 8,
    # col + 1); for N = 1 or M <= 8 some are repeats the layout does not hold (its register
    # bases wrap to zero): those bits of the index are dropped.
    dropped = (1 if n == 1 else 0) | (2 if m <= 8 else 0)
    kept = [j for j in range(4) if not j & dropped]
    starts = range(0, depth, k_instr)
    results: list[ir.Value] = []
    for r in range(reps_m):
        row0 = b.add(b.mul(warp_m, _const(16)), _const(r * rows))
        a_steps = [a_fragments(row0, q) for q in starts]      # each block of columns reuses them
        for s in range(reps_n):
            col0 = b.add(b.mul(warp_n, _const(8)), _const(s * cols))
            first = (r * reps_n + s) * len(kept)
            held = acc[first:first + len(kept)]
            regs = (pack_accumulator(k, [held[kept.index(j & ~dropped)] for j in range(4)], c_kind)
                    if acc else [ir.Constant(register, 0)] * count)
            b_steps = [f for i in range(0, len(starts), 2)
                       for f in b_fragments(col0, starts[i], min(2, len(starts) - i))]
            for fragments in zip(a_steps, b_steps):
                regs = unpack(b, asm(b, text, [register] * count, fragments[0] + fragments[1] + regs,
                                     effects=False), count)
            values = unpack_accumulator(k, regs, c_kind)
            results.extend(values[j] for j in kept)
    k.define(result, results)
    return True
