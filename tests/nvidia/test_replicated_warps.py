"""Warps that only repeat others' elements leave at the kernel's start
(`naiad.codegen.gpu.replicated_warps`): checked in the PTX (which warps stay, barriers counting
only them, the kernels it must not touch) and, on the GPU, by the values of row kernels,
reductions, scans and in-place updates whose blocks are smaller than the program's threads."""

from __future__ import annotations

import re

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def row_softmax(X, Out, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride + cols, mask=cols < n, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(Out + row * stride + cols, (e / tl.sum(e, 0)).to(Out.dtype.element_ty), mask=cols < n)


@naiad.jit
def row_layernorm(X, Y, W, B, stride, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, 0) / n
    centered = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(centered * centered, 0) / n + eps)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    b = tl.load(B + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (centered * rstd * w + b).to(Y.dtype.element_ty), mask=mask)


@naiad.jit
def row_cumsum(X, Out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    tl.store(Out + row * BLOCK + cols, tl.cumsum(tl.load(X + row * BLOCK + cols), 0))


@naiad.jit
def shift_left_in_place(X, BLOCK: tl.constexpr):
    """``x[i] = x[i + 1]`` for the first BLOCK - 1 elements: every read before any write."""
    cols = tl.arange(0, BLOCK)
    values = tl.load(X + cols + 1, mask=cols < BLOCK - 1)
    tl.store(X + cols, values, mask=cols < BLOCK - 1)


@naiad.jit
def atomic_row_sum(X, Out, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.atomic_add(Out + cols * 0, tl.load(X + cols))


@naiad.jit
def printed(X, BLOCK: tl.constexpr):
    tl.device_print("x", tl.load(X + tl.arange(0, BLOCK)))


@naiad.jit
def tile_copy(X, Out, R: tl.constexpr, C: tl.constexpr):
    offsets = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tl.store(Out + offsets, tl.load(X + offsets))


ROW = {"X": "*bf16", "Out": "*bf16", "stride": "i32", "n": "i32"}
ALIGNED = {name: [["tt.divisibility", 16]] for name in ("X", "Out", "stride")}


def _staying_threads(ptx: str) -> int | None:
    """The thread count below which threads go on (the kernel's first compare of tid.x), or None."""
    found = re.search(r"mov\.u32\s+(%r\d+), %tid\.x;\s+setp\.lt\.u32\s+%p\d+, \1, (\d+);", ptx)
    return int(found.group(2)) if found else None


@pytest.mark.parametrize("block, warps, staying, barriers", [
    (256, 4, 32, set()),      # 8 bf16 a lane: one warp holds the row, and needs no exchange
    (512, 4, 64, {"64"}),     # two warps, whose exchange waits for their 64 threads
    (512, 8, 64, {"64"}),
    (1024, 4, None, {""}),    # every warp holds its own elements: the whole program waits
])
def test_repeating_warps_leave_and_barriers_count_the_rest(block, warps, staying, barriers):
    ptx = compile_cuda(row_softmax, ROW, {"BLOCK": block}, ALIGNED, num_warps=warps).asm["ptx"]
    assert _staying_threads(ptx) == staying
    assert set(re.findall(r"bar\.sync\s+0(?:, (\d+))?;", ptx)) == barriers


@pytest.mark.parametrize("fn, signature, constexprs", [
    (atomic_row_sum, {"X": "*fp32", "Out": "*fp32"}, {"BLOCK": 64}),
    (printed, {"X": "*fp32"}, {"BLOCK": 64}),
    (tile_copy, {"X": "*fp32", "Out": "*fp32"}, {"R": 2, "C": 32}),
])
def test_kernels_with_effects_or_2d_tiles_keep_every_warp(fn, signature, constexprs):
    ptx = compile_cuda(fn, signature, constexprs, num_warps=4).asm["ptx"]
    assert _staying_threads(ptx) is None


def _bf16_tensor(torch, values: np.ndarray):
    return torch.from_numpy(values).to(torch.bfloat16).cuda()


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("n", [256, 200, 512, 77, 1])
@pytest.mark.parametrize("warps", [4, 8])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_softmax_and_layernorm_rows_smaller_than_the_program(gpu, n, warps, dtype):
    torch = gpu
    block = max(32, 1 << (n - 1).bit_length())
    rows = 37
    x = torch.randn(rows, n, device="cuda").to(getattr(torch, dtype)) * 3
    out = torch.full_like(x, float("nan"))
    row_softmax[(rows,)](x, out, x.stride(0), n, BLOCK=block, num_warps=warps)
    torch.testing.assert_close(out.float(), torch.softmax(x.float(), -1), atol=4e-3, rtol=1e-2)
    w, b = torch.rand(n, device="cuda").to(x.dtype), torch.rand(n, device="cuda").to(x.dtype)
    y = torch.full_like(x, float("nan"))
    row_layernorm[(rows,)](x, y, w, b, x.stride(0), n, 1e-5, BLOCK=block, num_warps=warps)
    want = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
    torch.testing.assert_close(y.float(), want, atol=3e-2, rtol=2e-2)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("block, warps", [(64, 4), (256, 8), (512, 4)])
def test_scans_and_in_place_shifts_with_repeating_warps(gpu, block, warps):
    torch = gpu
    x = torch.randint(-5, 6, (3, block), device="cuda", dtype=torch.int32)
    out = torch.zeros_like(x)
    row_cumsum[(3,)](x, out, BLOCK=block, num_warps=warps)
    assert torch.equal(out, torch.cumsum(x, 1, dtype=torch.int32))
    values = torch.arange(block, device="cuda", dtype=torch.float32)
    shift_left_in_place[(1,)](values, BLOCK=block, num_warps=warps)
    want = np.concatenate([np.arange(1, block), [block - 1]]).astype(np.float32)
    np.testing.assert_array_equal(values.cpu().numpy(), want)


@pytest.mark.usefixtures("gpu")
def test_atomics_still_count_each_element_once(gpu):
    torch = gpu
    x = torch.arange(64, device="cuda", dtype=torch.float32)
    out = torch.zeros(1, device="cuda")
    atomic_row_sum[(1,)](x, out, BLOCK=64, num_warps=4)
    assert out.item() == float(np.arange(64).sum())
