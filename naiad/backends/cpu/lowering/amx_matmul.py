"""bf16 and int8 ``tt.dot`` on Intel AMX tiles.

One ``tdpbf16ps`` adds the product of a 16 x 32 bf16 tile of A and a 32 x 16 tile of B to a 16 x
16 fp32 tile of D: 8,192 multiply-adds, where AVX-512 BF16's ``vdpbf16ps`` does 32 (``tdpbssd``:
16 x 64 int8 by 64 x 16 into int32, signed both).  B's tile holds its rows interleaved in
groups of 2 (bf16) or 4 (int8) -- 16 rows, each 16 columns' groups of consecutive k, the layout
`dot_operands.grouped_rows` makes for ``vdpbf16ps`` and ``vpdpbusd`` -- and A's is 16 rows of 64
bytes of consecutive k, as the A buffer holds them; so the tiles load straight from the dot's
buffers, a stride apart.

The 8 tile registers are used as oneDNN does: 4 accumulators of a 32 x 32 block of D (fewer
where M or N is 16), 2 strips of A and 2 of B, each configured 16 rows of 64 bytes.  The
accumulators are loaded from D and stored back around the loop over K; each dot loads the
configuration first (``ldtilecfg``: code between dots may have changed it, other libraries'
included) and releases the tiles after (``tilerelease``: a thread that holds none does not
make the kernel save them at each switch).  Rounding is ``vdpbf16ps``'s: exact products, fp32
sums, denormal inputs and results as zero; int32 sums wrap.
"""

from __future__ import annotations

from typing import Any

import dataclasses

import llvmlite.ir as ir

from naiad.backends.cpu.lowering.dot_operands import grouped_offset
from naiad.backends.cpu.lowering.tiles import Buffer
from naiad.codegen import llvm_types as lt

#: Rows of a tile and bytes of each row.
ROWS = 16
ROW_BYTES = 64
#: Tile registers: accumulators 0-3 (row strip * 2 + column strip), A 4-5, B 6-7.
_A_TILES, _B_TILES = 4, 6
_CONFIGURE = "ldtilecfg"


@dataclasses.dataclass(frozen=True)
class TileProduct:
    """A tile multiplication: its instruction, and the k of each 32-bit lane of B's rows."""

    instruction: str
    group: int

    @property
    def element_bytes(self) -> int:
        return 4 // self.group

    @property
    def k_step(self) -> int:
        """The k of one of A's tile rows."""
        return ROW_BYTES // self.element_bytes


BF16 = TileProduct("tdpbf16ps", 2)
INT8 = TileProduct("tdpbssd", 4)


def tile_product(kernel: Any, op: Any, m: int, n: int, k_dim: int) -> TileProduct | None:
    """How the dot runs on tiles, if it does: bf16 operands with an fp32 accumulator or int8
    with int32, on a target whose tiles multiply them, in whole tiles both ways (M and N
    multiples of 16, K of a row's k)."""
    accumulator = lt.scalar(op.c.type)
    if kernel.hooks.amx_bf16 and lt.is_bf16(op.a.type) and lt.is_bf16(op.b.type) and accumulator == lt.F32:
        product = BF16
    elif kernel.hooks.amx_int8 and lt.is_int8(op.a.type) and lt.is_int8(op.b.type) and accumulator == lt.I32:
        product = INT8
    else:
        return None
    return product if m % ROWS == 0 and n % ROWS == 0 and k_dim % product.k_step == 0 else None


def tiled_matmul(kernel: Any, product: TileProduct, a: Buffer, b_groups: Buffer, d: Buffer, m: int, n: int,
                 k_dim: int, batch: int, k_blocks: int | ir.Value = 1) -> None:
    """``d[batch] += a[batch] @ b[batch]``, ``b_groups`` in `dot_operands.grouped_rows`' layout;
    with ``k_blocks`` (a number or an i32), ``d += sum(a[i] @ b[i] for i in range(k_blocks))``
    over consecutive ``[M, K]`` and ``[K, N]`` blocks from ``batch``'s, in that order: the K
    blocks a loop's trips gathered (`k_panels`), each accumulator tile loaded and stored once
    for all of them."""
    bld = kernel.b
    call = _intrinsics(kernel.llmod, product)
    k_step, group = product.k_step, product.group
    strips_m, strips_n = 2 if m % (2 * ROWS) == 0 else 1, 2 if n % (2 * ROWS) == 0 else 1
    blocks_n = n // (ROWS * strips_n)
    configured_at = _configure_once(kernel, call)

    def at(buf: Buffer, element: ir.Value) -> ir.Value:
        return kernel.chunks.element_pointer(buf, element)

    def i32(value: int) -> ir.Constant:
        return ir.Constant(lt.I32, value)

    def i8(value: int) -> ir.Constant:
        return ir.Constant(lt.I8, value)

    d_stride, a_stride, b_stride = (ir.Constant(lt.I64, v) for v in (4 * n, k_dim * product.element_bytes, 4 * n))

    def block(index: ir.Value) -> None:
        i0 = bld.mul(bld.udiv(index, i32(blocks_n)), i32(ROWS * strips_m))
        j0 = bld.mul(bld.urem(index, i32(blocks_n)), i32(ROWS * strips_n))
        accumulators = [(r, c, r * 2 + c) for r in range(strips_m) for c in range(strips_n)]

        def d_tile(r: int, c: int) -> ir.Value:
            row = bld.add(i0, i32(ROWS * r))
            return at(d, bld.add(bld.add(bld.mul(row, i32(n)), j0), i32(batch * m * n + ROWS * c)))

        for r, c, tile in accumulators:
            bld.call(call["tileloadd64"], [i8(tile), d_tile(r, c), d_stride])

        def k_block(kb: ir.Value) -> None:
            a_first = bld.mul(bld.add(kb, i32(batch)), i32(m * k_dim))

            def step(kk: ir.Value) -> None:
                k0 = bld.mul(kk, i32(k_step))
                for r in range(strips_m):
                    row = bld.add(i0, i32(ROWS * r))
                    first = bld.add(bld.add(bld.mul(row, i32(k_dim)), k0), a_first)
                    bld.call(call["tileloadd64"], [i8(_A_TILES + r), at(a, first), a_stride])
                row_group = bld.udiv(bld.add(bld.mul(kb, i32(k_dim)), k0), i32(group))
                for c in range(strips_n):
                    first = grouped_offset(bld, row_group, j0, ROWS * c, n, group, batch * k_dim)
                    bld.call(call["tileloadd64"], [i8(_B_TILES + c), at(b_groups, first), b_stride])
                for r, c, tile in accumulators:
                    bld.call(call[product.instruction], [i8(tile), i8(_A_TILES + r), i8(_B_TILES + c)])

            kernel.counted_loop(k_dim // k_step, step)

        kernel.counted_loop(k_blocks, k_block)
        for r, c, tile in accumulators:
            bld.call(call["tilestored64"], [i8(tile), d_tile(r, c), d_stride])

    kernel.counted_loop((m // (ROWS * strips_m)) * blocks_n, block)
    with bld.if_then(bld.icmp_unsigned("==", configured_at, ir.Constant(lt.I64, 0))):
        bld.call(call["tilerelease"], [])


def _configure_once(kernel: Any, call: dict[str, ir.Function]) -> ir.Value:
    """Configure the tiles unless this thread did so earlier in its share of the launch, as a
    flag in the share's zeroed memory says; their release waits for the share's end
    (`KernelLowering.at_share_end`).  A 64-wide tile at K = 2048 multiplies 16 panels a
    program: ``ldtilecfg`` and ``tilerelease`` around each cost more than the tiles' state
    kept from one to the next.  Returns the flag's address (an i64), 0 where the share has no
    memory: then each caller configures, and releases after its multiply."""
    bld, zero = kernel.b, ir.Constant(lt.I64, 0)
    flag = kernel.share_memory(8, zeroed=True)
    shared = bld.icmp_unsigned("!=", flag, zero)
    at = bld.inttoptr(flag, lt.PTR)
    done = kernel.choose(shared, lambda: bld.icmp_unsigned("!=", bld.load(at, typ=lt.I64, align=8), zero),
                         lambda: ir.Constant(lt.I1, 0), lt.I1)
    with bld.if_then(bld.not_(done)):
        bld.call(call[_CONFIGURE], [_configuration(kernel.llmod)])
        with bld.if_then(shared):
            bld.store(ir.Constant(lt.I64, 1), at, align=8)
    kernel.at_share_end("tilerelease", lambda b: b.call(call["tilerelease"], []))
    return flag


def uses_tiles(module: ir.Module) -> bool:
    """Whether the lowered ``module`` runs a dot on tiles (its loader must then make sure the
    process may: `naiad.backends.cpu.amx.require_tiles`)."""
    return f"llvm.x86.{_CONFIGURE}" in module.globals


def _intrinsics(module: ir.Module, product: TileProduct) -> dict[str, ir.Function]:
    """LLVM's AMX intrinsics that name tile registers by number (immediate operands)."""
    signatures = {_CONFIGURE: [lt.PTR], "tilerelease": [], "tileloadd64": [lt.I8, lt.PTR, lt.I64],
                  "tilestored64": [lt.I8, lt.PTR, lt.I64], product.instruction: [lt.I8, lt.I8, lt.I8]}
    return {name: lt.intrinsic(module, f"x86.{name}", [], lt.VOID, args) for name, args in signatures.items()}


def _configuration(module: ir.Module) -> ir.Value:
    """The 64-byte tile configuration ``ldtilecfg`` reads: palette 1, then each of the 8 tiles
    16 rows of 64 bytes (bytes per row as 16-bit words from byte 16, rows as bytes from 48)."""
    name = "naiad.amx.tiles_16x64"
    config = module.globals.get(name)
    if config is None:
        layout = bytearray(64)
        layout[0] = 1
        for tile in range(8):
            layout[16 + 2 * tile:18 + 2 * tile] = ROW_BYTES.to_bytes(2, "little")
            layout[48 + tile] = ROWS
        kind = ir.ArrayType(lt.I8, 64)
        config = ir.GlobalVariable(module, kind, name)
        config.initializer = ir.Constant(kind, bytearray(layout))
        config.global_constant, config.linkage, config.align = True, "private", 64
    return config.bitcast(lt.PTR)
