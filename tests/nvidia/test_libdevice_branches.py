"""libdevice's ``erff`` keeps its branch between two coefficient sets in the PTX (as Triton's
does), instead of LLVM's 7 ``selp`` an element: ptxas then issues a thread's loads before the
first ``erf`` (`naiad.backends.cuda.target._branches_kept`).  Checked in the PTX and, on the
GPU, against the exact ``math.erf`` on both sides of the branch."""

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
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(A + offsets, mask=mask)
    b = tl.load(B + offsets, mask=mask)
    tl.store(Out + offsets, 0.5 * a * (1.0 + tl.erf(a * 0.7071067811865476)) * b, mask=mask)


def test_erf_s_coefficients_are_chosen_by_a_branch_not_selects():
    aligned = {name: [["tt.divisibility", 16]] for name in ("A", "B", "Out", "n")}
    ptx = compile_cuda(gelu_mul, {"A": "*fp32", "B": "*fp32", "Out": "*fp32", "n": "i32"},
                       {"BLOCK": 1024}, aligned, num_warps=4).asm["ptx"]
    # 64 before (7 an element and more); 1-4 now, by the libdevice (CUDA 13's gives 8: one an element)
    assert len(re.findall(r"\bselp\.f32", ptx)) <= 8
    assert len(re.findall(r"@%p\d+ bra", ptx)) >= 8           # a branch an element, at least


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("n", [4096, 1000, 1])
def test_gelu_mul_against_math_erf(gpu, n):
    torch = gpu
    rng = np.random.default_rng(n)
    # both sides of libdevice's branch (|x| / sqrt(2) below and above ~1), the tails, zero
    a = np.concatenate([np.linspace(-6, 6, 997), rng.normal(size=n)]).astype(np.float32)[:max(n, 1)]
    b = rng.uniform(0.5, 2, size=a.size).astype(np.float32)
    out = torch.full((a.size,), float("nan"), device="cuda")
    gelu_mul[(naiad.cdiv(a.size, 1024),)](torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(),
                                           out, a.size, BLOCK=1024)
    want = np.array([0.5 * x * (1 + math.erf(x / math.sqrt(2))) * y for x, y in zip(a.tolist(), b.tolist())])
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=2e-6, atol=1e-6)
