"""Kernels written for Triton (``import triton``), unmodified, on CUDA tensors through naiad.compat:
the ones the CPU suite runs (tests/cpu/test_triton_kernels.py, tests/cpu/triton_kernels/,
tests/test_compat.py).  GPU only, except `test_triton_kernels_compile_for_sm90`, which compiles
each for sm_90 without a GPU.

A kernel that needs what the GPU lowering does not support yet is listed in `NEEDS` and skipped
with the reason.
"""

from __future__ import annotations

import importlib
import sys

import pytest

import naiad
import naiad.compat

from .conftest import compile_cuda, libdevice_path

pytestmark = pytest.mark.shipped_backends

#: kernel -> why the cuda backend cannot run it yet (None: it can).
NEEDS: dict[str, str | None] = {
    "attention_fwd": None,     # dot, trans, exp (libdevice), max/sum, where, a loop
    "scale_kernel": None,
    "add_kernel": None,        # libdevice.tanh
}


def _supported(name: str) -> None:
    reason = NEEDS.get(name)
    if reason is not None:
        pytest.skip(f"{name} needs what the cuda backend does not support yet: {reason}")


@pytest.fixture
def compat():
    """naiad.compat for one test; no `triton` module (nor kernel module importing it) is left."""
    naiad.compat.enable()
    try:
        yield
    finally:
        for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")
                     or m.startswith("tests.cpu.triton_kernels.")]:
            del sys.modules[name]
        naiad.compat.disable()


def _kernel_module(name: str):
    return importlib.import_module(f"tests.cpu.triton_kernels.{name}")


def _compat_add_module(tmp_path):
    """tests/test_compat.py's Triton file (add + libdevice.tanh), imported as a user would."""
    from tests.test_compat import TRITON_KERNEL_FILE

    path = tmp_path / "triton_add_kernel_cuda.py"
    path.write_text(TRITON_KERNEL_FILE)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module("triton_add_kernel_cuda")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("triton_add_kernel_cuda", None)


# -- on a GPU --------------------------------------------------------------------------------------
def _attention_reference(torch, q, k, v, scale):
    return torch.softmax((q.double() @ k.double().T) * scale, dim=1) @ v.double()


@pytest.mark.parametrize("n_ctx,head_dim,block", [(64, 32, 32), (100, 32, 32), (96, 16, 32),
                                                  (200, 64, 64)])
def test_fused_attention(gpu, compat, n_ctx, head_dim, block):
    _supported("attention_fwd")
    torch = gpu
    attention = _kernel_module("attention")
    g = torch.Generator().manual_seed(n_ctx)
    q, k, v = (torch.randn(n_ctx, head_dim, generator=g).cuda() for _ in range(3))
    out = torch.empty_like(q)
    scale = head_dim ** -0.5
    attention.attention_fwd[(naiad.cdiv(n_ctx, block),)](
        q, k, v, out, q.stride(0), k.stride(0), v.stride(0), out.stride(0), n_ctx, scale,
        BLOCK_M=block, BLOCK_N=block, HEAD_DIM=head_dim)
    expected = _attention_reference(torch, q, k, v, scale).float()
    # tl.dot's default precision for fp32 is tf32 in Triton: allow for it
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)


def test_scale_kernel(gpu, compat):
    _supported("scale_kernel")
    torch = gpu
    scale = _kernel_module("scale")
    x = torch.arange(256, dtype=torch.float32, device="cuda") - 100.5
    y = torch.zeros_like(x)
    scale.scale_kernel[(1,)](x, y, BLOCK=256)
    assert torch.equal(y, x * 2)


def test_compat_add_tanh_kernel(gpu, compat, tmp_path):
    _supported("add_kernel")
    torch = gpu
    module = _compat_add_module(tmp_path)
    n = 3000
    g = torch.Generator().manual_seed(3)
    x, y = (torch.randn(n, generator=g).cuda() for _ in range(2))
    out = torch.empty_like(x)
    module.add_kernel[module.grid(n)](x, y, out, n, BLOCK_SIZE=1024)
    torch.testing.assert_close(out, torch.tanh(x + y), rtol=2e-6, atol=1e-6)


# -- without a GPU: each compiles for sm_90 ---------------------------------------------------------
_SIGNATURES = {
    "attention_fwd": (lambda: _kernel_module("attention").attention_fwd,
                      {"Q": "*fp32", "K": "*fp32", "V": "*fp32", "Out": "*fp32", "stride_qm": "i32",
                       "stride_kn": "i32", "stride_vn": "i32", "stride_om": "i32", "N_CTX": "i32",
                       "sm_scale": "fp32"},
                      {"BLOCK_M": 32, "BLOCK_N": 32, "HEAD_DIM": 32}, True),
    "scale_kernel": (lambda: _kernel_module("scale").scale_kernel, {"X": "*fp32", "Y": "*fp32"},
                     {"BLOCK": 256}, False),
}


@pytest.mark.parametrize("name", list(_SIGNATURES) + ["add_kernel"])
def test_triton_kernels_compile_for_sm90(compat, tmp_path, name):
    _supported(name)
    if name == "add_kernel":
        fn, signature, constexprs, math = (_compat_add_module(tmp_path).add_kernel,
                                           {"x_ptr": "*fp32", "y_ptr": "*fp32",
                                            "output_ptr": "*fp32", "n_elements": "i32"},
                                           {"BLOCK_SIZE": 1024}, True)
    else:
        get, signature, constexprs, math = _SIGNATURES[name]
        fn = get()
    if math and libdevice_path() is None:
        pytest.skip("no libdevice found (pip install nvidia-nvvm)")
    kernel = compile_cuda(fn, signature, constexprs)
    assert f".entry {name}" in kernel.asm["ptx"]
    assert ".extern .func" not in kernel.asm["ptx"]
