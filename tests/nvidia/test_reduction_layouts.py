"""Reductions whose result is kept as ``[X, 1]`` (Inductor writes every reduction so:
``tl.sum(acc, 1)[:, None]`` stored under the row mask): the reduced tile gets a layout of its
own, every thread on distinct elements and the lanes along its contiguous dimension, instead of
the parent of the ``[X, 1]`` result's layout, which put every warp along X -- with X = 1 each of
16 warps summed the whole row again (a torch.compile'd batch norm ran 40x slower than Triton)."""

from __future__ import annotations

import re

import pytest

import naiad
import naiad.language as tl
from naiad.codegen.gpu import layouts as L

from tests.nvidia.conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def row_sums(x, out, rows, cols, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < rows
    acc = tl.zeros([XBLOCK, RBLOCK], tl.float32)
    for r0 in range(0, cols, RBLOCK):
        rindex = r0 + tl.arange(0, RBLOCK)[None, :]
        acc += tl.load(x + xindex * cols + rindex, mask=xmask & (rindex < cols), other=0.0)
    tl.store(out + xindex, tl.sum(acc, 1)[:, None], xmask)


CONFIGS = [(1, 2048, 16), (1, 512, 4), (4, 512, 8), (8, 128, 4), (64, 64, 4)]
SIGNATURE = {"x": "*fp32", "out": "*fp32", "rows": "i32", "cols": "i32"}


def _blocked(text: str) -> L.Blocked:
    fields = [tuple(int(n) for n in re.findall(r"\d+", part)) for part in re.findall(r"\[[\d, ]+\]", text)]
    assert text.startswith("#ttg.blocked") and len(fields) == 4, text
    return L.Blocked(*fields)


@pytest.mark.parametrize("xblock, rblock, warps", CONFIGS)
def test_the_reduced_tile_repeats_no_thread_and_runs_along_its_rows(xblock, rblock, warps):
    kernel = compile_cuda(row_sums, SIGNATURE, {"XBLOCK": xblock, "RBLOCK": rblock},
                          {"x": [["tt.divisibility", 16]], "cols": [["tt.divisibility", 16]]}, warps)
    line = next(line for line in kernel.asm["ttgir"].splitlines() if "tt.load" in line)
    layout = _blocked(re.search(r'ttg\.layout = "([^"]+)"', line).group(1))
    assert L.repeated_threads(layout, (xblock, rblock)) == 1, layout
    assert layout.order[0] == 1 and layout.threads_per_warp[1] > 1, layout        # lanes along rows


def test_repeated_threads_counts_the_lanes_and_warps_a_layout_spends_twice():
    every_warp_on_one_row = L.Blocked((1, 1), (1, 32), (16, 1), (1, 0))
    assert L.repeated_threads(every_warp_on_one_row, (1, 2048)) == 16
    assert L.repeated_threads(every_warp_on_one_row, (16, 2048)) == 1
    assert L.repeated_threads(L.Blocked((1, 4), (1, 32), (1, 16), (1, 0)), (1, 2048)) == 1
    assert L.repeated_threads(L.Blocked((1, 4), (1, 32), (1, 4), (1, 0)), (1, 64)) == 8   # half the lanes, 3 of 4 warps


@pytest.mark.parametrize("xblock, rblock, warps", CONFIGS)
def test_row_sums_against_torch(gpu, xblock, rblock, warps):
    torch = gpu
    for rows, cols in ((1, 4096), (37, 1000), (640, 512)):
        x = torch.randn(rows, cols, device="cuda")
        out = torch.empty(rows, device="cuda")
        row_sums[(naiad.cdiv(rows, xblock),)](x, out, rows, cols, XBLOCK=xblock, RBLOCK=rblock,
                                               num_warps=warps)
        torch.testing.assert_close(out, x.sum(1), rtol=1e-4, atol=1e-3)
