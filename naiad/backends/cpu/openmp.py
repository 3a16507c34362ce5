"""Split launches on the OpenMP runtime the process has loaded already (torch's libgomp).

A CPU kernel's launch split across threads hands shares of its programs to worker threads.
Handed to a Python thread pool, each share costs tens of microseconds to wake a thread, and
inside a PyTorch program torch's own OpenMP threads keep spinning on the same cores after every
aten op, so the woken thread also waits for a core: a 131,072-element SiLU took 270 us after a
matmul on two cores, against 95 us for torch's own.  When an OpenMP runtime is in the process,
a launch runs as one OpenMP parallel region instead: the spinning threads take the shares at
once (the same SiLU: 94 us), as Inductor's C++ kernels do.

The region's body is a small native function (made once per process with LLVM) that reads a
task of seven int64 -- ``naiad_grid``'s address, the argument slots' address, nx, ny, nz and
the range of programs -- and runs its thread's contiguous share of that range.  Naiad never
loads an OpenMP runtime itself: a second runtime next to the one a library brings later would
double the threads, and a system libgomp loaded first could shadow torch's newer one.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

#: Shared objects of OpenMP runtimes that provide libgomp's entry points (GCC's, LLVM's, Intel's).
RUNTIMES = ("libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so")
#: Entry points the region needs.
_SYMBOLS = ("GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads")
_RUN_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32)
#: The task a region reads: seven int64 in (`_region_module`), then two the calling thread
#: writes: the programs it ran and the nanoseconds they took.
TASK_FIELDS = 9
_TASK = ctypes.c_int64 * TASK_FIELDS
OWN_PROGRAMS, OWN_NS = 7, 8
#: ``clock_gettime``'s clock that never jumps (Linux's number).
_CLOCK_MONOTONIC = 1


class OpenMPTeam:
    """Runs a range of a grid's programs as one OpenMP parallel region of the loaded runtime."""

    def __init__(self, library: ctypes.CDLL):
        from naiad.backends.cpu.target import host_target, new_target_machine
        from naiad.codegen.llvm_binding import native_target

        llvm = native_target()
        for name in _SYMBOLS:
            llvm.add_symbol(name, ctypes.cast(getattr(library, name), ctypes.c_void_p).value)
        self.library = library          # kept loaded while the engine refers to it
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(_region_module())),
                                                 new_target_machine(host_target().arch))
        self.engine.finalize_object()
        #: ``naiad_omp_run(task, threads)``, for native launch code (`TASK_FIELDS`).
        self.run_address = self.engine.get_function_address("naiad_omp_run")
        self._run = _RUN_TYPE(self.run_address)

    def run(self, function: Any, address: int, nx: int, ny: int, nz: int, first: int, end: int,
            threads: int) -> tuple[int, float]:
        """Programs ``[first, end)`` of ``function`` (a ``naiad_grid``), split evenly across
        ``threads`` threads, the calling one among them; returns when all have finished, with
        the programs the calling thread ran and the seconds they took (its work alone: the
        region's wall time also holds waking the other threads)."""
        entry = getattr(function, "address", None)       # `LoadedObject` sets it
        if entry is None:
            entry = ctypes.cast(function, ctypes.c_void_p).value
        task = _TASK(entry, address, nx, ny, nz, first, end, 0, 0)
        self._run(ctypes.addressof(task), threads)
        return task[OWN_PROGRAMS], task[OWN_NS] * 1e-9


def _region_module() -> Any:
    """``naiad_omp_run(task, threads)`` opens the parallel region; ``naiad_omp_share(task)``,
    its body, runs the calling thread's share of the task's programs (thread 0, the one that
    opened the region, also times its share).  LLVM is imported here: a launch served by the
    disk cache that never splits needs none of the compiler."""
    import llvmlite.ir as ir

    lt = _Types(ir)
    module = ir.Module("naiad_openmp")
    grid_type = ir.FunctionType(lt.VOID, [lt.PTR] + [lt.I32] * 5)
    parallel = ir.Function(module, ir.FunctionType(lt.VOID, [lt.PTR, lt.PTR, lt.I32, lt.I32]),
                           "GOMP_parallel")
    thread_num = ir.Function(module, ir.FunctionType(lt.I32, []), "omp_get_thread_num")
    num_threads = ir.Function(module, ir.FunctionType(lt.I32, []), "omp_get_num_threads")
    clock = ir.Function(module, ir.FunctionType(lt.I32, [lt.I32, lt.PTR]), "clock_gettime")

    share = ir.Function(module, ir.FunctionType(lt.VOID, [lt.PTR]), "naiad_omp_share")
    b = ir.IRBuilder(share.append_basic_block("entry"))
    task = share.args[0]

    def slot(i: int) -> Any:
        return b.gep(task, [ir.Constant(lt.I64, 8 * i)], source_etype=lt.I8)

    def now() -> Any:
        b.call(clock, [ir.Constant(lt.I32, _CLOCK_MONOTONIC), timespec])
        seconds = b.load(timespec, typ=lt.I64)
        nanos = b.load(b.gep(timespec, [ir.Constant(lt.I64, 8)], source_etype=lt.I8), typ=lt.I64)
        return b.add(b.mul(seconds, ir.Constant(lt.I64, 1_000_000_000)), nanos)

    field = [b.load(slot(i), typ=lt.I64, align=8) for i in range(7)]
    timespec = b.alloca(ir.ArrayType(lt.I64, 2))
    first, end = field[5], field[6]
    index = b.sext(b.call(thread_num, []), lt.I64)
    count = b.sext(b.call(num_threads, []), lt.I64)
    span = b.sub(end, first)
    low = b.add(first, b.sdiv(b.mul(span, index), count))
    high = b.add(first, b.sdiv(b.mul(span, b.add(index, ir.Constant(lt.I64, 1))), count))
    grid = b.inttoptr(field[0], grid_type.as_pointer())
    args = [b.inttoptr(field[1], lt.PTR)] + [b.trunc(v, lt.I32) for v in
                                             (field[2], field[3], field[4], low, high)]
    with b.if_else(b.icmp_signed("==", index, ir.Constant(lt.I64, 0))) as (timed, plain):
        with timed:
            start = now()
            b.call(grid, args)
            b.store(b.sub(high, low), slot(OWN_PROGRAMS))
            b.store(b.sub(now(), start), slot(OWN_NS))
        with plain:
            b.call(grid, args)
    b.ret_void()

    run = ir.Function(module, ir.FunctionType(lt.VOID, [lt.PTR, lt.I32]), "naiad_omp_run")
    b = ir.IRBuilder(run.append_basic_block("entry"))
    b.call(parallel, [share, run.args[0], run.args[1], ir.Constant(lt.I32, 0)])
    b.ret_void()
    return module


class _Types:
    """The few LLVM types the region uses (not `naiad.codegen.llvm_types`, which brings the
    compiler's IR library into a process that only launches)."""

    def __init__(self, ir: Any):
        self.I8, self.I32, self.I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        self.PTR, self.VOID = ir.PointerType(), ir.VoidType()


def _loaded_runtime() -> ctypes.CDLL | None:
    """The OpenMP runtime this process has loaded, if any (``RTLD_NOLOAD``: never loads one)."""
    mode = getattr(os, "RTLD_NOLOAD", None)
    if mode is None:
        return None
    for name in RUNTIMES:
        try:
            library = ctypes.CDLL(name, mode=mode | getattr(os, "RTLD_LOCAL", 0))
        except OSError:
            continue
        if all(hasattr(library, symbol) for symbol in _SYMBOLS):
            return library
    return None


_team: OpenMPTeam | None = None
#: ``len(sys.modules)`` when the process was last searched for a runtime: a runtime arrives with
#: an import (torch's), so the search (~50 us when nothing is found) runs again only after one.
_searched_at = -1


#: 0 in a forked child: GCC's libgomp keeps the parent's threads in its books, and a child's
#: first parallel region waits for them forever; the child's launches use Naiad's thread pool.
#: An int in memory, which native launch code reads too (`CPUNativeLaunch`).
USABLE = ctypes.c_int32(1)


def _unusable_in_child() -> None:
    global _team
    _team = None
    USABLE.value = 0


os.register_at_fork(after_in_child=_unusable_in_child)


def loaded_team() -> OpenMPTeam | None:
    """The team of the process's OpenMP runtime, None while no runtime is loaded (or in a
    forked child)."""
    global _team, _searched_at
    if _team is None and USABLE.value and len(sys.modules) != _searched_at:
        _searched_at = len(sys.modules)
        library = _loaded_runtime()
        if library is not None:
            _team = OpenMPTeam(library)
    return _team
