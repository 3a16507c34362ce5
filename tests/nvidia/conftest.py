"""Fixtures of the cuda backend's tests.

- `gpu`: skips the test unless the cuda driver is active (libcuda and a device) and torch sees a
  CUDA device; GPU-only modules put it in ``pytestmark`` (``pytest.mark.usefixtures("gpu")``).
- `compile_cuda`: compiles one specialization of a kernel for sm_90 without any GPU (PTX, and a
  cubin when ptxas is found); also importable as a plain function (``from .conftest import
  compile_cuda``).
- `needs_libdevice` / `needs_ptxas`: skip markers for kernels that call libdevice (exp, log,
  sin...) and for checks of the cubin.
"""

from __future__ import annotations

import functools

import pytest

import naiad
from naiad.backends.compiler import GPUTarget

TARGET = GPUTarget("cuda", 90, 32)


@functools.lru_cache(maxsize=None)
def libdevice_path() -> str | None:
    """libdevice.10.bc as the backend finds it, or None."""
    try:
        from naiad.backends.cuda.toolchain import find_libdevice

        return find_libdevice()
    except Exception:          # a bad NAIAD_LIBDEVICE_PATH, or no toolchain module
        return None


@functools.lru_cache(maxsize=None)
def ptxas_path() -> str | None:
    """ptxas as the backend finds it, or None."""
    try:
        from naiad.backends.cuda.toolchain import find_ptxas

        return find_ptxas()
    except Exception:
        return None


needs_libdevice = pytest.mark.skipif(libdevice_path() is None,
                                     reason="no libdevice found (pip install nvidia-nvvm, or "
                                            "set NAIAD_LIBDEVICE_PATH)")
needs_ptxas = pytest.mark.skipif(ptxas_path() is None,
                                 reason="no ptxas found (pip install nvidia-cuda-nvcc, or set "
                                        "NAIAD_PTXAS_PATH)")


def compile_cuda(fn, signature: dict, constexprs: dict | None = None, attrs: dict | None = None,
                 num_warps: int = 4, num_stages: int | None = None):
    """``fn`` compiled for an sm_90 GPU (a `CompiledKernel`: ``.asm[stage]``, ``.metadata``);
    ``num_stages`` as a launch gives it (the backend's default when None)."""
    from naiad.compiler.compiler import ASTSource

    source = ASTSource(fn, signature, constexprs or {}, attrs or {})
    options = {"num_warps": num_warps}
    if num_stages is not None:
        options["num_stages"] = num_stages
    return naiad.compile(source, target=TARGET, options=options)


@pytest.fixture(name="compile_cuda")
def compile_cuda_fixture():
    return compile_cuda


def gpu_unavailable() -> str | None:
    """Why GPU tests cannot run here, or None when they can."""
    try:
        from naiad.backends.cuda.driver import CUDADriver
    except ImportError as error:
        return f"the cuda driver module cannot be imported: {error}"
    if not CUDADriver.is_active():
        return f"the cuda driver is not active: {CUDADriver.why_inactive()}"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


@functools.lru_cache(maxsize=None)
def _gpu_reason() -> str | None:
    return gpu_unavailable()


@pytest.fixture
def gpu():
    """torch, on a machine where cuda kernels can run; the test is skipped otherwise."""
    reason = _gpu_reason()
    if reason is not None:
        pytest.skip(f"needs an NVIDIA GPU: {reason}")
    import torch

    yield torch
    torch.cuda.synchronize()
