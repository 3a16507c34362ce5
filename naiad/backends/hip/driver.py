"""The AMD backend's driver: devices, their architectures, streams, code objects and launches
through libamdhip64 with ctypes (no C compiler, no torch needed).  When a ROCm build of torch
has set up its GPUs, its current device and stream are ours too.  Tested against a stand-in for
the library (tests/hip/test_driver.py); it has not run on AMD hardware yet (docs/AMD.md)."""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
from typing import Any, Callable, Sequence

from naiad.backends.compiler import GPUTarget
from naiad.backends.driver import DriverBase, time_with_events
from naiad.backends.hip.launcher import HIPLauncher
from naiad.backends.hip.libhip import LibHIP, open_libhip
from naiad.backends.hip.target import lds_bytes, wave_size
from naiad.errors import NaiadError, OutOfResources

# hipFunction_attribute
_FUNC_MAX_THREADS, _FUNC_LOCAL_BYTES, _FUNC_NUM_REGS = 0, 3, 4
_CACHE_BYTES = 512 << 20                 # larger than any AMD GPU's last-level cache


@functools.lru_cache(maxsize=None)
def _status() -> tuple[Any, str]:
    """(the library, "active") or (None, why not)."""
    lib = open_libhip()
    if lib is None:
        return None, "no libamdhip64 found (no ROCm; compiling with --target hip:<gfx arch> works)"
    try:
        hip = LibHIP(lib)
    except AttributeError as e:
        return None, f"libamdhip64 lacks {e} (a ROCm older than Naiad supports)"
    count = ctypes.c_int()
    if hip.hipInit(0) or hip.hipGetDeviceCount(ctypes.byref(count)) or count.value < 1:
        return None, "libamdhip64 sees no AMD GPU"
    return hip, "active"


def _torch_gpu() -> Any:
    """torch, when it is imported and has set up its GPUs (then its device and stream rule)."""
    torch = sys.modules.get("torch")
    return torch if torch is not None and torch.cuda.is_initialized() else None


class _ThreadState(threading.local):
    device = 0


class HIPDriver(DriverBase):
    device_types = ("cuda",)

    @classmethod
    def is_active(cls) -> bool:
        return _status()[0] is not None

    @classmethod
    def why_inactive(cls) -> str:
        return _status()[1]

    def __init__(self) -> None:
        hip, reason = _status()
        if hip is None:
            raise NaiadError(f"the hip backend cannot run kernels on this machine: {reason}")
        self.hip = hip
        self.thread = _ThreadState()
        self._architectures: dict[int, str] = {}
        self._modules: dict[Any, int] = {}

    # -- devices and streams ------------------------------------------------------------------
    def torch_running(self) -> Any:
        """torch, once a ROCm build of it has set up the GPUs (its device and stream are ours)."""
        return _torch_gpu()

    def get_current_device(self) -> int:
        torch = _torch_gpu()
        return torch.cuda.current_device() if torch is not None else self.thread.device

    def set_current_device(self, device: int) -> None:
        self.hip("hipSetDevice", device)
        self.thread.device = device
        torch = _torch_gpu()
        if torch is not None:
            torch.cuda.set_device(device)

    def get_current_stream(self, device: int | None = None) -> int:
        torch = _torch_gpu()
        if torch is None:
            return 0
        return torch._C._cuda_getCurrentRawStream(self.get_current_device() if device is None else device)

    def architecture(self, device: int) -> str:
        if device not in self._architectures:
            self._architectures[device] = self.hip.architecture(device)
        return self._architectures[device]

    def get_current_target(self) -> GPUTarget:
        arch = self.architecture(self.get_current_device())
        return GPUTarget("hip", arch, wave_size(arch))

    def get_device_properties(self, device: int) -> dict[str, Any]:
        arch = self.architecture(device)
        properties = {"arch": arch, "warpSize": wave_size(arch), "max_shared_mem": lds_bytes(arch)}
        torch = _torch_gpu()
        if torch is not None:
            properties["multiprocessor_count"] = torch.cuda.get_device_properties(device).multi_processor_count
        return properties

    # -- code objects -------------------------------------------------------------------------
    def load_binary(self, name: str, binary: bytes, metadata: Any, device: int) -> tuple:
        """Load a code object and find kernel ``name``: ``(module, function, n_regs, n_spills,
        max_threads)``; more LDS than a workgroup has, or more threads per block than the
        kernel's registers allow, is `OutOfResources`."""
        shared = int(metadata.get("shared", 0))
        threads = int(metadata["num_warps"]) * int(metadata.get("warp_size", 64))
        limit = self.get_device_properties(device)["max_shared_mem"]
        if shared > limit:
            raise OutOfResources(shared, limit, f"{name} (LDS, bytes)")
        current = self.get_current_device()
        if device != current:
            self.hip("hipSetDevice", device)
        module = ctypes.c_void_p()
        try:
            self.hip("hipModuleLoadData", ctypes.byref(module), bytes(binary),
                     doing=f"loading kernel {name} on hip:{device}")
        finally:
            if device != current:
                self.hip("hipSetDevice", current)
        try:
            function = ctypes.c_void_p()
            self.hip("hipModuleGetFunction", ctypes.byref(function), module, name.encode(),
                     doing=f"looking up kernel {name}")
            n_regs, local_bytes, max_threads = (self._function_attribute(function, a) for a in
                                                (_FUNC_NUM_REGS, _FUNC_LOCAL_BYTES, _FUNC_MAX_THREADS))
            if threads > max_threads:
                raise OutOfResources(threads, max_threads, f"{name} (threads per block; {n_regs} "
                                                           f"registers each)")
        except BaseException:
            self.hip.hipModuleUnload(module)
            raise
        self._modules[module.value] = device
        return module.value, function.value, n_regs, local_bytes // 4, max_threads

    def _function_attribute(self, function: Any, attribute: int) -> int:
        value = ctypes.c_int()
        self.hip("hipFuncGetAttribute", ctypes.byref(value), attribute, function)
        return value.value

    def unload_module(self, module: Any) -> None:
        self._modules.pop(module, None)
        self.hip("hipModuleUnload", module)

    def make_launcher(self, signature: Any, metadata: Any) -> HIPLauncher:
        return HIPLauncher(self, signature, metadata)

    # -- benchmarking -------------------------------------------------------------------------
    def get_benchmarker(self) -> Callable:
        return self.benchmark

    def benchmark(self, kernel_call: Callable[[], Any], *,
                  quantiles: Sequence[float] | None = (0.5, 0.2, 0.8), warmup: float = 25,
                  rep: float = 100, **kwargs: Any) -> list[float]:
        """Time ``kernel_call`` with HIP events on the current stream (ms), as Triton's do_bench."""
        cache = self.get_empty_cache_for_benchmark()
        return time_with_events(kernel_call, lambda: HIPEvent(self.hip), self.get_current_stream(),
                                lambda: self.clear_cache(cache), quantiles, warmup, rep)

    def get_empty_cache_for_benchmark(self) -> Any:
        torch = sys.modules.get("torch")
        if torch is None:
            return None                  # nothing to flush with: the timings keep the cache warm
        return torch.empty(_CACHE_BYTES // 4, dtype=torch.int32,
                           device=torch.device("cuda", self.get_current_device()))

    def clear_cache(self, cache: Any) -> None:
        if cache is not None:
            cache.zero_()


class HIPEvent:
    """A HIP event: ``record(stream)``, ``synchronize()``, ``elapsed_time(later)`` in ms."""

    def __init__(self, hip: LibHIP):
        self.hip = hip
        handle = ctypes.c_void_p()
        hip("hipEventCreate", ctypes.byref(handle))
        self.handle = handle.value

    def record(self, stream: int) -> None:
        self.hip("hipEventRecord", self.handle, stream or None)

    def synchronize(self) -> None:
        self.hip("hipEventSynchronize", self.handle)

    def elapsed_time(self, later: "HIPEvent") -> float:
        ms = ctypes.c_float()
        self.hip("hipEventElapsedTime", ctypes.byref(ms), self.handle, later.handle)
        return ms.value

    def __del__(self) -> None:
        self.hip.hipEventDestroy(self.handle)
