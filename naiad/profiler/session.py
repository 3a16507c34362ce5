"""``with naiad.profiler.profile() as p:``: record the block's kernel launches and compiles,
then read them as events, per-kernel sums, a table or a Chrome trace."""

from __future__ import annotations

import os
import time
from typing import Any

from naiad.profiler import chrome_trace, recorder, summary
from naiad.profiler.events import CompileEvent, LaunchEvent


class Profile:
    """The launches and compiles of the blocks it was entered for (entered again later, it
    records on into the same lists).  Profiles nest: a launch inside an inner one is in both.
    GPU device times are read when the block ends, which waits for its kernels."""

    def __init__(self) -> None:
        self._recording = recorder.Recording()
        #: `time.perf_counter` when first entered: the trace's time zero.
        self.started: float | None = None

    def __enter__(self) -> "Profile":
        recorder.start(self._recording)
        if self.started is None:
            self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        recorder.stop(self._recording)
        for event in self._recording.launches:
            event.settle()

    @property
    def recording(self) -> bool:
        """Whether the profile is recording now (inside its block)."""
        return recorder.is_recording(self._recording)

    @property
    def events(self) -> list[LaunchEvent]:
        """Every launch recorded, in the order they ended."""
        return list(self._recording.launches)

    @property
    def compiles(self) -> list[CompileEvent]:
        """Every compile and compile-cache hit recorded, in the order they ended."""
        return list(self._recording.compiles)

    def key_averages(self) -> list[summary.KernelStats]:
        """One row per kernel (name and backend): calls, device and host times, compiles,
        cache hits, FLOPs, bytes and their rates."""
        return summary.key_averages(self._recording.launches, self._recording.compiles)

    def table(self, sort: str = "total") -> str:
        """`key_averages` as a text table, sorted by total device time ("total"), "calls",
        mean device time ("mean") or "name"."""
        return summary.table(self.key_averages(), sort)

    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Write the events as a Chrome trace (JSON) to ``path``: open it in
        https://ui.perfetto.dev or chrome://tracing."""
        origin = self.started if self.started is not None else time.perf_counter()
        trace = chrome_trace.chrome_trace(self._recording.launches, self._recording.compiles, origin)
        chrome_trace.write_chrome_trace(path, trace)


def profile() -> Profile:
    """A new `Profile`: ``with naiad.profiler.profile() as p: ...``, then ``print(p.table())``."""
    return Profile()
