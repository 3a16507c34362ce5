"""What a profile records: one `LaunchEvent` per kernel launch, one `CompileEvent` per compile
or cache hit.

Times are seconds; ``start`` and ``began`` are `time.perf_counter` values, so that profiles
nested in one another share the same records and each measures them from its own start.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

from naiad.errors import NaiadError

#: The launch-metadata keys whose values add up to a launch's floating-point operations, as
#: Triton's proton reads them (one count per operand width, or one in all).
FLOP_KEYS = ("flops", "flops8", "flops16", "flops32", "flops64")


class LaunchEvent:
    """One launch: ``name`` (the kernel's, or the one its ``launch_metadata`` gave), the
    ``backend``, the 3-d ``grid``, the ``stream`` and Python ``thread`` it was launched from,
    the compiled kernel's ``kernel_hash``, ``start`` (when the launcher began, host clock),
    ``host_time`` (how long the launcher took on the host) and ``device_time``, with ``flops``
    and ``bytes`` where the kernel declares them (``work``: `declared_work`; else None).

    A GPU's device time is read from its two events when first asked for, which waits for the
    kernel to finish: launches stay asynchronous while they are recorded."""

    __slots__ = ("name", "backend", "grid", "stream", "thread", "kernel_hash", "start",
                 "host_time", "flops", "bytes", "_device_time", "_events")

    def __init__(self, metadata: dict, work: tuple[float | None, float | None], thread: int,
                 start: float, host_time: float, events: tuple[Any, Any] | None):
        self.name = str(metadata.get("name"))
        self.backend = str(metadata.get("backend"))
        self.grid = tuple(metadata.get("grid") or ())
        self.stream = metadata.get("stream")
        self.kernel_hash = metadata.get("hash")
        self.thread, self.start, self.host_time = thread, start, host_time
        self.flops, self.bytes = work
        #: Without device events, the launch's wall time is its device time: such a backend's
        #: launches run before they return (the CPU's).
        self._device_time = None if events else host_time
        self._events = events

    @property
    def device_time(self) -> float:
        if self._events is not None:
            self.settle()
        return self._device_time

    def settle(self) -> None:
        """Read the device time from the events now (waiting for the kernel to finish) and let
        the events go: a profile does so for all its launches when its block ends."""
        if self._events is not None:
            first, last = self._events
            last.synchronize()
            self._device_time = first.elapsed_time(last) / 1000.0
            self._events = None

    def __repr__(self) -> str:
        return (f"LaunchEvent({self.name!r}, backend={self.backend!r}, grid={self.grid}, "
                f"device_time={self.device_time:.3g}, host_time={self.host_time:.3g})")


@dataclasses.dataclass(frozen=True)
class CompileEvent:
    """One kernel made ready by `naiad.compile`: compiled (``cache_hit`` False) or read from
    the compile cache, taking ``seconds`` from ``began``."""

    name: str
    backend: str
    kernel_hash: str
    thread: int
    began: float
    seconds: float
    cache_hit: bool


def declared_work(metadata: dict) -> tuple[float | None, float | None]:
    """(flops, bytes) of a launch as its launch metadata declares them, None where it does not:
    the FLOP counts of `FLOP_KEYS` add up.  A value that is not a number is the kernel's
    ``launch_metadata`` function's mistake, said before the kernel runs."""
    declared = {key: metadata[key] for key in _WORK_KEYS if metadata.get(key) is not None}
    if not declared:
        return None, None
    for key, value in declared.items():
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise NaiadError(f"kernel '{metadata.get('name')}': its launch_metadata gave {key}="
                             f"{value!r} -- fix: return a number for {key!r} (or leave it out)")
    counts = [value for key, value in declared.items() if key != "bytes"]
    moved = declared.get("bytes")
    return float(sum(counts)) if counts else None, None if moved is None else float(moved)


_WORK_KEYS = FLOP_KEYS + ("bytes",)
