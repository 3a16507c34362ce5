"""libcuda through ctypes: finding and typing the library, probing whether kernels can run
here, and the errors its calls raise.

Apart from the driver (`naiad.backends.cuda.driver`) because it is the one place that knows
libcuda's C interface: the driver, its device objects and the launcher all call through the one
`LibCUDA` it types, and say a failed CUresult, with what to do about it, the one way
`cuda_error` does; and the probe that ``is_active`` asks needs nothing of the driver.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
from typing import Any

from naiad.backends.driver import bind_functions, call_failed
from naiad.errors import NaiadError

_WINDOWS = sys.platform == "win32"
_LIBRARY_NAMES = ("nvcuda.dll",) if _WINDOWS else ("libcuda.so.1", "libcuda.so")

_P, _INT, _UINT = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
_PP, _PINT = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int)

#: The libcuda functions the backend calls and their argument types (all return a CUresult).
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
        bind_functions(self, lib, _SIGNATURES, ctypes.c_int)

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
    return CUDAError(call_failed(call, doing, describe(cuda, code), _HINTS.get(code), detail), code)


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


def libcuda_status() -> tuple[LibCUDA | None, str]:
    """`_probe`'s answer, found once per process (a GPU does not appear while it runs)."""
    global _status
    with _status_lock:
        if _status is None:
            try:
                _status = _probe()
            except Exception as error:           # is_active must never raise
                _status = (None, f"probing libcuda failed: {type(error).__name__}: {error}")
        return _status
