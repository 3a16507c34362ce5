"""The AMD backend's driver: for now it only says why it cannot run kernels here.  Compiling for
AMD GPUs needs no driver (``naiad compile --target hip:gfx942``); launching through
libamdhip64 (``hipModuleLoadData``, ``hipModuleLaunchKernel``) is the part of the backend still
to be written, so the backend stays inactive even where ROCm is installed, and says so."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any, NoReturn

from naiad.backends.compiler import GPUTarget
from naiad.backends.driver import DriverBase
from naiad.errors import NaiadError


def _find_libamdhip64() -> str | None:
    from naiad.backends.hip.linker import rocm_path

    candidate = os.path.join(rocm_path(), "lib", "libamdhip64.so")
    if os.path.isfile(candidate):
        return candidate
    return ctypes.util.find_library("amdhip64")


class HIPDriver(DriverBase):
    device_types = ("cuda",)

    @classmethod
    def is_active(cls) -> bool:
        return False

    @classmethod
    def why_inactive(cls) -> str:
        found = _find_libamdhip64()
        if found is None:
            return "no libamdhip64 found (no ROCm; compiling with --target hip:<gfx arch> works)"
        return (f"launching on AMD GPUs is not written yet ({found} found); compiling with "
                f"--target hip:<gfx arch> works")

    def __init__(self) -> None:
        raise NaiadError(f"the hip backend cannot run kernels on this machine: {self.why_inactive()}")

    def _inactive(self) -> NoReturn:                   # pragma: no cover  (never constructed)
        raise NaiadError(self.why_inactive())

    def get_current_target(self) -> GPUTarget:          # pragma: no cover
        self._inactive()

    def get_current_device(self) -> int:                # pragma: no cover
        self._inactive()

    def set_current_device(self, device: int) -> None:  # pragma: no cover
        self._inactive()

    def get_current_stream(self, device: int | None = None) -> int:   # pragma: no cover
        self._inactive()

    def get_benchmarker(self) -> Any:                   # pragma: no cover
        self._inactive()

    def load_binary(self, name: str, binary: bytes, metadata: Any, device: int) -> tuple:  # pragma: no cover
        self._inactive()

    def make_launcher(self, signature: Any, metadata: Any) -> Any:   # pragma: no cover
        self._inactive()

    def unload_module(self, module: Any) -> None:       # pragma: no cover
        self._inactive()

    def get_device_properties(self, device: int) -> dict[str, Any]:  # pragma: no cover
        self._inactive()
