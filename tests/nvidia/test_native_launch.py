"""The cuda backend's native launch (`CUDALauncher.native_launch`) over the libcuda stand-in,
whose ``cuLaunchKernelEx`` is here a C function pointer (a ctypes callback), as the native
code calls it, and a stand-in for torch's current device and stream: what the launch passes,
the device it checks, the error it raises."""

from __future__ import annotations

import ctypes
import types

import pytest

import naiad
import naiad.language as tl
from naiad.backends.cuda import driver as cuda_driver
from naiad.errors import NaiadError
from naiad.runtime import native_code
from naiad.runtime.jit import JITFunction

from .test_driver import cuda_driver_instance, fake  # noqa: F401  (the libcuda stand-in fixture)

pytestmark = [pytest.mark.shipped_backends,
              pytest.mark.skipif(not native_code.available(), reason="no native entries here")]

_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_void_p)


@naiad.jit
def scaled_print(n, scale, BLOCK: tl.constexpr):
    tl.device_print("n", n * scale)


@pytest.fixture
def native_fake(fake, monkeypatch):  # noqa: F811
    """The stand-in with a C ``cuLaunchKernelEx`` and a torch that runs CUDA: its current
    device is ``torch.device`` and its current stream 0x77."""
    from naiad.backends import selection

    def launch(config, function, params, extra):
        fake.calls.append("cuLaunchKernelEx")
        result = fake.fake_cuLaunchKernelEx(config, function or 0, params, extra)
        return fake.results.get("cuLaunchKernelEx", result)
    fake.cuLaunchKernelEx = _LAUNCH(launch)
    current = types.SimpleNamespace(device=0)
    torch = types.SimpleNamespace(
        _C=types.SimpleNamespace(_cuda_getDevice=lambda: current.device,
                                 _cuda_getCurrentRawStream=lambda device: 0x77),
        cuda=types.SimpleNamespace(set_device=lambda device: setattr(current, "device", device)))
    monkeypatch.setattr(cuda_driver, "_torch_cuda", lambda: torch)
    monkeypatch.setattr(cuda_driver, "_torch_running", torch)
    monkeypatch.setattr(selection, "_drivers", {})
    monkeypatch.setattr(selection, "_selected", {})
    fake.kernel_names.add(b"scaled_print")
    fake.param_formats = ["i", "f"]
    scaled_print.cache.clear()
    scaled_print._fast.clear()
    fake.torch = current
    return fake


def _forbid_python_path(monkeypatch):
    def fell_back(self, *args, **kwargs):
        raise AssertionError("the launch took the Python path")
    scaled_print._fast.clear()
    monkeypatch.setattr(JITFunction, "_run_slow", fell_back)


def test_the_native_launch_passes_grid_block_stream_and_arguments(native_fake, monkeypatch):
    with naiad.set_backend("cuda"):
        scaled_print[(3, 2)](7, 0.5, BLOCK=64, num_warps=2)
        scaled_print[(3, 2)](7, 0.5, BLOCK=64, num_warps=2)
        assert scaled_print._native.entry is not None and scaled_print._native.error is None
        _forbid_python_path(monkeypatch)
        for n in (9, 11, 13):
            scaled_print[(3, 2)](n, 0.5, BLOCK=64, num_warps=2)
    launches = native_fake.launches
    assert len(launches) == 5
    for launch, n in zip(launches, (7, 7, 9, 11, 13)):
        assert launch["grid"] == (3, 2, 1) and launch["block"] == (64, 1, 1)
        assert launch["stream"] == 0x77 and launch["values"] == [n, 0.5]
        assert launch["function"] == launches[0]["function"] and launch["extra"] is None


def test_another_current_device_takes_the_python_path(native_fake):
    native_fake.devices = 2
    with naiad.set_backend("cuda"):
        scaled_print[(1,)](7, 0.5, BLOCK=64)
        scaled_print[(1,)](7, 0.5, BLOCK=64)
        cuda_driver_instance().set_current_device(1)
        scaled_print[(1,)](7, 0.5, BLOCK=64)
        scaled_print[(1,)](7, 0.5, BLOCK=64)
    contexts = [launch["context"] for launch in native_fake.launches]
    assert contexts[0] == contexts[1] != contexts[2] == contexts[3]
    assert len(native_fake.images) == 2


def test_a_failed_native_launch_says_what_was_launched(native_fake, monkeypatch):
    with naiad.set_backend("cuda"):
        scaled_print[(2,)](7, 0.5, BLOCK=64)
        scaled_print[(2,)](7, 0.5, BLOCK=64)
        _forbid_python_path(monkeypatch)
        native_fake.results["cuLaunchKernelEx"] = 701
        with pytest.raises(NaiadError) as info:
            scaled_print[(2,)](7, 0.5, BLOCK=64)
    assert str(info.value) == (
        "cuLaunchKernelEx failed launching scaled_print (grid (2, 1, 1), 128 threads per block, 0 "
        "bytes of shared memory): CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701): too many resources "
        "requested for launch -- the kernel uses too many registers for its block size: use fewer "
        "warps (num_warps)")

