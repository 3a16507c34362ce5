"""A profile as a Chrome trace (the JSON that Perfetto and chrome://tracing open).

Each launch is one complete event (``"ph": "X"``, category "launch") in the process of its
backend ("cpu device", "cuda device"), on the track of the Python thread that launched it;
each compile or cache hit is one (category "compile") in the "host" process.  ``ts`` and
``dur`` are microseconds from the profile's start.  A launch's span starts when the launcher
began, or when the previous launch on its track ended if that is later: a GPU runs a stream's
kernels one after another, after their launches, and its events give their lengths but not
their start times.
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from naiad.errors import NaiadError
from naiad.profiler.events import CompileEvent, LaunchEvent

_HOST_PID = 0


def chrome_trace(launches: Sequence[LaunchEvent], compiles: Sequence[CompileEvent],
                 origin: float) -> dict[str, Any]:
    """``{"traceEvents": [...]}`` of the events, timed from ``origin`` (a perf_counter value)."""
    def us(seconds: float) -> float:
        return round(seconds * 1e6, 3)

    events: list[dict[str, Any]] = [_process_name(_HOST_PID, "host")]
    pids: dict[str, int] = {}
    track_ends: dict[tuple[int, int], float] = {}
    for launch in launches:
        if launch.backend not in pids:
            pids[launch.backend] = len(pids) + 1
            events.append(_process_name(pids[launch.backend], f"{launch.backend} device"))
        pid = pids[launch.backend]
        start = max(launch.start - origin, track_ends.get((pid, launch.thread), 0.0))
        track_ends[(pid, launch.thread)] = start + launch.device_time
        events.append({"name": launch.name, "cat": "launch", "ph": "X", "ts": us(start),
                       "dur": us(launch.device_time), "pid": pid, "tid": launch.thread,
                       "args": {"grid": list(launch.grid), "backend": launch.backend,
                                "stream": _json_value(launch.stream), "host_us": us(launch.host_time),
                                "flops": launch.flops, "bytes": launch.bytes,
                                "hash": launch.kernel_hash}})
    for compiled in compiles:
        events.append({"name": f"compile {compiled.name}", "cat": "compile", "ph": "X",
                       "ts": us(compiled.began - origin), "dur": us(compiled.seconds),
                       "pid": _HOST_PID, "tid": compiled.thread,
                       "args": {"backend": compiled.backend, "cache_hit": compiled.cache_hit,
                                "hash": compiled.kernel_hash}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(path: str | os.PathLike, trace: dict[str, Any]) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(trace, f)
    except OSError as e:
        raise NaiadError(f"cannot write the Chrome trace to {os.fspath(path)!r}: {e.strerror} -- "
                         f"fix: give a file path in a directory that exists and can be written") from None


def _process_name(pid: int, name: str) -> dict[str, Any]:
    return {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}


def _json_value(value: Any) -> Any:
    """A stream handle as JSON: ints as they are, anything else (a torch stream) as text."""
    return value if value is None or isinstance(value, (int, float, str)) else str(value)
