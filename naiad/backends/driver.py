"""The driver half of the backend contract: devices, streams, loading binaries, launching.

Exactly one concrete subclass of `DriverBase` lives in a backend's ``driver`` module.  The core
instantiates it with no arguments, once per process, the first time the backend is chosen.

Triton's drivers need torch (``GPUDriver`` binds torch.cuda) and a C compiler (their launcher is
generated C).  Here nothing in the contract needs either: device and stream queries are methods
the driver implements however it likes (ctypes, a vendor's Python bindings), and torch appears
only in `DriverBase.get_active_torch_device`, which may return None.
"""

from __future__ import annotations

import struct
from abc import ABCMeta, abstractmethod
from typing import Any, Callable, ClassVar, Protocol, Sequence

from naiad.backends.compiler import GPUTarget
from naiad.errors import NaiadError


#: The C type of each scalar kernel-argument type (bf16 travels as its 16 bits).
C_TYPES = {
    "i1": "bool", "u1": "bool", "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t",
    "u16": "uint16_t", "i32": "int32_t", "u32": "uint32_t", "i64": "int64_t", "u64": "uint64_t",
    "fp16": "_Float16", "bf16": "uint16_t", "fp32": "float", "fp64": "double",
}


#: Scalar argument type -> struct format of its 8-byte slot in a GPU launch's parameters: the
#: value in its first bytes, as wide as the kernel's parameter (LLVM gives i8 an 8-bit one).
SLOT_FORMATS = {
    "i1": "?7x", "u1": "?7x", "i8": "b7x", "u8": "B7x", "i16": "h6x", "u16": "H6x", "i32": "i4x",
    "u32": "I4x", "i64": "q", "u64": "Q", "fp16": "e6x", "bf16": "H6x", "fp32": "f4x", "fp64": "d",
}


def slot_format(ty: Any, kernel: str, target: str) -> str:
    """The struct format of a parameter of type ``ty`` (pointers: an 8-byte address); a type
    no launch can pass is an error naming the kernel and the ``target`` ("CUDA", "AMD GPU")."""
    if isinstance(ty, str) and ty.startswith("*"):
        return "Q"
    try:
        return SLOT_FORMATS[ty]
    except (KeyError, TypeError):
        raise NaiadError(f"{kernel + ': ' if kernel else ''}arguments of type {ty} cannot be "
                         f"passed to {target} kernels (pointers and {', '.join(SLOT_FORMATS)} can)") from None


class Benchmarker(Protocol):
    """Times a callable: ``bench(kernel_call, quantiles=[0.5, 0.2, 0.8]) -> [ms, ...]``."""

    def __call__(self, kernel_call: Callable[[], Any], *, quantiles: Sequence[float],
                 **kwargs: Any) -> Sequence[float]: ...


class Launcher(Protocol):
    """What `DriverBase.make_launcher` returns; called once per launch.

    ``launcher(grid_x, grid_y, grid_z, stream, function, packed_metadata, launch_metadata,
    enter_hook, exit_hook, *kernel_args)``: Triton's calling convention.  ``kernel_args`` still
    contain the constexpr arguments; the launcher drops them.
    """

    def __call__(self, grid_x: int, grid_y: int, grid_z: int, stream: int, function: Any,
                 packed_metadata: tuple, launch_metadata: Any, enter_hook: Any, exit_hook: Any,
                 *kernel_args: Any) -> None: ...


class StaleLaunch(Exception):
    """Raised by a launcher's optional warm path (``launcher.direct(module, function)``, see
    `naiad.runtime.jit`) when what it was made for no longer holds -- the CUDA one's: another
    device is current.  The JIT then takes the full launch path, which loads and prepares the
    kernel again or says which argument is wrong."""


class DriverBase(metaclass=ABCMeta):
    """A backend's runtime.

    Selection (`naiad.backends.selection`) asks `is_active` and `device_types`; the JIT asks
    `get_current_target`, `get_current_device` and `get_current_stream` at every launch; the
    loader calls `load_binary` once per compiled kernel and `make_launcher` once per kernel;
    the autotuner and ``naiad.testing.do_bench`` call `get_benchmarker`.
    """

    #: The memory kinds whose arrays this driver launches on, named as torch names device
    #: types: ("cpu",) for host memory, ("cuda",) for NVIDIA device memory.  When no backend is
    #: named, the device of a kernel's array arguments picks the backend that lists it.  Required,
    #: as a tuple of string literals on one line (``device_types = ("cpu",)``): selection reads
    #: it from the file without importing the backend, so a launch never imports (or waits for)
    #: a backend that runs elsewhere.
    device_types: ClassVar[tuple[str, ...]]
    #: Memory kinds its kernels can also take when the backend is chosen by name
    #: (``naiad.set_backend``, ``NAIAD_DEFAULT_BACKEND``) without claiming them when a backend
    #: is picked by the arguments' device: an OpenCL driver with shared virtual memory runs
    #: on host arrays, while numpy arrays still go to the cpu backend by default.
    guest_device_types: ClassVar[tuple[str, ...]] = ()
    #: The most programs a launch may have along each grid axis (x, y, z).  The core refuses
    #: a larger (or negative) grid dimension with a `naiad.errors.LaunchError` before the
    #: launcher runs.  The default is CUDA's: 2**31 - 1, 65535, 65535.
    max_grid: ClassVar[tuple[int, int, int]] = (2**31 - 1, 65535, 65535)
    #: The most programs one launch may have in all (the product of the grid), or None when
    #: only the per-axis limits apply.
    max_programs: ClassVar[int | None] = None

    @classmethod
    @abstractmethod
    def is_active(cls) -> bool:
        """True if this driver can run kernels on this machine now.

        Called for every discovered backend when a backend is chosen and by ``naiad backends``:
        keep it cheap.  An exception counts as False and is shown as the reason.
        """

    @classmethod
    def why_inactive(cls) -> str:
        """One line for people saying why `is_active` is False (e.g. "libcuda.so.1 not found")."""
        return "its is_active() returned False"

    @abstractmethod
    def get_current_target(self) -> GPUTarget:
        """The target of the current device: the default target of ``compile()`` and the JIT."""

    @abstractmethod
    def get_current_device(self) -> int:
        """Index of the current device (0 for a driver with one device)."""

    @abstractmethod
    def set_current_device(self, device: int) -> None:
        """Make ``device`` current for this thread."""

    @abstractmethod
    def get_current_stream(self, device: int | None = None) -> int:
        """The raw handle of the stream kernels launch on (0 where there are no streams)."""

    #: The C type of a pointer argument in ahead-of-time headers (`map_python_to_cpp_type`).
    pointer_c_type: ClassVar[str] = "void*"

    def map_python_to_cpp_type(self, ty: str) -> str:
        """The C type of a Triton type string ("i32", "*fp16", "fp32") for ahead-of-time
        headers: `pointer_c_type` for pointers, `C_TYPES` for scalars.  Default (API 3)."""
        if ty.startswith("*"):
            return self.pointer_c_type
        try:
            return C_TYPES[ty]
        except KeyError:
            raise NaiadError(f"arguments of type {ty} have no C type (pointers and "
                             f"{', '.join(C_TYPES)} do)") from None

    @abstractmethod
    def get_benchmarker(self) -> Benchmarker:
        """The callable that times kernels for the autotuner and ``do_bench``."""

    @abstractmethod
    def load_binary(self, name: str, binary: bytes, metadata: Any, device: int) -> tuple:
        """Load a compiled kernel: ``(module, function, n_regs, n_spills, n_max_threads)``.

        ``binary`` is the output of the backend's `binary_ext` stage.  Raise
        ``naiad.errors.NaiadError`` subclasses with a clear message when resources run out.
        """

    @abstractmethod
    def unload_module(self, module: Any) -> None:
        """Release what `load_binary` loaded."""

    @abstractmethod
    def make_launcher(self, signature: dict[str, str], metadata: Any) -> Launcher:
        """A launcher for kernels of this signature (name -> Triton type string)."""

    @abstractmethod
    def get_device_properties(self, device: int) -> dict[str, Any]:
        """At least ``max_shared_mem`` (bytes; 0 where there is no shared memory) and ``multiprocessor_count``."""

    def get_active_torch_device(self) -> Any:
        """The ``torch.device`` user code should allocate on, or None when torch has no such device."""
        return None

    # -- Triton's driver conveniences, derived from the methods above --------------------------
    @property
    def utils(self) -> "DriverUtils":
        """``driver.utils.get_device_properties(i)``, where Triton code looks for it."""
        return DriverUtils(self)

    def get_device_interface(self) -> Any:
        """A ``torch.cuda``-like module for this device (``synchronize``, ``Event``); None here.

        Backends whose device torch knows return torch's module; the CPU returns a host clock."""
        return None

    def get_empty_cache_for_benchmark(self) -> Any:
        """A buffer larger than the device's last-level cache; `clear_cache` overwrites it so a
        benchmark starts cold.  Default: 256 MiB of host memory."""
        return bytearray(256 << 20)

    def clear_cache(self, cache: Any) -> None:
        """Overwrite `get_empty_cache_for_benchmark`'s buffer (torch tensors are zeroed in place)."""
        if hasattr(cache, "zero_"):
            cache.zero_()
        else:
            cache[:] = bytes(len(cache))


def sample_quantiles(sorted_times: Sequence[float], quantiles: Sequence[float]) -> list[float]:
    """The ``quantiles`` of benchmark samples (sorted), interpolated linearly between the two
    nearest samples as numpy's and torch's defaults do (Triton's ``do_bench`` uses torch's); one
    rule for every benchmarker and for `naiad.testing.do_bench`."""
    result = []
    for q in quantiles:
        position = q * (len(sorted_times) - 1)
        low = int(position)
        high = min(low + 1, len(sorted_times) - 1)
        result.append(sorted_times[low] + (sorted_times[high] - sorted_times[low]) * (position - low))
    return result


def call_failed(call: str, doing: str, described: str, hint: str | None, detail: str = "") -> str:
    """A failed driver call's message: the call, what it was doing, the library's own words for
    the code (``described``), what to do when that is known, and ``detail`` (a log) last."""
    message = f"{call} failed{' ' + doing if doing else ''}: {described}"
    if hint:
        message += f" -- {hint}"
    if detail:
        message += f"\n{detail}"
    return message


def bind_functions(owner: Any, lib: Any, signatures: dict[str, tuple], restype: Any) -> None:
    """Set each of ``lib``'s functions named in ``signatures`` (name -> argument ctypes) as an
    attribute of ``owner``, typed: what a ctypes driver's library wrapper does first."""
    for name, argtypes in signatures.items():
        function = getattr(lib, name)
        function.argtypes, function.restype = argtypes, restype
        setattr(owner, name, function)


def time_with_events(kernel_call: Callable[[], Any], new_event: Callable[[], Any], stream: int,
                     flush: Callable[[], None], quantiles: Sequence[float] | None, warmup: float,
                     rep: float) -> list[float]:
    """Triton's ``do_bench`` with a GPU's events (``new_event()``: an object with
    ``record(stream)``, ``synchronize()`` and ``elapsed_time(later)`` in ms): about ``warmup`` ms
    of warm-up runs, then runs for about ``rep`` ms, each after ``flush()`` (emptying L2); the
    given quantiles, or every sample (sorted) when None."""
    kernel_call()
    start, end = new_event(), new_event()
    start.record(stream)
    for _ in range(5):
        flush()
        kernel_call()
    end.record(stream)
    end.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-4)
    pairs = [(new_event(), new_event()) for _ in range(max(5, min(10000, int(rep / estimate))))]
    for _ in range(max(1, int(warmup / estimate))):
        kernel_call()
    for first, last in pairs:
        flush()
        first.record(stream)
        kernel_call()
        last.record(stream)
    pairs[-1][1].synchronize()
    times = sorted(first.elapsed_time(last) for first, last in pairs)
    return times if quantiles is None else sample_quantiles(times, quantiles)


def bf16_bits(value: float) -> int:
    """A bf16 scalar argument's 16 bits, for launchers: the float rounded to f32, then to the
    nearest bf16 (ties to even); NaN stays NaN."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if value != value:
        return (bits >> 16) | 0x40
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


class DriverUtils:
    """Triton's ``driver.active.utils``: the driver's device queries under their Triton names."""

    def __init__(self, driver: DriverBase):
        self._driver = driver

    def get_device_properties(self, device: int) -> dict[str, Any]:
        return self._driver.get_device_properties(device)
