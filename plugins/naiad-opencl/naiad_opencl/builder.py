"""SPIR-V programs built into device binaries away from the user's process.

An OpenCL runtime compiles SPIR-V with its own compiler, in the calling process; a bug there
(Intel's CPU runtime had one on some integer kernels) crashes the process.  So programs are
built by a child process (`build_worker`), kept running for the next build; the parent loads
the device binary it returns, which needs no compiling.  A child that dies while building is
reported as an error naming the kernel, and the next build starts a new child; so is one that
takes longer than ``NAIAD_OPENCL_BUILD_TIMEOUT`` seconds (default 300: Intel's runtime was seen
spinning forever on malformed SPIR-V), which is stopped.  Device
binaries are kept on disk under Naiad's cache, by SPIR-V, device and driver, so a kernel is
built once per machine.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from naiad.errors import NaiadError
from naiad_opencl.knobs import KNOBS


class BuildError(NaiadError):
    """The device's compiler refused the program, or crashed on it."""


class Builder:
    """One build worker and the on-disk binaries; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: subprocess.Popen | None = None

    def device_binary(self, name: str, spv: bytes, index: int, device: Any) -> bytes:
        key = hashlib.sha256(spv + f"|{device.name}|{device.driver_version}|{device.version}".encode())
        path = _cache_folder() / f"{key.hexdigest()[:32]}.bin"
        if path.exists():
            return path.read_bytes()
        with self._lock:
            status, payload = self._request(name, spv, index, device)
        if status != 0:
            raise BuildError(f"the OpenCL device {device.name!r} could not build kernel {name!r} "
                             f"from its SPIR-V; the build log says:\n{payload.decode(errors='replace')}")
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(payload)
        os.replace(temporary, path)
        return payload

    def _request(self, name: str, spv: bytes, index: int, device: Any) -> tuple[int, bytes]:
        child = self._child
        if child is None or child.poll() is not None:
            child = self._child = subprocess.Popen([sys.executable, "-m", "naiad_opencl.build_worker"],
                                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        limit = build_timeout()
        watchdog = threading.Timer(limit, child.kill)
        watchdog.start()
        try:
            child.stdin.write(struct.pack("<IQ", index, len(spv)) + spv)
            child.stdin.flush()
            header = child.stdout.read(9)
            status, size = struct.unpack("<BQ", header)
            return status, child.stdout.read(size)
        except (BrokenPipeError, struct.error, OSError):
            code = child.wait()
            self._child = None
            saved = _cache_folder() / f"{name}.failed.spv"
            saved.write_bytes(spv)
            what = (f"took more than {limit:g} s (NAIAD_OPENCL_BUILD_TIMEOUT) and was stopped"
                    if not watchdog.is_alive() else f"crashed (exit status {code})")
            raise BuildError(f"the OpenCL runtime of device {device.name!r} {what} while building "
                             f"kernel {name!r}: a bug of the runtime, not of the kernel; its SPIR-V "
                             f"is saved as {saved} -- fix: update the runtime, or run this kernel on "
                             f"another backend") from None
        finally:
            watchdog.cancel()


def build_timeout() -> float:
    """Seconds one build may take (``NAIAD_OPENCL_BUILD_TIMEOUT``, default 300)."""
    text = KNOBS.build_timeout
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise BuildError(f"NAIAD_OPENCL_BUILD_TIMEOUT={text!r} is not a positive number of seconds "
                         f"-- fix: set it to e.g. 300, or unset it")
    return value


def _cache_folder() -> Path:
    folder = Path(os.environ.get("NAIAD_CACHE_DIR") or Path.home() / ".naiad") / "opencl-binaries"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
