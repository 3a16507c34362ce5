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
from typing import TYPE_CHECKING, Any, Callable, Sequence

from naiad.backends.driver import StaleLaunch, bf16_bits, slot_format
from naiad.errors import NaiadError
from naiad.runtime.native_code import address_of
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


    #: An int in a pointer position is a device address already (the JIT's warm path passes
    #: torch tensors' addresses, read once).
    accepts_addresses = True

    def direct(self, module: Any, function: Any) -> Callable[[tuple, Sequence[Any]], None]:
        """The warm launch path's launcher: ``run(grid, args)`` on the current stream without
        hooks, made right after a checked launch on the current device; from another current
        device it raises `StaleLaunch` (the full path loads the kernel there)."""
        driver, checked = self.driver, self.driver.get_current_device()

        def run(grid: tuple, args: Sequence[Any]) -> None:
            device = driver.get_current_device()
            if device != checked:
                raise StaleLaunch(f"{self.name} was prepared on hip:{checked}, hip:{device} is current")
            self(*grid, driver.get_current_stream(device), function, None, None, None, None, *args)
        return run

    def native_launch(self, module: Any, function: Any) -> "HIPNativeLaunch | None":
        """The warm launch as native code (`naiad.runtime.native_entry.NativeLaunch`); None for
        tuple arguments or over a library stand-in that is not C."""
        if not isinstance(self.driver.hip.hipModuleLaunchKernel, ctypes._CFuncPtr) or \
                any(len(path) != 1 for _, _, path in self.slots):
            return None
        return HIPNativeLaunch(self, function, self.driver.get_current_device())


class HIPNativeLaunch:
    """`HIPLauncher.native_launch`: on the device it was made for (else the Python path), on
    torch's current stream when a ROCm torch runs the GPUs (else the null stream), one
    ``hipModuleLaunchKernel`` with the GIL released."""

    def __init__(self, launcher: HIPLauncher, function: Any, device: int):
        self.launcher, self.function, self.device = launcher, function, device
        self.slots = [(path[0], ty) for _, ty, path in launcher.slots]
        self.torch = launcher.driver.torch_running()

    def emit(self, f: Any, slots: str, gx: str, gy: str, gz: str, not_here: str) -> str:
        launcher, overflow = self.launcher, f.value("alloca i32")
        if self.torch is not None:
            current = f.call_object(f.object(self.torch._C._cuda_getDevice), [], not_here)
        else:
            current = f.capi("PyObject_GetAttr", f.object(launcher.driver.thread),
                             f.object(sys.intern("device")))
            f.checked(current, not_here)
        device = f.capi("PyLong_AsLongLongAndOverflow", current, overflow)
        f.decref(current)
        f.unless(f.value(f"icmp eq i64 {device}, {self.device}"), not_here)
        stream = "0"
        if self.torch is not None:
            stream_object = f.call_object(f.object(self.torch._C._cuda_getCurrentRawStream),
                                          [f.object(self.device)], not_here)
            stream = f.capi("PyLong_AsUnsignedLongLong", stream_object)
            f.decref(stream_object)
        table = f.value(f"alloca [{max(1, len(self.slots))} x ptr]")
        for k in range(len(self.slots)):
            slot = f.value(f"getelementptr i64, ptr {slots}, i64 {k}")
            f(f"store ptr {slot}, ptr {f.value(f'getelementptr ptr, ptr {table}, i64 {k}')}")
        dims = [f.value(f"trunc i64 {d} to i32") for d in (gx, gy, gz)]
        state = f.capi("PyEval_SaveThread")
        code = f.value(
            f"call i32 inttoptr (i64 {address_of(launcher.driver.hip.hipModuleLaunchKernel)} to ptr)("
            f"ptr inttoptr (i64 {int(self.function)} to ptr), i32 {dims[0]}, i32 {dims[1]}, i32 {dims[2]}, "
            f"i32 {launcher.block}, i32 1, i32 1, i32 {launcher.shared}, ptr inttoptr (i64 {stream} to ptr), "
            f"ptr {table}, ptr null)")
        f.capi("PyEval_RestoreThread", state)
        return f.value(f"zext i32 {code} to i64")

    def error(self, code: int, grid: tuple[int, int, int]) -> None:
        from naiad.backends.hip.libhip import hip_error

        launcher = self.launcher
        raise hip_error(launcher.driver.hip, code, "hipModuleLaunchKernel",
                        f"launching {launcher.name} (grid {grid}, {launcher.block} threads per block, "
                        f"{launcher.shared} bytes of LDS)")


def _argument(args: Any, path: tuple) -> Any:
    value = args[path[0]]
    for step in path[1:]:
        value = getattr(value, step) if isinstance(step, str) else value[step]
    return value
