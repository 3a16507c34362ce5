"""Functions compiled CPU kernels call back into: device_print, device_assert, bounds errors,
and a monotonic clock for ``tl.atomic_poll``'s timeout.

Kernels reach them as external symbols (``naiad_print``, ``naiad_assert_fail``,
``naiad_out_of_bounds``, ``naiad_clock_ns``) registered with LLVM once per process.  Printing
holds the GIL for each call, so one program's lines come out in order.  Failures are recorded as they happen; the
launcher raises them as Python exceptions once the grid has finished, naming the kernel, the
source line and what went wrong.  (Two launches running at the same moment from different
Python threads share the record.)
"""

from __future__ import annotations

import ctypes
import struct
import sys
import threading
import time
from typing import Any

from naiad.codegen.print_lines import index_width, print_line
from naiad.errors import NaiadError

#: Value kinds passed to naiad_print (bits travel in an int64).
KIND_SIGNED, KIND_UNSIGNED, KIND_FLOAT32, KIND_FLOAT64, KIND_FLOAT16, KIND_BFLOAT16, KIND_POINTER = range(7)


class DeviceAssertionError(NaiadError, AssertionError):
    """A ``tl.device_assert`` (or ``assert``) failed in a kernel running on the CPU."""


class OutOfBoundsError(NaiadError, IndexError):
    """A load or store checked for bounds (``bounds_check``) touched memory outside every buffer passed to the kernel."""


_lock = threading.Lock()
_reports: list[tuple[str, tuple]] = []


def _decode(kind: int, bits: int) -> Any:
    if kind in (KIND_SIGNED, KIND_POINTER):
        return bits
    if kind == KIND_UNSIGNED:
        return bits & 0xFFFFFFFFFFFFFFFF
    if kind == KIND_FLOAT64:
        return struct.unpack("<d", struct.pack("<q", bits))[0]
    if kind == KIND_FLOAT32:
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    if kind == KIND_FLOAT16:
        return struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]
    return struct.unpack("<f", struct.pack("<I", (bits & 0xFFFF) << 16))[0]


def _format(value: Any, kind: int, width: int, hexadecimal: bool) -> str:
    """One value as Triton's GPU printf shows it: %d/%u, %f (6 decimals), %a for hex floats,
    zero-padded %x of the type's width for hex integers, 0x... for pointers."""
    if kind == KIND_POINTER:
        return f"0x{value & 0xFFFFFFFFFFFFFFFF:x}"
    if isinstance(value, float):
        return value.hex() if hexadecimal else f"{value:.6f}"
    if hexadecimal:
        return f"0x{value & ((1 << width) - 1):0{max(1, width // 4)}x}"
    return f"{value}"


def _print(prefix: bytes, x: int, y: int, z: int, index: int, shape: bytes, operand: int,
           kind: int, bits: int, flags: int) -> None:
    """One line of device_print.  ``shape`` is None for a print without values ("64,128", ""
    for a scalar, otherwise), ``index`` the element's flat index in it; ``flags`` holds hex
    (bit 0) and the value's bit width (bits 1...)."""
    pid = (str(x), str(y), str(z))
    text = prefix.decode(errors="replace")
    if shape is None:
        sys.stdout.write(print_line(pid, text))
        return
    value = _format(_decode(kind, bits), kind, flags >> 1, bool(flags & 1))
    dims = [int(d) for d in shape.decode().split(",")] if shape else []
    indices = []
    for dim in reversed(dims):
        index, i = divmod(index, dim)
        indices.append(f"{i:>{index_width(dim)}}")
    sys.stdout.write(print_line(pid, text, value, indices[::-1], operand if operand >= 0 else None))


def _assert_fail(message: bytes, file: bytes, line: int, x: int, y: int, z: int) -> None:
    with _lock:
        _reports.append(("assert", (message.decode(errors="replace"), file.decode(errors="replace"),
                                    line, (x, y, z))))


def _out_of_bounds(access: int, address: int, x: int, y: int, z: int) -> None:
    with _lock:
        _reports.append(("bounds", (access, address, (x, y, z))))


PRINT = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32,
                         ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32,
                         ctypes.c_int64, ctypes.c_int32)(_print)
ASSERT_FAIL = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32,
                               ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)(_assert_fail)
OUT_OF_BOUNDS = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int64, ctypes.c_int32,
                                 ctypes.c_int32, ctypes.c_int32)(_out_of_bounds)

#: Nanoseconds of a monotonic clock (Python's, so that it is the same on every platform).
CLOCK_NS = ctypes.CFUNCTYPE(ctypes.c_int64)(time.perf_counter_ns)

_registered = False


def register_symbols() -> None:
    """Make the callbacks visible to LLVM's loader (once per process)."""
    global _registered
    if _registered:
        return
    import llvmlite.binding as llvm

    for name, fn in (("naiad_print", PRINT), ("naiad_assert_fail", ASSERT_FAIL),
                     ("naiad_out_of_bounds", OUT_OF_BOUNDS), ("naiad_clock_ns", CLOCK_NS)):
        llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
    _registered = True


def pending_reports() -> list:
    """The list reports are appended to (the warm launch path tests it without a call)."""
    return _reports


def has_reports() -> bool:
    """Whether a launch left a report (a cheap check before `raise_reports`)."""
    return bool(_reports)


def take_reports() -> list[tuple[str, tuple]]:
    with _lock:
        reports = list(_reports)
        _reports.clear()
    return reports


def raise_reports(kernel: str, metadata: dict, arguments: list[tuple]) -> None:
    """Raise the first failure the last launch reported, if any.

    ``arguments``: (runtime argument index, name, start address, end address, element size) of
    each pointer argument.
    """
    reports = take_reports()
    if not reports:
        return
    kind, details = reports[0]
    more = f" ({len(reports) - 1} more failures)" if len(reports) > 1 else ""
    if kind == "assert":
        message, file, line, pid = details
        raise DeviceAssertionError(f"device assertion failed in kernel '{kernel}' at {file}:{line}, "
                                   f"program {pid}: {message}{more}")
    access, address, pid = details
    info = metadata["debug_accesses"][access]
    raise OutOfBoundsError(f"out-of-bounds {info['kind']} in kernel '{kernel}' at "
                           f"{info['file']}:{info['line']}, program {pid}: "
                           f"{_describe_address(address, info, arguments)}{more} -- fix: mask the "
                           f"{info['kind']} (mask=offsets < n) or correct the offsets")


def _describe_address(address: int, info: dict, arguments: list[tuple]) -> str:
    named = [a for a in arguments if a[0] == info.get("argument")]
    candidates = named or arguments
    if not candidates:
        return f"address 0x{address:x} is outside every buffer"
    _, name, start, end, size = min(candidates, key=lambda a: min(abs(address - a[2]),
                                                                  abs(address - a[3])))
    offset = (address - start) // max(size, 1)
    length = (end - start) // max(size, 1)
    return (f"pointer argument '{name}' at element offset {offset}, outside its buffer of "
            f"{length} elements")
