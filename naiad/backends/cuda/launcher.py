"""The NVIDIA backend's kernel launcher: packing a launch's arguments and calling
``cuLaunchKernelEx``.

Triton's NVIDIA driver compiles a C launcher per signature; here a launch packs its arguments
with a Python function generated once per signature (one ``struct.pack_into`` into one buffer:
the launch configuration, the kernelParams pointer table and the 8-byte slots it points to) and
calls ``cuLaunchKernelEx`` directly.  It is apart from the driver (`naiad.backends.cuda.driver`),
which makes one per kernel with ``make_launcher``, because the launch is the hot path and its
own job; it reaches devices and libcuda only through the driver it is given.
"""

from __future__ import annotations

import ctypes
import struct
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

from naiad.backends.cuda.argument_memory import locate
from naiad.backends.cuda.tensor_map_encoding import (ARITHMETIC, MAP_BYTES as _MAP_BYTES, TensorMap,
                                                     TensorMapEncoder, wrapped)
from naiad.backends.driver import StaleLaunch, bf16_bits, slot_format
from naiad.errors import NaiadError
from naiad.runtime.native_code import address_of
from naiad.runtime.slots import path_expression, runtime_slots
from naiad.runtime.torch_modes import outside_modes

if TYPE_CHECKING:
    from naiad.backends.cuda.driver import CUDADriver

def kernel_slots(signature: Any) -> list[tuple[str, Any, str]]:
    """(name, type, Python expression reading it from ``args``) of each kernel parameter, in
    order (`naiad.runtime.slots.runtime_slots`)."""
    return [(name, ty, path_expression(path)) for name, ty, path in runtime_slots(signature)]


#: CUlaunchConfig (cuda.h): grid and block dimensions, shared bytes, stream, no attributes;
#: padded to 64 bytes, where the kernelParams pointer table starts.
LAUNCH_CONFIG = struct.Struct("<7I4xQQI4x8x")


class CUDALauncher:
    """Launches one compiled kernel through cuLaunchKernelEx (4 arguments: through ctypes each
    costs time, and cuLaunchKernel takes 11).

    ``pack(args, device, grid_x, grid_y, grid_z, stream)`` is generated once per signature: it
    returns one buffer holding the launch configuration (`LAUNCH_CONFIG`), then the n parameter
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
        self.signature = signature
        self.slots = kernel_slots(signature)
        maps = [TensorMap.from_json(m) for m in metadata.get("tensor_maps") or ()]
        #: The tensor maps the kernel takes after its arguments (`tensor_map_encoding`).
        self.maps = TensorMapEncoder(driver.cuda.lib, self.name, maps) if maps else None
        n = len(self.slots) + len(maps)
        self.struct = struct.Struct(LAUNCH_CONFIG.format + f"{n}Q"
                                    + "".join(slot_format(ty, self.name, "CUDA") for _, ty, _ in self.slots)
                                    + f"{_MAP_BYTES}s" * len(maps))
        self._launch = driver.cuda.cuLaunchKernelEx
        self.pack = outside_modes(self._build_packer())

    def _build_packer(self) -> Callable[[Sequence[Any], int], Any]:
        maps = self.maps.maps if self.maps is not None else []
        n, table = len(self.slots) + len(maps), LAUNCH_CONFIG.size
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
        address, owner = locate(value, self.driver)
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
        code = self._launch(base, function, base + LAUNCH_CONFIG.size, None)
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
        driver, addressof, table = self.driver, ctypes.addressof, LAUNCH_CONFIG.size
        checked, current = driver.get_current_device(), driver.device_and_stream

        def run(grid: tuple, args: Sequence[Any]) -> None:
            grid_x, grid_y, grid_z = grid
            if grid_x * grid_y * grid_z > 0:
                device, stream = current()
                if device != checked:
                    raise StaleLaunch(f"{self.name} was prepared on cuda:{checked}, cuda:{device} "
                                      f"is current")
                if driver.thread.active != device:
                    driver.activate()
                buffer = pack(args, device, grid_x, grid_y, grid_z, stream)
                base = addressof(buffer)
                code = launch(base, function, base + table, None)
                if code:
                    raise self.driver.launch_error(code, self.name, function, grid, block, shared)
        return run

    def native_launch(self, module: Any, function: Any) -> "CUDANativeLaunch | None":
        """The warm launch as native code (`naiad.runtime.native_entry.NativeLaunch`), made, as
        `direct`'s, right after a checked launch on the current device; None for kernels that
        take tensor maps (encoded per launch), over a stand-in libcuda, or before torch runs
        CUDA (whose current device and stream it reads)."""
        torch = self.driver.torch_running()
        if self.maps is not None or torch is None or not isinstance(self._launch, ctypes._CFuncPtr) \
                or any(len(path) != 1 for _, _, path in runtime_slots(self.signature)):
            return None
        return CUDANativeLaunch(self, torch, function, self.driver.get_current_device())


class CUDANativeLaunch:
    """`CUDALauncher.native_launch`: on the device it was made for (else the Python path, which
    activates the context or names the stale argument), with that thread's context active,
    on torch's current stream: one ``cuLaunchKernelEx`` with the GIL released."""

    def __init__(self, launcher: CUDALauncher, torch: Any, function: Any, device: int):
        self.launcher, self.function, self.device = launcher, function, device
        self.get_device, self.get_stream = torch._C._cuda_getDevice, torch._C._cuda_getCurrentRawStream
        self.slots = [(path[0], ty) for _, ty, path in runtime_slots(launcher.signature)]

    def emit(self, f: Any, slots: str, gx: str, gy: str, gz: str, not_here: str) -> str:
        launcher = self.launcher
        overflow = f.value("alloca i32")
        current = f.call_object(f.object(self.get_device), [], not_here)
        device = f.capi("PyLong_AsLongLongAndOverflow", current, overflow)
        f.decref(current)
        f.unless(f.value(f"icmp eq i64 {device}, {self.device}"), not_here)
        active = f.capi("PyObject_GetAttr", f.object(launcher.driver.thread), f.object(sys.intern("active")))
        f.checked(active, not_here)
        same = f.same(active, f.object(self.device))
        f.decref(active)
        f.unless(same, not_here)
        stream_object = f.call_object(f.object(self.get_stream), [f.object(self.device)], not_here)
        stream = f.capi("PyLong_AsUnsignedLongLong", stream_object)
        f.decref(stream_object)
        config = f.value(f"alloca [{LAUNCH_CONFIG.size // 8} x i64]")
        for word in range(LAUNCH_CONFIG.size // 8):
            f(f"store i64 0, ptr {f.value(f'getelementptr i64, ptr {config}, i64 {word}')}")
        dims = [f.value(f"trunc i64 {d} to i32") for d in (gx, gy, gz)]
        for offset, value in enumerate(dims + [str(launcher.block), "1", "1", str(launcher.shared)]):
            f(f"store i32 {value}, ptr {f.value(f'getelementptr i32, ptr {config}, i64 {offset}')}")
        f(f"store i64 {stream}, ptr {f.value(f'getelementptr i64, ptr {config}, i64 4')}")
        table = f.value(f"alloca [{max(1, len(self.slots))} x ptr]")
        for k in range(len(self.slots)):
            slot = f.value(f"getelementptr i64, ptr {slots}, i64 {k}")
            f(f"store ptr {slot}, ptr {f.value(f'getelementptr ptr, ptr {table}, i64 {k}')}")
        state = f.capi("PyEval_SaveThread")
        code = f.value(f"call i32 inttoptr (i64 {address_of(launcher._launch)} to ptr)(ptr {config}, "
                       f"ptr inttoptr (i64 {int(self.function)} to ptr), ptr {table}, ptr null)")
        f.capi("PyEval_RestoreThread", state)
        return f.value(f"zext i32 {code} to i64")

    def error(self, code: int, grid: tuple[int, int, int]) -> None:
        launcher = self.launcher
        raise launcher.driver.launch_error(code, launcher.name, self.function, grid, launcher.block,
                                           launcher.shared)


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
