"""``tt.dot`` on AMD's matrix cores (CDNA's MFMA): ``v_mfma_f32_32x32x8{f16,bf16_1k}`` (one
32 x 32 x 8 product per wavefront and instruction) and ``v_mfma_f32_16x16x16{f16,bf16_1k}``
(16 x 16 x 16).

The layouts, as AMD documents the instructions (wave64), for lane ``l`` and the instruction's
size ``S`` (32 or 16; ``G = 64 / S`` lane groups):

- A (S x 4G): row ``l % S``, the four consecutive k ``4 (l / S) .. + 3`` in one operand
  register pair;
- B (4G x S): column ``l % S``, the same four k;
- the accumulator (S x S): column ``l % S``; 32 x 32: 16 registers ``v`` at rows
  ``8 (v / 4) + 4 (l / 32) + v % 4``; 16 x 16: 4 registers at rows ``4 (l / 16) + v``.

`AmdMfma` is that accumulator for a whole dot (``ttg.mma``, written by `accelerate_matmul`):
the wavefronts tile M and N (``warps_per_cta``), then the tiles repeat.  `operand_layout` is the
matching A or B layout over the dot's whole K (registers: the four k, then the K steps, then
the repetitions).  All three are `naiad.codegen.gpu.layouts.Linear` layouts, so the shared
lowering brings the operands into them through shared memory like any conversion, and the rule
(`lower_dot`) only gathers each instruction's registers.

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
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, StringAttr

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu import ops_dot
from naiad.codegen.gpu.kernel import RULES as SHARED_RULES, GPUKernel, shape_of
from naiad.ir import tt
from naiad.ir.types import element_type

PACK = 4
#: The architectures with these instructions (CDNA 2 and 3).
ARCHS = ("gfx90a", "gfx940", "gfx941", "gfx942", "gfx950")
#: Operand element type -> (the intrinsic, the LLVM element type of its operand vectors).
_INSTRUCTIONS = {(Float16Type, 32): ("llvm.amdgcn.mfma.f32.32x32x8f16", lt.F16),
                 (BFloat16Type, 32): ("llvm.amdgcn.mfma.f32.32x32x8bf16.1k", lt.I16),
                 (Float16Type, 16): ("llvm.amdgcn.mfma.f32.16x16x16f16", lt.F16),
                 (BFloat16Type, 16): ("llvm.amdgcn.mfma.f32.16x16x16bf16.1k", lt.I16)}
_LANES = 64


@dataclasses.dataclass(frozen=True)
class AmdMfma:
    warps_per_cta: tuple[int, int]
    size: int = 32                       # the instruction's M and N (its "nonKDim")

    @property
    def k_step(self) -> int:
        """K of one instruction: four per lane group."""
        return PACK * _LANES // self.size

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
        lanes += [(PACK << i, 0) for i in range(groups.bit_length() - 1)]
        warps = [(size << i, 0) for i in range(wm.bit_length() - 1)]
        warps += [(0, size << i) for i in range(wn.bit_length() - 1)]
        return L.make_linear(shape, registers, lanes, warps)

    def __str__(self) -> str:
        return (f"#ttg.amd_mfma<{{version = 3, warpsPerCTA = {list(self.warps_per_cta)}, "
                f"instrShape = [{self.size}, {self.size}], isTransposed = false}}>")

    @classmethod
    def parse(cls, text: str) -> "AmdMfma":
        found = re.search(r"warpsPerCTA\s*=\s*\[(\d+),\s*(\d+)\]", text)
        if found is None:
            raise ValueError(f"{text!r} is not an amd_mfma layout: no warpsPerCTA")
        size = re.search(r"instrShape\s*=\s*\[(\d+)", text)
        return cls((int(found.group(1)), int(found.group(2))), int(size.group(1)) if size else 32)


L.register_layout("#ttg.amd_mfma", AmdMfma.parse)


def operand_layout(layout: AmdMfma, index: int, shape: tuple[int, int]) -> L.Linear:
    """A (``index`` 0, M x K) or B (1, K x N) in the layout the instruction reads, for the
    accumulator ``layout``: registers are the four consecutive k, then the K steps, then the
    repetitions along M (A) or N (B); the other dimension's wavefronts hold copies."""
    wm, wn = layout.warps_per_cta
    size, k_step = layout.size, layout.k_step
    depth = shape[1] if index == 0 else shape[0]
    steps = depth // k_step
    reps = shape[0] // (size * wm) if index == 0 else shape[1] // (size * wn)

    def at(k: int, other: int) -> tuple[int, int]:        # (k, M-or-N) -> the operand's (row, col)
        return (other, k) if index == 0 else (k, other)
    registers = [at(1, 0), at(2, 0)] + [at(k_step << i, 0) for i in range(steps.bit_length() - 1)]
    warps_along = wm if index == 0 else wn
    registers += [at(0, size * warps_along << i) for i in range(reps.bit_length() - 1)]
    lanes = [at(0, 1 << i) for i in range(size.bit_length() - 1)]
    lanes += [at(PACK << i, 0) for i in range((_LANES // size).bit_length() - 1)]
    own = [at(0, size << i) for i in range(warps_along.bit_length() - 1)]
    copies = [(0, 0)] * ((wn if index == 0 else wm).bit_length() - 1)
    warps = own + copies if index == 0 else copies + own
    return L.make_linear(shape, registers, lanes, warps)


def choose(op: tt.DotOp, num_warps: int, arch: str, size: int = 0) -> AmdMfma | None:
    """The MFMA layout of a 2-D fp16 or bf16 dot with an fp32 accumulator whose tiles fit
    exactly, of instruction ``size`` (0: 32 where it fits, else 16); None for FMA."""
    a, b, c = (type(element_type(v.type)) for v in (op.a, op.b, op.c))
    if str(arch) not in ARCHS or a is not b or (a, 32) not in _INSTRUCTIONS or c is not Float32Type:
        return None
    a_shape, b_shape = op.a.type.get_shape(), op.b.type.get_shape()
    if len(a_shape) != 2:
        return None
    m, depth, n = a_shape[0], a_shape[1], b_shape[1]
    for tile in ((size,) if size else (32, 16)):
        k_step = PACK * _LANES // tile
        if depth % k_step or not _power_of_two(depth // k_step):
            continue
        for wm in (num_warps, num_warps // 2, num_warps // 4, 1):
            wn = num_warps // max(wm, 1)
            if wm >= 1 and wm * wn == num_warps and m % (tile * wm) == 0 and n % (tile * wn) == 0 \
                    and _power_of_two(m // (tile * wm)) and _power_of_two(n // (tile * wn)):
                return AmdMfma((wm, wn), tile)
    return None


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def accelerate_matmul(func: Any, num_warps: int, arch: str, size: int = 0) -> None:
    """Write ``ttg.mma`` on every dot of ``func`` that runs on MFMA (one already there, from an
    edited TTGIR, is kept); ``size``: the ``matrix_instr_nonkdim`` option."""
    for op in func.walk():
        if isinstance(op, tt.DotOp) and "ttg.mma" not in op.attributes:
            layout = choose(op, num_warps, arch, size)
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
    name, element = _INSTRUCTIONS[(type(element_type(op.a.type)), layout.size)]
    a = k.tensor(op.a, operand_layout(layout, 0, shape_of(op.a))).values
    b_ = k.tensor(op.b, operand_layout(layout, 1, shape_of(op.b))).values
    acc = k.tensor(op.c, layout).values
    steps = shape_of(op.a)[1] // layout.k_step
    reps_m, reps_n = layout.repetitions(shape)
    count = layout.registers
    pack, acc_type = lt.vector(element, PACK), lt.vector(lt.F32, count)
    mfma = lt.function(b.module, name, acc_type, [pack, pack, acc_type, lt.I32, lt.I32, lt.I32])

    def vector(values: list[ir.Value], ty: ir.Type) -> ir.Value:
        out = ir.Constant(ty, ir.Undefined)
        for i, value in enumerate(values):
            out = b.insert_element(out, b.bitcast(value, ty.element) if value.type != ty.element else value,
                                   ir.Constant(lt.I32, i))
        return out

    results: list[ir.Value] = []
    zero = ir.Constant(lt.I32, 0)
    for rm in range(reps_m):
        for rn in range(reps_n):
            first = count * (rn + reps_n * rm)
            c = vector(acc[first:first + count], acc_type)
            for s in range(steps):
                a_regs = a[PACK * (s + steps * rm):PACK * (s + steps * rm) + PACK]
                b_regs = b_[PACK * (s + steps * rn):PACK * (s + steps * rn) + PACK]
                c = b.call(mfma, [vector(a_regs, pack), vector(b_regs, pack), c, zero, zero, zero])
            results.extend(b.extract_element(c, ir.Constant(lt.I32, v)) for v in range(count))
    k.define(result, results)


#: The hip backend's rule table when MFMA is on: the shared rules with `lower_dot`.
RULES = {**SHARED_RULES, tt.DotOp: lower_dot}
