"""A CPU kernel's warm launch as native code (`naiad.runtime.native_entry.NativeLaunch`, made by
`CPULauncher.native_launch`): on the calling thread, or split as one OpenMP parallel region."""

from __future__ import annotations

import ctypes
import time
from typing import Any

from naiad.backends.cpu import openmp, runtime
from naiad.backends.cpu.knobs import KNOBS
from naiad.backends.cpu.work_estimate import NATIVE_OPENMP_WORK_S, OPENMP_WORK_S
from naiad.runtime.native_code import double


class CPUNativeLaunch:
    """`CPULauncher.native_launch`: the programs run on the calling thread through one
    ``naiad_launch`` call (header: grid, first program 0, program count; then the slots), the
    GIL released meanwhile.  On several threads, a launch of several programs runs here when
    the kernel's `WorkEstimate` says it is too small to split (`NATIVE_OPENMP_WORK_S`, or
    `OPENMP_WORK_S` where the Python path would split it), timed to keep the estimate
    current, as `CPULauncher._build_run` does; a larger one runs as one parallel
    region of the process's OpenMP runtime (`openmp.OpenMPTeam`, when one was loaded as the
    launch was prepared, the knob is on and this is not a forked child), timed on the calling
    thread's share as `CPULauncher.run_grid` does -- the Python path's split cost about 10 us
    more, a third of a 2^18-element add; otherwise the Python path splits it.  A report the
    kernel left (a failed assertion, a print) is raised or shown by `error`."""

    def __init__(self, launcher: Any, launch: Any, grid_address: int):
        self.launcher = launcher
        self.address = ctypes.cast(launch, ctypes.c_void_p).value
        self.grid_address = grid_address
        self.slots = [(path[0], ty) for path, ty in zip(launcher.runtime, launcher.types)]
        self.team = openmp.loaded_team() if launcher.threads > 1 and KNOBS.openmp else None

    def emit(self, f: Any, slots: str, gx: str, gy: str, gz: str, not_here: str) -> str:
        total = f.value(f"mul i64 {f.value(f'mul i64 {gx}, {gy}')}, {gz}")
        timed = f.value("alloca i1")
        f(f"store i1 false, ptr {timed}")
        header = f.value(f"alloca [{3 + len(self.slots)} x i64]")
        for offset, value in enumerate((gx, gy, gz, "0", total)):
            word = f.value(f"getelementptr i32, ptr {header}, i64 {offset}")
            f(f"store i32 {f.value(f'trunc i64 {value} to i32') if value != '0' else 0}, ptr {word}")
        for k in range(len(self.slots)):
            source = f.value(f"getelementptr i64, ptr {slots}, i64 {k}")
            target = f.value(f"getelementptr i64, ptr {header}, i64 {3 + k}")
            f(f"store i64 {f.load('i64', source)}, ptr {target}")
        run, done = f.fresh("run"), f.fresh("launched")
        if self.launcher.threads > 1:
            check = f.fresh("small")
            f.branch(f.value(f"icmp sgt i64 {total}, 1"), check, run)
            f.place(check)
            estimate = f.capi("PyObject_GetAttr", f.object(self.launcher.work), f.object("program_s"))
            f.checked(estimate, not_here)
            known, unknown = f.fresh("known"), f.fresh("unknown")
            f.branch(f.same(estimate, f.object(None)), unknown, known)
            f.place(unknown)                  # no estimate yet: the Python path times a slice
            f.decref(estimate)
            f.jump(not_here)
            f.place(known)
            seconds = f.capi("PyFloat_AsDouble", estimate)
            f.decref(estimate)
            work = f.value(f"fmul double {seconds}, {f.value(f'sitofp i64 {total} to double')}")
            stay, split = f.fresh("stay"), f.fresh("split") if self.team is not None else not_here
            threshold = NATIVE_OPENMP_WORK_S if self.team is not None else OPENMP_WORK_S
            f.branch(f.value(f"fcmp olt double {work}, {double(threshold)}"), stay, split)
            f.place(stay)
            f(f"store i1 true, ptr {timed}")
            f.jump(run)
            if self.team is not None:
                f.place(split)
                self._split(f, header, gx, gy, gz, total, not_here)
                f.jump(done)
        else:
            f.jump(run)
        f.place(run)
        start = self._clock(f, timed)
        state = f.capi("PyEval_SaveThread")
        f(f"call void inttoptr (i64 {self.address} to ptr)(ptr {header})")
        f.capi("PyEval_RestoreThread", state)
        stop = self._clock(f, timed)
        observe = f.fresh("observe")
        f.branch(f.load("i1", timed), observe, done)
        f.place(observe)
        self._observe(f, total, f.value(f"fsub double {stop}, {start}"))
        f.jump(done)
        f.place(done)
        reported = f.value(f"icmp sgt i64 {f.capi('PyObject_Size', f.object(runtime.pending_reports()))}, 0")
        return f.value(f"select i1 {reported}, i64 1, i64 0")

    def _split(self, f: Any, header: str, gx: str, gy: str, gz: str, total: str, not_here: str) -> None:
        """The programs as one OpenMP parallel region (`openmp.OpenMPTeam.run`'s task), or to
        ``not_here`` in a forked child or with the knob turned off since."""
        usable = f.load("i32", f"inttoptr (i64 {ctypes.addressof(openmp.USABLE)} to ptr)")
        f.unless(f.value(f"icmp ne i32 {usable}, 0"), not_here)
        knob = f.capi("PyObject_GetAttr", f.object(KNOBS), f.object("openmp"))
        f.checked(knob, not_here)
        on = f.same(knob, f.object(True))
        f.decref(knob)
        f.unless(on, not_here)
        task = f.value(f"alloca [{openmp.TASK_FIELDS} x i64]")
        arguments = f.value(f"ptrtoint ptr {f.value(f'getelementptr i64, ptr {header}, i64 3')} to i64")
        for i, value in enumerate((str(self.grid_address), arguments, gx, gy, gz, "0", total, "0", "0")):
            f(f"store i64 {value}, ptr {f.value(f'getelementptr i64, ptr {task}, i64 {i}')}")
        most = self.launcher.threads
        threads = f.value(f"select i1 {f.value(f'icmp slt i64 {total}, {most}')}, i64 {total}, i64 {most}")
        state = f.capi("PyEval_SaveThread")
        f(f"call void inttoptr (i64 {self.team.run_address} to ptr)(ptr {task}, "
          f"i32 {f.value(f'trunc i64 {threads} to i32')})")
        f.capi("PyEval_RestoreThread", state)
        own = f.load("i64", task, 8 * openmp.OWN_PROGRAMS)
        nanoseconds = f.value(f"sitofp i64 {f.load('i64', task, 8 * openmp.OWN_NS)} to double")
        self._observe(f, own, f.value(f"fmul double {nanoseconds}, {double(1e-9)}"))

    def _clock(self, f: Any, timed: str) -> str:
        """``time.perf_counter()`` as a double register when ``timed`` (else 0)."""
        read, done = f.fresh("clock"), f.fresh("clocked")
        seconds = f.value("alloca double")
        f(f"store double 0.0, ptr {seconds}")
        f.branch(f.load("i1", timed), read, done)
        f.place(read)
        now = f.capi("PyObject_Vectorcall", f.object(time.perf_counter), "null", "0", "null")
        f.checked(now, done)
        f(f"store double {f.capi('PyFloat_AsDouble', now)}, ptr {seconds}")
        f.decref(now)
        f.jump(done)
        f.place(done)
        return f.load("double", seconds)

    def _observe(self, f: Any, programs: str, seconds: str) -> None:
        """``work.observe(programs, seconds)``; its failure is dropped (the launch has run)."""
        args = f.value("alloca [2 x ptr]")
        count = f.capi("PyLong_FromLongLong", programs)
        elapsed = f.capi("PyFloat_FromDouble", seconds)
        f(f"store ptr {count}, ptr {args}")
        f(f"store ptr {elapsed}, ptr {f.value(f'getelementptr ptr, ptr {args}, i64 1')}")
        valid = f.value(f"and i1 {f.value(f'icmp ne ptr {count}, null')}, {f.value(f'icmp ne ptr {elapsed}, null')}")
        call, skip = f.fresh("call"), f.fresh("skip")
        f.branch(valid, call, skip)
        f.place(call)
        result = f.capi("PyObject_Vectorcall", f.object(self.launcher.work.observe), args, "2", "null")
        f.checked(result, skip)
        f.decref(result)
        f.jump(skip)
        f.place(skip)
        f.capi("Py_DecRef", count)           # NULL-safe
        f.capi("Py_DecRef", elapsed)
        f.capi("PyErr_Clear")

    def error(self, code: int, grid: tuple[int, int, int]) -> None:
        runtime.raise_reports(self.launcher.name, self.launcher.metadata, [])
