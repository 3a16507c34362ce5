"""fp32 -> bf16 / fp8 and fp8 -> fp32 on NVIDIA's conversion instructions.

On CI: the PTX of a cast kernel has the instruction where the GPU has it (bf16 from sm_80, fp8
from sm_89) and the shared integer code elsewhere.  On the GPU: special values (ties, the
largest finite values and beyond, infinities, NaN, subnormals) convert to the same bits as the
CPU backend, which runs the shared code -- so the instructions round exactly as Naiad's own
definition of each conversion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends.compiler import GPUTarget
from naiad.compiler.compiler import ASTSource

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def cast_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m).to(out_ptr.dtype.element_ty), mask=m)


def _ptx(src: str, dst: str, arch: int = 90) -> str:
    signature = {"x_ptr": src, "out_ptr": dst, "n": "i32"}
    if arch == 90:
        return compile_cuda(cast_kernel, signature, {"BLOCK": 256}).asm["ptx"]
    source = ASTSource(cast_kernel, signature, {"BLOCK": 256}, {})
    return naiad.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": 4}).asm["ptx"]


@pytest.mark.parametrize("src, dst, instruction", [
    ("*fp32", "*bf16", "cvt.rn.bf16.f32"),
    ("*fp16", "*bf16", "cvt.rn.bf16.f32"),
    ("*fp32", "*fp8e4nv", "cvt.rn.satfinite.e4m3x2.f32"),
    ("*fp32", "*fp8e5", "cvt.rn.satfinite.e5m2x2.f32"),
    ("*fp8e4nv", "*fp32", "cvt.rn.f16x2.e4m3x2"),
    ("*fp8e5", "*fp16", "cvt.rn.f16x2.e5m2x2"),
])
def test_sm90_converts_with_one_instruction(src, dst, instruction):
    ptx = _ptx(src, dst)
    assert instruction in ptx
    if dst == "*bf16":      # the shared code's rounding (an add of 0x7FFF and the kept bit) is gone
        assert "32767" not in ptx


def test_sm80_has_the_bf16_instruction_but_not_the_fp8_ones():
    assert "cvt.rn.bf16.f32" in _ptx("*fp32", "*bf16", arch=80)
    ptx = _ptx("*fp32", "*fp8e4nv", arch=80)
    assert "e4m3x2" not in ptx and "cvt.rn.satfinite" not in ptx


def test_rounding_toward_zero_keeps_the_shared_code():
    @naiad.jit
    def rtz_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.store(out_ptr + offs, x.to(tl.float8e5, fp_downcast_rounding="rtz"))

    ptx = compile_cuda(rtz_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp8e5"}, {"BLOCK": 128}).asm["ptx"]
    assert "cvt.rn.satfinite" not in ptx


# -- on the GPU: the same bits as the CPU backend ------------------------------------------------
def _specials() -> np.ndarray:
    """fp32 values at every edge of bf16 and both fp8 formats."""
    edges = [0.0, -0.0, 1.0, -1.0, 1.00390625, 1.01171875, 1.0625, 1.1875, 1.125, 1.375,
             448.0, 464.0, 480.0, 500.0, -448.0, 57344.0, 61440.0, 65536.0, -57344.0, 1e6, -1e6,
             3.3895314e38, 3.4e38, -3.4e38, float("inf"), float("-inf"),
             2.0 ** -6, 2.0 ** -9, 2.0 ** -10, 2.0 ** -14, 2.0 ** -16, 2.0 ** -17, 2.0 ** -18,
             1e-40, -1e-40, 1e-45, 0.1, -0.3, math.pi, -math.e]
    rng = np.random.default_rng(3)
    spread = rng.standard_normal(2000).astype(np.float32) * np.float32(2.0) ** rng.integers(-20, 20, 2000)
    return np.concatenate([np.array(edges, np.float32), spread.astype(np.float32)])


def _run(torch, x: np.ndarray, dst, device: str) -> np.ndarray:
    src = torch.from_numpy(x).to(device)
    out = torch.empty(src.shape, dtype=dst, device=device)
    cast_kernel[(naiad.cdiv(src.numel(), 256),)](src, out, src.numel(), BLOCK=256)
    return out.cpu().view(torch.uint8 if dst.itemsize == 1 else torch.int16).numpy()


@pytest.mark.parametrize("dst", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_fp32_narrows_to_the_cpu_backends_bits(gpu, dst):
    torch = gpu
    x = _specials()
    with_nan = np.concatenate([x, np.array([float("nan")], np.float32)])
    on_gpu, on_cpu = (_run(torch, with_nan, getattr(torch, dst), d) for d in ("cuda", "cpu"))
    if dst == "bfloat16":       # a NaN stays a NaN (its payload may differ)
        assert (on_gpu[-1] & 0x7F80) == 0x7F80 and (on_gpu[-1] & 0x7F) != 0
        on_gpu, on_cpu = on_gpu[:-1], on_cpu[:-1]
    np.testing.assert_array_equal(on_gpu, on_cpu)


@pytest.mark.parametrize("src", ["float8_e4m3fn", "float8_e5m2"])
def test_every_fp8_value_widens_to_the_cpu_backends_fp32(gpu, src):
    torch = gpu
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(getattr(torch, src))
    results = []
    for device in ("cuda", "cpu"):
        out = torch.empty(256, dtype=torch.float32, device=device)
        x = codes.to(device)
        cast_kernel[(1,)](x, out, 256, BLOCK=256)
        results.append(out.cpu().numpy())
    on_gpu, on_cpu = results
    nan = np.isnan(on_cpu)
    np.testing.assert_array_equal(np.isnan(on_gpu), nan)
    np.testing.assert_array_equal(on_gpu[~nan].view(np.int32), on_cpu[~nan].view(np.int32))
