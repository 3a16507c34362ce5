"""The CPU backend's driver: load object code in-process, run a grid on all cores through ctypes.

A kernel's object code exports ``naiad_grid(args, nx, ny, nz, first, last)``.  A launch packs
the arguments into 8-byte slots once, splits the programs into one contiguous share per thread,
and calls ``naiad_grid`` from each thread; ctypes releases the GIL during the call, so the
threads run in parallel and no Python runs per program.  A launch whose work is small runs on
the calling thread alone (`WorkEstimate`): handing programs to pool threads costs tens of
microseconds, more than a small kernel's whole run.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import os
import struct
import threading
import time
from typing import Any, Callable, Sequence

from naiad.backends.cpu.knobs import KNOBS
from naiad.backends.cpu.native_launch import CPUNativeLaunch
from naiad.backends.cpu.work_estimate import OPENMP_WORK_S, PARALLEL_WORK_S, WorkEstimate
from naiad.backends.compiler import GPUTarget
from naiad.backends.cpu import amx, openmp, runtime
from naiad.backends.cpu.target import host_target
from naiad.backends.driver import DriverBase, bf16_bits, sample_quantiles
from naiad.errors import NaiadError
from naiad.runtime.array_address import numpy_address
from naiad.runtime.arrays import data_pointer
from naiad.runtime.torch_modes import mode_switches, outside_modes
from naiad.runtime.slots import runtime_slots

_GRID_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                              ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)
_LAUNCH_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_char_p)

#: Kernel argument type string -> struct format of its 8-byte slot.
_SLOTS = {
    "i1": "B7x", "u1": "B7x", "i8": "b7x", "u8": "B7x", "i16": "h6x", "u16": "H6x", "i32": "i4x",
    "u32": "I4x", "i64": "q", "u64": "Q", "fp16": "e6x", "bf16": "H6x", "fp32": "f4x", "fp64": "d",
}
_POINTER = "Q"


class CPULauncher:
    """Packs a launch's arguments and runs the grid; built once per compiled kernel."""

    def __init__(self, name: str, signature: Sequence[tuple[str, str]], metadata: dict,
                 threads: int, pool: Callable[[], concurrent.futures.ThreadPoolExecutor]):
        self.name = name
        self.metadata = metadata
        self.bounds_check = bool(metadata.get("bounds_check"))
        slots = runtime_slots(signature)
        self.names = [name for name, _, _ in slots]
        self.types = [ty for _, ty, _ in slots]
        self.runtime = [path for _, _, path in slots]
        self.packer = struct.Struct("<" + "".join(_slot(ty) for ty in self.types))
        self.threads = threads
        self.pool = pool
        self.work = WorkEstimate()
        packer = None if self.bounds_check else self._build_packer()
        self._pack_fast = outside_modes(packer) if packer is not None else None
        #: Whether a launch may pass a numpy array's data address (an int) in its place
        #: (`JITFunction.run`'s warm path does, having read the address already).
        self.accepts_addresses = self._pack_fast is not None
        self._run = self._build_run() or self.launch_general

    def _packed_parts(self) -> list[str] | None:
        """Python expressions of each slot's value in ``args``, for the generated packers; None
        when an argument is reached through a tuple or a tensor descriptor."""
        if any(len(path) != 1 for path in self.runtime):
            return None
        parts = []
        for (index,), ty in zip(self.runtime, self.types):
            if ty.startswith("*"):       # an int: an address the warm launch path read already
                parts.append(f"(args[{index}] if type(args[{index}]) is int else _pointer(args[{index}]))")
            elif ty == "bf16":
                parts.append(f"_bf16(float(args[{index}]))")
            else:
                parts.append(f"args[{index}]")
        return parts

    def _generate(self, source: str, scope: dict, name: str = "pack") -> Callable[..., Any]:
        scope.update(_pointer=_pointer, _bf16=bf16_bits)
        exec(compile(source, f"<naiad launcher {self.name}>", "exec"), scope)
        return scope[name]

    def _build_packer(self) -> Callable[[Sequence[Any]], Any] | None:
        """A function made once for this signature that packs a launch's arguments into a new
        slot buffer without walking the signature (no per-launch dict or path lookups)."""
        parts = self._packed_parts()
        if parts is None:
            return None
        slots = (self.packer.size + 16) // 8
        source = (f"def pack(args):\n    buffer = _buffer()\n"
                  f"    _pack_into(buffer, 0{''.join(', ' + p for p in parts)})\n    return buffer\n")
        return self._generate(source, {"_buffer": ctypes.c_uint64 * slots,
                                       "_pack_into": self.packer.pack_into})

    def direct(self, module: Any, function: Any) -> Callable[[tuple, Sequence[Any]], None] | None:
        """The warm launch path's launcher: ``run(grid, args)`` launches without hooks, and on
        one thread through ``naiad_launch`` (one ctypes argument: header and slots packed into
        one bytes object); None where it does not apply (bounds checks, tuple arguments).
        Generated for the signature, as it runs at every launch."""
        parts = self._packed_parts()
        launch = getattr(module, "launch", None)
        if parts is None or self.bounds_check or launch is None:
            return None
        source = ("def pack(grid, args):\n"
                  "    nx, ny, nz = grid\n"
                  "    total = nx * ny * nz\n"
                  "    if total > 1 and _threads > 1:\n"
                  "        _general(nx, ny, nz, 0, _function, None, None, None, None, *args)\n"
                  "    elif total > 0:\n"
                  f"        _launch(_pack(nx, ny, nz, 0, total{''.join(', ' + p for p in parts)}))\n"
                  "        if _reports:\n"
                  "            _raise_reports(_name, _metadata, [])\n")
        return self._generate(source, {
            "_pack": struct.Struct("<5i4x" + self.packer.format[1:]).pack, "_launch": launch,
            "_threads": self.threads, "_general": self, "_function": function,
            "_reports": runtime.pending_reports(), "_raise_reports": runtime.raise_reports,
            "_name": self.name, "_metadata": self.metadata})

    def native_launch(self, module: Any, function: Any) -> "CPUNativeLaunch | None":
        """The warm launch as native code (`naiad.runtime.native_entry.NativeLaunch`): what
        `direct` does, for a launch that stays on the calling thread; None where `direct`
        does not apply."""
        launch = getattr(module, "launch", None)
        if self._packed_parts() is None or self.bounds_check or launch is None:
            return None
        return CPUNativeLaunch(self, launch, module.grid.address)

    def _build_run(self) -> Callable[..., None] | None:
        """Triton's launcher convention, generated for the signature: Inductor calls it for
        every kernel of a compiled graph, so a launch that stays on this thread (the work
        estimate says so) packs header and slots into one bytes object, read with torch's
        function modes off, and runs through the module's ``naiad_launch``: a few microseconds
        less than `launch_general`, which takes every other launch (a first one, one worth
        splitting, one of another module's ``function``).  None with bounds checks or tuple
        arguments."""
        parts = self._packed_parts()
        if parts is None or self.bounds_check:
            return None
        modes_on, modes_off = mode_switches()
        pack = f"_pack(grid_x, grid_y, grid_z, 0, total{''.join(', ' + p for p in parts)})"
        source = (
            "def run(grid_x, grid_y, grid_z, stream, function, packed_metadata, launch_metadata,\n"
            "        enter_hook, exit_hook, *args):\n"
            "    total = grid_x * grid_y * grid_z\n"
            "    launch = getattr(function, 'launch', None)\n"
            "    estimate = _work.program_s\n"
            "    if (launch is None or total <= 0 or total > 1 and _threads > 1\n"
            "            and (estimate is None or estimate * total >= _split_from)):\n"
            "        return _general(grid_x, grid_y, grid_z, stream, function, packed_metadata,\n"
            "                        launch_metadata, enter_hook, exit_hook, *args)\n"
            "    if enter_hook:\n"
            "        enter_hook(launch_metadata)\n"
            "    if _modes_on():\n"
            "        with _modes_off():\n"
            f"            header = {pack}\n"
            "    else:\n"
            f"        header = {pack}\n"
            "    start = _clock()\n"
            "    launch(header)\n"
            "    _work.observe(total, _clock() - start)\n"
            "    if _reports:\n"
            "        _raise_reports(_name, _metadata, [])\n"
            "    if exit_hook:\n"
            "        exit_hook(launch_metadata)\n")
        scope = {"_pack": struct.Struct("<5i4x" + self.packer.format[1:]).pack, "_work": self.work,
                 "_threads": self.threads, "_split_from": OPENMP_WORK_S, "_general": self.launch_general,
                 "_modes_on": modes_on, "_modes_off": modes_off, "_clock": time.perf_counter,
                 "_reports": runtime.pending_reports(), "_raise_reports": runtime.raise_reports,
                 "_name": self.name, "_metadata": self.metadata}
        return self._generate(source, scope, "run")

    def pack(self, args: Sequence[Any]) -> Any:
        """The argument slots of one launch (plus, with bounds checks, the arrays' address ranges)."""
        values = []
        for path, ty in zip(self.runtime, self.types):
            value = _argument(args, path)
            if ty.startswith("*"):
                pointer = data_pointer(value)
                value = 0 if value is None else pointer
            elif ty == "bf16":
                value = bf16_bits(float(value))
            values.append(value)
        ranges = self.ranges(args) if self.bounds_check else []
        buffer = ctypes.create_string_buffer(self.packer.size + 8 + 16 * len(ranges) + 8)
        self.packer.pack_into(buffer, 0, *values)
        if self.bounds_check:
            struct.pack_into(f"<q{2 * len(ranges)}Q", buffer, self.packer.size, len(ranges),
                             *[bound for r in ranges for bound in r[2:4]])
        return buffer, ranges

    def ranges(self, args: Sequence[Any]) -> list[tuple]:
        """(runtime index, name, start, end, element size) of every array argument."""
        out = []
        for position, (path, ty) in enumerate(zip(self.runtime, self.types)):
            array = _argument(args, path)
            if ty.startswith("*") and array is not None:
                start, end, size = array_extent(array)
                out.append((position, self.names[position], start, end, size))
        return out

    def __call__(self, *launch: Any) -> None:
        """Triton's launcher convention (`launch_general`'s parameters)."""
        self._run(*launch)

    def launch_general(self, grid_x: int, grid_y: int, grid_z: int, stream: int, function: Any,
                       packed_metadata: tuple, launch_metadata: Any, enter_hook: Any, exit_hook: Any,
                       *args: Any) -> None:
        """Triton's launcher convention; ``function`` is the grid function of `load_binary`.
        An empty hook chain (Naiad's knob default, passed on by Inductor) is not called."""
        total = grid_x * grid_y * grid_z
        if total <= 0:
            return
        if enter_hook:
            enter_hook(launch_metadata)
        if self._pack_fast is not None:
            buffer, ranges = self._pack_fast(args), ()
        else:
            buffer, ranges = self.pack(args)
        self.run_grid(function, ctypes.addressof(buffer), grid_x, grid_y, grid_z, total)
        if runtime.has_reports():
            runtime.raise_reports(self.name, self.metadata, list(ranges))
        if exit_hook:
            exit_hook(launch_metadata)


    def run_grid(self, function: Any, address: int, nx: int, ny: int, nz: int, total: int) -> None:
        """Programs ``[0, total)`` on this thread, or split across threads when their work is
        worth it (`WorkEstimate`): as one parallel region of the process's OpenMP runtime when
        one is loaded (`openmp.loaded_team`), else through Naiad's thread pool."""
        threads = min(self.threads, total)
        if threads <= 1:
            function(address, nx, ny, nz, 0, total)
            return
        first = 0
        if self.work.program_s is None:                    # a first slice, timed
            first = max(1, total // (4 * threads))
            start = time.perf_counter()
            function(address, nx, ny, nz, 0, first)
            self.work.observe(first, time.perf_counter() - start)
        # Below the lower threshold the launch stays here whatever runs splits; only above it
        # is the knob read and the runtime looked up (each costs microseconds a launch).
        team = None
        if self.work.parallel(total - first, OPENMP_WORK_S):
            team = openmp.loaded_team() if KNOBS.openmp else None
        if not self.work.parallel(total - first, PARALLEL_WORK_S if team is None else OPENMP_WORK_S):
            start = time.perf_counter()
            function(address, nx, ny, nz, first, total)
            self.work.observe(total - first, time.perf_counter() - start)
            return
        if team is not None:
            self.work.observe(*team.run(function, address, nx, ny, nz, first, total, threads))
            return
        bounds = [first + (total - first) * i // threads for i in range(threads + 1)]
        futures = [self.pool().submit(function, address, nx, ny, nz, bounds[i], bounds[i + 1])
                   for i in range(1, threads)]
        # Only this thread's own share is timed: the launch's wall time includes handing the
        # other shares to the pool, which would make small work look large and keep it split.
        start = time.perf_counter()
        function(address, nx, ny, nz, bounds[0], bounds[1])
        self.work.observe(bounds[1] - bounds[0], time.perf_counter() - start)
        for future in futures:
            future.result()


def _pointer(value: Any) -> int:
    """A pointer argument's slot: the array's address, 0 for None; the way to read it is
    remembered per type (`_address_reader`), as every launch reads it."""
    kind = type(value)
    if kind is int:                 # an address the warm launch path read already
        return value
    reader = _ADDRESS_READERS.get(kind)
    if reader is None:
        reader = _ADDRESS_READERS[kind] = _address_reader(kind)
    return reader(value)


def _address_reader(kind: type) -> Callable[[Any], int]:
    if kind is type(None):
        return lambda value: 0
    if _ndarray is not None and issubclass(kind, _ndarray):
        return numpy_address
    data_ptr = getattr(kind, "data_ptr", None)      # torch tensors: the unbound method
    if callable(data_ptr) and not isinstance(data_ptr, property):
        return data_ptr
    return data_pointer


_ADDRESS_READERS: dict[type, Callable[[Any], int]] = {}

try:
    from numpy import ndarray as _ndarray
except ImportError:        # pragma: no cover
    _ndarray = None


def _argument(args: Sequence[Any], path: tuple) -> Any:
    value = args[path[0]]
    for i in path[1:]:
        value = getattr(value, i) if isinstance(i, str) else value[i]
    return value


def array_extent(array: Any) -> tuple[int, int, int]:
    """(first byte, end byte, element size) of the memory an array argument may touch."""
    start = data_pointer(array)
    size = getattr(array, "itemsize", None) or array.element_size()
    interface = getattr(array, "__array_interface__", None)
    if interface is not None and interface.get("strides") is None:
        return start, start + array.nbytes, size
    shape = tuple(array.shape)
    strides = tuple(array.strides) if interface is not None else \
        tuple(s * size for s in array.stride())
    if any(d == 0 for d in shape):
        return start, start, size
    low = sum(s * (d - 1) for s, d in zip(strides, shape) if s < 0)
    high = sum(s * (d - 1) for s, d in zip(strides, shape) if s > 0)
    return start + low, start + high + size, size


def _slot(ty: str) -> str:
    if ty.startswith("*"):
        return _POINTER
    try:
        return _SLOTS[ty]
    except KeyError:
        raise NaiadError(f"arguments of type {ty} cannot be passed to CPU kernels") from None


@functools.lru_cache(maxsize=None)
def _cpu_count() -> int:
    """The processor count, read once (``os.cpu_count`` takes ~20 us in some containers, and
    the thread count is asked at every launch split across the pool)."""
    return os.cpu_count() or 1


_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _shared_pool(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    """One process-wide pool of worker threads (grown when more threads are asked for)."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or workers > _pool_size:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers),
                                                          thread_name_prefix="naiad-cpu")
            _pool_size = max(1, workers)
        return _pool


def _forget_pool_in_child() -> None:
    """A forked child has none of its parent's worker threads, but the pool's bookkeeping says
    idle workers wait: work handed to it would never run, and the launch would wait forever.
    The child makes its own pool at its first split launch."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


class LoadedObject:
    """An object file loaded into this process; keeps LLVM's execution engine alive."""

    def __init__(self, binary: bytes):
        from naiad.backends.cpu.target import host_target, new_target_machine
        from naiad.codegen.llvm_binding import native_target

        llvm = native_target()
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""),
                                                 new_target_machine(host_target().arch))
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(binary))
        self.engine.finalize_object()
        address = self.engine.get_function_address("naiad_grid")
        if not address:
            raise NaiadError("the CPU object code has no naiad_grid function")
        self.grid = _GRID_TYPE(address)
        self.grid.address = address         # for OpenMP regions, which call it natively
        #: ``naiad_launch(header and slots)`` (`CPULauncher.direct`); None in object code made
        #: before it existed (an override).  The grid function carries it too: a launcher of
        #: Triton's convention is handed only the function.
        address = self.engine.get_function_address("naiad_launch")
        self.launch = self.grid.launch = _LAUNCH_TYPE(address) if address else None


class CPUDriver(DriverBase):
    device_types = ("cpu",)
    #: ``naiad_grid`` takes each dimension and the range of programs as 32-bit ints.
    max_grid = (2**31 - 1, 2**31 - 1, 2**31 - 1)
    max_programs = 2**31 - 1

    def __init__(self) -> None:
        runtime.register_symbols()

    @classmethod
    def is_active(cls) -> bool:
        try:
            import llvmlite.binding  # noqa: F401
        except ImportError:
            return False
        return True

    @classmethod
    def why_inactive(cls) -> str:
        return "llvmlite cannot be imported (pip install llvmlite)"

    def get_current_target(self) -> GPUTarget:
        return host_target()

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        if device != 0:
            raise NaiadError(f"the CPU backend has one device (0), not {device}")

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_benchmarker(self) -> Callable:
        return benchmark

    def threads(self) -> int:
        return KNOBS.threads or _cpu_count()

    def _thread_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        return _shared_pool(self.threads() - 1)

    def load_binary(self, name: str, binary: bytes, metadata: Any, device: int) -> tuple:
        if metadata.get("amx"):
            amx.require_tiles(name)
        loaded = LoadedObject(binary)
        return loaded, loaded.grid, vector_registers(), 0, 1

    def unload_module(self, module: Any) -> None:
        """MCJIT frees the code with its engine, when ``module`` is garbage-collected."""

    def make_launcher(self, signature: Any, metadata: Any) -> CPULauncher:
        """``signature``: (name, Triton type string) for every parameter, constexprs included."""
        return CPULauncher(metadata["name"], signature, metadata, self.threads(), self._thread_pool)

    def get_device_properties(self, device: int | None = None) -> dict[str, Any]:
        """The host seen through Triton's GPU occupancy model (see docs/CPU.md): an "SM" is a
        worker thread, a warp is one program (warpSize 1), "shared memory" is the per-core L2
        cache that a program's scratch buffers (``metadata.shared``) should fit in, and a kernel
        uses every vector register (``n_regs``), with room for 32 resident programs per core."""
        return {"max_shared_mem": l2_cache_bytes(), "multiprocessor_count": self.threads(),
                "max_num_regs": 32 * vector_registers(), "warpSize": 1,
                "max_threads_per_sm": 32}

    def get_active_torch_device(self) -> Any:
        try:
            import torch
        except ImportError:
            return None
        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        return HostDeviceInterface

    def get_empty_cache_for_benchmark(self) -> Any:
        import numpy

        return numpy.empty(64 << 20, dtype=numpy.uint8)     # larger than a host's last-level cache

    def clear_cache(self, cache: Any) -> None:
        cache.fill(0)


def vector_registers() -> int:
    """Vector registers of the host ISA: 32 with AVX-512 or on AArch64, 16 otherwise."""
    from naiad.backends.cpu.target import host_features, vector_bytes

    return 32 if vector_bytes(host_features()) == 64 or _is_arm() else 16


def _is_arm() -> bool:
    import platform

    return platform.machine().lower() in ("arm64", "aarch64")


def l2_cache_bytes() -> int:
    """The L2 cache of CPU 0 from sysfs (Linux); 1 MiB where the system does not say."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index2/size") as f:
            text = f.read().strip().upper()
    except OSError:
        return 1 << 20
    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
    return int(text.rstrip("KM")) * scale


class HostEvent:
    """``torch.cuda.Event`` on the host: ``record()`` notes the time, ``elapsed_time`` in ms."""

    def __init__(self, enable_timing: bool = True, **kwargs: Any):
        self.time = 0.0

    def record(self, stream: Any = None) -> None:
        self.time = time.perf_counter()

    def synchronize(self) -> None:
        """Kernels finish before their launch returns: nothing to wait for."""

    def elapsed_time(self, end: "HostEvent") -> float:
        return (end.time - self.time) * 1000.0


class HostDeviceInterface:
    """What Triton code reaches through ``get_device_interface()`` (timing, synchronization)."""

    Event = HostEvent

    @staticmethod
    def synchronize(device: Any = None) -> None:
        """CPU launches are synchronous."""

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def device_count() -> int:
        return 1


def benchmark(kernel_call: Callable[[], Any], *, quantiles: Sequence[float] | None = (0.5, 0.2, 0.8),
              warmup: float = 3, rep: float = 100.0, **kwargs: Any) -> list[float]:
    """Time ``kernel_call`` on the host (ms) over repeated runs for ~``rep`` ms: the given
    quantiles, or every sample (sorted) when ``quantiles`` is None."""
    for _ in range(max(1, min(int(warmup), 25))):
        kernel_call()
    start = time.perf_counter()
    kernel_call()
    estimate = max(time.perf_counter() - start, 1e-7)
    runs = max(5, min(10000, int(rep / 1000 / estimate)))
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        kernel_call()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    if quantiles is None:
        return times
    return sample_quantiles(times, quantiles)
