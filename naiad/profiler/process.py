"""``NAIAD_PROFILE=1``: profile the whole process and report at exit.

``import naiad`` calls `profile_process` when the knob is set (reading the knob is all it costs
otherwise); the table goes to stderr, so that it does not mix with what the program prints,
and the trace to ``NAIAD_PROFILE_TRACE`` when that is set.
"""

from __future__ import annotations

import atexit
import sys

from naiad import knobs
from naiad.errors import NaiadError
from naiad.profiler.session import Profile, profile


def profile_process() -> Profile:
    """Start recording every launch of the process; `report` runs at exit."""
    whole = profile()
    whole.__enter__()
    atexit.register(report, whole)
    return whole


def report(whole: Profile) -> None:
    """Stop ``whole``, print its table to stderr and write its trace if NAIAD_PROFILE_TRACE
    names a file (a trace that cannot be written is said, not raised: the process is ending)."""
    whole.__exit__(None, None, None)
    print(f"naiad profile (NAIAD_PROFILE=1):\n{whole.table()}", file=sys.stderr, flush=True)
    path = knobs.runtime.profile_trace
    if path:
        try:
            whole.export_chrome_trace(path)
        except NaiadError as e:
            print(f"naiad profile: {e}", file=sys.stderr)
        else:
            print(f"naiad profile: wrote the Chrome trace {path}", file=sys.stderr)
