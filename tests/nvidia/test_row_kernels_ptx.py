"""Two things the PTX of memory-bound row kernels does as Triton's does, checked in the PTX and
against torch on the GPU:

- a masked load is one predicated ``ld.global`` whose registers hold ``other`` where the mask is
  off, not a branch around the load (ptxas then issues a thread's loads together: behind
  branches it kept 64 registers of a layer norm's row for 76, and the whole row sweep moved
  from 8 points under 0.97 of Triton to 5 on the H100);
- a whole reduction's partials of 16 warps are combined by one shared-memory read a lane and
  four butterfly shuffles (not 16 reads a thread and 16 registers);
- a thread's accesses along a row are one 64-bit address plus constants (the pointer offsets
  as a GEP, whose constant part the code generator splits off), not one 64-bit multiply and
  register each (a layer norm's fp32 row of 32,768 spilled 136 bytes a thread with them, 4
  without; 0.90 -> 1.09 of Triton on the H100);
- a loop-carried accumulator fed by loads (``acc += x.to(tl.float32)``) takes the layout the
  loads want, as Triton's does: a bf16 row read 16 bytes a thread a trip, not twice 8 bytes
  (39 -> 32 registers, Triton's 32);
- a scan whose row is several repetitions of the layout's tile exchanges every repetition's
  warp totals through shared memory at once: two barriers, not two a repetition (cumsum of
  1024 fp32 in 4 warps: 128 -> 120 SASS instructions; 8192 in 16 warps 60 -> 53 registers).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def row_total(X, Out, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + tl.program_id(0) * N + cols, mask=cols < N, other=0.0)
    tl.store(Out + tl.program_id(0), tl.sum(x, axis=0))


@naiad.jit
def rms_rows(X, Y, W, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0)
    scale = tl.rsqrt(tl.sum(x * x, axis=0) / N + 1e-6)
    w = tl.load(W + cols, mask=mask)
    tl.store(Y + row * stride + cols, x * scale * w, mask=mask)


@naiad.jit
def looped_row_sum(X, Out, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(X + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(Out + row, tl.sum(acc, axis=0))


@naiad.jit
def row_cumsum(X, Out, N, BLOCK: tl.constexpr, REVERSE: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + tl.program_id(0) * N + cols, mask=cols < N, other=0.0)
    tl.store(Out + tl.program_id(0) * N + cols, tl.cumsum(x, axis=0, reverse=REVERSE), mask=cols < N)


@naiad.jit
def masked_copy(X, Y, n, fill, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=fill)
    tl.store(Y + offs, x)


@naiad.jit
def masked_scalar(X, Y, n, fill):
    i = tl.program_id(0)
    tl.store(Y + i, tl.load(X + i, mask=i < n, other=fill))


def test_a_whole_reduction_reads_one_partial_a_thread():
    ptx = compile_cuda(row_total, {"X": "*fp32", "Out": "*fp32", "N": "i32"}, {"BLOCK": 8192},
                       num_warps=16).asm["ptx"]
    after = ptx[ptx.rindex("bar.sync"):]
    assert len(re.findall(r"ld\.shared", after)) == 1
    assert len(re.findall(r"shfl\.sync\.bfly", after)) == 4


def test_a_row_s_accesses_share_one_address_plus_constants():
    """An RMS norm's row: 16 accesses a thread of each of X, W, Y, their addresses the first
    one's plus multiples of 2,048 elements (8,192 bytes), no 64-bit multiply each."""
    aligned = {name: [["tt.divisibility", 16]] for name in ("X", "Y", "W", "stride", "N")}
    ptx = compile_cuda(rms_rows, {"X": "*fp32", "Y": "*fp32", "W": "*fp32", "stride": "i32",
                                     "N": "i32"}, {"BLOCK": 32768}, aligned, num_warps=16).asm["ptx"]
    assert len(re.findall(r"ld\.global\.v4", ptx)) == 32 and len(re.findall(r"st\.global\.v4", ptx)) == 16
    assert len(re.findall(r"mul\.wide", ptx)) <= 6
    steps = {int(c) for c in re.findall(r"add\.s64\s+%rd\d+, %rd\d+, (\d+);", ptx)}
    assert {8192 * i for i in range(1, 16)} <= steps


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("n", [32768, 30000, 100])
def test_rms_rows_against_numpy(gpu, n):
    torch = gpu
    rng = np.random.default_rng(n)
    x, w = rng.normal(size=(3, n)).astype(np.float32), rng.normal(size=n).astype(np.float32)
    y = torch.full((3, n), float("nan"), device="cuda")
    rms_rows[(3,)](torch.from_numpy(x).cuda(), y, torch.from_numpy(w).cuda(), n, n,
                      BLOCK=naiad.next_power_of_2(n), num_warps=16)
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype, block, loads", [("bf16", 1024, 1), ("fp32", 1024, 2), ("i8", 2048, 1)])
def test_a_loop_carried_accumulator_reads_its_loads_16_bytes_at_a_time(dtype, block, loads):
    """128 threads, each reading its share of a trip's chunk in 16-byte loads."""
    aligned = {name: [["tt.divisibility", 16]] for name in ("X", "Out", "stride", "N")}
    ptx = compile_cuda(looped_row_sum, {"X": f"*{dtype}", "Out": "*fp32", "stride": "i32", "N": "i32"},
                       {"BLOCK": block}, aligned, num_warps=4).asm["ptx"]
    assert re.findall(r"@%p\d+ ld\.global\.(\S+)", ptx) == ["v4.b32"] * loads


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "int8"])
@pytest.mark.parametrize("n", [4096, 3000, 100])
def test_looped_row_sums_against_numpy(gpu, dtype, n):
    torch = gpu
    rng = np.random.default_rng(n)
    x = torch.from_numpy(rng.integers(-50, 50, size=(3, n)).astype(np.float32)).to(getattr(torch, dtype)).cuda()
    out = torch.full((3,), float("nan"), device="cuda")
    looped_row_sum[(3,)](x, out, n, n, BLOCK=1024)
    np.testing.assert_array_equal(out.cpu().numpy(), x.float().cpu().numpy().sum(axis=1))


@pytest.mark.parametrize("block, warps", [(1024, 4), (8192, 16), (4096, 4)])
def test_a_scan_s_repetitions_cross_shared_memory_together(block, warps):
    ptx = compile_cuda(row_cumsum, {"X": "*fp32", "Out": "*fp32", "N": "i32"},
                       {"BLOCK": block, "REVERSE": False}, num_warps=warps).asm["ptx"]
    assert ptx.count("bar.sync") == 2


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n, warps", [(1000, 4), (8192, 16), (4000, 4), (33, 1)])
def test_row_cumsums_against_numpy(gpu, n, warps, reverse):
    torch = gpu
    x = np.random.default_rng(n).integers(-20, 20, size=(3, n)).astype(np.float32)
    out = torch.full((3, n), float("nan"), device="cuda")
    row_cumsum[(3,)](torch.from_numpy(x).cuda(), out, n, BLOCK=naiad.next_power_of_2(n), REVERSE=reverse,
                     num_warps=warps)
    want = np.flip(np.cumsum(np.flip(x, 1), 1), 1) if reverse else np.cumsum(x, 1)
    np.testing.assert_array_equal(out.cpu().numpy(), want)


@pytest.mark.parametrize("dtype, width, block", [("fp32", "v4.b32", 512), ("fp16", "v4.b32", 1024),
                                                 ("i8", "v4.b32", 2048), ("fp64", "v2.b64", 256)])
def test_a_masked_load_is_predicated_not_branched_around(dtype, width, block):
    """The aligned case (16 bytes a thread, every thread one access): one load under its
    predicate, no branch in the kernel."""
    signature = {"X": f"*{dtype}", "Y": f"*{dtype}", "n": "i32",
                 "fill": "fp32" if dtype.startswith("fp") else "i32"}
    aligned = {name: [["tt.divisibility", 16]] for name in ("X", "Y", "n")}
    ptx = compile_cuda(masked_copy, signature, {"BLOCK": block}, aligned, num_warps=4).asm["ptx"]
    assert re.findall(r"@%p\d+ ld\.global\.(\S+)", ptx) == [width]
    assert "bra" not in ptx


def test_a_masked_load_of_unknown_alignment_is_predicated_a_element():
    ptx = compile_cuda(masked_copy, {"X": "*fp16", "Y": "*fp16", "n": "i32", "fill": "fp32"},
                       {"BLOCK": 256}, num_warps=1).asm["ptx"]
    assert re.findall(r"@%p\d+ ld\.global\.(\S+)", ptx) == ["b16"] * 8
    assert "bra" not in ptx


DTYPES = ["float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64"]


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n, block", [(1000, 256), (1024, 1024), (33, 64), (1, 8)])
def test_masked_loads_hold_other_where_masked_off(gpu, dtype, n, block):
    """Every element type, aligned and not, a mask ending inside a 16-byte access: the loaded
    part is the input, the rest ``other``."""
    torch = gpu
    t = getattr(torch, dtype)
    total = naiad.cdiv(n, block) * block
    x = (torch.arange(total, device="cuda") % 100 + 1).to(t)
    y = torch.zeros(total, device="cuda", dtype=t)
    fill = -7 if dtype != "uint8" else 7
    masked_copy[(naiad.cdiv(n, block),)](x, y, n, fill, BLOCK=block)
    want = x.clone()
    want[n:] = fill
    assert torch.equal(y, want)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "int64"])
def test_a_masked_scalar_load_holds_other(gpu, dtype):
    torch = gpu
    t = getattr(torch, dtype)
    x = (torch.arange(10, device="cuda") + 1).to(t)
    y = torch.zeros(10, device="cuda", dtype=t)
    masked_scalar[(10,)](x, y, 6, 3)
    want = x.clone()
    want[6:] = 3
    assert torch.equal(y, want)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("n, warps", [(8192, 16), (3000, 8), (100, 4), (1 << 15, 32), (5, 1)])
def test_whole_reductions_against_numpy(gpu, n, warps):
    torch = gpu
    x = np.random.default_rng(n).normal(size=(5, n)).astype(np.float32)
    out = torch.full((5,), float("nan"), device="cuda")
    row_total[(5,)](torch.from_numpy(x).cuda(), out, n, BLOCK=naiad.next_power_of_2(n), num_warps=warps)
    np.testing.assert_allclose(out.cpu().numpy(), x.sum(axis=1, dtype=np.float64), atol=1e-3 * n ** 0.5,
                               rtol=1e-4)
