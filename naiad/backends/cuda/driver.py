"""The NVIDIA backend's driver: devices, contexts, streams, targets, loading binaries and
benchmarking, all through libcuda with ctypes -- no torch, no C compiler, no CUDA toolkit at run
time.

Kernels run in each device's primary context, the one torch and cupy use, so their tensors,
streams and ours mix freely.  When torch is imported and has set up CUDA, its current device and
stream are ours too.  This is the module the backend contract loads (`CUDADriver`); the rest of
the driver's work is in modules of their own: libcuda and its errors in `libcuda`, the launcher
in `launcher` (argument locations in `argument_memory`), events, device memory and the device
interface in `device_objects`.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
from typing import Any, Callable, Sequence

from naiad.backends.compiler import GPUTarget
from naiad.backends.cuda.device_objects import CUDADeviceInterface, CUDAEvent, DeviceBuffer
from naiad.backends.cuda.launcher import CUDALauncher
from naiad.backends.cuda.libcuda import CUDAError, cuda_error, libcuda_status
from naiad.backends.driver import DriverBase, time_with_events
from naiad.errors import NaiadError, OutOfResources

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


_torch_running: Any = None      # torch, once it has initialized CUDA (that never reverts)


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
        cuda, why = libcuda_status()
        if cuda is None:
            raise NaiadError(f"the cuda backend cannot run on this machine: {why}")
        self.cuda = cuda
        count = ctypes.c_int()
        cuda("cuDeviceGetCount", ctypes.byref(count))
        self.device_count = count.value
        #: This thread's current device and active context (the warm launch path reads them).
        self.thread = _ThreadState()
        self._handles: dict[int, int] = {}        # ordinal -> CUdevice
        self._contexts: dict[int, int] = {}       # ordinal -> retained primary context
        self._targets: dict[int, GPUTarget] = {}
        self._properties: dict[int, dict[str, int]] = {}
        self._modules: dict[int, int] = {}        # loaded module -> device
        self._functions: dict[int, int] = {}      # loaded function -> device

    @classmethod
    def is_active(cls) -> bool:
        return libcuda_status()[0] is not None

    @classmethod
    def why_inactive(cls) -> str:
        return libcuda_status()[1] or "active"

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
        if self.thread.active != device:
            self.cuda("cuCtxSetCurrent", self._context(device))
            self.thread.active = device
        return device

    @contextlib.contextmanager
    def on_device(self, device: int) -> Any:
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
        return torch._C._cuda_getDevice() if torch is not None else self.thread.device

    def set_current_device(self, device: int) -> None:
        self.cuda("cuCtxSetCurrent", self._context(device))
        self.thread.device = self.thread.active = device
        torch = _torch_cuda()
        if torch is not None:
            torch.cuda.set_device(device)

    def torch_running(self) -> Any:
        """torch, once it runs CUDA (it then says which device and stream are current), else None."""
        return _torch_running or _torch_cuda()

    def device_and_stream(self) -> tuple[int, int]:
        """The current device and stream for a warm launch, read straight from torch's C functions
        once torch runs CUDA."""
        torch = _torch_running or _torch_cuda()
        if torch is None:
            return self.thread.device, 0
        device = torch._C._cuda_getDevice()
        return device, torch._C._cuda_getCurrentRawStream(device)

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
        with self.on_device(device):
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
        with self.on_device(self.get_current_device() if device is None else device):
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
        return time_with_events(kernel_call, lambda: CUDAEvent(self), stream,
                                lambda: self.clear_cache(cache), quantiles, warmup, rep)

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
