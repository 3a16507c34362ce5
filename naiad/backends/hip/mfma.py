"""``tt.dot`` on AMD's matrix cores (CDNA's MFMA): ``v_mfma_f32_32x32x8{f16,bf16_1k}`` (one
32 x 32 x 8 product per wavefront and instruction) and ``v_mfma_f32_16x16x16{f16,bf16_1k}``
(16 x 16 x 16), on gfx950 first their twice-as-deep ``32x32x16`` / ``16x16x32``; int8 into
int32 (CDNA 2's ``v_mfma_i32_32x32x8i8``, CDNA 3's ``32x32x16_i8``, gfx950's ``32x32x32_i8``
and their 16 x 16 twins); fp8 (``v_mfma_f32_32x32x16_{fp8_fp8,bf8_bf8}`` and 16x16x32), which
reads the FNUZ E4M3 and E5M2 of ``tl.float8e4b8`` / ``tl.float8e5b16`` on gfx940-942 and OCP's
``tl.float8e4nv`` / ``tl.float8e5`` on gfx950.

The layouts, as AMD documents the instructions (wave64), for lane ``l``, the instruction's
size ``S`` (32 or 16; ``G = 64 / S`` lane groups) and ``P`` elements of each operand a lane
gives (4 or, on gfx950, 8 of 16-bit types; 4, 8 or 16 of 8-bit ones: K = P G):

- A (S x PG): row ``l % S``, the ``P`` consecutive k ``P (l / S) .. + P - 1`` in one operand
  register pair;
- B (PG x S): column ``l % S``, the same ``P`` k;
- the accumulator (S x S): column ``l % S``; 32 x 32: 16 registers ``v`` at rows
  ``8 (v / 4) + 4 (l / 32) + v % 4``; 16 x 16: 4 registers at rows ``4 (l / 16) + v``.

`AmdMfma` is that accumulator for a whole dot (``ttg.mma``, written by `accelerate_matmul`):
the wavefronts tile M and N (``warps_per_cta``), then the tiles repeat.  `operand_layout` is the
matching A or B layout over the dot's whole K (registers: the four k, then the K steps, then
the repetitions).  All three are `naiad.codegen.gpu.layouts.Linear` layouts, so the shared
lowering brings the operands into them through the LDS (both in one staging, a ring of two
slots with ``num_stages`` 3 or more, loop-invariant ones before the loop:
`naiad.codegen.gpu.operand_rings`), and the rule (`lower_dot`) only gathers each
instruction's registers.

Only dots whose M and N are multiples of the wavefronts' tiles and whose K is a multiple of the
instruction's (powers of two of them: no register wraps) take it; others stay on FMA.  The size
is ``matrix_instr_nonkdim`` (Triton's option: 32, 16, or 0 for the larger that fits).  It is off unless ``NAIAD_HIP_MFMA=1``
(`naiad.backends.hip.knobs`): it has not run on AMD hardware yet (docs/AMD.md).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import llvmlite.ir as ir
from xdsl.dialects.builtin import (BFloat16Type, Float8E4M3FNType, Float8E4M3FNUZType, Float8E5M2FNUZType,
                                   Float8E5M2Type, Float16Type, Float32Type, IntegerType, StringAttr)

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu import operand_rings, ops_dot
from naiad.codegen.gpu.kernel import RULES as SHARED_RULES, GPUKernel, shape_of
from naiad.ir import tt
from naiad.ir.types import element_type

#: Rows of the accumulator a lane group holds together (every instruction's).
ROWS = 4
#: The architectures with MFMA (CDNA 2 and 3); CDNA 3's; CDNA 3's before gfx950, whose fp8
#: instructions read the FNUZ formats (gfx950's read OCP's).
ARCHS = ("gfx90a", "gfx940", "gfx941", "gfx942", "gfx950")
_CDNA3 = ("gfx940", "gfx941", "gfx942", "gfx950")
_FNUZ_FP8 = ("gfx940", "gfx941", "gfx942")
_GFX950 = ("gfx950",)


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One MFMA instruction: its intrinsic, the architectures that have it, the elements a lane
    gives of each operand (``pack``, in one operand of ``operand`` type) and the accumulator's
    element type."""

    intrinsic: str
    archs: tuple[str, ...]
    element: ir.Type
    pack: int
    operand: ir.Type
    accumulator: ir.Type


def _sixteen(name: str, element: ir.Type, pack: int = 4, archs: tuple[str, ...] = ARCHS,
             operand: ir.Type | None = None) -> Instruction:
    return Instruction(name, archs, element, pack, lt.vector(operand or element, pack), lt.F32)


def _eight(name: str, archs: tuple[str, ...], accumulator: ir.Type, pack: int = 8) -> Instruction:
    operand = {4: lt.I32, 8: lt.I64, 16: lt.vector(lt.I32, 4)}[pack]
    return Instruction(name, archs, lt.I8, pack, operand, accumulator)


def _fp8(size: int, kind: str, archs: tuple[str, ...]) -> Instruction:
    shape = "32x32x16" if size == 32 else "16x16x32"
    return _eight(f"llvm.amdgcn.mfma.f32.{shape}.{kind}.{kind}", archs, lt.F32)


_BF16 = lt.BFloatType()
#: (operand kind, instruction size) -> its instructions, the deepest first (`choose` takes the
#: first the architecture has and the dot's K fits).
_INSTRUCTIONS = {
    ("f16", 32): (_sixteen("llvm.amdgcn.mfma.f32.32x32x16.f16", lt.F16, 8, _GFX950),
                  _sixteen("llvm.amdgcn.mfma.f32.32x32x8f16", lt.F16)),
    ("bf16", 32): (_sixteen("llvm.amdgcn.mfma.f32.32x32x16.bf16", lt.I16, 8, _GFX950, _BF16),
                   _sixteen("llvm.amdgcn.mfma.f32.32x32x8bf16.1k", lt.I16)),
    ("f16", 16): (_sixteen("llvm.amdgcn.mfma.f32.16x16x32.f16", lt.F16, 8, _GFX950),
                  _sixteen("llvm.amdgcn.mfma.f32.16x16x16f16", lt.F16)),
    ("bf16", 16): (_sixteen("llvm.amdgcn.mfma.f32.16x16x32.bf16", lt.I16, 8, _GFX950, _BF16),
                   _sixteen("llvm.amdgcn.mfma.f32.16x16x16bf16.1k", lt.I16)),
    ("i8", 32): (_eight("llvm.amdgcn.mfma.i32.32x32x32.i8", _GFX950, lt.I32, 16),
                 _eight("llvm.amdgcn.mfma.i32.32x32x16.i8", _CDNA3, lt.I32),
                 _eight("llvm.amdgcn.mfma.i32.32x32x8i8", ("gfx90a",), lt.I32, 4)),
    ("i8", 16): (_eight("llvm.amdgcn.mfma.i32.16x16x64.i8", _GFX950, lt.I32, 16),
                 _eight("llvm.amdgcn.mfma.i32.16x16x32.i8", _CDNA3, lt.I32),
                 _eight("llvm.amdgcn.mfma.i32.16x16x16i8", ("gfx90a",), lt.I32, 4)),
    **{(kind, size): (_fp8(size, name, archs),) for size in (32, 16) for kind, name, archs in (
        ("fp8 fnuz", "fp8", _FNUZ_FP8), ("bf8 fnuz", "bf8", _FNUZ_FP8),
        ("fp8 ocp", "fp8", _GFX950), ("bf8 ocp", "bf8", _GFX950))},
}
#: The dot's operand element type -> its kind in `_INSTRUCTIONS`, with the accumulator's type.
_KINDS = {Float16Type: ("f16", Float32Type), BFloat16Type: ("bf16", Float32Type),
          Float8E4M3FNUZType: ("fp8 fnuz", Float32Type), Float8E5M2FNUZType: ("bf8 fnuz", Float32Type),
          Float8E4M3FNType: ("fp8 ocp", Float32Type), Float8E5M2Type: ("bf8 ocp", Float32Type)}
_LANES = 64


def _instructions(op: Any, size: int) -> tuple[Instruction, ...]:
    """The instructions of ``size`` for ``op``'s operand and accumulator types, deepest first."""
    a, b, c = (element_type(v.type) for v in (op.a, op.b, op.c))
    if type(a) is not type(b) or a != b:
        return ()
    if isinstance(a, IntegerType):
        kind, accumulator = ("i8", IntegerType) if a.width.data == 8 else (None, None)
        if not isinstance(c, IntegerType) or c.width.data != 32:
            return ()
    else:
        kind, accumulator = _KINDS.get(type(a), (None, None))
        if type(c) is not accumulator:
            return ()
    return _INSTRUCTIONS.get((kind, size), ())


def _instruction(op: Any, layout: "AmdMfma") -> Instruction:
    """The instruction of a dot's `AmdMfma` layout (its size and the k a lane gives)."""
    return next(i for i in _instructions(op, layout.size) if i.pack == layout.pack)


@dataclasses.dataclass(frozen=True)
class AmdMfma:
    warps_per_cta: tuple[int, int]
    size: int = 32                       # the instruction's M and N (its "nonKDim")
    pack: int = 4                        # operand elements a lane gives an instruction
    kpack: int = 1                       # instructions whose k a lane holds consecutively

    @property
    def k_step(self) -> int:
        """K of one instruction: ``pack`` per lane group."""
        return self.pack * _LANES // self.size

    @property
    def registers(self) -> int:
        """Accumulator registers of one instruction a lane holds."""
        return self.size * self.size // _LANES

    def repetitions(self, shape: tuple[int, ...]) -> tuple[int, int]:
        wm, wn = self.warps_per_cta
        return shape[0] // (self.size * wm), shape[1] // (self.size * wn)

    def linear(self, shape: tuple[int, ...]) -> L.Linear:
        wm, wn = self.warps_per_cta
        size = self.size
        reps_m, reps_n = self.repetitions(shape)
        registers = [(1, 0), (2, 0)] + ([(8, 0), (16, 0)] if size == 32 else [])
        registers += [(0, size * wn << i) for i in range(reps_n.bit_length() - 1)]
        registers += [(size * wm << i, 0) for i in range(reps_m.bit_length() - 1)]
        groups = _LANES // size
        lanes = [(0, 1 << i) for i in range(size.bit_length() - 1)]
        lanes += [(ROWS << i, 0) for i in range(groups.bit_length() - 1)]
        warps = [(size << i, 0) for i in range(wm.bit_length() - 1)]
        warps += [(0, size << i) for i in range(wn.bit_length() - 1)]
        return L.make_linear(shape, registers, lanes, warps)

    def __str__(self) -> str:
        return (f"#ttg.amd_mfma<{{version = 3, warpsPerCTA = {list(self.warps_per_cta)}, "
                f"instrShape = [{self.size}, {self.size}, {self.k_step}], kpack = {self.kpack}, "
                f"isTransposed = false}}>")

    @classmethod
    def parse(cls, text: str) -> "AmdMfma":
        found = re.search(r"warpsPerCTA\s*=\s*\[(\d+),\s*(\d+)\]", text)
        if found is None:
            raise ValueError(f"{text!r} is not an amd_mfma layout: no warpsPerCTA")
        shape = re.search(r"instrShape\s*=\s*\[(\d+),\s*\d+(?:,\s*(\d+))?\]", text)
        size = int(shape.group(1)) if shape else 32
        k_step = int(shape.group(2)) if shape and shape.group(2) else ROWS * _LANES // size
        kpack = re.search(r"kpack\s*=\s*(\d+)", text)
        return cls((int(found.group(1)), int(found.group(2))), size, k_step * size // _LANES,
                   int(kpack.group(1)) if kpack else 1)


L.register_layout("#ttg.amd_mfma", AmdMfma.parse)


def operand_layout(layout: AmdMfma, index: int, shape: tuple[int, int]) -> L.Linear:
    """A (``index`` 0, M x K) or B (1, K x N) in the layout the instruction reads, for the
    accumulator ``layout``: registers are the ``pack`` consecutive k of an instruction, then
    ``kpack`` instructions' (K-packing: with 2, a lane holds 8 consecutive fp16 k, read from
    shared memory in one 128-bit access, and the instructions take the k of a K step in another
    order -- the sum is the same, as A and B agree), then the K steps, then the repetitions
    along M (A) or N (B); the other dimension's wavefronts hold copies."""
    wm, wn = layout.warps_per_cta
    size, k_step, run = layout.size, layout.k_step, layout.pack * layout.kpack
    depth = shape[1] if index == 0 else shape[0]
    steps = depth // (k_step * layout.kpack)
    reps = shape[0] // (size * wm) if index == 0 else shape[1] // (size * wn)

    def at(k: int, other: int) -> tuple[int, int]:        # (k, M-or-N) -> the operand's (row, col)
        return (other, k) if index == 0 else (k, other)
    registers = [at(1 << i, 0) for i in range(run.bit_length() - 1)]
    registers += [at(k_step * layout.kpack << i, 0) for i in range(steps.bit_length() - 1)]
    warps_along = wm if index == 0 else wn
    registers += [at(0, size * warps_along << i) for i in range(reps.bit_length() - 1)]
    lanes = [at(0, 1 << i) for i in range(size.bit_length() - 1)]
    lanes += [at(run << i, 0) for i in range((_LANES // size).bit_length() - 1)]
    own = [at(0, size << i) for i in range(warps_along.bit_length() - 1)]
    copies = [(0, 0)] * ((wn if index == 0 else wm).bit_length() - 1)
    warps = own + copies if index == 0 else copies + own
    return L.make_linear(shape, registers, lanes, warps)


def choose(op: tt.DotOp, num_warps: int, arch: str, size: int = 0, kpack: int = 1) -> AmdMfma | None:
    """The MFMA layout of a 2-D dot whose types an instruction of ``arch`` takes (fp16, bf16,
    int8 into int32; fp8 on CDNA 3) and whose tiles fit exactly, of the deepest instruction
    whose K step the dot's K holds a power of two of, of instruction
    ``size`` (0: 32 where it fits, else 16), K-packed by ``kpack`` where K has that many
    steps; None for FMA."""
    a_shape, b_shape = op.a.type.get_shape(), op.b.type.get_shape()
    if len(a_shape) != 2:
        return None
    m, depth, n = a_shape[0], a_shape[1], b_shape[1]
    for tile in ((size,) if size else (32, 16)):
        for instruction in _instructions(op, tile):
            if str(arch) not in instruction.archs:
                continue
            k_step = instruction.pack * _LANES // tile
            grid = _wavefront_grid(m, n, tile, num_warps)
            if depth % k_step or not _power_of_two(depth // k_step) or grid is None:
                continue
            packed = kpack if (depth // k_step) % kpack == 0 else 1
            return AmdMfma(grid, tile, instruction.pack, packed)
    return None


def _wavefront_grid(m: int, n: int, tile: int, num_warps: int) -> tuple[int, int] | None:
    """The wavefronts along M and N (as many along M as fit) whose ``tile``-wide tiles repeat a
    power of two of times over M x N; None if no split of ``num_warps`` does."""
    for wm in (num_warps, num_warps // 2, num_warps // 4, 1):
        wn = num_warps // max(wm, 1)
        if wm >= 1 and wm * wn == num_warps and m % (tile * wm) == 0 and n % (tile * wn) == 0 \
                and _power_of_two(m // (tile * wm)) and _power_of_two(n // (tile * wn)):
            return wm, wn
    return None


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def accelerate_matmul(func: Any, num_warps: int, arch: str, size: int = 0, kpack: int = 1) -> None:
    """Write ``ttg.mma`` on every dot of ``func`` that runs on MFMA (one already there, from an
    edited TTGIR, is kept); ``size`` and ``kpack``: the ``matrix_instr_nonkdim`` and ``kpack``
    options."""
    for op in func.walk():
        if isinstance(op, tt.DotOp) and "ttg.mma" not in op.attributes:
            layout = choose(op, num_warps, arch, size, kpack)
            if layout is not None:
                op.attributes["ttg.mma"] = StringAttr(str(layout))


def lower_dot(k: GPUKernel, op: Any) -> None:
    """A dot with an `AmdMfma` layout: per tile of the accumulator, one MFMA per K step on the
    registers the operand layouts hold; any other dot on FMA."""
    layout = k.layout_of(op.results[0])
    if not isinstance(layout, AmdMfma):
        ops_dot.fma_dot(k, op)
        return
    b = k.b
    result = op.results[0]
    shape = shape_of(result)
    instruction = _instruction(op, layout)
    pack = layout.pack
    a, b_ = (dist.values for dist in operand_rings.convert(k, op, _operands(op, layout)))
    acc = k.tensor(op.c, layout).values
    steps = shape_of(op.a)[1] // layout.k_step
    reps_m, reps_n = layout.repetitions(shape)
    count = layout.registers
    operand, acc_type = instruction.operand, lt.vector(instruction.accumulator, count)
    mfma = lt.function(b.module, instruction.intrinsic, acc_type,
                       [operand, operand, acc_type, lt.I32, lt.I32, lt.I32])

    def vector(values: list[ir.Value], ty: ir.Type) -> ir.Value:
        out = ir.Constant(ty, ir.Undefined)
        for i, value in enumerate(values):
            out = b.insert_element(out, b.bitcast(value, ty.element) if value.type != ty.element else value,
                                   ir.Constant(lt.I32, i))
        return out

    def registers(values: list[ir.Value]) -> ir.Value:
        packed = vector(values, lt.vector(instruction.element, pack))
        return packed if packed.type == operand else b.bitcast(packed, operand)

    results: list[ir.Value] = []
    zero = ir.Constant(lt.I32, 0)
    for rm in range(reps_m):
        for rn in range(reps_n):
            first = count * (rn + reps_n * rm)
            c = vector(acc[first:first + count], acc_type)
            for s in range(steps):
                a_regs = a[pack * (s + steps * rm):pack * (s + steps * rm) + pack]
                b_regs = b_[pack * (s + steps * rn):pack * (s + steps * rn) + pack]
                c = b.call(mfma, [registers(a_regs), registers(b_regs), c, zero, zero, zero])
            results.extend(b.extract_element(c, ir.Constant(lt.I32, v)) for v in range(count))
    k.define(result, results)


def _operands(op: Any, layout: AmdMfma) -> list[tuple[Any, L.Linear]]:
    return [(op.a, operand_layout(layout, 0, shape_of(op.a))), (op.b, operand_layout(layout, 1, shape_of(op.b)))]


def staging(k: GPUKernel, op: Any) -> operand_rings.Staging:
    """What the dot's rule stages in LDS each trip (`operand_rings.plan`): the MFMA operands'
    conversions, or FMA's operands."""
    layout = k.layout_of(op.results[0])
    if isinstance(layout, AmdMfma):
        return operand_rings.conversions(k, op, _operands(op, layout))
    return ops_dot.fma_staging(k, op)


#: The hip backend's rule table: the shared rules with `lower_dot`.
RULES = {**SHARED_RULES, tt.DotOp: lower_dot}
