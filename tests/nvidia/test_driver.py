"""The NVIDIA driver: probing libcuda, devices, loading binaries, packing and launching.

Three kinds of tests:

- without libcuda (this machine, CI): the probe's answer, and everything the launcher does
  before it reaches libcuda (argument packing, argument errors);
- with `FakeLibCUDA`, a Python stand-in for libcuda that writes its outputs through the
  pointers the driver passes: the driver's own logic around each libcuda call (error texts,
  shared-memory opt-in, OutOfResources, context switching, what cuLaunchKernelEx receives);
- on a real GPU (skipped unless `CUDADriver.is_active()`): PTX made by llvmlite, loaded and
  launched on torch and cupy arrays, checked against torch.
"""

from __future__ import annotations

import ctypes
import math
import struct
import sys
import types

import numpy
import pytest

import naiad
import naiad.language as tl

from naiad.backends.compiler import GPUTarget
from naiad.backends.cuda import device_objects, libcuda, toolchain
from naiad.backends.cuda import driver as cuda_driver
from naiad.backends.cuda.driver import CUDADriver
from naiad.backends.cuda.launcher import CUDALauncher
from naiad.backends.cuda.libcuda import CUDAError
from naiad.backends.driver import bf16_bits
from naiad.errors import NaiadError, OutOfResources


# -- a stand-in for libcuda --------------------------------------------------------------------
def _put(pointer, ctype, value) -> None:
    """Write ``value`` where an output parameter (a ctypes byref) points."""
    ctypes.cast(pointer, ctypes.POINTER(ctype))[0] = value


_ERRORS = {1: (b"CUDA_ERROR_INVALID_VALUE", b"invalid argument"),
           2: (b"CUDA_ERROR_OUT_OF_MEMORY", b"out of memory"),
           100: (b"CUDA_ERROR_NO_DEVICE", b"no CUDA-capable device is detected"),
           218: (b"CUDA_ERROR_INVALID_PTX", b"a PTX JIT compilation failed"),
           400: (b"CUDA_ERROR_INVALID_HANDLE", b"invalid resource handle"),
           500: (b"CUDA_ERROR_NOT_FOUND", b"named symbol not found"),
           701: (b"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", b"too many resources requested for launch"),
           710: (b"CUDA_ERROR_ASSERT", b"device-side assert triggered")}

H100_ATTRIBUTES = {75: 9, 76: 0, 97: 232448, 16: 132, 12: 65536, 10: 32, 13: 1980000,
                   36: 2619000, 37: 5120, 39: 2048}
FUNCTION_ATTRIBUTES = {0: 1024, 1: 0, 3: 8, 4: 40}     # max threads, static shared, local bytes, regs


class FakeLibCUDA:
    """libcuda's functions as the driver calls them; ``fake_<name>`` methods model the ones a
    test looks at, every other function succeeds and is only recorded in ``calls``;
    ``results[name]`` makes a function fail with that CUresult.  Device handles are
    100 + ordinal and contexts 0x1000 + handle, so that a mix-up shows."""

    def __init__(self, devices: int = 1, attributes: dict | None = None):
        self.devices = devices
        self.attributes = dict(attributes or H100_ATTRIBUTES)
        self.function_attributes = dict(FUNCTION_ATTRIBUTES)
        self.results: dict[str, int] = {}
        self.missing: set[str] = set()
        self.calls: list[str] = []
        self.current = None              # the current context
        self.stack: list = []
        self.images: list[bytes] = []
        self.set_attributes: list[tuple] = []
        self.unloaded: list = []
        self.launches: list[dict] = []
        self.kernel_names = {b"add"}           # what the loaded modules hold
        self.param_formats: list[str] = []      # how fake_cuLaunchKernelEx reads the parameters
        self.pointer_devices: dict[int, int] = {}
        self.elapsed_ms = 0.5

    def __getattr__(self, name: str):
        if not name.startswith("cu") or name in self.missing:
            raise AttributeError(name)
        method = getattr(type(self), "fake_" + name, None)

        def call(*args):
            self.calls.append(name)
            result = method(self, *args) if method is not None else 0
            return self.results.get(name, result)
        return call

    def fake_cuGetErrorName(self, code, pointer):
        if code not in _ERRORS:
            return 1
        _put(pointer, ctypes.c_char_p, _ERRORS[code][0])
        return 0

    def fake_cuGetErrorString(self, code, pointer):
        _put(pointer, ctypes.c_char_p, _ERRORS[code][1])
        return 0

    def fake_cuDeviceGetCount(self, pointer):
        _put(pointer, ctypes.c_int, self.devices)
        return 0

    def fake_cuDeviceGet(self, pointer, ordinal):
        _put(pointer, ctypes.c_int, 100 + ordinal)
        return 0

    def fake_cuDeviceGetAttribute(self, pointer, attribute, handle):
        assert 100 <= handle < 100 + self.devices, handle
        _put(pointer, ctypes.c_int, self.attributes[attribute])
        return 0

    def fake_cuDevicePrimaryCtxRetain(self, pointer, handle):
        _put(pointer, ctypes.c_void_p, 0x1000 + handle)
        return 0

    def fake_cuCtxSetCurrent(self, context):
        self.current = context
        return 0

    def fake_cuCtxPushCurrent_v2(self, context):
        self.stack.append(self.current)
        self.current = context
        return 0

    def fake_cuCtxPopCurrent_v2(self, pointer):
        _put(pointer, ctypes.c_void_p, self.current)
        self.current = self.stack.pop()
        return 0

    def fake_cuModuleLoadDataEx(self, pointer, image, count, options, values):
        self.images.append((image, self.current))
        if "cuModuleLoadDataEx" in self.results:
            log = b"ptxas application ptx input, line 7; error   : Unknown symbol 'oops'\0"
            assert list(options[:count]) == [5, 6] and values[1] >= len(log)
            ctypes.memmove(values[0], log, len(log))
            return 0
        _put(pointer, ctypes.c_void_p, 0x2000 + len(self.images))
        return 0

    def fake_cuModuleGetFunction(self, pointer, module, name):
        if name not in self.kernel_names:
            return 500
        _put(pointer, ctypes.c_void_p, module + 0x1000)
        return 0

    def fake_cuFuncGetAttribute(self, pointer, attribute, function):
        _put(pointer, ctypes.c_int, self.function_attributes[attribute])
        return 0

    def fake_cuFuncSetAttribute(self, function, attribute, value):
        self.set_attributes.append((function, attribute, value))
        return 0

    def fake_cuModuleUnload(self, module):
        self.unloaded.append((module, self.current))
        return 0

    def fake_cuLaunchKernelEx(self, config, function, params, extra):
        gx, gy, gz, bx, by, bz, shared, stream, attrs, n_attrs = struct.unpack(
            "<7I4xQQI", ctypes.string_at(config, 52))
        assert (attrs, n_attrs) == (0, 0)
        values = []
        for i, fmt in enumerate(self.param_formats):      # read as the GPU does: by size
            where = ctypes.c_uint64.from_address(params + 8 * i).value
            values.append(struct.unpack("<" + fmt, ctypes.string_at(where, struct.calcsize(fmt)))[0])
        self.launches.append({"function": function, "grid": (gx, gy, gz), "block": (bx, by, bz),
                              "shared": shared, "stream": stream, "values": values,
                              "extra": extra, "context": self.current})
        return 0

    def fake_cuPointerGetAttribute(self, pointer, attribute, address):
        assert attribute == 9
        if address not in self.pointer_devices:
            return 1                                      # not device memory
        _put(pointer, ctypes.c_int, self.pointer_devices[address])
        return 0

    def fake_cuEventCreate(self, pointer, flags):
        _put(pointer, ctypes.c_void_p, 0x4000 + self.calls.count("cuEventCreate"))
        return 0

    def fake_cuMemAlloc_v2(self, pointer, size):
        _put(pointer, ctypes.c_uint64, 0x7000_0000)
        return 0

    def fake_cuEventElapsedTime(self, pointer, start, end):
        _put(pointer, ctypes.c_float, self.elapsed_ms)
        return 0


@pytest.fixture
def fake(monkeypatch) -> FakeLibCUDA:
    lib = FakeLibCUDA()
    monkeypatch.setattr(libcuda, "_open_libcuda", lambda: lib)
    monkeypatch.setattr(libcuda, "_status", None)
    # on a GPU machine torch may run CUDA already: the stand-in's devices are not torch's
    monkeypatch.setattr(cuda_driver, "_torch_cuda", lambda: None)
    monkeypatch.setattr(cuda_driver, "_torch_running", None)
    return lib


@pytest.fixture
def driver(fake) -> CUDADriver:
    return CUDADriver()


METADATA = {"name": "add", "num_warps": 4, "shared": 0}


# -- probing -----------------------------------------------------------------------------------
def test_inactive_without_libcuda(monkeypatch):
    if libcuda._open_libcuda() is not None:
        pytest.skip("this machine has libcuda")
    monkeypatch.setattr(libcuda, "_status", None)
    assert CUDADriver.is_active() is False
    assert CUDADriver.why_inactive() == "no libcuda.so.1 found (no NVIDIA driver)"
    with pytest.raises(NaiadError, match="the cuda backend cannot run on this machine: no "
                                         "libcuda.so.1 found \\(no NVIDIA driver\\)"):
        CUDADriver()


def test_active_with_a_device(fake):
    assert CUDADriver.is_active() is True
    assert CUDADriver.why_inactive() == "active"


def test_inactive_when_cuinit_fails(fake):
    fake.results["cuInit"] = 100
    assert CUDADriver.is_active() is False
    assert CUDADriver.why_inactive() == ("cuInit(0) failed: CUDA_ERROR_NO_DEVICE (100): no "
                                         "CUDA-capable device is detected")


def test_inactive_without_devices(fake):
    fake.devices = 0
    assert CUDADriver.is_active() is False
    assert CUDADriver.why_inactive() == ("the NVIDIA driver sees no CUDA device "
                                         "(cuDeviceGetCount returned 0)")


def test_inactive_when_libcuda_lacks_a_function(fake):
    fake.missing.add("cuLaunchKernelEx")
    assert CUDADriver.is_active() is False
    why = CUDADriver.why_inactive()
    assert "lacks a function Naiad calls" in why and "cuLaunchKernelEx" in why
    assert "update the NVIDIA driver" in why


def test_probe_exceptions_do_not_escape_is_active(fake, monkeypatch):
    def broken():
        raise RuntimeError("dlopen exploded")
    monkeypatch.setattr(libcuda, "_open_libcuda", broken)
    assert CUDADriver.is_active() is False
    assert CUDADriver.why_inactive() == "probing libcuda failed: RuntimeError: dlopen exploded"


# -- libcuda errors ----------------------------------------------------------------------------
def test_a_failed_call_names_the_call_the_error_and_what_to_do(driver, fake):
    fake.results["cuMemAlloc_v2"] = 2
    with pytest.raises(CUDAError) as info:
        driver.cuda("cuMemAlloc_v2", ctypes.byref(ctypes.c_uint64()), 1 << 40)
    assert info.value.code == 2
    assert str(info.value) == ("cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory "
                               "-- free device memory (del unused tensors, torch.cuda.empty_cache()) "
                               "or use smaller inputs")


def test_an_unknown_cuda_result(driver):
    error = libcuda.cuda_error(driver.cuda, 12345, "cuSomething", "while testing")
    assert str(error) == "cuSomething failed while testing: unknown CUresult 12345"


# -- devices -----------------------------------------------------------------------------------
def test_target_and_properties(driver, fake):
    assert driver.get_current_target() == GPUTarget("cuda", 90, 32)
    assert driver.get_current_target() is driver.get_current_target()
    properties = driver.get_device_properties(0)
    assert properties == {"max_shared_mem": 232448, "multiprocessor_count": 132,
                          "max_num_regs": 65536, "warpSize": 32, "sm_clock_rate": 1980000,
                          "mem_clock_rate": 2619000, "mem_bus_width": 5120,
                          "max_threads_per_sm": 2048}
    assert driver.get_device_properties() == properties
    assert driver.utils.get_device_properties(0) == properties


def test_target_of_an_ampere_gpu(fake):
    fake.attributes.update({75: 8, 76: 6})
    assert CUDADriver().get_current_target() == GPUTarget("cuda", 86, 32)


def test_devices_and_their_primary_contexts(fake):
    fake.devices = 2
    driver = CUDADriver()
    assert driver.get_current_device() == 0
    assert driver.activate() == 0 and fake.current == 0x1000 + 100
    driver.set_current_device(1)
    assert driver.get_current_device() == 1 and fake.current == 0x1000 + 101
    assert fake.calls.count("cuDevicePrimaryCtxRetain") == 2
    driver.set_current_device(0)
    assert fake.calls.count("cuDevicePrimaryCtxRetain") == 2        # retained once per device
    assert driver.get_current_stream() == 0


def test_a_device_that_does_not_exist(fake):
    fake.devices = 2
    with pytest.raises(NaiadError, match=r"CUDA device 5 does not exist: this machine has 2 \(0 to 1\)"):
        CUDADriver().set_current_device(5)


def test_map_python_to_cpp_type(driver):
    assert driver.map_python_to_cpp_type("*fp32") == "CUdeviceptr"
    assert driver.map_python_to_cpp_type("*i8") == "CUdeviceptr"
    assert driver.map_python_to_cpp_type("i32") == "int32_t"
    assert driver.map_python_to_cpp_type("u64") == "uint64_t"
    assert driver.map_python_to_cpp_type("i1") == "bool"
    assert driver.map_python_to_cpp_type("fp32") == "float"
    assert driver.map_python_to_cpp_type("fp64") == "double"
    assert driver.map_python_to_cpp_type("bf16") == "uint16_t"
    with pytest.raises(NaiadError, match=r"arguments of type constexpr have no C type \(pointers and i1, u1, i8"):
        driver.map_python_to_cpp_type("constexpr")


# -- loading -----------------------------------------------------------------------------------
def test_load_ptx_is_nul_terminated_and_a_cubin_is_passed_as_is(driver, fake):
    module, function, n_regs, n_spills, max_threads = driver.load_binary("add", b".version 8.0\n",
                                                                         METADATA, 0)
    assert fake.images[0] == (b".version 8.0\n\0", 0x1000 + 100)
    assert (n_regs, n_spills, max_threads) == (40, 2, 1024)
    assert function == module + 0x1000
    driver.load_binary("add", ".version 8.0\n", METADATA, 0)          # text works too
    assert fake.images[1][0] == b".version 8.0\n\0"
    cubin = b"\x7fELF\x02\x01\x01" + bytes(9)
    driver.load_binary("add", cubin, METADATA, 0)
    assert fake.images[2][0] == cubin
    assert fake.set_attributes == []                       # 0 bytes of shared memory: no opt-in


def test_more_than_48k_of_shared_memory_is_opted_in(driver, fake):
    fake.function_attributes[1] = 1024                     # static shared memory
    _, function, *_ = driver.load_binary("add", b"ptx", dict(METADATA, shared=100 << 10), 0)
    # ... and given the largest shared-memory carveout (100 %), as Triton's launcher does
    assert fake.set_attributes == [(function, 8, 232448 - 1024), (function, 9, 100)]


def test_too_much_shared_memory_is_out_of_resources(driver, fake):
    with pytest.raises(OutOfResources) as info:
        driver.load_binary("add", b"ptx", dict(METADATA, shared=232449), 0)
    assert str(info.value) == ("out of resources: add (shared memory, bytes): the kernel needs "
                               "232449, the device has 232448 -- fix: use smaller blocks or fewer stages")
    assert (info.value.required, info.value.limit) == (232449, 232448)
    assert fake.images == []                               # nothing was loaded


def test_too_many_threads_for_the_registers_is_out_of_resources(driver, fake):
    fake.function_attributes.update({0: 256, 4: 255})
    with pytest.raises(OutOfResources) as info:
        driver.load_binary("add", b"ptx", dict(METADATA, num_warps=16), 0)
    assert str(info.value) == ("out of resources: add (threads per block; 255 registers each): the "
                               "kernel needs 512, the device has 256 -- fix: use smaller blocks or "
                               "fewer stages")
    assert fake.unloaded == [(0x2001, 0x1000 + 100)]


def test_a_load_error_shows_the_jit_log(driver, fake):
    fake.results["cuModuleLoadDataEx"] = 218
    with pytest.raises(CUDAError) as info:
        driver.load_binary("add", b"ptx", METADATA, 0)
    message = str(info.value)
    assert message.startswith("cuModuleLoadDataEx failed loading kernel add on cuda:0: "
                              "CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed -- the "
                              "driver rejected the PTX")
    assert message.endswith("the driver's JIT log:\nptxas application ptx input, line 7; "
                            "error   : Unknown symbol 'oops'")


def test_a_binary_without_the_kernel(driver, fake):
    with pytest.raises(CUDAError) as info:
        driver.load_binary("mul", b"ptx", dict(METADATA, name="mul"), 0)
    assert str(info.value) == ("cuModuleGetFunction failed looking up kernel mul: "
                               "CUDA_ERROR_NOT_FOUND (500): named symbol not found -- the binary "
                               "has no kernel of that name")
    assert fake.unloaded == [(0x2001, 0x1000 + 100)]


def test_load_and_unload_on_another_device_keep_the_current_one(fake):
    fake.devices = 2
    driver = CUDADriver()
    module, *_ = driver.load_binary("add", b"ptx", METADATA, 1)
    assert fake.images[0][1] == 0x1000 + 101               # loaded in device 1's context
    assert fake.current == 0x1000 + 100 and driver.get_current_device() == 0
    driver.unload_module(module)
    assert fake.unloaded == [(module, 0x1000 + 101)]
    assert fake.current == 0x1000 + 100


# -- packing -----------------------------------------------------------------------------------
SCALARS = [("a", "i1", True, "?"), ("b", "u1", 0, "?"), ("c", "i8", -5, "b"), ("d", "u8", 250, "B"),
           ("e", "i16", -300, "h"), ("f", "u16", 65000, "H"), ("g", "i32", -2**31, "i"),
           ("h", "u32", 2**32 - 1, "I"), ("i", "i64", -2**63, "q"), ("j", "u64", 2**64 - 1, "Q"),
           ("k", "fp16", 1.5, "e"), ("l", "bf16", -2.75, "H"), ("m", "fp32", 0.1, "f"),
           ("n", "fp64", math.pi, "d")]


def _expected(ty: str, value):
    if ty == "bf16":
        return bf16_bits(value)
    if ty == "fp32":
        return struct.unpack("<f", struct.pack("<f", value))[0]
    return value


def _unpack(launcher: CUDALauncher, buffer, formats: list[str]) -> list:
    """The values the kernel would read: follow each kernelParams pointer (after the launch
    configuration), read its size."""
    base, n, table = ctypes.addressof(buffer), len(formats), 64
    pointers = struct.unpack_from(f"<{n}Q", bytes(buffer), table)
    assert list(pointers) == [base + table + 8 * (n + i) for i in range(n)]
    return [struct.unpack("<" + f, ctypes.string_at(p, struct.calcsize(f)))[0]
            for p, f in zip(pointers, formats)]


def test_every_scalar_type_is_packed_at_its_width(driver):
    signature = [("x", "*fp32"), ("BLOCK", "constexpr")] + [(n, ty) for n, ty, _, _ in SCALARS]
    launcher = driver.make_launcher(signature, METADATA)
    args = [0xDEAD0000, 128] + [v for _, _, v, _ in SCALARS]
    values = _unpack(launcher, launcher.pack(args, 0), ["Q"] + [f for *_, f in SCALARS])
    assert values == [0xDEAD0000] + [_expected(ty, v) for _, ty, v, _ in SCALARS]


def test_bf16_rounds_as_the_cpu_backend():
    from naiad.backends.cpu.driver import bf16_bits as cpu_bf16_bits

    values = [0.0, -0.0, 1.0, 1.00390625, 1.01171875, 3.14159, -65504.0, 1e-40, 3e38, -3.4e38,
              float("inf"), float("-inf"), float("nan")]
    assert [bf16_bits(v) for v in values] == [cpu_bf16_bits(v) for v in values]
    assert bf16_bits(1.00390625) == 0x3F80                 # a tie goes to even
    assert bf16_bits(1.01171875) == 0x3F82


def test_tuple_parameters_are_flattened_without_their_constexprs(driver):
    launcher = driver.make_launcher([("t", ("i32", "constexpr", "*fp16")), ("n", "i64")], METADATA)
    assert [name for name, _, _ in launcher.slots] == ["t[0]", "t[2]", "n"]
    buffer = launcher.pack([(7, 99, 0x1000), 2**40], 0)
    assert _unpack(launcher, buffer, ["i", "Q", "q"]) == [7, 0x1000, 2**40]


def test_a_kernel_without_parameters(driver, fake):
    launcher = driver.make_launcher([("BLOCK", "constexpr")], METADATA)
    launcher(1, 1, 1, 0, 0x3001, (), None, None, None, 64)
    assert fake.launches[0]["values"] == []


def test_an_unsupported_parameter_type(driver):
    with pytest.raises(NaiadError) as info:
        driver.make_launcher([("x", "fp8e4nv")], METADATA)
    assert str(info.value).startswith("add: arguments of type fp8e4nv cannot be passed to CUDA "
                                      "kernels (pointers and i1, u1, i8")


# -- pointer arguments -------------------------------------------------------------------------
class CudaArray:
    """An object with __cuda_array_interface__ (and, like cupy, a ``device.id`` when given)."""

    def __init__(self, address: int, device: int | None = None):
        self.__cuda_array_interface__ = {"data": (address, False), "shape": (4,), "typestr": "<f4",
                                         "version": 3}
        if device is not None:
            self.device = types.SimpleNamespace(id=device)


class DLPackOnCUDA:
    """A DLPack producer that says it lives on a CUDA device; its capsule is a numpy array's."""

    def __init__(self, array, kind: int = 2, device: int = 0):
        self.array, self.kind, self.device_id = array, kind, device

    def __dlpack_device__(self):
        return (self.kind, self.device_id)

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()


@pytest.fixture
def pointer_launcher(driver) -> CUDALauncher:
    return driver.make_launcher([("x", "*fp32"), ("n", "i32")], METADATA)


def _address(launcher: CUDALauncher, value, device: int = 0) -> int:
    return _unpack(launcher, launcher.pack([value, 1], device), ["Q", "i"])[0]


def test_device_pointers(pointer_launcher, fake):
    assert _address(pointer_launcher, None) == 0
    assert _address(pointer_launcher, 0x7F0000001000) == 0x7F0000001000
    assert _address(pointer_launcher, CudaArray(0x5000, device=0)) == 0x5000
    fake.pointer_devices[0x6000] = 0
    assert _address(pointer_launcher, CudaArray(0x6000)) == 0x6000     # device from libcuda
    assert _address(pointer_launcher, CudaArray(0)) == 0                # an empty array
    array = numpy.arange(10, dtype=numpy.float32)[3:]
    assert _address(pointer_launcher, DLPackOnCUDA(array)) == array.ctypes.data
    assert _address(pointer_launcher, DLPackOnCUDA(array, kind=13)) == array.ctypes.data


def _pointer_error(launcher: CUDALauncher, value, device: int = 0) -> str:
    with pytest.raises(NaiadError) as info:
        launcher.pack([value, 1], device)
    return str(info.value)


def test_a_numpy_array_is_host_memory(pointer_launcher):
    assert _pointer_error(pointer_launcher, numpy.zeros(4, numpy.float32)) == (
        "add: argument x is in host memory (ndarray); CUDA kernels read device memory: move it to "
        "the GPU first (x.cuda() or x.to('cuda') for a torch tensor, cupy.asarray(x) for a numpy "
        "array)")


def test_a_cpu_torch_tensor_is_host_memory(pointer_launcher):
    torch = pytest.importorskip("torch")
    message = _pointer_error(pointer_launcher, torch.zeros(4))
    assert message.startswith("add: argument x is in host memory (Tensor); CUDA kernels read device "
                              "memory: move it to the GPU first (x.cuda() or x.to('cuda')")


def test_a_tensor_on_another_torch_device(pointer_launcher):
    torch = pytest.importorskip("torch")
    assert _pointer_error(pointer_launcher, torch.empty(4, device="meta")) == (
        "add: argument x is on torch device meta, not an NVIDIA GPU: move it with x.cuda() / .to('cuda')")


def test_host_memory_behind_the_cuda_array_interface(pointer_launcher):
    assert "argument x is in host memory (CudaArray)" in _pointer_error(pointer_launcher, CudaArray(0x9000))


def test_dlpack_host_and_foreign_devices(pointer_launcher):
    array = numpy.zeros(4, numpy.float32)
    assert "argument x is in host memory (DLPackOnCUDA)" in \
        _pointer_error(pointer_launcher, DLPackOnCUDA(array, kind=1))
    assert _pointer_error(pointer_launcher, DLPackOnCUDA(array, kind=10)) == (
        "add: argument x is on DLPack device type 10, not an NVIDIA GPU: move it with x.cuda() / "
        ".to('cuda')")


@pytest.mark.parametrize("make", [lambda: CudaArray(0x5000, device=1),
                                  lambda: DLPackOnCUDA(numpy.zeros(4), device=1)])
def test_an_array_on_another_device(pointer_launcher, make):
    assert _pointer_error(pointer_launcher, make()) == (
        "add: argument x is on cuda:1 but the kernel runs on cuda:0, the current device: move it "
        "with x.to('cuda:0'), or make cuda:1 current (torch.cuda.set_device(1)) before launching")


def test_an_array_on_another_device_found_by_libcuda(pointer_launcher, fake):
    fake.pointer_devices[0x7000] = 1
    assert "argument x is on cuda:1 but the kernel runs on cuda:0" in \
        _pointer_error(pointer_launcher, CudaArray(0x7000))


@pytest.mark.parametrize("value", [object(), "x", True, 1.5])
def test_something_that_is_not_an_array(pointer_launcher, value):
    assert _pointer_error(pointer_launcher, value) == (
        f"add: argument x ({type(value).__name__}) is not an array: pass a CUDA tensor or array "
        f"(torch, cupy, anything with __cuda_array_interface__ or DLPack on a CUDA device), a "
        f"device address (int), or None")


# -- launching ---------------------------------------------------------------------------------
def test_launch_passes_grid_block_shared_stream_and_every_argument(driver, fake):
    signature = [("x", "*fp32"), ("BLOCK", "constexpr")] + [(n, ty) for n, ty, _, _ in SCALARS]
    metadata = dict(METADATA, num_warps=8, shared=4096)
    _, function, *_ = driver.load_binary("add", b"ptx", metadata, 0)
    launcher = driver.make_launcher(signature, metadata)
    fake.param_formats = ["Q"] + [f for *_, f in SCALARS]
    events = []
    args = [CudaArray(0x5000, device=0), 1024] + [v for _, _, v, _ in SCALARS]
    launcher(3, 2, 1, 77, function, (), {"name": "add"}, lambda m: events.append(("enter", m)),
             lambda m: events.append(("exit", m)), *args)
    launch = fake.launches[0]
    assert launch["function"] == function and launch["grid"] == (3, 2, 1)
    assert launch["block"] == (256, 1, 1) and launch["shared"] == 4096 and launch["stream"] == 77
    assert launch["extra"] is None and launch["context"] == 0x1000 + 100
    assert launch["values"] == [0x5000] + [_expected(ty, v) for _, ty, v, _ in SCALARS]
    assert events == [("enter", {"name": "add"}), ("exit", {"name": "add"})]


def test_an_empty_grid_launches_nothing(driver, fake):
    launcher = driver.make_launcher([("x", "*fp32")], METADATA)
    events = []
    launcher(0, 1, 1, 0, 0x3001, (), {}, events.append, events.append, None)
    launcher.direct(0x2001, 0x3001)((4, 0, 1), [None])
    assert fake.launches == [] and events == []


def test_direct_launch_uses_the_current_stream_and_no_hooks(driver, fake):
    _, function, *_ = driver.load_binary("add", b"ptx", METADATA, 0)
    launcher = driver.make_launcher([("x", "*fp32"), ("n", "i32"), ("B", "constexpr")], METADATA)
    assert launcher.accepts_addresses is True
    fake.param_formats = ["Q", "i"]
    launcher.direct(0x2001, function)((5, 1, 1), [0x8000, 1000, 64])
    launch = fake.launches[0]
    assert launch["grid"] == (5, 1, 1) and launch["block"] == (128, 1, 1)
    assert launch["stream"] == 0 and launch["values"] == [0x8000, 1000]


def test_a_failed_launch_says_what_was_launched(driver, fake):
    _, function, *_ = driver.load_binary("add", b"ptx", METADATA, 0)
    launcher = driver.make_launcher([("n", "i32")], METADATA)
    fake.results["cuLaunchKernelEx"] = 701
    with pytest.raises(CUDAError) as info:
        launcher(2, 1, 1, 0, function, (), None, None, None, 5)
    assert str(info.value) == (
        "cuLaunchKernelEx failed launching add (grid (2, 1, 1), 128 threads per block, 0 bytes of "
        "shared memory): CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701): too many resources requested "
        "for launch -- the kernel uses too many registers for its block size: use fewer warps "
        "(num_warps)")
    with pytest.raises(CUDAError, match="cuLaunchKernelEx failed launching add \\(grid \\(2, 1, 1\\)"):
        launcher.direct(0x2001, function)((2, 1, 1), [5])


def test_a_launch_after_a_failed_device_assert_says_what_happened(driver, fake):
    """CUDA reports a failed tl.device_assert at the next call (here the next launch)."""
    _, function, *_ = driver.load_binary("add", b"ptx", METADATA, 0)
    launcher = driver.make_launcher([("n", "i32")], METADATA)
    fake.results["cuLaunchKernelEx"] = 710
    with pytest.raises(CUDAError) as info:
        launcher(1, 1, 1, 0, function, (), None, None, None, 5)
    assert str(info.value).endswith(
        "CUDA_ERROR_ASSERT (710): device-side assert triggered -- a tl.device_assert failed (the "
        "GPU printed its message above); this process's CUDA context is now unusable")


def test_the_warm_path_steps_aside_when_another_device_is_current(fake):
    """The warm path gets addresses (ints) checked on the device current at the first launch;
    from another current device it launches nothing and raises StaleLaunch, for the JIT to
    take the full path."""
    from naiad.backends.driver import StaleLaunch

    fake.devices = 2
    driver = CUDADriver()
    _, function, *_ = driver.load_binary("add", b"ptx", METADATA, 0)
    launcher = driver.make_launcher([("x", "*fp32"), ("n", "i32")], METADATA)
    run = launcher.direct(0x2001, function)
    driver.set_current_device(1)
    with pytest.raises(StaleLaunch, match="add was prepared on cuda:0, cuda:1 is current"):
        run((1, 1, 1), [0x8000, 5])
    assert fake.launches == []


@naiad.jit
def scalars_only(n):
    tl.device_print("n", n)


@naiad.jit
def fill_first(x, n):
    tl.store(x, n)


@pytest.mark.shipped_backends
def test_warm_launches_follow_the_current_device(fake, monkeypatch):
    """Through the JIT's warm path on two devices: a kernel of scalars loads and runs on the
    new current device; an array left on cuda:0 is named when cuda:1 is current."""
    from naiad.backends import selection

    monkeypatch.setattr(selection, "_drivers", {})          # a driver over the stand-in
    monkeypatch.setattr(selection, "_selected", {})
    for kernel in (scalars_only, fill_first):
        kernel.cache.clear()
        kernel._fast.clear()
    fake.devices = 2
    fake.kernel_names |= {b"scalars_only", b"fill_first"}
    fake.pointer_devices[0x9000] = 0
    with naiad.set_backend("cuda"):
        for device in (0, 0, 1, 1):
            cuda_driver_instance().set_current_device(device)
            scalars_only[(1,)](5)
    contexts = [launch["context"] for launch in fake.launches]
    assert len(fake.images) == 2 and contexts[0] == contexts[1] != contexts[2] == contexts[3]
    cuda_driver_instance().set_current_device(0)
    x = CudaArray(0x9000)
    fill_first[(1,)](x, 1)
    fill_first[(1,)](x, 2)                          # warm
    cuda_driver_instance().set_current_device(1)
    with pytest.raises(NaiadError, match="argument x is on cuda:0 but the kernel runs on cuda:1"):
        fill_first[(1,)](x, 3)


def cuda_driver_instance() -> CUDADriver:
    """The driver the JIT launches cuda kernels with."""
    from naiad.backends import selection

    return selection.driver_for(selection.select([CudaArray(0x9000)]))


@pytest.mark.shipped_backends
def test_a_compiled_kernel_loads_itself_on_each_device_it_runs_on(fake):
    """One compiled kernel, launched on cuda:0 then cuda:1: a module per device, each launch
    with its own device's function, and back on cuda:0 no second load."""
    from .conftest import compile_cuda
    from .test_ops import affine_kernel

    fake.devices = 2
    driver = CUDADriver()
    kernel = compile_cuda(affine_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                          {"BLOCK": 128})
    fake.param_formats = ["Q", "Q", "i"]
    fake.kernel_names.add(b"affine_kernel")
    for device in (0, 1, 0):
        driver.set_current_device(device)
        kernel.launch(driver, (1, 1, 1), [0x1000, 0x2000, 100, 128])
    contexts = [context for _, context in fake.images]
    assert len(contexts) == 2 and contexts[0] != contexts[1]
    functions = [launch["function"] for launch in fake.launches]
    assert functions[0] == functions[2] != functions[1]
    assert [launch["context"] for launch in fake.launches] == [contexts[0], contexts[1], contexts[0]]


def test_a_kernel_launched_on_another_device_than_it_was_loaded_on(fake):
    fake.devices = 2
    driver = CUDADriver()
    _, function, *_ = driver.load_binary("add", b"ptx", METADATA, 0)
    launcher = driver.make_launcher([("n", "i32")], METADATA)
    driver.set_current_device(1)
    fake.results["cuLaunchKernelEx"] = 400
    with pytest.raises(CUDAError) as info:
        launcher(1, 1, 1, 0, function, (), None, None, None, 5)
    assert str(info.value).endswith(
        "\nkernel add was loaded on cuda:0 but cuda:1 is current: launch it with cuda:0 current, "
        "or load it again on cuda:1")


# -- benchmarking without torch ----------------------------------------------------------------
def test_benchmark_times_with_events_and_flushes_l2_before_each_run(fake, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    driver = CUDADriver()
    fake.elapsed_ms = 2.0            # every pair of events: the 5 estimate runs take 0.4 ms each
    calls = []
    times = driver.get_benchmarker()(lambda: calls.append(1), quantiles=[0.5, 0.2], warmup=4, rep=20)
    assert times == [2.0, 2.0]
    # one untimed call, 5 for the estimate, 4 ms of warm-up runs, then 20 ms of timed runs
    assert len(calls) == 1 + 5 + 10 + 50
    assert fake.calls.count("cuMemsetD8Async") == 5 + 50          # an L2 flush before each run
    assert fake.calls.count("cuMemAlloc_v2") == 1
    fake.elapsed_ms = 100.0
    assert len(driver.benchmark(lambda: None, quantiles=None, warmup=1, rep=1)) == 5   # at least 5


def test_device_interface_without_torch(fake, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    driver = CUDADriver()
    interface = driver.get_device_interface()
    assert isinstance(interface, device_objects.CUDADeviceInterface)
    assert interface.device_count() == 1 and interface.current_device() == 0

    def time_nothing() -> float:
        start, end = interface.Event(enable_timing=True), interface.Event(enable_timing=True)
        start.record()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    assert time_nothing() == 0.5
    assert fake.calls.count("cuEventDestroy_v2") == 2              # freed with the objects
    interface.synchronize()
    assert "cuCtxSynchronize" in fake.calls

    def flush() -> int:
        buffer = driver.get_empty_cache_for_benchmark()
        driver.clear_cache(buffer)
        return buffer.nbytes

    assert flush() == 256 << 20
    assert fake.calls.count("cuMemsetD8Async") == 1 and fake.calls.count("cuMemFree_v2") == 1


# -- on a GPU ----------------------------------------------------------------------------------
@pytest.fixture
def gpu_driver():
    """The real driver and torch, or skip."""
    if not CUDADriver.is_active():
        pytest.skip(f"no NVIDIA GPU: {CUDADriver.why_inactive()}")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return CUDADriver(), torch


_KERNELS_IR = """
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()

define ptx_kernel void @add(ptr addrspace(1) noalias %x, ptr addrspace(1) noalias %y,
                            ptr addrspace(1) noalias %out, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %dim = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %bid, %dim
  %i = add i32 %base, %tid
  %inside = icmp slt i32 %i, %n
  br i1 %inside, label %body, label %done
body:
  %px = getelementptr float, ptr addrspace(1) %x, i32 %i
  %py = getelementptr float, ptr addrspace(1) %y, i32 %i
  %a = load float, ptr addrspace(1) %px
  %b = load float, ptr addrspace(1) %py
  %s = fadd float %a, %b
  %po = getelementptr float, ptr addrspace(1) %out, i32 %i
  store float %s, ptr addrspace(1) %po
  br label %done
done:
  ret void
}

define ptx_kernel void @scalars(ptr addrspace(1) %out, i1 %a, i8 %b, i16 %c, i32 %d, i64 %e,
                                half %f, bfloat %g, float %h, double %i, i8 %j, i32 %k) {
  %a1 = uitofp i1 %a to double
  %b1 = sitofp i8 %b to double
  %c1 = sitofp i16 %c to double
  %d1 = sitofp i32 %d to double
  %e1 = sitofp i64 %e to double
  %f1 = fpext half %f to double
  %g0 = fpext bfloat %g to float
  %g1 = fpext float %g0 to double
  %h1 = fpext float %h to double
  %j1 = uitofp i8 %j to double
  %k1 = uitofp i32 %k to double
  store double %a1, ptr addrspace(1) %out
  %p1 = getelementptr double, ptr addrspace(1) %out, i32 1
  store double %b1, ptr addrspace(1) %p1
  %p2 = getelementptr double, ptr addrspace(1) %out, i32 2
  store double %c1, ptr addrspace(1) %p2
  %p3 = getelementptr double, ptr addrspace(1) %out, i32 3
  store double %d1, ptr addrspace(1) %p3
  %p4 = getelementptr double, ptr addrspace(1) %out, i32 4
  store double %e1, ptr addrspace(1) %p4
  %p5 = getelementptr double, ptr addrspace(1) %out, i32 5
  store double %f1, ptr addrspace(1) %p5
  %p6 = getelementptr double, ptr addrspace(1) %out, i32 6
  store double %g1, ptr addrspace(1) %p6
  %p7 = getelementptr double, ptr addrspace(1) %out, i32 7
  store double %h1, ptr addrspace(1) %p7
  %p8 = getelementptr double, ptr addrspace(1) %out, i32 8
  store double %i, ptr addrspace(1) %p8
  %p9 = getelementptr double, ptr addrspace(1) %out, i32 9
  store double %j1, ptr addrspace(1) %p9
  %p10 = getelementptr double, ptr addrspace(1) %out, i32 10
  store double %k1, ptr addrspace(1) %p10
  ret void
}
"""


def _ptx(arch: int) -> str:
    from naiad.backends.cuda import target

    return target.emit_ptx(_KERNELS_IR, arch)


def _binary(driver: CUDADriver, as_cubin: bool) -> bytes:
    arch = driver.get_current_target().arch
    ptxas = toolchain.find_ptxas()
    if not as_cubin:
        return _ptx(arch).encode()
    if ptxas is None:
        pytest.skip("no ptxas to make a cubin with")
    return toolchain.ptx_to_cubin(_ptx(arch), arch, ptxas=ptxas).cubin


ADD_SIGNATURE = [("x", "*fp32"), ("y", "*fp32"), ("out", "*fp32"), ("n", "i32"), ("BLOCK", "constexpr")]


def _load_add(driver: CUDADriver, as_cubin: bool = True, **metadata):
    metadata = dict(METADATA, **metadata)
    module, function, n_regs, n_spills, max_threads = driver.load_binary(
        "add", _binary(driver, as_cubin), metadata, driver.get_current_device())
    assert n_regs > 0 and n_spills == 0 and max_threads >= 128
    return module, function, driver.make_launcher(ADD_SIGNATURE, metadata)


@pytest.mark.parametrize("as_cubin", [True, False], ids=["cubin", "ptx"])
def test_gpu_vector_add_on_torch_tensors(gpu_driver, as_cubin):
    driver, torch = gpu_driver
    module, function, launcher = _load_add(driver, as_cubin)
    n = 100_003
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    grid = (n + 127) // 128
    launcher(grid, 1, 1, driver.get_current_stream(), function, (), None, None, None, x, y, out, n, 128)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)
    out.zero_()
    launcher.direct(module, function)((grid, 1, 1), [x.data_ptr(), y, out, n, 128])
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)
    driver.unload_module(module)


def test_gpu_launch_on_a_torch_stream(gpu_driver):
    driver, torch = gpu_driver
    module, function, launcher = _load_add(driver)
    stream = torch.cuda.Stream()
    n = 4096
    x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
    with torch.cuda.stream(stream):
        assert driver.get_current_stream() == stream.cuda_stream
        launcher.direct(module, function)((n // 128, 1, 1), [x, y, out, n, 128])
    stream.synchronize()
    assert torch.equal(out, x + y)


def test_gpu_vector_add_on_cupy_arrays(gpu_driver):
    driver, torch = gpu_driver
    cupy = pytest.importorskip("cupy")
    module, function, launcher = _load_add(driver)
    n = 5000
    x, y = cupy.random.rand(n, dtype=cupy.float32), cupy.random.rand(n, dtype=cupy.float32)
    out = cupy.zeros(n, dtype=cupy.float32)
    launcher((n + 127) // 128, 1, 1, 0, function, (), None, None, None, x, y, out, n, 128)
    cupy.cuda.runtime.deviceSynchronize()
    assert bool((out == x + y).all())


def test_gpu_dlpack_producer(gpu_driver):
    driver, torch = gpu_driver
    module, function, launcher = _load_add(driver)
    n = 1000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.zeros(n, device="cuda")

    class OnlyDLPack:
        def __init__(self, tensor):
            self.tensor = tensor

        def __dlpack_device__(self):
            return self.tensor.__dlpack_device__()

        def __dlpack__(self, stream=None):
            return self.tensor.__dlpack__()

    launcher(8, 1, 1, 0, function, (), None, None, None, OnlyDLPack(x), OnlyDLPack(y[0:]),
             OnlyDLPack(out), n, 128)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


def test_gpu_every_scalar_type_reaches_the_kernel(gpu_driver):
    driver, torch = gpu_driver
    _, function, _, _, _ = driver.load_binary("scalars", _binary(driver, True),
                                              dict(METADATA, name="scalars", num_warps=1), 0)
    signature = [("out", "*fp64"), ("a", "i1"), ("b", "i8"), ("c", "i16"), ("d", "i32"),
                 ("e", "i64"), ("f", "fp16"), ("g", "bf16"), ("h", "fp32"), ("i", "fp64"),
                 ("j", "u8"), ("k", "u32")]
    launcher = driver.make_launcher(signature, dict(METADATA, name="scalars", num_warps=1))
    out = torch.zeros(11, dtype=torch.float64, device="cuda")
    values = [True, -100, -30000, -2**31, -2**62, 1.5, -2.75, 0.1, math.pi, 250, 2**32 - 1]
    launcher(1, 1, 1, 0, function, (), None, None, None, out, *values)
    torch.cuda.synchronize()
    expected = [1.0, -100.0, -30000.0, float(-2**31), float(-2**62), 1.5, -2.75,
                float(numpy.float32(0.1)), math.pi, 250.0, float(2**32 - 1)]
    assert out.tolist() == expected


def test_gpu_too_much_shared_memory(gpu_driver):
    driver, torch = gpu_driver
    limit = driver.get_device_properties(0)["max_shared_mem"]
    with pytest.raises(OutOfResources, match=f"add \\(shared memory, bytes\\): the kernel needs "
                                             f"{limit + 1}, the device has {limit}"):
        _load_add(driver, shared=limit + 1)


def test_gpu_kernel_with_more_than_48k_of_dynamic_shared_memory(gpu_driver):
    driver, torch = gpu_driver
    module, function, launcher = _load_add(driver, shared=100 << 10)
    n = 256
    x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
    launcher(2, 1, 1, 0, function, (), None, None, None, x, y, out, n, 128)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


def test_gpu_host_tensor_is_refused(gpu_driver):
    driver, torch = gpu_driver
    module, function, launcher = _load_add(driver)
    x = torch.zeros(4, device="cuda")
    with pytest.raises(NaiadError, match="add: argument y is in host memory \\(Tensor\\)"):
        launcher(1, 1, 1, 0, function, (), None, None, None, x, torch.zeros(4), x, 4, 128)


def test_gpu_tensor_on_another_device_is_refused(gpu_driver):
    driver, torch = gpu_driver
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    module, function, launcher = _load_add(driver)
    x, other = torch.zeros(4, device="cuda:0"), torch.zeros(4, device="cuda:1")
    with pytest.raises(NaiadError, match="argument y is on cuda:1 but the kernel runs on cuda:0"):
        launcher(1, 1, 1, 0, function, (), None, None, None, x, other, x, 4, 128)


def test_gpu_broken_ptx_shows_the_jit_log(gpu_driver):
    driver, torch = gpu_driver
    ptx = b".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry add() { bogus; }\n"
    with pytest.raises(CUDAError) as info:
        driver.load_binary("add", ptx, METADATA, 0)
    assert "cuModuleLoadDataEx failed loading kernel add on cuda:0" in str(info.value)
    assert "the driver's JIT log:" in str(info.value)


def test_gpu_benchmarker(gpu_driver):
    driver, torch = gpu_driver
    module, function, launcher = _load_add(driver)
    n = 1 << 24
    x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
    run = launcher.direct(module, function)
    times = driver.get_benchmarker()(lambda: run((n // 128, 1, 1), [x, y, out, n, 128]),
                                     quantiles=[0.5, 0.2, 0.8], warmup=5, rep=20)
    assert len(times) == 3 and all(t > 0 for t in times) and times[1] <= times[0] <= times[2]
    samples = driver.benchmark(lambda: run((n // 128, 1, 1), [x, y, out, n, 128]), quantiles=None,
                               rep=10)
    assert len(samples) >= 5 and samples == sorted(samples)


def test_gpu_device_queries(gpu_driver):
    driver, torch = gpu_driver
    properties = driver.get_device_properties(0)
    assert set(properties) == {"max_shared_mem", "multiprocessor_count", "max_num_regs", "warpSize",
                               "sm_clock_rate", "mem_clock_rate", "mem_bus_width",
                               "max_threads_per_sm"}
    torch_properties = torch.cuda.get_device_properties(0)
    assert properties["multiprocessor_count"] == torch_properties.multi_processor_count
    assert properties["warpSize"] == 32 and properties["max_shared_mem"] > 48 << 10
    major, minor = torch.cuda.get_device_capability(0)
    assert driver.get_current_target() == GPUTarget("cuda", 10 * major + minor, 32)
    assert driver.get_current_device() == torch.cuda.current_device()
    assert driver.get_device_interface() is torch.cuda
    assert driver.get_active_torch_device() == torch.device("cuda", torch.cuda.current_device())


def test_gpu_libcuda_device_interface_and_buffer(gpu_driver):
    driver, torch = gpu_driver
    interface = device_objects.CUDADeviceInterface(driver)
    start, end = interface.Event(enable_timing=True), interface.Event(enable_timing=True)
    start.record()
    buffer = device_objects.DeviceBuffer(driver, 64 << 20).zero_()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    interface.synchronize()
    assert interface.device_count() == torch.cuda.device_count()
    del buffer


def test_tensor_descriptor_parameters_are_passed_as_base_shape_and_strides(driver):
    """A host TensorDescriptor argument: its base pointer, then its shape, then its strides, as
    the kernel's parameters (the CPU launcher's order)."""
    from naiad.runtime.tensor_descriptor import TensorDescriptor

    launcher = driver.make_launcher([("d", "tensordesc<fp32[16, 32]>"), ("n", "i32")], METADATA)
    assert [name for name, _, _ in launcher.slots] == [
        "d.base", "d.shape[0]", "d.shape[1]", "d.strides[0]", "d.strides[1]", "n"]
    descriptor = TensorDescriptor(0x9000, [64, 128], [128, 1], [16, 32])
    types = [ty for _, ty, _ in launcher.slots]
    formats = ["Q"] + ["i" if t == "i32" else "q" for t in types[1:]]
    assert _unpack(launcher, launcher.pack([descriptor, 5], 0), formats) == [0x9000, 64, 128, 128, 1, 5]
