"""MFMA dots (`naiad.backends.hip.mfma`): the layouts and the rule's register gathering, run
through the instruction's documented semantics on the host (each lane's registers as the
layouts place them, one 32 x 32 x 8 product per wavefront and instruction) against numpy;
and the ISA: ``v_mfma`` where the option asks and the shape fits, FMA otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from naiad.backends.hip.mfma import PACK, AmdMfma, operand_layout
from naiad.codegen.gpu import layouts as L
from naiad.tools import gallery
from tests.hip.test_compile import _compile

pytestmark = pytest.mark.shipped_backends

LANES = 64


def _placed(layout, shape, warps):
    """coordinate[warp][lane][register] of every element a thread holds."""
    linear = L.linear_of(layout, shape)
    offsets = linear.offsets()

    def thread(bases, index):
        return np.sum([np.array(b) for i, b in enumerate(bases) if index >> i & 1] or [np.zeros(2, int)], axis=0)
    return [[[tuple(np.array(o) + thread(linear.lanes, lane) + thread(linear.warps, warp)) for o in offsets]
             for lane in range(LANES)] for warp in range(warps)]


def _row(size, lane, v):
    """The documented accumulator row of register ``v`` in ``lane``."""
    if size == 32:
        return 8 * (v // 4) + 4 * (lane // 32) + v % 4
    return 4 * (lane // 16) + v


def _emulate(a, b, warps_per_cta, size):
    """D = A @ B computed the way `lower_dot` drives the instruction: registers gathered from
    the operand layouts, the documented lane semantics of v_mfma_f32_{32x32x8,16x16x16}."""
    m, depth = a.shape
    n = b.shape[1]
    layout = AmdMfma(warps_per_cta, size)
    count, k_step = layout.registers, layout.k_step
    warps = warps_per_cta[0] * warps_per_cta[1]
    a_at = _placed(operand_layout(layout, 0, (m, depth)), (m, depth), warps)
    b_at = _placed(operand_layout(layout, 1, (depth, n)), (depth, n), warps)
    d_at = _placed(layout, (m, n), warps)
    steps, (reps_m, reps_n) = depth // k_step, layout.repetitions((m, n))
    out = np.full((m, n), np.nan)
    for w in range(warps):
        for rm in range(reps_m):
            for rn in range(reps_n):
                acc = np.zeros((LANES, count))
                for s in range(steps):
                    # the instruction: lane l gives A row l % S and B column l % S, k 4 (l / S) + j
                    a_tile, b_tile = np.zeros((size, k_step)), np.zeros((k_step, size))
                    for lane in range(LANES):
                        for j in range(PACK):
                            ra = a_at[w][lane][PACK * (s + steps * rm) + j]
                            rb = b_at[w][lane][PACK * (s + steps * rn) + j]
                            a_tile[lane % size, 4 * (lane // size) + j] = a[ra]
                            b_tile[4 * (lane // size) + j, lane % size] = b[rb]
                    product = a_tile @ b_tile
                    for lane in range(LANES):
                        for v in range(count):
                            acc[lane, v] += product[_row(size, lane, v), lane % size]
                for lane in range(LANES):
                    for v in range(count):
                        out[d_at[w][lane][count * (rn + reps_n * rm) + v]] = acc[lane, v]
    return out


@pytest.mark.parametrize("m, n, depth, warps, size", [
    (32, 32, 8, (1, 1), 32), (64, 64, 32, (2, 2), 32), (128, 64, 16, (2, 1), 32), (64, 128, 64, (1, 2), 32),
    (16, 16, 16, (1, 1), 16), (32, 64, 32, (2, 2), 16), (64, 16, 64, (4, 1), 16)])
def test_the_layouts_and_the_rule_compute_the_product(m, n, depth, warps, size):
    rng = np.random.default_rng(m + n + depth)
    a, b = rng.standard_normal((m, depth)), rng.standard_normal((depth, n))
    np.testing.assert_allclose(_emulate(a, b, warps, size), a @ b, rtol=1e-12, atol=1e-12)


MATMUL = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **{
    n: "i32" for n in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm",
                       "stride_cn")}}


@pytest.mark.parametrize("dtype", ["*fp16", "*bf16"])
def test_a_matmul_runs_on_mfma_when_asked(dtype):
    signature = {**MATMUL, "a_ptr": dtype, "b_ptr": dtype, "c_ptr": dtype}
    constexprs = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
    isa = _compile(gallery.matmul_tutorial_kernel, signature, constexprs, mfma=True).asm["amdgcn"]
    assert isa.count("v_mfma_f32_32x32x8") == 4                 # one 32x32 tile a wave, 4 K steps
    assert ".amdhsa_private_segment_fixed_size 0" in isa
    plain = _compile(gallery.matmul_tutorial_kernel, signature, constexprs).asm["amdgcn"]
    assert "v_mfma" not in plain                                # the option is off by default


def test_the_instruction_size_follows_the_tiles_and_the_option():
    small = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 8}
    isa = _compile(gallery.matmul_tutorial_kernel, MATMUL, small, num_warps=1, mfma=True).asm["amdgcn"]
    assert isa.count("v_mfma_f32_16x16x16") == 1 and "32x32" not in isa
    big = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
    isa = _compile(gallery.matmul_tutorial_kernel, MATMUL, big, mfma=True,
                   matrix_instr_nonkdim=16).asm["amdgcn"]
    assert isa.count("v_mfma_f32_16x16x16") == 4 * 2 and "32x32x8" not in isa   # 4 tiles a wave, 2 K steps


def test_shapes_off_the_tiles_and_rdna_stay_on_fma():
    constexprs = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 8, "GROUP_SIZE_M": 8}
    assert "v_mfma" not in _compile(gallery.matmul_tutorial_kernel, MATMUL, constexprs,
                                    mfma=True).asm["amdgcn"]
    constexprs = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
    assert "v_mfma" not in _compile(gallery.matmul_tutorial_kernel, MATMUL, constexprs, "gfx1100",
                                    mfma=True).asm["amdgcn"]


GROUPED = {"a_addresses": "*i64", "b_addresses": "*i64", "c_addresses": "*i64", "shapes": "*i32",
           "group_count": "i32"}


@pytest.mark.parametrize("arch", ["gfx942", "gfx1100"])
def test_tutorial_08_grouped_matmul_compiles(arch):
    """Triton's tutorial 08 (problems' pointers loaded from memory, a persistent walk over their
    tiles): a code object with no scratch, its dot on MFMA on CDNA when asked, on FMA on RDNA."""
    constexprs = {"NUM_PROGRAMS": 304, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    isa = _compile(gallery.grouped_matmul_kernel, GROUPED, constexprs, arch, mfma=True).asm["amdgcn"]
    assert ".amdhsa_private_segment_fixed_size 0" in isa
    assert ("v_mfma_f32_32x32x8" in isa) == (arch == "gfx942")
