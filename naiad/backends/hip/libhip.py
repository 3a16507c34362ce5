"""libamdhip64 through ctypes: the functions the driver calls, typed, and their errors.

Only calls whose ABI is the same across ROCm releases are used: the device's properties are read
for its architecture name alone (found in the structure, whose layout changed between releases,
by its ``gfx`` prefix), and everything else the driver needs comes from the architecture.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
from typing import Any

from naiad.backends.driver import bind_functions, call_failed
from naiad.errors import NaiadError

_P, _INT, _UINT = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
_PP, _PINT = ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int)

#: name -> argument types; every function returns a hipError_t.
_SIGNATURES = {
    "hipInit": (_UINT,),
    "hipGetDeviceCount": (_PINT,),
    "hipSetDevice": (_INT,),
    "hipModuleLoadData": (_PP, _P),
    "hipModuleGetFunction": (_PP, _P, ctypes.c_char_p),
    "hipModuleUnload": (_P,),
    "hipFuncGetAttribute": (_PINT, _INT, _P),
    "hipModuleLaunchKernel": (_P, _UINT, _UINT, _UINT, _UINT, _UINT, _UINT, _UINT, _P, _P, _P),
    "hipEventCreate": (_PP,),
    "hipEventRecord": (_P, _P),
    "hipEventSynchronize": (_P,),
    "hipEventElapsedTime": (ctypes.POINTER(ctypes.c_float), _P, _P),
    "hipEventDestroy": (_P,),
}
#: The properties call: ROCm 6's name, then the older one.
_PROPERTIES = ("hipGetDevicePropertiesR0600", "hipGetDeviceProperties")
#: Bytes read from the properties structure (larger than any release's).
PROPERTIES_BYTES = 8192

#: What to do about the hipError_t codes a user can meet.
_HINTS = {
    2: "free device memory or use smaller inputs",
    98: "the code object has no kernel of that name, or was built for another GPU",
    209: "the code object was built for another GPU: compile for this device's architecture",
    701: "the kernel uses too many registers for its block size: use fewer warps (num_warps)",
}


class HIPError(NaiadError):
    """A libamdhip64 call failed; ``code`` is its hipError_t."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class LibHIP:
    """libamdhip64's functions used here, typed; ``hip(name, *args)`` raises a `HIPError` when
    the call fails, ``hip.<name>(*args)`` returns the bare code."""

    def __init__(self, lib: Any):
        self.lib = lib
        bind_functions(self, lib, _SIGNATURES, ctypes.c_int)
        bind_functions(self, lib, {"hipGetErrorName": (_INT,), "hipGetErrorString": (_INT,)}, ctypes.c_char_p)
        self.properties = next((getattr(lib, n) for n in _PROPERTIES if hasattr(lib, n)), None)

    def __call__(self, name: str, *args: Any, doing: str = "") -> None:
        code = getattr(self, name)(*args)
        if code:
            raise hip_error(self, code, name, doing)

    def architecture(self, device: int) -> str:
        """The device's ``gfx`` architecture (``gcnArchName`` without its feature suffixes)."""
        if self.properties is None:
            raise NaiadError("libamdhip64 has no hipGetDeviceProperties")
        buffer = ctypes.create_string_buffer(PROPERTIES_BYTES)
        code = self.properties(buffer, device)
        if code:
            raise hip_error(self, code, "hipGetDeviceProperties")
        found = re.search(rb"gfx[0-9a-f]+(?=[:\0])", buffer.raw)
        if found is None:
            raise NaiadError(f"hip:{device} reports no gfx architecture name")
        return found.group(0).decode()


def hip_error(hip: LibHIP, code: int, call: str, doing: str = "", detail: str = "") -> HIPError:
    name = (hip.hipGetErrorName(code) or b"").decode() or f"hipError {code}"
    text = (hip.hipGetErrorString(code) or b"").decode()
    return HIPError(call_failed(call, doing, f"{name} ({code}): {text}", _HINTS.get(code), detail), code)


def find_libhip() -> str | None:
    from naiad.backends.hip.linker import rocm_path

    candidate = os.path.join(rocm_path(), "lib", "libamdhip64.so")
    if os.path.isfile(candidate):
        return candidate
    return ctypes.util.find_library("amdhip64")


def open_libhip() -> Any:
    """The loaded library, or None."""
    path = find_libhip()
    if path is None:
        return None
    try:
        return ctypes.CDLL(path)
    except OSError:
        return None
