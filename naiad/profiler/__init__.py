"""Naiad's profiler: what each kernel launch cost, where Triton users reach for proton.

``with naiad.profiler.profile() as p:`` records every launch in the block -- kernel, backend,
grid, device time (a GPU's events; on the CPU, whose launches are synchronous, the launch's
wall time), the launcher's host time, FLOPs and bytes where the kernel declares them
(``@naiad.jit(launch_metadata=fn)``, as Triton's) -- and every compile, with its time and
whether the compile cache had it.  Then ``p.events``, ``p.key_averages()``, ``p.table()`` and
``p.export_chrome_trace(path)``.  ``naiad profile script.py`` and ``NAIAD_PROFILE=1`` profile
a script or a whole process.  While no profile records, nothing of it is installed: launches
run as without it.  docs/PROFILER.md has the details and the overhead.
"""

from naiad.profiler.events import CompileEvent, LaunchEvent
from naiad.profiler.script import run_script
from naiad.profiler.session import Profile, profile
from naiad.profiler.summary import SORTS, KernelStats

__all__ = ["CompileEvent", "KernelStats", "LaunchEvent", "Profile", "SORTS", "profile", "run_script"]
