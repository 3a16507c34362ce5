"""The NVIDIA backend's driver: devices, streams, loading cubins and launching, all through
libcuda with ctypes -- no torch, no C compiler, no CUDA toolkit at run time.

Triton's NVIDIA driver compiles a C launcher per signature; here a launch packs its arguments
with a Python function generated once per signature (one ``struct.pack_into`` into one buffer:
the launch configuration, the kernelParams pointer table and the 8-byte slots it points to) and
calls ``cuLaunchKernelEx`` directly.  Kernels run in each device's primary context, the one torch and
cupy use, so their tensors, streams and ours mix freely.  When torch is imported and has set up
CUDA, its current device and stream are ours too.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import struct
import sys
import threading
from typing import Any, Callable, Sequence

from naiad.backends.compiler import GPUTarget
from naiad.backends.cuda.tensor_map_encoding import (ARITHMETIC, MAP_BYTES as _MAP_BYTES, TensorMap,
                                                     TensorMapEncoder, wrapped)
from naiad.backends.driver import DriverBase, StaleLaunch, bf16_bits, sample_quantiles
from naiad.errors import NaiadError, OutOfResources
from naiad.runtime.slots import path_expression, runtime_slots
from naiad.runtime.tensor_wrapper import TensorWrapper

_WINDOWS = sys.platform == "win32"
_LIBRARY_NAMES = ("nvcuda.dll",) if _WINDOWS else ("libcuda.so.1", "libcuda.so")

_P, _INT, _UINT = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
_PP, _PINT = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int)

#: The libcuda functions this driver calls and their argument types (all return a CUresult).
#: The ``_v2`` names are the 64-bit-size entry points that cuda.h's macros select.
_SIGNATURES: dict[str, tuple] = {
    "cuInit": (_UINT,),
    "cuGetErrorName": (_INT, ctypes.POINTER(ctypes.c_char_p)),
    "cuGetErrorString": (_INT, ctypes.POINTER(ctypes.c_char_p)),
    "cuDeviceGetCount": (_PINT,),
    "cuDeviceGet": (_PINT, _INT),
    "cuDeviceGetAttribute": (_PINT, _INT, _INT),
    "cuDevicePrimaryCtxRetain": (_PP, _INT),
    "cuCtxSetCurrent": (_P,),
    "cuCtxPushCurrent_v2": (_P,),
    "cuCtxPopCurrent_v2": (_PP,),
    "cuCtxSynchronize": (),
    "cuModuleLoadDataEx": (_PP, ctypes.c_char_p, _UINT, _PINT, _PP),
    "cuModuleUnload": (_P,),
    "cuModuleGetFunction": (_PP, _P, ctypes.c_char_p),
    "cuFuncGetAttribute": (_PINT, _INT, _P),
    "cuFuncSetAttribute": (_P, _INT, _INT),
    "cuLaunchKernelEx": (_P, _P, _P, _P),
    "cuPointerGetAttribute": (_P, _INT, ctypes.c_uint64),
    "cuEventCreate": (_PP, _UINT),
    "cuEventRecord": (_P, _P),
    "cuEventSynchronize": (_P,),
    "cuEventElapsedTime": (ctypes.POINTER(ctypes.c_float), _P, _P),
    "cuEventDestroy_v2": (_P,),
    "cuMemAlloc_v2": (ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t),
    "cuMemFree_v2": (ctypes.c_uint64,),
    "cuMemsetD8Async": (ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, _P),
}

# cuda.h enumerators used here.
_DEVICE_ATTRIBUTES = {          # get_device_properties key -> CUdevice_attribute
    "max_shared_mem": 97,       # MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    "multiprocessor_count": 16, "max_num_regs": 12, "warpSize": 10, "sm_clock_rate": 13,
    "mem_clock_rate": 36, "mem_bus_width": 37, "max_threads_per_sm": 39,
}
_CC_MAJOR, _CC_MINOR = 75, 76
_FUNC_MAX_THREADS, _FUNC_SHARED_STATIC, _FUNC_LOCAL_BYTES, _FUNC_NUM_REGS = 0, 1, 3, 4
_FUNC_MAX_DYNAMIC_SHARED, _FUNC_SHARED_CARVEOUT = 8, 9
_CARVEOUT_MAX_SHARED = 100               # percent of the unified L1/shared memory
_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE = 5, 6
_POINTER_DEVICE_ORDINAL = 9
_ERROR_INVALID_VALUE = 1
_DEFAULT_SHARED_LIMIT = 48 << 10          # what a kernel gets without opting in
_CACHE_BYTES = 256 << 20                  # larger than any GPU's L2 cache

#: What to do about the CUresults a user can meet, by code.
_HINTS = {
    2: "free device memory (del unused tensors, torch.cuda.empty_cache()) or use smaller inputs",
    209: "the cubin was built for another GPU: compile for this device's target",
    218: "the driver rejected the PTX: see the JIT log; install ptxas (pip install "
         "nvidia-cuda-nvcc) so the backend hands the driver cubins",
    222: "the NVIDIA driver is older than the PTX ISA version: update the driver, or install "
         "ptxas (pip install nvidia-cuda-nvcc) so the backend hands the driver cubins",
    500: "the binary has no kernel of that name",
    700: "a kernel accessed memory out of bounds (check masks and pointer arithmetic; "
         "NAIAD_DEBUG=1 on the CPU backend finds it); this process's CUDA context is now unusable",
    701: "the kernel uses too many registers for its block size: use fewer warps (num_warps)",
    710: "a tl.device_assert failed (the GPU printed its message above); this process's CUDA "
         "context is now unusable",
}


class CUDAError(NaiadError):
    """A libcuda call failed; ``code`` is its CUresult."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class LibCUDA:
    """libcuda's functions used here, typed; ``cuda(name, *args)`` calls one and raises a
    `CUDAError` when it fails, ``cuda.<name>(*args)`` returns the bare CUresult."""

    def __init__(self, lib: Any):
        #: The library itself, for functions that only some drivers have.
        self.lib = lib
        for name, argtypes in _SIGNATURES.items():
            function = getattr(lib, name)
            function.argtypes, function.restype = argtypes, ctypes.c_int
            setattr(self, name, function)

    def __call__(self, name: str, *args: Any) -> None:
        code = getattr(self, name)(*args)
        if code:
            raise cuda_error(self, code, name)


def describe(cuda: LibCUDA, code: int) -> str:
    """CUDA's name and description of a CUresult: "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable..."."""
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    if cuda.cuGetErrorName(code, ctypes.byref(name)) or name.value is None:
        return f"unknown CUresult {code}"
    cuda.cuGetErrorString(code, ctypes.byref(text))
    return f"{name.value.decode()} ({code}): {(text.value or b'').decode()}"


def cuda_error(cuda: LibCUDA, code: int, call: str, doing: str = "", detail: str = "") -> CUDAError:
    """The error for a failed libcuda call: the call, what it was doing, CUDA's text for the
    code, what to do when that is known, and ``detail`` (a log) last."""
    message = f"{call} failed{' ' + doing if doing else ''}: {describe(cuda, code)}"
    if code in _HINTS:
        message += f" -- {_HINTS[code]}"
    if detail:
        message += f"\n{detail}"
    return CUDAError(message, code)


def _open_libcuda() -> Any:
    """libcuda by its usual names, then wherever ctypes.util finds it (slower: it may run
    ldconfig); None when there is none."""
    for name in _LIBRARY_NAMES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    found = ctypes.util.find_library("nvcuda" if _WINDOWS else "cuda")
    try:
        return ctypes.CDLL(found) if found else None
    except OSError:
        return None


def _probe() -> tuple[LibCUDA | None, str]:
    """(libcuda, "") when kernels can run here, else (None, why not)."""
    lib = _open_libcuda()
    if lib is None:
        return None, f"no {_LIBRARY_NAMES[0]} found (no NVIDIA driver)"
    try:
        cuda = LibCUDA(lib)
    except AttributeError as error:
        return None, f"{_LIBRARY_NAMES[0]} lacks a function Naiad calls ({error}): update the NVIDIA driver"
    code = cuda.cuInit(0)
    if code:
        return None, f"cuInit(0) failed: {describe(cuda, code)}"
    count = ctypes.c_int()
    code = cuda.cuDeviceGetCount(ctypes.byref(count))
    if code:
        return None, f"cuDeviceGetCount failed: {describe(cuda, code)}"
    if count.value <= 0:
        return None, "the NVIDIA driver sees no CUDA device (cuDeviceGetCount returned 0)"
    return cuda, ""


_status: tuple[LibCUDA | None, str] | None = None
_status_lock = threading.Lock()


def _libcuda_status() -> tuple[LibCUDA | None, str]:
    """`_probe`'s answer, found once per process (a GPU does not appear while it runs)."""
    global _status
    with _status_lock:
        if _status is None:
            try:
                _status = _probe()
            except Exception as error:           # is_active must never raise
                _status = (None, f"probing libcuda failed: {type(error).__name__}: {error}")
        return _status


_torch_running: Any = None      # torch, once it has initialized CUDA (that never reverts)


def _device_and_stream(driver: "CUDADriver") -> tuple[int, int]:
    """The current device and stream for a warm launch, read straight from torch's C functions
    once torch runs CUDA."""
    torch = _torch_running or _torch_cuda()
    if torch is None:
        return driver._local.device, 0
    device = torch._C._cuda_getDevice()
    return device, torch._C._cuda_getCurrentRawStream(device)


def _torch_cuda() -> Any:
    """torch, when it is imported and has initialized CUDA: its current device and stream rule
    (remembered once true: a launch asks at every call)."""
    global _torch_running
    if _torch_running is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            _torch_running = torch
    return _torch_running


class _ThreadState(threading.local):
    device = 0           # the device set_current_device chose on this thread (when torch does not say)
    active = None        # the device whose primary context this driver made current on this thread


class CUDADriver(DriverBase):
    device_types = ("cuda",)
    pointer_c_type = "CUdeviceptr"
    max_grid = (2**31 - 1, 65535, 65535)

    def __init__(self) -> None:
        cuda, why = _libcuda_status()
        if cuda is None:
            raise NaiadError(f"the cuda backend cannot run on this machine: {why}")
        self.cuda = cuda
        count = ctypes.c_int()
        cuda("cuDeviceGetCount", ctypes.byref(count))
        self.device_count = count.value
        self._local = _ThreadState()
        self._handles: dict[int, int] = {}        # ordinal -> CUdevice
        self._contexts: dict[int, int] = {}       # ordinal -> retained primary context
        self._targets: dict[int, GPUTarget] = {}
        self._properties: dict[int, dict[str, int]] = {}
        self._modules: dict[int, int] = {}        # loaded module -> device
        self._functions: dict[int, int] = {}      # loaded function -> device

    @classmethod
    def is_active(cls) -> bool:
        return _libcuda_status()[0] is not None

    @classmethod
    def why_inactive(cls) -> str:
        return _libcuda_status()[1] or "active"

    # -- devices and contexts -----------------------------------------------------------------
    def _handle(self, device: int) -> int:
        handle = self._handles.get(device)
        if handle is None:
            if not (isinstance(device, int) and 0 <= device < self.device_count):
                raise NaiadError(f"CUDA device {device!r} does not exist: this machine has "
                                 f"{self.device_count} (0 to {self.device_count - 1})")
            value = ctypes.c_int()
            self.cuda("cuDeviceGet", ctypes.byref(value), device)
            handle = self._handles[device] = value.value
        return handle

    def _context(self, device: int) -> int:
        context = self._contexts.get(device)
        if context is None:
            value = ctypes.c_void_p()
            self.cuda("cuDevicePrimaryCtxRetain", ctypes.byref(value), self._handle(device))
            context = self._contexts[device] = value.value
        return context

    def activate(self) -> int:
        """Make the current device's primary context current on this thread, where this driver
        has not yet (every libcuda call needs one); the current device."""
        device = self.get_current_device()
        if self._local.active != device:
            self.cuda("cuCtxSetCurrent", self._context(device))
            self._local.active = device
        return device

    @contextlib.contextmanager
    def _on(self, device: int) -> Any:
        """Run the body in ``device``'s context, leaving the thread's current device as it was."""
        if device == self.activate():
            yield
            return
        self.cuda("cuCtxPushCurrent_v2", self._context(device))
        try:
            yield
        finally:
            self.cuda("cuCtxPopCurrent_v2", ctypes.byref(ctypes.c_void_p()))

    def get_current_device(self) -> int:
        torch = _torch_cuda()
        return torch._C._cuda_getDevice() if torch is not None else self._local.device

    def set_current_device(self, device: int) -> None:
        self.cuda("cuCtxSetCurrent", self._context(device))
        self._local.device = self._local.active = device
        torch = _torch_cuda()
        if torch is not None:
            torch.cuda.set_device(device)

    def get_current_stream(self, device: int | None = None) -> int:
        """torch's current stream when torch runs CUDA, else 0 (the legacy default stream)."""
        torch = _torch_cuda()
        if torch is None:
            return 0
        return torch._C._cuda_getCurrentRawStream(self.get_current_device() if device is None
                                                   else device)

    def _attribute(self, device: int, attribute: int) -> int:
        value = ctypes.c_int()
        self.cuda("cuDeviceGetAttribute", ctypes.byref(value), attribute, self._handle(device))
        return value.value

    def get_current_target(self) -> GPUTarget:
        device = self.get_current_device()
        target = self._targets.get(device)
        if target is None:
            capability = 10 * self._attribute(device, _CC_MAJOR) + self._attribute(device, _CC_MINOR)
            target = self._targets[device] = GPUTarget("cuda", capability,
                                                       self.get_device_properties(device)["warpSize"])
        return target

    def get_device_properties(self, device: int | None = None) -> dict[str, int]:
        """Triton's keys; ``max_shared_mem`` is the most a block may opt in to (bytes)."""
        device = self.get_current_device() if device is None else device
        if device not in self._properties:
            self._properties[device] = {key: self._attribute(device, attribute)
                                        for key, attribute in _DEVICE_ATTRIBUTES.items()}
        return dict(self._properties[device])

    def get_active_torch_device(self) -> Any:
        torch = sys.modules.get("torch")
        return torch.device("cuda", self.get_current_device()) if torch is not None else None

    # -- binaries -----------------------------------------------------------------------------
    def load_binary(self, name: str, binary: bytes, metadata: Any, device: int) -> tuple:
        """Load a cubin (or PTX, which the driver JIT-compiles) and find kernel ``name``:
        ``(module, function, n_regs, n_spills, max_threads)``.  A kernel that needs more than
        48 KiB of shared memory is allowed what the device can give, and asks for the largest
        shared-memory carveout (as Triton's launcher does: the driver otherwise picks the smallest
        configuration that fits one block, 168 of 228 KiB on an H200 for a 148 KiB matmul); one
        that needs more than that, or more threads per block than its register use permits, is
        `OutOfResources`."""
        shared, threads = int(metadata.get("shared", 0)), 32 * int(metadata["num_warps"])
        limit = self.get_device_properties(device)["max_shared_mem"]
        if shared > limit:
            raise OutOfResources(shared, limit, f"{name} (shared memory, bytes)")
        with self._on(device):
            module = self._load_module(name, _image(binary), device)
            try:
                function = ctypes.c_void_p()
                code = self.cuda.cuModuleGetFunction(ctypes.byref(function), module, name.encode())
                if code:
                    raise cuda_error(self.cuda, code, "cuModuleGetFunction",
                                     f"looking up kernel {name}")
                function = function.value
                n_regs, local_bytes, max_threads, static = (
                    self._function_attribute(function, a) for a in
                    (_FUNC_NUM_REGS, _FUNC_LOCAL_BYTES, _FUNC_MAX_THREADS, _FUNC_SHARED_STATIC))
                if threads > max_threads:
                    raise OutOfResources(threads, max_threads,
                                         f"{name} (threads per block; {n_regs} registers each)")
                if shared > _DEFAULT_SHARED_LIMIT:
                    self.cuda("cuFuncSetAttribute", function, _FUNC_MAX_DYNAMIC_SHARED, limit - static)
                    self.cuda("cuFuncSetAttribute", function, _FUNC_SHARED_CARVEOUT, _CARVEOUT_MAX_SHARED)
            except BaseException:
                self.cuda.cuModuleUnload(module)
                raise
        self._modules[module] = self._functions[function] = device
        return module, function, n_regs, local_bytes // 4, max_threads

    def _load_module(self, name: str, image: bytes, device: int) -> int:
        log = ctypes.create_string_buffer(16 << 10)
        options = (ctypes.c_int * 2)(_JIT_ERROR_LOG_BUFFER, _JIT_ERROR_LOG_BUFFER_SIZE)
        values = (ctypes.c_void_p * 2)(ctypes.addressof(log), len(log))
        module = ctypes.c_void_p()
        code = self.cuda.cuModuleLoadDataEx(ctypes.byref(module), image, 2, options, values)
        if code:
            text = log.value.decode(errors="replace").strip()
            raise cuda_error(self.cuda, code, "cuModuleLoadDataEx",
                             f"loading kernel {name} on cuda:{device}",
                             f"the driver's JIT log:\n{text}" if text else "")
        return module.value

    def _function_attribute(self, function: int, attribute: int) -> int:
        value = ctypes.c_int()
        self.cuda("cuFuncGetAttribute", ctypes.byref(value), attribute, function)
        return value.value

    def unload_module(self, module: Any) -> None:
        device = self._modules.pop(module, None)
        with self._on(self.get_current_device() if device is None else device):
            self.cuda("cuModuleUnload", module)

    def make_launcher(self, signature: Any, metadata: Any) -> "CUDALauncher":
        """``signature``: (name, Triton type string) of every parameter, constexprs included."""
        return CUDALauncher(self, signature, metadata)

    def launch_error(self, code: int, name: str, function: int, grid: tuple, block: int,
                     shared: int) -> CUDAError:
        """The error for a failed cuLaunchKernelEx, saying so when the kernel was loaded on
        another device than the current one."""
        loaded, current = self._functions.get(function), self.get_current_device()
        detail = ""
        if loaded is not None and loaded != current:
            detail = (f"kernel {name} was loaded on cuda:{loaded} but cuda:{current} is current: "
                      f"launch it with cuda:{loaded} current, or load it again on cuda:{current}")
        return cuda_error(self.cuda, code, "cuLaunchKernelEx",
                          f"launching {name} (grid {grid}, {block} threads per block, "
                          f"{shared} bytes of shared memory)", detail)

    def pointer_device(self, address: int) -> int | None:
        """The device that owns device memory at ``address``; None for host memory."""
        device = ctypes.c_int()
        code = self.cuda.cuPointerGetAttribute(ctypes.byref(device), _POINTER_DEVICE_ORDINAL, address)
        if code == _ERROR_INVALID_VALUE:
            return None
        if code:
            raise cuda_error(self.cuda, code, "cuPointerGetAttribute")
        return device.value

    # -- benchmarking -------------------------------------------------------------------------
    def get_benchmarker(self) -> Callable:
        return self.benchmark

    def benchmark(self, kernel_call: Callable[[], Any], *,
                  quantiles: Sequence[float] | None = (0.5, 0.2, 0.8), warmup: float = 25,
                  rep: float = 100, **kwargs: Any) -> list[float]:
        """Time ``kernel_call`` with CUDA events on the current stream (ms), as Triton's
        do_bench: about ``warmup`` ms of warm-up runs, then runs for about ``rep`` ms, each
        after flushing L2; the given quantiles, or every sample (sorted) when None."""
        stream = self.get_current_stream(self.activate())
        cache = self.get_empty_cache_for_benchmark()
        kernel_call()
        start, end = CUDAEvent(self), CUDAEvent(self)
        start.record(stream)
        for _ in range(5):
            self.clear_cache(cache)
            kernel_call()
        end.record(stream)
        end.synchronize()
        estimate = max(start.elapsed_time(end) / 5, 1e-4)
        pairs = [(CUDAEvent(self), CUDAEvent(self))
                 for _ in range(max(5, min(10000, int(rep / estimate))))]
        for _ in range(max(1, int(warmup / estimate))):
            kernel_call()
        for first, last in pairs:
            self.clear_cache(cache)
            first.record(stream)
            kernel_call()
            last.record(stream)
        pairs[-1][1].synchronize()
        times = sorted(first.elapsed_time(last) for first, last in pairs)
        if quantiles is None:
            return times
        return sample_quantiles(times, quantiles)

    def get_device_interface(self) -> Any:
        torch = sys.modules.get("torch")
        return torch.cuda if torch is not None else CUDADeviceInterface(self)

    def get_empty_cache_for_benchmark(self) -> Any:
        torch = sys.modules.get("torch")
        if torch is not None:
            return torch.empty(_CACHE_BYTES // 4, dtype=torch.int32,
                               device=torch.device("cuda", self.activate()))
        return DeviceBuffer(self, _CACHE_BYTES)


def _image(binary: bytes | str) -> bytes:
    """What cuModuleLoadDataEx takes: an ELF cubin or a fatbin as is, PTX text NUL-terminated."""
    if isinstance(binary, str):
        binary = binary.encode()
    binary = bytes(binary)
    if binary[:4] in (b"\x7fELF", b"\x50\xed\x55\xba") or binary.endswith(b"\0"):
        return binary
    return binary + b"\0"


class CUDAEvent:
    """``torch.cuda.Event``'s timing part over libcuda: ``record``, ``synchronize``,
    ``elapsed_time`` (ms)."""

    def __init__(self, driver: CUDADriver, enable_timing: bool = True, **kwargs: Any):
        self.driver = driver
        driver.activate()
        handle = ctypes.c_void_p()
        driver.cuda("cuEventCreate", ctypes.byref(handle), 0 if enable_timing else 2)
        self.handle = handle.value

    def record(self, stream: int | None = None) -> None:
        """Record on ``stream`` (a raw handle; default: the current stream)."""
        stream = self.driver.get_current_stream() if stream is None else stream
        self.driver.cuda("cuEventRecord", self.handle, stream)

    def synchronize(self) -> None:
        self.driver.cuda("cuEventSynchronize", self.handle)

    def elapsed_time(self, end: "CUDAEvent") -> float:
        ms = ctypes.c_float()
        self.driver.cuda("cuEventElapsedTime", ctypes.byref(ms), self.handle, end.handle)
        return ms.value

    def __del__(self) -> None:
        handle = getattr(self, "handle", None)
        if handle:
            self.driver.cuda.cuEventDestroy_v2(handle)


class CUDADeviceInterface:
    """What Triton code reaches through ``get_device_interface()`` when torch is not imported."""

    def __init__(self, driver: CUDADriver):
        self._driver = driver
        self.Event = functools.partial(CUDAEvent, driver)

    def synchronize(self, device: int | None = None) -> None:
        driver = self._driver
        with driver._on(driver.get_current_device() if device is None else device):
            driver.cuda("cuCtxSynchronize")

    def current_device(self) -> int:
        return self._driver.get_current_device()

    def device_count(self) -> int:
        return self._driver.device_count


class DeviceBuffer:
    """``nbytes`` of device memory from cuMemAlloc, freed with the object (the benchmark's L2
    flush buffer when torch is absent); ``zero_()`` clears it on the current stream."""

    def __init__(self, driver: CUDADriver, nbytes: int):
        self.driver, self.nbytes = driver, nbytes
        self.device = driver.activate()
        pointer = ctypes.c_uint64()
        driver.cuda("cuMemAlloc_v2", ctypes.byref(pointer), nbytes)
        self.pointer = pointer.value

    def zero_(self) -> "DeviceBuffer":
        self.driver.cuda("cuMemsetD8Async", self.pointer, 0, self.nbytes,
                         self.driver.get_current_stream(self.device))
        return self

    def __del__(self) -> None:
        pointer = getattr(self, "pointer", None)
        if pointer:
            self.driver.cuda.cuMemFree_v2(pointer)


# -- launching ---------------------------------------------------------------------------------

#: Scalar argument type -> struct format of its 8-byte slot.  A slot holds the value in its
#: first bytes, as wide as the kernel's PTX parameter (LLVM gives i8 a .u8 parameter).
_SCALARS = {
    "i1": "?7x", "u1": "?7x", "i8": "b7x", "u8": "B7x", "i16": "h6x", "u16": "H6x", "i32": "i4x",
    "u32": "I4x", "i64": "q", "u64": "Q", "fp16": "e6x", "bf16": "H6x", "fp32": "f4x", "fp64": "d",
}
_POINTER = "Q"
_DLPACK_CUDA = (2, 13)           # kDLCUDA, kDLCUDAManaged
_DLPACK_HOST = (1, 3)            # kDLCPU, kDLCUDAHost (pinned host memory)


def _slot(ty: Any, kernel: str = "") -> str:
    if isinstance(ty, str) and ty.startswith("*"):
        return _POINTER
    try:
        return _SCALARS[ty]
    except (KeyError, TypeError):
        raise NaiadError(f"{kernel + ': ' if kernel else ''}arguments of type {ty} cannot be "
                         f"passed to CUDA kernels (pointers and {', '.join(_SCALARS)} can)") from None


def kernel_slots(signature: Any) -> list[tuple[str, Any, str]]:
    """(name, type, Python expression reading it from ``args``) of each kernel parameter, in
    order (`naiad.runtime.slots.runtime_slots`)."""
    return [(name, ty, path_expression(path)) for name, ty, path in runtime_slots(signature)]


#: CUlaunchConfig (cuda.h): grid and block dimensions, shared bytes, stream, no attributes;
#: padded to 64 bytes, where the kernelParams pointer table starts.
_CONFIG = struct.Struct("<7I4xQQI4x8x")


class CUDALauncher:
    """Launches one compiled kernel through cuLaunchKernelEx (4 arguments: through ctypes each
    costs time, and cuLaunchKernel takes 11).

    ``pack(args, device, grid_x, grid_y, grid_z, stream)`` is generated once per signature: it
    returns one buffer holding the launch configuration (`_CONFIG`), then the n parameter
    pointers, then the n 8-byte slots they point to, filled by one ``struct.pack_into``.  Torch
    CUDA tensors on ``device`` and ints (device addresses) are read inline; every other pointer
    argument goes through `_pointer`, which checks where it lives.
    """

    #: An int in a pointer position is a device address already.
    accepts_addresses = True

    def __init__(self, driver: CUDADriver, signature: Any, metadata: Any):
        self.driver = driver
        self.name = metadata["name"]
        self.block = 32 * int(metadata["num_warps"])
        self.shared = int(metadata.get("shared", 0))
        self.slots = kernel_slots(signature)
        maps = [TensorMap.from_json(m) for m in metadata.get("tensor_maps") or ()]
        #: The tensor maps the kernel takes after its arguments (`tensor_map_encoding`).
        self.maps = TensorMapEncoder(driver.cuda.lib, self.name, maps) if maps else None
        n = len(self.slots) + len(maps)
        self.struct = struct.Struct(_CONFIG.format + f"{n}Q"
                                    + "".join(_slot(ty, self.name) for _, ty, _ in self.slots)
                                    + f"{_MAP_BYTES}s" * len(maps))
        self._launch = driver.cuda.cuLaunchKernelEx
        self.pack = self._build_packer()

    def _build_packer(self) -> Callable[[Sequence[Any], int], Any]:
        maps = self.maps.maps if self.maps is not None else []
        n, table = len(self.slots) + len(maps), _CONFIG.size
        parts = ["grid_x, grid_y, grid_z", f"{self.block}, 1, 1, {self.shared}", "stream, 0, 0"]
        parts += [f"base + {table + 8 * n + 8 * i}" for i in range(len(self.slots))]
        parts += [f"base + {table + 16 * n - 8 * len(maps) + _MAP_BYTES * j}" for j in range(len(maps))]
        values = []
        for i, (_, ty, expression) in enumerate(self.slots):
            if ty.startswith("*"):
                values.append(f"(v if type(v := {expression}) is int else v.data_ptr() if type(v) "
                              f"is _Tensor and v.get_device() == device else _pointer(v, device, {i}))")
            elif ty == "bf16":
                values.append(f"_bf16(float({expression}))")
            else:
                values.append(expression)
        parts += values + [_map_expression(j, tmap, values) for j, tmap in enumerate(maps)]
        source = ("def pack(args, device, grid_x=1, grid_y=1, grid_z=1, stream=0):\n"
                  "    buffer = _Buffer()\n"
                  "    base = _addressof(buffer)\n"
                  f"    _pack_into(buffer, 0{''.join(', ' + p for p in parts)})\n    return buffer\n")
        torch = sys.modules.get("torch")
        words = table // 8 + 2 * n - len(maps) + _MAP_BYTES // 8 * len(maps)
        scope = {"_Buffer": ctypes.c_uint64 * words, "_addressof": ctypes.addressof,
                 "_map": self.maps.encode if self.maps is not None else None,
                 "_pack_into": self.struct.pack_into, "_pointer": self._pointer, "_bf16": bf16_bits,
                 "_wrapped": wrapped,
                 "_Tensor": torch.Tensor if torch is not None else None}
        exec(compile(source, f"<naiad cuda launcher {self.name}>", "exec"), scope)
        return scope["pack"]

    def _pointer(self, value: Any, device: int, slot: int) -> int:
        """The address of pointer argument ``slot``, checked to be device memory on ``device``."""
        if value is None:
            return 0
        argument = self.slots[slot][0]
        address, owner = _locate(value, self.driver)
        if address is None:
            raise NaiadError(f"{self.name}: argument {argument} ({type(value).__name__}) is not an "
                             f"array: pass a CUDA tensor or array (torch, cupy, anything with "
                             f"__cuda_array_interface__ or DLPack on a CUDA device), a device "
                             f"address (int), or None")
        if owner == "host":
            raise NaiadError(f"{self.name}: argument {argument} is in host memory "
                             f"({type(value).__name__}); CUDA kernels read device memory: move it "
                             f"to the GPU first ({argument}.cuda() or {argument}.to('cuda') for a "
                             f"torch tensor, cupy.asarray({argument}) for a numpy array)")
        if isinstance(owner, str):
            raise NaiadError(f"{self.name}: argument {argument} is on {owner}, not an NVIDIA GPU: "
                             f"move it with {argument}.cuda() / .to('cuda')")
        if owner is not None and owner != device:
            raise NaiadError(f"{self.name}: argument {argument} is on cuda:{owner} but the kernel "
                             f"runs on cuda:{device}, the current device: move it with "
                             f"{argument}.to('cuda:{device}'), or make cuda:{owner} current "
                             f"(torch.cuda.set_device({owner})) before launching")
        return address

    def __call__(self, grid_x: int, grid_y: int, grid_z: int, stream: int, function: Any,
                 packed_metadata: tuple, launch_metadata: Any, enter_hook: Any, exit_hook: Any,
                 *args: Any) -> None:
        """Triton's launcher convention; ``function`` is `CUDADriver.load_binary`'s."""
        if grid_x * grid_y * grid_z <= 0:
            return
        device = self.driver.activate()
        if enter_hook is not None:
            enter_hook(launch_metadata)
        buffer = self.pack(args, device, grid_x, grid_y, grid_z, stream)
        base = ctypes.addressof(buffer)
        code = self._launch(base, function, base + _CONFIG.size, None)
        if code:
            raise self.driver.launch_error(code, self.name, function, (grid_x, grid_y, grid_z),
                                           self.block, self.shared)
        if exit_hook is not None:
            exit_hook(launch_metadata)

    def direct(self, module: Any, function: Any) -> Callable[[tuple, Sequence[Any]], None]:
        """The warm launch path's launcher: ``run(grid, args)`` launches on the current stream
        without hooks.  It is made right after a checked launch on the current device, with
        ``function`` loaded there and the arguments' devices checked (their addresses may come
        as ints: `naiad.runtime.jit`'s entry keys them by device); from another current device
        it raises `StaleLaunch`, and the full path loads the kernel there or names the argument
        that lives elsewhere."""
        pack, launch, block, shared = self.pack, self._launch, self.block, self.shared
        driver, addressof, table = self.driver, ctypes.addressof, _CONFIG.size
        checked = driver.get_current_device()

        def run(grid: tuple, args: Sequence[Any]) -> None:
            grid_x, grid_y, grid_z = grid
            if grid_x * grid_y * grid_z > 0:
                device, stream = _device_and_stream(driver)
                if device != checked:
                    raise StaleLaunch(f"{self.name} was prepared on cuda:{checked}, cuda:{device} "
                                      f"is current")
                if driver._local.active != device:
                    driver.activate()
                buffer = pack(args, device, grid_x, grid_y, grid_z, stream)
                base = addressof(buffer)
                code = launch(base, function, base + table, None)
                if code:
                    raise self.driver.launch_error(code, self.name, function, grid, block, shared)
        return run


def _map_expression(j: int, tmap: TensorMap, values: list[str]) -> str:
    """The packer's expression for map ``j``'s bytes, from the slot values it is encoded from."""
    def read(part: tuple) -> str:
        if part[0] in ARITHMETIC:
            op, bits, a, b = part
            return f"_wrapped(({read(a)}) {ARITHMETIC[op]} ({read(b)}), {bits})"
        kind, value = part
        return values[value] if kind == "arg" else str(value)
    shape = "".join(read(p) + ", " for p in tmap.shape)
    strides = "".join(read(p) + ", " for p in tmap.strides)
    return f"_map({j}, {values[tmap.base]}, ({shape}), ({strides}))"


def _locate(value: Any, driver: CUDADriver) -> tuple[int | None, int | str | None]:
    """(address, owner) of an array argument: owner is a CUDA device ordinal, None when
    unknown, "host" for host memory, or the name of another device; (None, None) when
    ``value`` is no array."""
    if isinstance(value, TensorWrapper):           # tl.reinterpret: the memory of its base
        value = value.base
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.is_cuda:
            return value.data_ptr(), value.get_device()
        return value.data_ptr(), "host" if value.device.type == "cpu" else f"torch device {value.device}"
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is not None:
        address = int(interface["data"][0])
        owner = getattr(getattr(value, "device", None), "id", None)       # cupy
        if not isinstance(owner, int):
            owner = driver.pointer_device(address) if address else None
            if owner is None and address:
                owner = "host"
        return address, owner
    dlpack_device = getattr(value, "__dlpack_device__", None)
    if dlpack_device is not None:
        kind, owner = (int(x) for x in dlpack_device())
        if kind in _DLPACK_CUDA:
            return _dlpack_address(value), owner
        return 0, "host" if kind in _DLPACK_HOST else f"DLPack device type {kind}"
    if hasattr(value, "__array_interface__"):
        return 0, "host"
    return None, None


class _DLTensor(ctypes.Structure):
    """dlpack.h's DLTensor, the head of the DLManagedTensor a "dltensor" capsule points to."""
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes, _capsule_pointer.restype = (ctypes.py_object, ctypes.c_char_p), ctypes.c_void_p


def _dlpack_address(value: Any) -> int:
    """The data address of a DLPack producer.  The capsule is read, not consumed: its
    destructor releases it, while ``value`` (the caller's argument) keeps the memory alive."""
    capsule = value.__dlpack__()
    tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    return (tensor.data or 0) + tensor.byte_offset
