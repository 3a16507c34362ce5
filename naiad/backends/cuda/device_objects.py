"""Small objects over libcuda handles that the driver hands out: timing events (its
benchmarker's), a block of device memory (the benchmark's L2 flush buffer when torch is absent)
and the ``torch.cuda``-like interface ``get_device_interface()`` returns when torch is absent.

The event and the buffer each hold one libcuda handle and free it with the object; all three
reach libcuda through the driver they are given.  They are apart from the driver
(`naiad.backends.cuda.driver`) because they use it and are no part of it: that module keeps to
devices, contexts, binaries and benchmarking.
"""

from __future__ import annotations

import ctypes
import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from naiad.backends.cuda.driver import CUDADriver


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
        with driver.on_device(driver.get_current_device() if device is None else device):
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
