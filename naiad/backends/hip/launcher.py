"""The AMD backend's kernel launcher: a launch's arguments packed into 8-byte slots with a
table of pointers to them (HIP's ``kernelParams``, the convention CUDA's launch has too), then
one ``hipModuleLaunchKernel``.

Pointer arguments are device addresses: torch tensors on the GPU (a ROCm build of torch calls
them "cuda" tensors), objects with ``__cuda_array_interface__`` (cupy on ROCm), ints, or None.
"""

from __future__ import annotations

import ctypes
import struct
import sys
from typing import TYPE_CHECKING, Any

from naiad.backends.driver import bf16_bits, slot_format
from naiad.errors import NaiadError
from naiad.runtime.slots import runtime_slots
from naiad.runtime.tensor_wrapper import TensorWrapper

if TYPE_CHECKING:
    from naiad.backends.hip.driver import HIPDriver


class HIPLauncher:
    """Launches one compiled kernel (Triton's launcher convention)."""

    def __init__(self, driver: HIPDriver, signature: Any, metadata: Any):
        self.driver = driver
        self.name = metadata["name"]
        self.block = int(metadata["num_warps"]) * int(metadata.get("warp_size", 64))
        self.shared = int(metadata.get("shared", 0))
        self.slots = runtime_slots(signature)
        self.struct = struct.Struct("<" + "".join(slot_format(ty, self.name, "AMD GPU")
                                                 for _, ty, _ in self.slots))

    def pack(self, args: Any) -> Any:
        """The parameter table (a pointer per slot) followed by the slots, in one buffer."""
        n = len(self.slots)
        buffer = (ctypes.c_uint64 * (2 * max(n, 1)))()
        base = ctypes.addressof(buffer)
        values = []
        for name, ty, path in self.slots:
            value = _argument(args, path)
            if ty.startswith("*"):
                value = self._address(name, value)
            elif ty == "bf16":
                value = bf16_bits(float(value))
            values.append(value)
        self.struct.pack_into(buffer, 8 * n, *values)
        for i in range(n):
            buffer[i] = base + 8 * (n + i)
        return buffer

    def _address(self, argument: str, value: Any) -> int:
        if value is None:
            return 0
        if type(value) is int:
            return value
        if isinstance(value, TensorWrapper):
            value = value.base
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(value, torch.Tensor):
            if not value.is_cuda:
                raise NaiadError(f"{self.name}: argument {argument} is on {value.device}, not the GPU: "
                                 f"move it with {argument}.cuda() / .to('cuda')")
            return value.data_ptr()
        interface = getattr(value, "__cuda_array_interface__", None)
        if interface is not None:
            return int(interface["data"][0])
        if hasattr(value, "__array_interface__"):
            raise NaiadError(f"{self.name}: argument {argument} is in host memory "
                             f"({type(value).__name__}): move it to the GPU first")
        raise NaiadError(f"{self.name}: argument {argument} ({type(value).__name__}) is not an array: "
                         f"pass a GPU tensor (torch on ROCm, cupy), a device address (int), or None")

    def __call__(self, grid_x: int, grid_y: int, grid_z: int, stream: int, function: Any,
                 packed_metadata: tuple, launch_metadata: Any, enter_hook: Any, exit_hook: Any,
                 *args: Any) -> None:
        if grid_x * grid_y * grid_z <= 0:
            return
        if enter_hook is not None:
            enter_hook(launch_metadata)
        buffer = self.pack(args)
        self.driver.hip("hipModuleLaunchKernel", function, grid_x, grid_y, grid_z, self.block, 1, 1,
                        self.shared, stream or None, ctypes.addressof(buffer), None,
                        doing=f"launching {self.name} (grid {(grid_x, grid_y, grid_z)}, {self.block} "
                              f"threads per block, {self.shared} bytes of LDS)")
        if exit_hook is not None:
            exit_hook(launch_metadata)


def _argument(args: Any, path: tuple) -> Any:
    value = args[path[0]]
    for step in path[1:]:
        value = getattr(value, step) if isinstance(step, str) else value[step]
    return value
