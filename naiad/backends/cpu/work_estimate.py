"""How long a CPU kernel's programs take, learned from its launches, and so whether a launch is
worth splitting across threads (`naiad.backends.cpu.driver`'s launches and the native launch
code of `naiad.backends.cpu.native_launch` both ask)."""

from __future__ import annotations


#: Work (seconds on one thread) below which a launch runs on the calling thread alone, when
#: its shares go to Naiad's thread pool, and when they go to the process's OpenMP threads
#: (`naiad.backends.cpu.openmp`), whose hand-off is cheaper: splitting a SiLU pays from about
#: 10 us of work there (measured on two cores after a torch matmul).
PARALLEL_WORK_S = 100e-6
OPENMP_WORK_S = 20e-6
#: The same for a warm launch that opens the OpenMP region from its native entry
#: (`naiad.backends.cpu.native_launch`), about 10 us cheaper than from Python: a 2^17-element
#: add (19-20 us on one thread) took 13-17 us split, launched back to back, after a torch
#: matmul or after 0.5 ms of Python work alike; at 2^16 (10 us) splitting did not pay.
NATIVE_OPENMP_WORK_S = 10e-6


#: How far a slower measurement moves a kernel's estimate (`WorkEstimate.observe`).
_SLOWER_WEIGHT = 0.25


class WorkEstimate:
    """How long one program of a kernel takes on one thread, learned from its launches, and so
    whether a launch of ``total`` programs is worth splitting across threads.

    Until a kernel has run, a launch runs a first slice of its programs on the calling thread,
    timed, and decides for the rest from that; later launches decide from the estimate and keep
    it up to date (the time per program of the programs the calling thread ran itself)."""

    def __init__(self) -> None:
        self.program_s: float | None = None

    def parallel(self, total: int, threshold_s: float = PARALLEL_WORK_S) -> bool:
        return self.program_s is not None and self.program_s * total >= threshold_s

    def observe(self, programs: int, seconds: float) -> None:
        """A faster measurement replaces the estimate; a slower one moves it a quarter of the
        way: a thread preempted once (a busy machine) must not make the next launch split,
        since a split launch that waits for a preempted worker costs milliseconds."""
        if programs <= 0:
            return
        measured = seconds / programs
        if self.program_s is None or measured <= self.program_s:
            self.program_s = measured
        else:
            self.program_s += (measured - self.program_s) * _SLOWER_WEIGHT
