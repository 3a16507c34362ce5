"""Warm launch cost: host time of one launch of a cached 4-argument kernel (3 arrays + n,
grid (1,), 64 float32 elements) on the CPU backend, next to numpy's and torch's own call
overhead for the same work.

    python bench/launch.py [--launches N] [--repeats R] [--csv PATH]
    python bench/launch.py --plot bench/results/launch.csv     # the plot, from a CSV (also
                                                               # bench/gpu_launch.py's)

Each row is the median over R repeats of (time of N back-to-back calls) / N, in microseconds,
measured with time.perf_counter.  Writes the rows to bench/results/launch.csv and, with
matplotlib, their bars beside it (`plots`).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time

import numpy as np

import naiad
import naiad.language as tl
import plots


@naiad.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def median_us(call, launches: int, repeats: int) -> float:
    for _ in range(max(10, launches // 10)):
        call()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(launches):
            call()
        samples.append((time.perf_counter() - start) / launches * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(__file__), "results", "launch.csv"))
    parser.add_argument("--plot", metavar="CSV", help="only draw the plot of an earlier run's CSV")
    args = parser.parse_args()
    if args.plot:
        plot(args.plot)
        return

    x = np.ones(64, np.float32)
    y = np.ones(64, np.float32)
    o = np.empty_like(x)
    launch = add[(1,)]
    launch(x, y, o, 64, BLOCK=64)                       # compile and warm
    assert (o == 2).all()
    rows = [("naiad launch(x, y, o, 64, BLOCK=64), launch = add[(1,)] held from before",
             median_us(lambda: launch(x, y, o, 64, BLOCK=64), args.launches, args.repeats)),
            ("naiad add[(1,)](x, y, o, 64, BLOCK=64)",
             median_us(lambda: add[(1,)](x, y, o, 64, BLOCK=64), args.launches, args.repeats))]
    rows.append(("numpy np.add(x, y, out=o)",
                 median_us(lambda: np.add(x, y, out=o), args.launches, args.repeats)))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        tx, ty, to = torch.ones(64), torch.ones(64), torch.empty(64)
        rows.append(("torch torch.add(x, y, out=o) (cpu)",
                     median_us(lambda: torch.add(tx, ty, out=to), args.launches, args.repeats)))

    report(rows, args.csv, args.launches, args.repeats)


def report(rows: list[tuple[str, float]], path: str, launches: int, repeats: int) -> None:
    """Print ``(call, median us)`` rows as a table and write them to the CSV file ``path``
    (bench/gpu_launch.py reports the same way)."""
    width = max(len(name) for name, _ in rows)
    print(f"{'call':<{width}}  median us")
    for name, us in rows:
        print(f"{name:<{width}}  {us:9.2f}")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["call", "median_us", "launches", "repeats"])
        for name, us in rows:
            writer.writerow([name, f"{us:.2f}", launches, repeats])
    print(f"wrote {path}")
    plot(path)


def plot(csv_path: str) -> str | None:
    """The calls' median microseconds as bars, in a PNG beside the CSV; returns its path, or None
    without matplotlib."""
    rows = plots.read_rows(csv_path, "call", "median_us")
    panel = plots.Bars("host time of one warm call (lower is better)", "µs per call (median)",
                       [r["call"] for r in rows], {"median": [plots.number(r["median_us"]) for r in rows]})
    return plots.write_png(csv_path, [panel], "Warm launch against the libraries' own calls", columns=1,
                           panel_width=10)


if __name__ == "__main__":
    main()
