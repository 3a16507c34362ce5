"""The autotuner's progress line: ``autotune <kernel>: config i/n, best <time> (<config>), ETA <s>``.

Tuning a kernel over many configs compiles and times each one, which can take minutes; on a
terminal one line, rewritten in place after each config (``\\r``), says how far it is, the best
time so far and about how long is left.  Anywhere else (a log file, a CI job, a pipe) a line
rewritten in place would be a pile of fragments, so nothing is written.  The stream and the
clock are parameters, so that tests can watch the line with a fake terminal.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from typing import Any, Callable, Protocol


class Stream(Protocol):
    """What the line is written to (``sys.stderr``)."""

    def write(self, text: str) -> Any: ...

    def flush(self) -> Any: ...

    def isatty(self) -> bool: ...


class TuningProgress:
    """The progress line of one kernel's tuning over ``total`` configs.

    Call `timed` after each config is timed and `close` when tuning ends (the line then stays,
    with ETA 0s, and the terminal moves to the next line).  Writes nothing unless ``stream`` is
    a terminal.
    """

    def __init__(self, kernel: str, total: int, stream: Stream,
                 clock: Callable[[], float] = time.perf_counter, columns: int | None = None):
        self.kernel, self.total, self.stream, self.clock = kernel, total, stream, clock
        self.live = _is_terminal(stream)
        self.columns = columns if columns is not None else _columns(stream)
        self.start = clock()
        self.done = 0
        self.best: tuple[float, Any] | None = None          # (ms, config)
        self.shown = 0                                       # length of the line on screen

    def timed(self, config: Any, ms: float) -> None:
        """Count one more config, timed at ``ms`` milliseconds (infinite: it failed), and
        rewrite the line."""
        self.done += 1
        if math.isfinite(ms) and (self.best is None or ms < self.best[0]):
            self.best = (ms, config)
        if self.live:
            self._show(self.line())

    def line(self) -> str:
        """The text of the line as it stands now."""
        best = "none yet" if self.best is None else f"{format_ms(self.best[0])} ({self.best[1]})"
        return (f"autotune {self.kernel}: config {self.done}/{self.total}, best {best}, "
                f"ETA {self.eta():.1f}s")

    def eta(self) -> float:
        """Seconds left, if the configs still to time take as long as those timed took on
        average."""
        if self.done == 0:
            return math.inf
        elapsed = self.clock() - self.start
        return elapsed / self.done * max(0, self.total - self.done)

    def close(self) -> None:
        """End the line (on a terminal, after at least one update)."""
        if self.live and self.shown:
            self.stream.write("\n")
            self.stream.flush()

    def _show(self, text: str) -> None:
        # a line wider than the terminal would wrap, and "\r" would rewrite only its last row
        if len(text) >= self.columns:
            text = text[:max(0, self.columns - 4)] + "..."
        self.stream.write("\r" + text.ljust(self.shown))
        self.stream.flush()
        self.shown = len(text)


def format_ms(ms: float) -> str:
    """A time in the unit that suits it, three significant digits: 12.3 us, 4.56 ms, 1.2 s."""
    if ms >= 1000:
        return f"{ms / 1000:.3g} s"
    if ms >= 1:
        return f"{ms:.3g} ms"
    return f"{ms * 1000:.3g} us"


def _is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:                                       # a closed file
        return False


def _columns(stream: Any) -> int:
    """The width of the terminal that ``stream`` writes to (shutil's guess when it has no file
    descriptor: COLUMNS, or 80)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size().columns
