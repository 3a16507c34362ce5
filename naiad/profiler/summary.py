"""A profile's events summed per kernel (`key_averages`) and shown as a text table (`table`),
the way torch's profiler shows ``key_averages().table()``."""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from naiad.errors import NaiadError
from naiad.profiler.events import CompileEvent, LaunchEvent


@dataclasses.dataclass
class KernelStats:
    """One kernel's launches (by name and backend) and compiles.  Times in seconds; the
    means, minimum and maximum are None without launches, ``flops`` / ``bytes`` (totals) and
    the rates None where no launch declared them.  The rates are over the launches that did."""

    name: str
    backend: str
    calls: int = 0
    device_total: float = 0.0
    device_min: float | None = None
    device_max: float | None = None
    host_total: float = 0.0
    compiles: int = 0
    cache_hits: int = 0
    compile_time: float = 0.0
    flops: float | None = None
    bytes: float | None = None
    flops_time: float = 0.0         # device time of the launches that declared flops
    bytes_time: float = 0.0         # ... and bytes

    @property
    def device_mean(self) -> float | None:
        return self.device_total / self.calls if self.calls else None

    @property
    def host_mean(self) -> float | None:
        return self.host_total / self.calls if self.calls else None

    @property
    def gflops(self) -> float | None:
        """GFLOP/s: declared FLOPs over the device time of the launches that declared them."""
        return self.flops / self.flops_time / 1e9 if self.flops is not None and self.flops_time > 0 else None

    @property
    def gbps(self) -> float | None:
        """GB/s: declared bytes over the device time of the launches that declared them."""
        return self.bytes / self.bytes_time / 1e9 if self.bytes is not None and self.bytes_time > 0 else None

    def add_launch(self, event: LaunchEvent) -> None:
        device = event.device_time
        self.calls += 1
        self.device_total += device
        self.device_min = device if self.device_min is None else min(self.device_min, device)
        self.device_max = device if self.device_max is None else max(self.device_max, device)
        self.host_total += event.host_time
        if event.flops is not None:
            self.flops = (self.flops or 0.0) + event.flops
            self.flops_time += device
        if event.bytes is not None:
            self.bytes = (self.bytes or 0.0) + event.bytes
            self.bytes_time += device

    def add_compile(self, event: CompileEvent) -> None:
        if event.cache_hit:
            self.cache_hits += 1
        else:
            self.compiles += 1
        self.compile_time += event.seconds


def key_averages(launches: Sequence[LaunchEvent], compiles: Sequence[CompileEvent]) -> list[KernelStats]:
    """One `KernelStats` per (launch name, backend), in the order first launched.  A compile
    counts for the kernel whose launches ran its binary (by hash: a ``launch_metadata`` may
    have renamed them); one never launched gets a row of its own, with no calls."""
    rows: dict[tuple[str, str], KernelStats] = {}
    by_hash: dict[str, tuple[str, str]] = {}
    for event in launches:
        key = (event.name, event.backend)
        rows.setdefault(key, KernelStats(*key)).add_launch(event)
        by_hash.setdefault(event.kernel_hash, key)
    for event in compiles:
        key = by_hash.get(event.kernel_hash, (event.name, event.backend))
        rows.setdefault(key, KernelStats(*key)).add_compile(event)
    return list(rows.values())


#: How `table` may sort its rows: by total device time, calls, mean device time (the most
#: first), or kernel name.
SORTS: dict[str, Callable[[KernelStats], tuple]] = {
    "total": lambda row: (-row.device_total, row.name),
    "calls": lambda row: (-row.calls, row.name),
    "mean": lambda row: (-(row.device_mean or 0.0), row.name),
    "name": lambda row: (row.name, row.backend),
}


def check_sort(sort: str) -> None:
    if sort not in SORTS:
        raise NaiadError(f"cannot sort the profile table by {sort!r} -- fix: sort by one of "
                         f"{', '.join(SORTS)}")


_COLUMNS: list[tuple[str, Callable[[KernelStats], str]]] = [
    ("Backend", lambda r: r.backend),
    ("Calls", lambda r: str(r.calls)),
    ("Device total", lambda r: _time(r.device_total if r.calls else None)),
    ("Device mean", lambda r: _time(r.device_mean)),
    ("Device min", lambda r: _time(r.device_min)),
    ("Device max", lambda r: _time(r.device_max)),
    ("Host mean", lambda r: _time(r.host_mean)),
    ("Compiles", lambda r: str(r.compiles)),
    ("Cache hits", lambda r: str(r.cache_hits)),
    ("Compile time", lambda r: _time(r.compile_time if r.compiles or r.cache_hits else None)),
    ("GFLOP/s", lambda r: _rate(r.gflops)),
    ("GB/s", lambda r: _rate(r.gbps)),
]


def table(rows: Sequence[KernelStats], sort: str = "total") -> str:
    """The rows as a text table sorted by ``sort`` (a key of `SORTS`), with the totals below."""
    check_sort(sort)
    ordered = sorted(rows, key=SORTS[sort])
    header = ["Kernel"] + [title for title, _ in _COLUMNS]
    cells = [[row.name] + [cell(row) for _, cell in _COLUMNS] for row in ordered]
    widths = [max(len(line[i]) for line in [header] + cells) for i in range(len(header))]
    rule = "  ".join("-" * w for w in widths)

    def line(values: list[str]) -> str:
        return "  ".join([values[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(values[1:], widths[1:])])
    lines = [rule, line(header), rule] + [line(c) for c in cells] + [rule]
    launches = sum(row.calls for row in rows)
    kernels = sum(1 for row in rows if row.calls)
    lines.append(f"{_count(launches, 'launch', 'launches')} of {_count(kernels, 'kernel', 'kernels')}, "
                 f"device time {_time(sum(row.device_total for row in rows))}; "
                 f"{sum(row.compiles for row in rows)} compiled, "
                 f"{sum(row.cache_hits for row in rows)} from the compile cache"
                 if rows else "no kernel launches or compiles were recorded")
    return "\n".join(lines)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3f}us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3f}ms"
    return f"{seconds:.3f}s"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
