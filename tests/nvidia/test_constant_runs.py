"""Element-wise values known equal over runs (axis info's constancy: a mask ``cols < N`` with N
a multiple of 16) are computed once per run a thread holds, not once per element: the PTX of a
row kernel has one compare per 8-element run of its mask; the results are unchanged (checked
against torch on the GPU, and by every masked kernel of the suites)."""

from __future__ import annotations

import pytest

import naiad
import naiad.language as tl

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def centered_rows(X, Y, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    centered = tl.where(mask, x - tl.sum(x, axis=0) / N, 0.0)
    tl.store(Y + row * stride + cols, centered, mask=mask)


SIGNATURE = {"X": "*bf16", "Y": "*bf16", "stride": "i32", "N": "i32"}


def test_a_mask_is_compared_once_per_run():
    """16 warps, 8 bf16 a thread per 128-bit access, 4 accesses: with N a multiple of 16 the
    mask is constant over each 8-element run: 4 compares for the loads, the `tl.where` and the
    stores together; N of unknown alignment: one per element."""
    def compares(attrs):
        ptx = compile_cuda(centered_rows, SIGNATURE, {"BLOCK": 16384}, attrs, num_warps=16).asm["ptx"]
        return ptx.count("setp.lt.s32") + ptx.count("setp.ge.s32")
    aligned = {name: [["tt.divisibility", 16]] for name in ("X", "Y", "stride")}
    assert compares({**aligned, "N": [["tt.divisibility", 16]]}) <= 3 * 4
    assert compares(aligned) >= 32


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("n", [16384, 16000, 12288, 100])
def test_centered_rows_against_torch(gpu, n):
    torch = gpu
    x = torch.randn((8, n), device="cuda", dtype=torch.bfloat16)
    y = torch.full_like(x, float("nan"))
    centered_rows[(8,)](x, y, n, n, BLOCK=naiad.next_power_of_2(n), num_warps=16)
    want = x.float() - x.float().mean(dim=1, keepdim=True)
    torch.testing.assert_close(y.float(), want, atol=2e-2, rtol=1e-2)
