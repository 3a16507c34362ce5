"""The hip driver against a stand-in for libamdhip64 (`FakeLibHIP`, which writes its outputs
through the pointers the driver passes): activation, the device's architecture, loading a real
code object with resource checks, what ``hipModuleLaunchKernel`` receives, and the errors."""

from __future__ import annotations

import ctypes
import struct

import pytest

import naiad
import naiad.language as tl
from naiad.backends.compiler import GPUTarget
from naiad.backends.hip import driver as hip_driver
from naiad.backends.hip import libhip
from naiad.backends.hip.driver import HIPDriver
from naiad.errors import NaiadError, OutOfResources

pytestmark = pytest.mark.shipped_backends

_ERRORS = {1: (b"hipErrorInvalidValue", b"invalid argument"),
           701: (b"hipErrorLaunchOutOfResources", b"too many resources requested for launch")}


def _put(pointer, ctype, value) -> None:
    ctypes.cast(pointer, ctypes.POINTER(ctype))[0] = value


class FakeLibHIP:
    """libamdhip64's functions as the driver calls them; ``results[name]`` makes one fail."""

    def __init__(self, devices: int = 1, arch: bytes = b"gfx942:sramecc+:xnack-"):
        self.devices, self.arch = devices, arch
        self.results: dict[str, int] = {}
        self.function_attributes = {0: 1024, 3: 0, 4: 48}     # max threads, local bytes, registers
        self.images: list[bytes] = []
        self.launches: list[dict] = []
        self.param_formats: list[str] = []
        self.device = 0

    def __getattr__(self, name: str):
        if not name.startswith("hip"):
            raise AttributeError(name)
        method = getattr(type(self), "fake_" + name, None)

        def call(*args):
            result = method(self, *args) if method is not None else 0
            return self.results.get(name, result)
        return call

    def fake_hipGetErrorName(self, code):
        return _ERRORS.get(code, (b"hipErrorUnknown", b""))[0]

    def fake_hipGetErrorString(self, code):
        return _ERRORS.get(code, (b"", b"unknown error"))[1]

    def fake_hipGetDeviceCount(self, pointer):
        _put(pointer, ctypes.c_int, self.devices)
        return 0

    def fake_hipSetDevice(self, device):
        self.device = device
        return 0

    def fake_hipGetDevicePropertiesR0600(self, buffer, device):
        ctypes.memmove(buffer, b"AMD Instinct MI300X\0", 20)
        ctypes.memmove(ctypes.addressof(buffer) + 1160, self.arch + b"\0", len(self.arch) + 1)
        return 0

    def fake_hipModuleLoadData(self, pointer, image):
        self.images.append((bytes(image), self.device))
        _put(pointer, ctypes.c_void_p, 0x2000 + len(self.images))
        return 0

    def fake_hipModuleGetFunction(self, pointer, module, name):
        _put(pointer, ctypes.c_void_p, 0x3000 + len(name))
        return 0

    def fake_hipFuncGetAttribute(self, pointer, attribute, function):
        _put(pointer, ctypes.c_int, self.function_attributes[attribute])
        return 0

    def fake_hipModuleLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        values = []
        for i, fmt in enumerate(self.param_formats):
            where = ctypes.c_uint64.from_address(params + 8 * i).value
            values.append(struct.unpack("<" + fmt, ctypes.string_at(where, struct.calcsize(fmt)))[0])
        self.launches.append({"function": function, "grid": (gx, gy, gz), "block": (bx, by, bz),
                              "shared": shared, "stream": stream, "values": values, "extra": extra})
        return 0


@pytest.fixture
def fake(monkeypatch) -> FakeLibHIP:
    lib = FakeLibHIP()
    monkeypatch.setattr(libhip, "open_libhip", lambda: lib)
    monkeypatch.setattr(hip_driver, "open_libhip", lambda: lib)
    hip_driver._status.cache_clear()
    monkeypatch.setattr(hip_driver, "_torch_gpu", lambda: None)
    yield lib
    hip_driver._status.cache_clear()


def test_active_with_a_device_and_its_architecture(fake):
    assert HIPDriver.is_active() and HIPDriver.why_inactive() == "active"
    driver = HIPDriver()
    assert driver.get_current_target() == GPUTarget("hip", "gfx942", 64)
    assert driver.get_device_properties(0) == {"arch": "gfx942", "warpSize": 64, "max_shared_mem": 65536}


def test_rdna_runs_32_lane_waves(fake):
    fake.arch = b"gfx1100"
    assert HIPDriver().get_current_target() == GPUTarget("hip", "gfx1100", 32)


def test_inactive_without_a_gpu(fake):
    fake.devices = 0
    assert not HIPDriver.is_active()
    assert HIPDriver.why_inactive() == "libamdhip64 sees no AMD GPU"
    with pytest.raises(NaiadError, match="the hip backend cannot run kernels on this machine: "
                                         "libamdhip64 sees no AMD GPU"):
        HIPDriver()


def _code_object():
    from tests.hip.test_compile import ALIGNED, _compile, add_kernel

    return _compile(add_kernel, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"},
                    {"BLOCK": 1024}, attrs=ALIGNED)


def test_loading_a_code_object_reads_its_resources(fake):
    kernel = _code_object()
    driver = HIPDriver()
    module, function, n_regs, spills, max_threads = driver.load_binary(
        "add_kernel", kernel.asm["hsaco"], dict(kernel.metadata), 0)
    assert fake.images[0][0][:4] == b"\x7fELF" and (n_regs, spills, max_threads) == (48, 0, 1024)
    fake.function_attributes[0] = 128
    with pytest.raises(OutOfResources, match="add_kernel \\(threads per block; 48 registers each\\): "
                                             "the kernel needs 256, the device has 128"):
        driver.load_binary("add_kernel", kernel.asm["hsaco"], dict(kernel.metadata), 0)
    with pytest.raises(OutOfResources, match="LDS, bytes"):
        driver.load_binary("big", b"\x7fELF", {"shared": 1 << 17, "num_warps": 4, "warp_size": 64}, 0)


def test_a_launch_passes_grid_block_lds_stream_and_every_argument(fake):
    driver = HIPDriver()
    signature = [("x", "*fp32"), ("n", "i32"), ("scale", "fp32"), ("half", "bf16"), ("B", "constexpr")]
    launcher = driver.make_launcher(signature, {"name": "k", "num_warps": 2, "warp_size": 64, "shared": 512})
    fake.param_formats = ["Q", "i", "f", "H"]
    events = []
    launcher(4, 2, 1, 0x77, 0x3005, (), {"name": "k"}, events.append, events.append,
             0x9000, 1000, 0.5, 1.0, 64)
    launch = fake.launches[0]
    assert launch["grid"] == (4, 2, 1) and launch["block"] == (128, 1, 1)
    assert launch["shared"] == 512 and launch["stream"] == 0x77 and launch["extra"] is None
    assert launch["values"] == [0x9000, 1000, 0.5, 0x3F80] and events == [{"name": "k"}] * 2
    launcher(0, 1, 1, 0, 0x3005, (), None, None, None, 0x9000, 1, 1.0, 1.0, 64)
    assert len(fake.launches) == 1                                       # an empty grid runs nothing


def test_a_failed_launch_says_what_was_launched(fake):
    launcher = HIPDriver().make_launcher([("n", "i32")], {"name": "k", "num_warps": 4, "shared": 0})
    fake.results["hipModuleLaunchKernel"] = 701
    with pytest.raises(NaiadError) as info:
        launcher(2, 1, 1, 0, 0x3005, (), None, None, None, 5)
    assert str(info.value) == (
        "hipModuleLaunchKernel failed launching k (grid (2, 1, 1), 256 threads per block, 0 bytes of "
        "LDS): hipErrorLaunchOutOfResources (701): too many resources requested for launch -- the "
        "kernel uses too many registers for its block size: use fewer warps (num_warps)")


@pytest.mark.parametrize("value, message", [
    ("x", "argument x \\(str\\) is not an array"), (b"", "argument x \\(bytes\\) is not an array")])
def test_arguments_that_are_not_device_memory(fake, value, message):
    launcher = HIPDriver().make_launcher([("x", "*fp32")], {"name": "k", "num_warps": 4})
    with pytest.raises(NaiadError, match=message):
        launcher(1, 1, 1, 0, 0x3005, (), None, None, None, value)


def test_host_arrays_are_refused():
    import numpy

    from naiad.backends.hip.launcher import HIPLauncher

    launcher = HIPLauncher(None, [("x", "*fp32")], {"name": "k", "num_warps": 4})
    with pytest.raises(NaiadError, match="k: argument x is in host memory \\(ndarray\\): move it to "
                                         "the GPU first"):
        launcher.pack([numpy.zeros(4, numpy.float32)])


@naiad.jit
def fill(out, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.zeros((BLOCK,), tl.float32) + value, mask=offs < n)


def test_the_jit_compiles_loads_and_launches_through_the_driver(fake, monkeypatch):
    """A launch from Python, the cuda backend absent: the kernel compiled for the device's
    architecture, its code object loaded once, each launch with its arguments."""
    from naiad.backends import selection
    from tests.nvidia.test_driver import CudaArray

    monkeypatch.setattr(selection, "_drivers", {})
    monkeypatch.setattr(selection, "_selected", {})
    fill.cache.clear()
    fill._fast.clear()
    fake.param_formats = ["Q", "i", "f"]
    with naiad.set_backend("hip"):
        for value in (2.5, 3.5):
            fill[(3,)](CudaArray(0x9000), 100, value, BLOCK=64)
    assert len(fake.images) == 1 and fake.images[0][0][:4] == b"\x7fELF"
    assert [launch["values"] for launch in fake.launches] == [[0x9000, 100, 2.5], [0x9000, 100, 3.5]]
    assert all(launch["grid"] == (3, 1, 1) and launch["block"] == (256, 1, 1) for launch in fake.launches)


@naiad.jit
def scalars_only(n, value, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK > 0)


_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                           ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_void_p)


def test_warm_launches_run_natively(fake, monkeypatch):
    """With a C ``hipModuleLaunchKernel`` (a ctypes callback standing for the library's), the
    warm launches after the first two go through the native entry: the Python path forbidden,
    the arguments still arrive."""
    from naiad.backends import selection
    from naiad.runtime import native_code
    from naiad.runtime.jit import JITFunction
    if not native_code.available():
        pytest.skip("no native entries here")

    def launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        return fake.fake_hipModuleLaunchKernel(function, gx, gy, gz, bx, by, bz, shared, stream,
                                               params, extra)
    fake.hipModuleLaunchKernel = _LAUNCH(launch)
    monkeypatch.setattr(selection, "_drivers", {})
    monkeypatch.setattr(selection, "_selected", {})
    kernel = JITFunction(scalars_only.fn)                # (no pointer: the stand-in has no tensors)
    fake.param_formats = ["i", "f"]
    with naiad.set_backend("hip"):
        kernel[(3,)](100, 1.5, BLOCK=64)
        kernel[(3,)](100, 1.5, BLOCK=64)                  # compiles the native variant
        assert kernel._native.entry is not None and kernel._native.error is None

        def fell_back(self, *args, **kwargs):
            raise AssertionError("the launch took the Python path")
        kernel._fast.clear()
        monkeypatch.setattr(JITFunction, "_run_slow", fell_back)
        for value in (2.5, 3.5):
            kernel[(3,)](100, value, BLOCK=64)
    assert [launch["values"] for launch in fake.launches][-2:] == [[100, 2.5], [100, 3.5]]
    assert fake.launches[-1]["grid"] == (3, 1, 1) and fake.launches[-1]["stream"] is None
