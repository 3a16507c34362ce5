"""``tl.erf`` on NVIDIA GPUs is Naiad's polynomial (`naiad.codegen.fastmath.erf_f32`, as on the
CPU), not libdevice's ``erff``: straight-line code with no coefficient selects.  Checked in the
PTX and, on the GPU, against the exact ``math.erf`` (in ulp, densely over both pieces and the
tails) and in a fused GELU."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def gelu_mul(A, B, Out, n, BLOCK: tl.constexpr):
    """``gelu(a) * b`` computed in fp32 (16-bit data is widened, and narrowed to store)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(A + offsets, mask=mask).to(tl.float32)
    b = tl.load(B + offsets, mask=mask).to(tl.float32)
    gelu = 0.5 * a * (1.0 + tl.erf(a * 0.7071067811865476))
    tl.store(Out + offsets, (gelu * b).to(Out.dtype.element_ty), mask=mask)


@naiad.jit
def erf_kernel(X, Out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(Out + offsets, tl.erf(tl.load(X + offsets, mask=mask)), mask=mask)


GELU_SIGNATURE = {"A": "*fp32", "B": "*fp32", "Out": "*fp32", "n": "i32"}
ALIGNED = {name: [["tt.divisibility", 16]] for name in ("A", "B", "Out", "n")}


def test_erf_is_straight_line_code_without_the_math_library():
    ptx = compile_cuda(gelu_mul, GELU_SIGNATURE, {"BLOCK": 1024}, ALIGNED, num_warps=4).asm["ptx"]
    assert not re.search(r"\bbra\b", ptx)                 # no branch (libdevice's had two an element)
    assert len(re.findall(r"\bselp\.f32", ptx)) == 8 * 2    # the piece an element (libdevice: 64)
    assert "ex2" not in ptx and "__nv_erf" not in ptx
    assert len(re.findall(r"\bfma\.rn\.f32", ptx)) >= 8 * 18     # both pieces, every element


def _ulps(got: np.ndarray, want: list[float]) -> np.ndarray:
    exact = np.array(want)
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / np.maximum(spacing, np.finfo(np.float32).smallest_subnormal)


@pytest.mark.usefixtures("gpu")
def test_erf_within_three_ulp_of_math_erf(gpu):
    torch = gpu
    # both pieces (below and above 1) and their seam, the edge of rounding to 1 (3.92), the
    # tails, signed zeros, tiny and subnormal inputs
    x = np.concatenate([np.linspace(-4.5, 4.5, 180_001), np.linspace(0.999, 1.001, 2001),
                        np.linspace(3.9, 3.95, 2001), [0.0, -0.0, 1e-30, -1e-38, 1e-45, 9.0, -30.0]])
    x = x.astype(np.float32)
    out = torch.full((x.size,), float("nan"), device="cuda")
    erf_kernel[(naiad.cdiv(x.size, 1024),)](torch.from_numpy(x).cuda(), out, x.size, BLOCK=1024)
    got = out.cpu().numpy()
    ulps = _ulps(got, [math.erf(v) for v in x.tolist()])
    assert ulps.max() <= 3, f"{ulps.max():.2f} ulp at x = {x[ulps.argmax()]!r}"
    assert np.array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))


@pytest.mark.usefixtures("gpu")
def test_erf_of_infinities_and_nan(gpu):
    torch = gpu
    x = torch.tensor([float("inf"), float("-inf"), float("nan")], device="cuda")
    out = torch.zeros(3, device="cuda")
    erf_kernel[(1,)](x, out, 3, BLOCK=4)
    got = out.cpu().numpy()
    assert got[0] == 1.0 and got[1] == -1.0 and np.isnan(got[2])


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("n", [4096, 1000, 1])
def test_gelu_mul_against_math_erf(gpu, n):
    torch = gpu
    rng = np.random.default_rng(n)
    a = np.concatenate([np.linspace(-6, 6, 997), rng.normal(size=n)]).astype(np.float32)[:max(n, 1)]
    b = rng.uniform(0.5, 2, size=a.size).astype(np.float32)
    out = torch.full((a.size,), float("nan"), device="cuda")
    gelu_mul[(naiad.cdiv(a.size, 1024),)](torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(),
                                           out, a.size, BLOCK=1024)
    want = np.array([0.5 * x * (1 + math.erf(x / math.sqrt(2))) * y for x, y in zip(a.tolist(), b.tolist())])
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=2e-6, atol=1e-6)
