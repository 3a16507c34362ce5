"""``tl.dot_scaled`` on NVIDIA: the scaled operands go through a 16-bit tensor-core dot (wgmma on
sm_90): bf16, which holds the MX formats exactly, or fp16 where an operand is fp16, as Triton.
Checked in the PTX on CI and against the numpy decoding of the MX formats
(naiad/testing/conformance/test_dot_scaled.py) on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

from naiad.testing.conformance import test_dot_scaled as cpu
from naiad.testing.conformance.reference import assert_dot_close

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends

CASES = [("e2m1", "bf16", "lhs"), ("e4m3", "e5m2", "both"), ("e5m2", "e4m3", "none"),
         ("e2m1", "e2m1", "both"), ("fp16", "e2m1", "rhs")]


def _shapes(fa, fb, m, n, k):
    return (m, k // 2 if fa == "e2m1" else k), (k // 2 if fb == "e2m1" else k, n)


_POINTER = {"e2m1": "*u8", "e4m3": "*u8", "e5m2": "*u8", "bf16": "*u16", "fp16": "*fp16"}


@pytest.mark.parametrize("fa, fb, scaled", CASES)
def test_scaled_dots_take_a_16_bit_tensor_core_dot(fa, fb, scaled):
    """bf16 operands (exact for the MX formats), or fp16 where an operand is fp16, as Triton."""
    m, n, k = 64, 64, 64
    (ar, ac), (br, bc) = _shapes(fa, fb, m, n, k)
    signature = {"a_ptr": _POINTER[fa], "sa_ptr": "*u8" if scaled in ("lhs", "both") else "constexpr",
                 "b_ptr": _POINTER[fb], "sb_ptr": "*u8" if scaled in ("rhs", "both") else "constexpr",
                 "acc_ptr": "constexpr", "out_ptr": "*fp32"}
    constexprs = {"A_ROWS": ar, "A_COLS": ac, "B_ROWS": br, "B_COLS": bc, "M": m, "N": n,
                  "GROUPS": k // 32, "FA": fa, "FB": fb, "A_K_PACK": True, "B_K_PACK": True,
                  "FAST": False, "acc_ptr": None}
    for name in ("sa_ptr", "sb_ptr"):
        if signature[name] == "constexpr":
            constexprs[name] = None
    ptx = compile_cuda(cpu.scaled_kernel, signature, constexprs).asm["ptx"]
    kind = "f16" if "fp16" in (fa, fb) else "bf16"
    assert f"wgmma.mma_async.sync.aligned.m64n64k16.f32.{kind}.{kind}" in ptx
    assert "fma.rn.f32" not in ptx


@pytest.mark.parametrize("fa, fb, scaled", CASES)
@pytest.mark.parametrize("m, n, k", [(64, 64, 64), (128, 64, 128), (16, 32, 64)])
def test_dot_scaled_on_the_gpu_matches_the_mx_decoding(gpu, fa, fb, scaled, m, n, k):
    torch = gpu
    rng = np.random.default_rng(m + n + k)
    a_shape, b_shape = _shapes(fa, fb, m, n, k)
    a, b = cpu.operand(fa, a_shape, rng), cpu.operand(fb, b_shape, rng)
    sa = rng.integers(118, 136, (m, k // 32), dtype=np.uint8) if scaled in ("lhs", "both") else None
    sb = rng.integers(118, 136, (n, k // 32), dtype=np.uint8) if scaled in ("rhs", "both") else None
    acc = rng.standard_normal((m, n)).astype(np.float32)

    def cuda(x):
        return None if x is None else torch.from_numpy(x).cuda()

    out = torch.zeros((m, n), dtype=torch.float32, device="cuda")
    groups = k // 32
    cpu.scaled_kernel[(1,)](cuda(a), cuda(sa), cuda(b), cuda(sb), cuda(acc), out, *a.shape, *b.shape,
                            m, n, groups, fa, fb, True, True, False)
    expected = cpu.reference(a, sa, fa, b, sb, fb, acc)
    # the products are exact; their fp32 sum rounds in the tensor cores' order, not numpy's
    x, y = cpu.operands(a, sa, fa, b, sb, fb)
    assert_dot_close(out.cpu().numpy(), expected, x, y, product_error=2.0 ** -20)
