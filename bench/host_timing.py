"""Wall-clock timing of host-side work for the CPU benchmarks (cpu.py, opencl.py)."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable


def median_ms(fn: Callable[[], Any], runs: int) -> float:
    """The median of ``runs`` timed calls of ``fn``, in ms, after one untimed call (compiles,
    warms caches)."""
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)
