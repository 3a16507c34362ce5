"""The LDS ring of a dot's operands (``num_stages=3``, `naiad.codegen.gpu.operand_rings`) in
the hip backend's ISA: one ``s_barrier`` a trip of the dot's loop instead of two, twice the LDS,
the ring dropped where the LDS cannot hold it or the dot may skip trips, an operand loaded
before the loop converted there.  (The values these kernels compute are checked where the same
shared lowering runs: naiad-opencl's test_operand_rings.py, on an OpenCL device.)"""

from __future__ import annotations

import re

import pytest

import naiad
import naiad.language as tl
from naiad.tools import gallery
from tests.hip.test_compile import ALIGNED, _compile
from tests.hip.test_mfma import MATMUL
from tests.nvidia.test_operand_rings import every_other_trip

pytestmark = pytest.mark.shipped_backends


def _outer_loop(isa: str) -> list[str]:
    """The lines of the outermost loop of the kernel (from a label to the branch back to it)."""
    lines = isa.splitlines()
    labels = {line[:-1]: i for i, line in enumerate(lines) if re.fullmatch(r"\.LBB\d+_\d+:", line)}
    spans = []
    for j, line in enumerate(lines):
        branch = re.match(r"\s*s_(?:cbranch_\w+|branch)\s+(\.LBB\d+_\d+)", line)
        if branch and labels.get(branch.group(1), j) < j:
            spans.append((labels[branch.group(1)], j))
    assert spans, "no loop in the ISA"
    first, last = max(spans, key=lambda span: span[1] - span[0])
    return lines[first:last + 1]


def _loop_barriers(isa: str) -> int:
    return sum("s_barrier" in line for line in _outer_loop(isa))


def _lds(isa: str) -> int:
    return int(re.search(r"\.amdhsa_group_segment_fixed_size\s+(\d+)", isa).group(1))


def _matmul(dtype, arch="gfx942", block=(64, 64, 32), **options):
    signature = {**MATMUL, "a_ptr": dtype, "b_ptr": dtype, "c_ptr": dtype}
    bm, bn, bk = block
    constexprs = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8}
    return _compile(gallery.matmul_tutorial_kernel, signature, constexprs, arch, **options).asm["amdgcn"]


@pytest.mark.parametrize("dtype, arch, mfma", [("*fp16", "gfx942", True), ("*bf16", "gfx942", True),
                                               ("*fp32", "gfx942", False), ("*fp16", "gfx1100", False)])
def test_three_stages_wait_once_a_trip_in_twice_the_lds(dtype, arch, mfma):
    two = _matmul(dtype, arch, mfma=mfma, num_stages=2)
    three = _matmul(dtype, arch, mfma=mfma, num_stages=3)
    assert _loop_barriers(two) == 2               # both operands staged together: before and after
    assert _loop_barriers(three) == 1
    assert ("v_mfma" in three) == mfma
    assert _lds(three) >= 2 * min(_lds(two), 4 * 32 * 64 * (4 if dtype == "*fp32" else 2))
    assert ".amdhsa_private_segment_fixed_size 0" in three


def test_a_ring_the_lds_cannot_hold_is_not_made():
    """128 x 128 x 64 fp16 tiles: two slots of both operands are over 64 KiB on MI300 (one
    staging then, two barriers), within gfx950's 160 KiB (the ring)."""
    mi300 = _matmul("*fp16", "gfx942", (128, 128, 64), mfma=True, num_stages=3, num_warps=8)
    assert _lds(mi300) <= 64 << 10 and _loop_barriers(mi300) == 2
    mi355 = _matmul("*fp16", "gfx950", (128, 128, 64), mfma=True, num_stages=3, num_warps=8)
    assert 64 << 10 < _lds(mi355) <= 160 << 10 and _loop_barriers(mi355) == 1


@naiad.jit
def fixed_a_kernel(a, b, c, K, M: tl.constexpr, N: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, BK)
    x = tl.load(a + rm[:, None] * BK + rk[None, :])
    acc = tl.zeros((M, N), tl.float32)
    for k in range(0, K, BK):
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("stages, barriers", [(2, 2), (3, 1)])
def test_an_operand_loaded_before_the_loop_is_converted_there(stages, barriers):
    signature = {"a": "*fp16", "b": "*fp16", "c": "*fp32", "K": "i32"}
    isa = _compile(fixed_a_kernel, signature, {"M": 64, "N": 64, "BK": 32}, attrs=ALIGNED, mfma=True,
                   num_stages=stages).asm["amdgcn"]
    loop = _outer_loop(isa)
    assert sum("s_barrier" in line for line in loop) == barriers
    assert sum("v_mfma" in line for line in loop) == 4
    # only B's 32 x 64 tile is written each trip: 4 KiB over 256 lanes, one 16-byte store each
    assert sum(bool(re.match(r"\s*ds_write", line)) for line in loop) == 1


def test_a_dot_that_may_skip_trips_gets_no_ring():
    """Slots taken in turn by trip are safe only if every trip stages: two trips apart could
    otherwise write the slot a slow wave still reads."""
    signature = {"a": "*fp16", "b": "*fp16", "c": "*fp32", "K": "i32"}
    two, three = (_compile(every_other_trip, signature, {"N": 64, "BK": 32}, attrs=ALIGNED, mfma=True,
                           num_stages=stages).asm["amdgcn"] for stages in (2, 3))
    assert _lds(three) == _lds(two)
    assert _loop_barriers(three) == 2
