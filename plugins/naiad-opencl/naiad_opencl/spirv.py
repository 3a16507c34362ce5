"""LLVM's SPIR-V target through llvmlite: O3 and SPIR-V emission."""

from __future__ import annotations

import functools
import os
import struct
import subprocess
import sys
import threading
from typing import Any

from naiad.errors import NaiadError

from naiad_opencl.hooks import TRIPLE


@functools.lru_cache(maxsize=None)
def llvm_binding() -> Any:
    """llvmlite's binding with every target initialized (once per process: the emit worker
    calls it before it forks, so that no fork loads LLVM again)."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def _machine() -> Any:
    """A new target machine each time: LLVM's SPIR-V back end keeps per-module state in its
    target machine, and a second module emitted through one crashed the process."""
    return llvm_binding().Target.from_triple(TRIPLE).create_target_machine(opt=3)


def optimize(llir: str) -> str:
    """``llir`` parsed, verified and optimized at O3 (as text)."""
    llvm = llvm_binding()
    module = llvm.parse_assembly(llir)
    module.verify()
    builder = llvm.create_pass_builder(_machine(), llvm.create_pipeline_tuning_options(speed_level=3))
    builder.getModulePassManager().run(module, builder)
    return str(module)


def emit_spirv(llir: str) -> bytes:
    """The SPIR-V binary of an optimized module, emitted by a process of its own.

    The SPIR-V back end of llvmlite 0.50's LLVM keeps its module analysis in a static member
    (llvm-project issue 160613, fixed upstream by making it a per-pass member) whose maps hold
    the addresses of objects of the modules emitted before: once those are freed, a later
    module's objects at the same addresses meet the stale entries, and its SPIR-V comes out with
    an id defined twice (measured: 18 of 36 re-emissions of a module after 108 others differed;
    Intel's runtime crashed building such binaries).  So each module is emitted by a process
    forked from a worker that has emitted nothing (`naiad_opencl.emit_worker`: a few ms a
    module, no re-import of the user's script); where there is no ``fork`` (Windows), in this
    process, one at a time."""
    if not hasattr(os, "fork"):
        return emit_in_process(llir)
    return _WORKER.emit(llir)


#: LLVM's options are process-wide: one emission at a time changes them.
_emitting = threading.Lock()


def emit_in_process(llir: str) -> bytes:
    """`emit_spirv` in this process.  Loop strength reduction is off while the SPIR-V back end
    runs: in llvmlite 0.50's LLVM it rewrote a loop's address ``((tid >> 2) & 3) * 16 + k`` into
    one that lost the mask (every work-item past the fourth read the wrong row: an FMA dot's
    operands).  The option is put back after, for the other targets of the process."""
    llvm = llvm_binding()
    with _emitting:
        llvm.set_option("", "-disable-lsr=true")
        try:
            return bytes(_machine().emit_object(llvm.parse_assembly(llir)))
        finally:
            llvm.set_option("", "-disable-lsr=false")


class _Worker:
    """The emit worker, started on first use and again after it dies; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: subprocess.Popen | None = None

    def emit(self, llir: str) -> bytes:
        data = llir.encode()
        with self._lock:
            child = self._child
            if child is None or child.poll() is not None:
                child = self._child = subprocess.Popen(
                    [sys.executable, "-m", "naiad_opencl.emit_worker"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE)
            try:
                child.stdin.write(struct.pack("<Q", len(data)) + data)
                child.stdin.flush()
                status, size = struct.unpack("<BQ", child.stdout.read(9))
                payload = child.stdout.read(size)
            except (BrokenPipeError, struct.error, OSError):
                self._child = None
                status, payload = 1, b"the SPIR-V emit worker died"
        if status != 0:
            raise NaiadError(f"LLVM's SPIR-V back end failed to emit this kernel: "
                             f"{payload.decode(errors='replace')} -- this is a bug in LLVM or in "
                             f"naiad-opencl's LLVM IR; NAIAD_KERNEL_DUMP=1 keeps the module")
        return payload


_WORKER = _Worker()
