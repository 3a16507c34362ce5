"""``tt.dot`` on NVIDIA tensor cores: the cuda backend's own rule for dots with a ``ttg.mma``
layout (`accelerate_matmul`); dots without one take the shared FMA rule.

**wgmma** (sm_90, mma version 3).  The operands are written to shared memory in the layouts the
instruction reads through matrix descriptors (`SharedTile`: 16-byte vectors in swizzle atoms of
32, 64 or 128 bytes, the swizzle chosen by the row length so that the stores are free of bank
conflicts), ordered for the async proxy (``fence.proxy.async``), then each warpgroup issues one
``wgmma.mma_async`` per 64-row pass, column block and K step, commits them as one group and
waits for it.  A 16-bit operand is stored along whichever dimension its registers run (a
transposed operand stays transposed: the instruction's ``imm-trans`` flags say so); the other
types must be stored K-major.  An A operand already in an mma v3 layout of the dot's warps (the
probabilities of attention, computed from the first dot's accumulator) is passed from
registers: its accumulator registers are the A fragments, two to a 32-bit register.

**mma.sync** (sm_80 on, version 2): both operands go to shared memory K-major, rows padded by 16
bytes; each warp loads its A and B fragments with 32-bit shared loads and issues
``mma.sync.m16n8k16`` per 16x8 tile and K step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import llvmlite.ir as ir

from naiad.backends.cuda.accelerate_matmul import operand_kinds
from naiad.backends.cuda.mma_layouts import NvidiaMma, swizzle_bytes
from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu import ops_dot
from naiad.codegen.gpu.kernel import RULES as SHARED_RULES, Dist, GPUKernel, shape_of
from naiad.ir import tt
from naiad.passes.constants import splat_value

#: PTX names of the operand kinds (`accelerate_matmul.kind`).
_PTX_TYPE = {"f16": "f16", "bf16": "bf16", "tf32": "tf32", "i8": "s8", "e4m3": "e4m3",
             "e5m2": "e5m2", "f32": "f32", "i32": "s32"}
#: Swizzle width in bytes -> the descriptor's layout-type field.
_SWIZZLE_CODE = {128: 1, 64: 2, 32: 3}


def lower_dot(k: GPUKernel, op: Any) -> None:
    """A dot on the instruction its ``ttg.mma`` layout names; on FMA without one."""
    layout = k.layout_of(op.results[0])
    if not isinstance(layout, NvidiaMma):
        ops_dot.fma_dot(k, op)
    elif layout.version == 3:
        _wgmma(k, op, layout)
    else:
        _mma_sync(k, op, layout)


# -- shared memory tiles ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SharedTile:
    """A 2-D operand in shared memory as wgmma reads it.  Tensor dimension ``inner`` is
    stored contiguously, in atoms of ``width`` bytes along it: atom ``a`` holds, for every
    index of the other (outer) dimension in turn, ``width`` bytes of the inner one, and the
    16-byte chunks of each such row are XOR-swizzled by the row's place among 8.  The tile
    starts at byte ``base`` of the kernel's shared memory, 1024-byte aligned, so the swizzle
    of the addresses is the swizzle of the offsets.  ``k_dim`` is the operand's K dimension:
    the tile is K-major when it is the inner one."""

    shape: tuple[int, int]
    inner: int
    k_dim: int
    element_bytes: int
    width: int
    base: int

    @property
    def outer_size(self) -> int:
        return self.shape[1 - self.inner]

    @property
    def atom_bytes(self) -> int:
        """Bytes between two atoms along the inner dimension (the descriptor's leading offset)."""
        return self.outer_size * self.width

    @property
    def k_major(self) -> bool:
        return self.inner == self.k_dim

    def plain(self, b: ir.IRBuilder, outer: ir.Value, inner: ir.Value) -> ir.Value:
        """The byte offset (in the tile, before the swizzle) of element (outer, inner)."""
        byte = b.mul(inner, ir.Constant(lt.I32, self.element_bytes))
        atom = b.udiv(byte, ir.Constant(lt.I32, self.width))
        within = b.urem(byte, ir.Constant(lt.I32, self.width))
        return b.add(b.add(b.mul(atom, ir.Constant(lt.I32, self.atom_bytes)),
                           b.mul(outer, ir.Constant(lt.I32, self.width))), within)

    def offset(self, b: ir.IRBuilder, outer: ir.Value, inner: ir.Value) -> ir.Value:
        """The swizzled byte offset (in the tile) of element (outer, inner): i32 values."""
        plain = self.plain(b, outer, inner)
        phase = b.and_(b.lshr(plain, ir.Constant(lt.I32, 7)),
                       ir.Constant(lt.I32, self.width // 16 - 1))
        return b.xor(plain, b.shl(phase, ir.Constant(lt.I32, 4)))

    def block_start(self, b: ir.IRBuilder, index: ir.Value, depth: int) -> ir.Value:
        """The byte (of shared memory, unswizzled: the descriptor's start) where one
        instruction's block begins: M or N index ``index`` (an i32), K index ``depth``."""
        other = ir.Constant(lt.I32, depth)
        outer, inner = (index, other) if self.k_major else (other, index)
        return b.add(self.plain(b, outer, inner), ir.Constant(lt.I32, self.base))


def _tile(dist: Dist, mlir_type: Any, k_dim: int, may_transpose: bool, base: int) -> SharedTile | None:
    """The tile an operand goes to: along the dimension its registers run when the type may
    be transposed (16-bit), else along K (dimension ``k_dim``); None when no swizzle fits."""
    element = lt.byte_size(lt.memory_type(mlir_type))
    runs = [L.run_length(dist.layout, dist.shape, d) for d in (0, 1)]
    inner = k_dim
    if may_transpose and runs[1 - k_dim] > runs[k_dim]:
        inner = 1 - k_dim
    width = swizzle_bytes(dist.shape[inner] * element)
    if not width or dist.shape[1 - inner] % 8:
        return None
    return SharedTile(dist.shape, inner, k_dim, element, width, base)


def _store_tile(k: GPUKernel, dist: Dist, tile: SharedTile) -> None:
    """Every thread writes its elements of ``dist`` into ``tile``, in vectors of up to 16
    bytes along the tile's inner dimension (one element at a time across it)."""
    b = k.b
    run = L.run_length(dist.layout, dist.shape, tile.inner)
    vector = max(1, min(run, 16 // tile.element_bytes))
    coords = k.coordinates(dist.layout, dist.shape)
    base = k.hooks.shared_base(b)
    for start in range(0, len(dist.values), vector):
        c = coords[start]
        offset = b.add(tile.offset(b, c[1 - tile.inner], c[tile.inner]), ir.Constant(lt.I32, tile.base))
        values = dist.values[start:start + vector]
        pointer = b.gep(base, [offset], source_etype=lt.I8)
        if vector == 1:
            b.store(_storable(b, values[0]), pointer)
            continue
        storage = _storable(b, values[0]).type
        packed = ir.Constant(ir.VectorType(storage, vector), None)
        for i, v in enumerate(values):
            packed = b.insert_element(packed, _storable(b, v), ir.Constant(lt.I32, i))
        b.store(packed, pointer).align = vector * tile.element_bytes


def _storable(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    return b.zext(value, lt.I8) if value.type == lt.I1 else value


# -- inline PTX -----------------------------------------------------------------------------------

def _asm(k: GPUKernel, text: str, outputs: list[ir.Type], inputs: list[ir.Value],
         constraints: list[str], tied: list[ir.Value] | None = None, effects: bool = True) -> Any:
    """One inline-assembly statement: ``outputs`` ($0..), then ``inputs`` with their
    constraints, then ``tied`` inputs read and written in the outputs' registers.  With
    ``effects`` it is never moved, dropped or reordered with memory accesses (wgmma and the
    fences); without, it is a pure computation (mma.sync)."""
    tied = tied or []
    kinds = [_CONSTRAINT[t] for t in outputs]
    all_constraints = [f"={c}" for c in kinds] + constraints + [str(i) for i in range(len(tied))]
    if effects:
        all_constraints.append("~{memory}")
    ret: ir.Type = ir.VoidType() if not outputs else (outputs[0] if len(outputs) == 1
                                                      else ir.LiteralStructType(outputs))
    args = list(inputs) + list(tied)
    call = ir.InlineAsm(ir.FunctionType(ret, [a.type for a in args]), text,
                        ",".join(all_constraints), side_effect=effects)
    return k.b.call(call, args)


_CONSTRAINT = {lt.F32: "f", lt.I32: "r", lt.I64: "l"}


def _unpack(k: GPUKernel, result: Any, count: int) -> list[ir.Value]:
    if count == 1:
        return [result]
    return [k.b.extract_value(result, i) for i in range(count)]


# -- wgmma ----------------------------------------------------------------------------------------

def _descriptor(k: GPUKernel, tile: SharedTile, start: ir.Value) -> ir.Value:
    """The 64-bit shared-memory matrix descriptor of a block starting at byte ``start``."""
    b = k.b
    address = b.add(b.ptrtoint(k.hooks.shared_base(b), lt.I32), start)
    field = b.zext(b.and_(b.lshr(address, ir.Constant(lt.I32, 4)), ir.Constant(lt.I32, 0x3FFF)), lt.I64)
    fixed = ((tile.atom_bytes >> 4) << 16) | (((8 * tile.width) >> 4) << 32) | \
        (_SWIZZLE_CODE[tile.width] << 62)
    return b.or_(field, ir.Constant(lt.I64, fixed))


def _a_from_registers(k: GPUKernel, op: Any, a: Dist, layout: NvidiaMma) -> dict | None:
    """(m-pass, k-step) -> the four 32-bit A fragments, when ``a`` is in an mma v3 layout
    whose thread mapping the instruction's A fragments share (the warps along M, one column
    of warpgroups); None otherwise."""
    source = a.layout
    if not isinstance(source, NvidiaMma) or source.version != 3 or lt.byte_size(lt.scalar(op.a.type)) != 2:
        return None
    if source.warps_per_cta[0] != layout.warps_per_cta[0] or source.warps_per_cta[1] != 1:
        return None
    linear = L.linear_of(source, a.shape)
    where = {offset: i for i, offset in enumerate(linear.offsets())}
    m, kk = a.shape
    rows = 16 * layout.warps_per_cta[0]
    fragments = {}
    for r in range(m // rows):
        for q in range(kk // 16):
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
    return b.or_(b.zext(low, lt.I32), b.shl(b.zext(high, lt.I32), ir.Constant(lt.I32, 16)))


def _wgmma(k: GPUKernel, op: Any, layout: NvidiaMma) -> None:
    b = k.b
    result = op.results[0]
    m, n = shape_of(result)
    a_kind, b_kind, c_kind = operand_kinds(op)
    k_instr = layout.instr_shape[2]
    depth = shape_of(op.a)[1]
    a_dist, b_dist = k.tensor(op.a), k.tensor(op.b)
    a_regs = _a_from_registers(k, op, a_dist, layout)
    transposable = a_kind in ("f16", "bf16")
    a_bytes = 0 if a_regs else m * depth * lt.byte_size(lt.memory_type(op.a.type))
    b_bytes = depth * n * lt.byte_size(lt.memory_type(op.b.type))
    offsets = k.shared_regions([a_bytes, b_bytes], align=1024)
    a_tile = None if a_regs else _tile(a_dist, op.a.type, 1, transposable, offsets[0])
    b_tile = _tile(b_dist, op.b.type, 0, transposable, offsets[1])
    if (a_tile is None and a_regs is None) or b_tile is None:
        ops_dot.fma_dot(k, op)                 # no swizzled layout fits (a short row)
        return
    k.hooks.barrier(b)                         # the previous user of shared memory is done
    if a_tile is not None:
        _store_tile(k, a_dist, a_tile)
    _store_tile(k, b_dist, b_tile)
    _asm(k, "fence.proxy.async.shared::cta;", [], [], [])
    k.hooks.barrier(b)
    acc_type = lt.I32 if c_kind == "i32" else lt.F32
    zero = splat_value(op.c) == 0
    acc = [] if zero else k.tensor(op.c, layout).values
    warps_m = layout.warps_per_cta[0]
    group_m = b.and_(b.lshr(k.warp, ir.Constant(lt.I32, 2)), ir.Constant(lt.I32, warps_m // 4 - 1))
    group_n = b.lshr(k.warp, ir.Constant(lt.I32, warps_m.bit_length() - 1))
    rows, cols = layout.tile()
    reps_m, reps_n = layout.repetitions((m, n))
    per = layout.n // 2                        # accumulator registers of one instruction
    opcode = (f"wgmma.mma_async.sync.aligned.m64n{layout.n}k{k_instr}."
              f"{_PTX_TYPE[c_kind]}.{_PTX_TYPE[a_kind]}.{_PTX_TYPE[b_kind]}")
    trans_b = int(not b_tile.k_major)
    trans_a = int(a_tile is not None and not a_tile.k_major)
    results: list[ir.Value] = []
    _asm(k, "wgmma.fence.sync.aligned;", [], [], [])
    for r in range(reps_m):
        row = b.add(b.mul(group_m, ir.Constant(lt.I32, 64)), ir.Constant(lt.I32, r * rows))
        for s in range(reps_n):
            col = b.add(b.mul(group_n, ir.Constant(lt.I32, layout.n)), ir.Constant(lt.I32, s * cols))
            first = (r * reps_n + s) * per
            regs = acc[first:first + per] if acc else [ir.Constant(acc_type, 0)] * per
            for q in range(depth // k_instr):
                scale = ir.Constant(lt.I32, 0 if (zero and q == 0) else 1)
                b_desc = _descriptor(k, b_tile, b_tile.block_start(b, col, q * k_instr))
                if a_regs is not None:
                    a_inputs, a_constraints = a_regs[(r, q)], ["r"] * 4
                    flags = _register_a_flags(a_kind, trans_b)
                else:
                    a_desc = _descriptor(k, a_tile, a_tile.block_start(b, row, q * k_instr))
                    a_inputs, a_constraints = [a_desc], ["l"]
                    flags = _flags(a_kind, trans_a, trans_b)
                names = [f"${per + i}" for i in range(len(a_inputs) + 2)]
                a_operand = names[0] if len(a_inputs) == 1 else "{" + ", ".join(names[:4]) + "}"
                text = ("{\n.reg .pred p;\n"
                        f"setp.ne.b32 p, {names[-1]}, 0;\n"
                        f"{opcode} {{{', '.join(f'${i}' for i in range(per))}}}, "
                        f"{a_operand}, {names[-2]}, p{flags};\n}}")
                regs = _unpack(k, _asm(k, text, [acc_type] * per, a_inputs + [b_desc, scale],
                                       a_constraints + ["l", "r"], tied=regs), per)
            results.extend(regs)
    _asm(k, "wgmma.commit_group.sync.aligned;", [], [], [])
    waited = _asm(k, "wgmma.wait_group.sync.aligned 0;", [acc_type] * len(results), [], [],
                  tied=results)
    k.define(result, _unpack(k, waited, len(results)))


def _flags(kind: str, trans_a: int, trans_b: int) -> str:
    """The immediates after the predicate when A comes from shared memory: the scales of A and
    B (float types), and the transposition flags (16-bit types only)."""
    if kind == "i8":
        return ""
    if kind in ("f16", "bf16"):
        return f", 1, 1, {trans_a}, {trans_b}"
    return ", 1, 1"


def _register_a_flags(kind: str, trans_b: int) -> str:
    """The same when A comes from registers (only 16-bit types do): no flag for A's layout."""
    return f", 1, 1, {trans_b}"


# -- mma.sync --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PaddedTile:
    """An mma.sync operand in shared memory, K-major: row ``i`` (M for A, N for B) starts at
    byte ``i * row_bytes``, one 16-byte pad after its K elements, so the 32-bit fragment loads
    of a warp (8 rows, 4 column pairs) fall in 32 different banks."""

    k_dim: int
    element_bytes: int
    row_bytes: int
    base: int

    @classmethod
    def of(cls, shape: tuple[int, int], k_dim: int, element_bytes: int, base: int) -> "PaddedTile":
        return cls(k_dim, element_bytes, shape[k_dim] * element_bytes + 16, base)

    @staticmethod
    def size(shape: tuple[int, int], k_dim: int, element_bytes: int) -> int:
        return shape[1 - k_dim] * (shape[k_dim] * element_bytes + 16)

    def offset(self, b: ir.IRBuilder, row: ir.Value, depth: ir.Value) -> ir.Value:
        """The byte (of shared memory) of element (row, K index ``depth``)."""
        return b.add(b.add(b.mul(row, ir.Constant(lt.I32, self.row_bytes)),
                           b.mul(depth, ir.Constant(lt.I32, self.element_bytes))),
                     ir.Constant(lt.I32, self.base))


def _store_padded(k: GPUKernel, dist: Dist, tile: PaddedTile) -> None:
    """Every thread writes its elements of ``dist`` into ``tile``: vectors along K where its
    registers run along K, one element at a time otherwise."""
    b = k.b
    run = L.run_length(dist.layout, dist.shape, tile.k_dim)
    vector = max(1, min(run, 16 // tile.element_bytes))
    coords = k.coordinates(dist.layout, dist.shape)
    base = k.hooks.shared_base(b)
    for start in range(0, len(dist.values), vector):
        c = coords[start]
        pointer = b.gep(base, [tile.offset(b, c[1 - tile.k_dim], c[tile.k_dim])], source_etype=lt.I8)
        values = [_storable(b, v) for v in dist.values[start:start + vector]]
        if vector == 1:
            b.store(values[0], pointer)
            continue
        packed = ir.Constant(ir.VectorType(values[0].type, vector), None)
        for i, v in enumerate(values):
            packed = b.insert_element(packed, v, ir.Constant(lt.I32, i))
        b.store(packed, pointer).align = vector * tile.element_bytes


def _mma_sync(k: GPUKernel, op: Any, layout: NvidiaMma) -> None:
    b = k.b
    result = op.results[0]
    m, n = shape_of(result)
    depth = shape_of(op.a)[1]
    a_kind, _, _ = operand_kinds(op)
    element = 2
    a_dist, b_dist = k.tensor(op.a), k.tensor(op.b)
    a_size = PaddedTile.size((m, depth), 1, element)
    offsets = k.shared_regions([a_size, PaddedTile.size((depth, n), 0, element)])
    a_tile = PaddedTile.of((m, depth), 1, element, offsets[0])
    b_tile = PaddedTile.of((depth, n), 0, element, offsets[1])
    k.hooks.barrier(b)
    _store_padded(k, a_dist, a_tile)
    _store_padded(k, b_dist, b_tile)
    k.hooks.barrier(b)
    zero = splat_value(op.c) == 0
    acc = [] if zero else k.tensor(op.c, layout).values
    wm, wn = layout.warps_per_cta
    warp_m = b.urem(k.warp, ir.Constant(lt.I32, wm))
    warp_n = b.urem(b.udiv(k.warp, ir.Constant(lt.I32, wm)), ir.Constant(lt.I32, wn))
    group = b.lshr(k.lane, ir.Constant(lt.I32, 2))
    pair = b.mul(b.and_(k.lane, ir.Constant(lt.I32, 3)), ir.Constant(lt.I32, 2))
    rows, cols = layout.tile()
    reps_m, reps_n = layout.repetitions((m, n))
    base = k.hooks.shared_base(b)

    def fragment(tile: PaddedTile, row: ir.Value, depth: int) -> ir.Value:
        at = tile.offset(b, row, b.add(pair, ir.Constant(lt.I32, depth)))
        return b.load(b.gep(base, [at], source_etype=lt.I8), typ=lt.I32)

    text = (f"mma.sync.aligned.m16n8k16.row.col.f32.{_PTX_TYPE[a_kind]}.{_PTX_TYPE[a_kind]}.f32 "
            "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};")
    results: list[ir.Value] = []
    for r in range(reps_m):
        row = b.add(b.add(b.mul(warp_m, ir.Constant(lt.I32, 16)), ir.Constant(lt.I32, r * rows)), group)
        row8 = b.add(row, ir.Constant(lt.I32, 8))
        for s in range(reps_n):
            col = b.add(b.add(b.mul(warp_n, ir.Constant(lt.I32, 8)), ir.Constant(lt.I32, s * cols)), group)
            first = (r * reps_n + s) * 4
            regs = acc[first:first + 4] if acc else [ir.Constant(lt.F32, 0)] * 4
            for q in range(0, depth, 16):
                a = [fragment(a_tile, row, q), fragment(a_tile, row8, q),
                     fragment(a_tile, row, q + 8), fragment(a_tile, row8, q + 8)]
                bb = [fragment(b_tile, col, q), fragment(b_tile, col, q + 8)]
                out = _asm(k, text, [lt.F32] * 4, a + bb + regs, ["r"] * 6 + ["f"] * 4, effects=False)
                regs = _unpack(k, out, 4)
            results.extend(regs)
    k.define(result, results)


#: The cuda backend's rule table: the shared rules, with tensor-core dots.
RULES = {**SHARED_RULES, tt.DotOp: lower_dot}
