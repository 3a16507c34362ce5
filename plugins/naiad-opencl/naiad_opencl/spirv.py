"""LLVM's SPIR-V target through llvmlite: O3 and SPIR-V emission."""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import functools
import threading
from typing import Any

from naiad.errors import NaiadError

from naiad_opencl.hooks import TRIPLE


@functools.lru_cache(maxsize=None)
def _llvm() -> Any:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def _machine() -> Any:
    """A new target machine each time: LLVM's SPIR-V back end keeps per-module state in its
    target machine, and a second module emitted through one crashed the process."""
    return _llvm().Target.from_triple(TRIPLE).create_target_machine(opt=3)


def optimize(llir: str) -> str:
    """``llir`` parsed, verified and optimized at O3 (as text)."""
    llvm = _llvm()
    module = llvm.parse_assembly(llir)
    module.verify()
    builder = llvm.create_pass_builder(_machine(), llvm.create_pipeline_tuning_options(speed_level=3))
    builder.getModulePassManager().run(module, builder)
    return str(module)


def emit_spirv(llir: str) -> bytes:
    """The SPIR-V binary of an optimized module, emitted in a process of its own.

    The SPIR-V back end of llvmlite 0.50's LLVM keeps its module analysis in a static member
    (llvm-project issue 160613, fixed upstream by making it a per-pass member) whose maps hold
    the addresses of objects of the modules emitted before: once those are freed, a later
    module's objects at the same addresses meet the stale entries, and its SPIR-V comes out with
    an id defined twice (measured: 18 of 36 re-emissions of a module after 108 others differed;
    Intel's runtime crashed building such binaries).  So each module is emitted by a process
    forked from a server that has emitted nothing (multiprocessing's forkserver: a few ms a
    module); where there is no forkserver (Windows), in this process, one at a time."""
    pool = _pool()
    if pool is None:
        with _emitting:
            return _emit(llir)
    try:
        return pool.submit(_emit, llir).result()
    except concurrent.futures.process.BrokenProcessPool:
        _pool.cache_clear()              # the next emission gets a new pool
        raise NaiadError("LLVM's SPIR-V back end crashed while emitting this kernel (its process "
                         "died) -- this is a bug in LLVM or in naiad-opencl's LLVM IR; "
                         "NAIAD_KERNEL_DUMP=1 keeps the module that did it") from None


#: LLVM's options are process-wide: one emission at a time changes them (in-process emission).
_emitting = threading.Lock()


def _emit(llir: str) -> bytes:
    """Loop strength reduction is off while the SPIR-V back end runs: in llvmlite 0.50's LLVM
    it rewrote a loop's address ``((tid >> 2) & 3) * 16 + k`` into one that lost the mask (every
    work-item past the fourth read the wrong row: an FMA dot's operands).  The option is put
    back after, for the other targets of the process."""
    llvm = _llvm()
    llvm.set_option("", "-disable-lsr=true")
    try:
        return bytes(_machine().emit_object(llvm.parse_assembly(llir)))
    finally:
        llvm.set_option("", "-disable-lsr=false")


@functools.lru_cache(maxsize=None)
def _pool() -> Any:
    """One worker process per emission, each forked from a clean server (None without one)."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["llvmlite.binding", "naiad_opencl.spirv"])
    return concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context, max_tasks_per_child=1)
