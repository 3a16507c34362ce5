"""The OpenCL backend's driver: SPIR-V programs built on the device, kernels launched on a
queue, host arrays passed through shared virtual memory.

A launch of grid (x, y, z) is an NDRange of ``(x * threads, y, z)`` work-items in work-groups of
``threads = num_warps * threads_per_warp`` (the size the kernel requires); it returns when the
kernel has finished, as the cpu backend's do, since the arrays are the host's.  A pointer
argument is any host array (numpy, torch CPU tensors, anything with ``__array_interface__`` or
DLPack on the CPU) or a `naiad_opencl.array.Array`; on a device with fine-grained system SVM
it is passed as it is, no copy.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Callable, Sequence

from naiad.backends.compiler import GPUTarget
from naiad.backends.driver import DriverBase, bf16_bits, sample_quantiles
from naiad.errors import NaiadError
from naiad.runtime.arrays import data_pointer
from naiad.runtime.slots import runtime_slots
from naiad_opencl import runtime
from naiad_opencl.builder import Builder

#: Kernel argument type string -> the numpy dtype of its value.
_SCALARS = {
    "i1": "uint8", "u1": "uint8", "i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16",
    "i32": "int32", "u32": "uint32", "i64": "int64", "u64": "uint64", "fp16": "float16",
    "bf16": "uint16", "fp32": "float32", "fp64": "float64",
}


def _scalar_type(ty: str) -> str:
    try:
        return _SCALARS[ty]
    except KeyError:
        raise NaiadError(f"arguments of type {ty} cannot be passed to OpenCL kernels") from None


class OpenCLLauncher:
    """Sets a launch's arguments and enqueues the NDRange; built once per compiled kernel."""

    def __init__(self, driver: "OpenCLDriver", signature: Any, metadata: dict):
        import numpy

        self.driver = driver
        self.name = metadata["name"]
        slots = runtime_slots(signature)
        self.names = [name for name, _, _ in slots]
        self.paths = [path for _, _, path in slots]
        self.types = [ty for _, ty, _ in slots]
        self.scalars = [None if ty.startswith("*") else numpy.dtype(_scalar_type(ty)) for ty in self.types]

    def _pointer(self, state: runtime.DeviceState, value: Any, name: str) -> Any:
        if value is None:
            return None
        own = getattr(value, "opencl_svm", None)
        if own is not None:
            return own
        address = value if isinstance(value, int) else data_pointer(value)
        if address is None:
            raise NaiadError(f"kernel {self.name!r}: argument {name!r} is a pointer parameter, and "
                             f"{type(value).__name__} is not an array -- fix: pass a numpy array, a "
                             f"torch CPU tensor or a naiad_opencl array")
        if not state.system_svm:
            raise NaiadError(f"kernel {self.name!r}: argument {name!r} is host memory, and the "
                             f"OpenCL device {state.device.name!r} cannot read host pointers (no "
                             f"fine-grained system SVM) -- fix: pass naiad_opencl.array(...) "
                             f"arrays, which live on the device")
        return _host_svm(address)

    def _scalar(self, i: int, value: Any) -> Any:
        import numpy

        if self.types[i] == "bf16":
            return numpy.uint16(bf16_bits(float(value)))
        return self.scalars[i].type(value)

    def __call__(self, grid_x: int, grid_y: int, grid_z: int, stream: int, function: Any,
                 packed_metadata: tuple, launch_metadata: Any, enter_hook: Any, exit_hook: Any,
                 *args: Any) -> None:
        """Triton's launcher convention; ``function`` is the kernel of `load_binary`."""
        import pyopencl as cl

        if grid_x * grid_y * grid_z <= 0:
            return
        num_warps, lanes, _ = packed_metadata
        state = self.driver.state()
        if enter_hook is not None:
            enter_hook(launch_metadata)
        for i, path in enumerate(self.paths):
            value = args[path[0]]
            for step in path[1:]:
                value = getattr(value, step) if isinstance(step, str) else value[step]
            if self.scalars[i] is None:
                function.set_arg(i, self._pointer(state, value, self.names[i]))
            else:
                function.set_arg(i, self._scalar(i, value))
        threads = num_warps * lanes
        cl.enqueue_nd_range_kernel(state.queue, function, (grid_x * threads, grid_y, grid_z),
                                   (threads, 1, 1))
        state.queue.finish()
        if exit_hook is not None:
            exit_hook(launch_metadata)


def _host_svm(address: int) -> Any:
    """A host address as a pyopencl SVM kernel argument (fine-grained system SVM: the kernel
    may read and write anywhere from it; the one-byte view only names the address)."""
    import ctypes

    import numpy
    import pyopencl as cl

    return cl.SVM(numpy.ctypeslib.as_array((ctypes.c_uint8 * 1).from_address(address)))


class OpenCLDriver(DriverBase):
    device_types = ("opencl",)
    guest_device_types = ("cpu",)
    max_grid = (2**31 - 1, 2**31 - 1, 2**31 - 1)
    max_programs = 2**31 - 1

    def __init__(self) -> None:
        self._device = runtime.chosen_index()
        self._states: dict[int, runtime.DeviceState] = {}
        self._builder = Builder()

    @classmethod
    def is_active(cls) -> bool:
        return bool(runtime.devices())

    @classmethod
    def why_inactive(cls) -> str:
        return runtime.why_none()

    def state(self, device: int | None = None) -> runtime.DeviceState:
        index = self._device if device is None else device
        state = self._states.get(index)
        if state is None:
            state = self._states[index] = runtime.DeviceState(runtime.devices()[index])
        return state

    def get_current_target(self) -> GPUTarget:
        device = runtime.devices()[self._device]
        return GPUTarget("opencl", runtime.arch(device), runtime.sub_group_size(device))

    def get_current_device(self) -> int:
        return self._device

    def set_current_device(self, device: int) -> None:
        count = len(runtime.devices())
        if not 0 <= device < count:
            raise NaiadError(f"OpenCL device {device} does not exist (there are {count})")
        self._device = device

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def map_python_to_cpp_type(self, ty: str) -> str:
        return "half" if ty == "fp16" else super().map_python_to_cpp_type(ty)     # OpenCL C

    def get_benchmarker(self) -> Callable:
        return benchmark

    def load_binary(self, name: str, binary: bytes, metadata: Any, device: int) -> tuple:
        """The SPIR-V built into the device's binary by the build worker (`builder`: a runtime
        that crashes on it takes only the worker down), then loaded here."""
        import pyopencl as cl

        state = self.state(device)
        index = self._device if device is None else device
        native = self._builder.device_binary(name, bytes(binary), index, state.device)
        program = cl.Program(state.context, [state.device], [native])
        with warnings.catch_warnings():              # the runtime's log, on success
            warnings.simplefilter("ignore", cl.CompilerWarning)
            program.build()
        kernel = cl.Kernel(program, name)
        return program, kernel, 0, 0, state.device.max_work_group_size

    def unload_module(self, module: Any) -> None:
        """pyopencl releases the program with its last reference."""

    def make_launcher(self, signature: Any, metadata: Any) -> OpenCLLauncher:
        return OpenCLLauncher(self, signature, metadata)

    def get_device_properties(self, device: int | None = None) -> dict[str, Any]:
        d = self.state(device).device
        return {"max_shared_mem": d.local_mem_size, "multiprocessor_count": d.max_compute_units,
                "warpSize": runtime.sub_group_size(d), "max_work_group_size": d.max_work_group_size,
                "name": d.name}

    def get_active_torch_device(self) -> Any:
        try:
            import torch
        except ImportError:
            return None
        return torch.device("cpu")


def benchmark(kernel_call: Callable[[], Any], *, quantiles: Sequence[float] | None = (0.5, 0.2, 0.8),
              warmup: float = 3, rep: float = 100.0, **kwargs: Any) -> list[float]:
    """Time ``kernel_call`` (ms; launches return when their kernel is done) over repeated runs
    for ~``rep`` ms: the given quantiles, or every sample (sorted) when ``quantiles`` is None."""
    for _ in range(max(1, min(int(warmup), 25))):
        kernel_call()
    start = time.perf_counter()
    kernel_call()
    estimate = max(time.perf_counter() - start, 1e-7)
    times = []
    for _ in range(max(5, min(10000, int(rep / 1000 / estimate)))):
        t0 = time.perf_counter()
        kernel_call()
        times.append((time.perf_counter() - t0) * 1000.0)
    times.sort()
    return times if quantiles is None else sample_quantiles(times, quantiles)
