"""The same kernels on two of Naiad's CPU paths, in one run: the opencl backend (naiad-opencl on
an OpenCL device, e.g. Intel's CPU runtime) against Naiad's own cpu backend.

    pip install "./plugins/naiad-opencl[intel-cpu]" && python bench/opencl.py [--quick] [--csv PATH]
    python bench/opencl.py --plot bench/results/opencl.csv     # the plot, from a CSV

The kernels are the gallery's (naiad/tools/gallery.py): vector add, softmax, layernorm and the
64x64x32 matmul, each over a range of sizes.  Both backends get the same numpy arrays (opencl
through shared virtual memory, without copies); every result is checked against numpy first.
Prints median times and the ratio opencl / cpu (time: above 1 means the cpu backend is faster)
and writes the same rows as CSV and, with matplotlib, their plot beside it (`plots`).  There is no goal: the table tells users which CPU path to use.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys

import numpy as np

import naiad
from naiad.tools import gallery
from host_timing import median_ms
import plots

BACKENDS = ("cpu", "opencl")


def workloads(quick: bool):
    """(name, unit, amount of work for the unit, run() -> result, numpy reference)."""
    rng = np.random.default_rng(0)
    for log_n in ((16, 20) if quick else (16, 20, 24)):
        n = 1 << log_n
        x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        yield f"vector add 2^{log_n} fp32", "GB/s", 3 * 4 * n, (lambda x=x, y=y: gallery.add(x, y)), x + y
    for rows, cols in (((256, 1024),) if quick else ((256, 1024), (4096, 1024), (1024, 4096))):
        m = rng.standard_normal((rows, cols), dtype=np.float32)
        w, b = rng.standard_normal(cols, dtype=np.float32), rng.standard_normal(cols, dtype=np.float32)
        yield (f"softmax {rows}x{cols} fp32", "GB/s", 2 * 4 * rows * cols,
               (lambda m=m: gallery.softmax(m)), gallery.softmax_reference(m))
        yield (f"layernorm {rows}x{cols} fp32", "GB/s", 2 * 4 * rows * cols,
               (lambda m=m, w=w, b=b: gallery.layernorm(m, w, b)), gallery.layernorm_reference(m, w, b))
    for size in ((256,) if quick else (256, 512, 1024)):
        a = rng.standard_normal((size, size), dtype=np.float32)
        c = rng.standard_normal((size, size), dtype=np.float32)
        yield f"matmul {size}^3 fp32", "GFLOP/s", 2 * size ** 3, (lambda a=a, c=c: gallery.matmul(a, c)), a @ c


def plot(csv_path: str) -> str | None:
    """Each workload's median time on the two backends, as bars on a log scale, in a PNG beside
    the CSV; returns its path, or None without matplotlib."""
    rows = plots.read_rows(csv_path, "workload", "cpu_ms", "opencl_ms")
    panel = plots.Bars("median time of one call (lower is better)", "ms (log scale)",
                       [r["workload"] for r in rows],
                       {f"{backend} backend": [plots.number(r[f"{backend}_ms"]) for r in rows]
                        for backend in BACKENDS}, x_log=True)
    return plots.write_png(csv_path, [panel], "Naiad's two CPU paths: the cpu backend and opencl",
                           columns=1, panel_width=8)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer, smaller sizes (a smoke run)")
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(__file__), "results", "opencl.csv"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--plot", metavar="CSV", help="only draw the plot of an earlier run's CSV")
    args = parser.parse_args()
    if args.plot:
        plot(args.plot)
        return 0
    from naiad.backends.discovery import registry
    from naiad.backends.selection import driver_for

    if "opencl" not in registry.sources():
        print("the opencl backend is not installed -- fix: pip install ./plugins/naiad-opencl[intel-cpu]",
              file=sys.stderr)
        return 1
    target = driver_for(registry["opencl"]).get_current_target()
    print(f"Naiad {naiad.__version__}: cpu backend ({os.cpu_count()} cores) vs opencl ({target.arch}, "
          f"sub-group {target.warp_size})")
    header = ("workload", "unit", "cpu_ms", "opencl_ms", "opencl/cpu (time)", "cpu_rate", "opencl_rate")
    rows = []
    for name, unit, amount, run, expected in workloads(args.quick):
        times = {}
        for backend in BACKENDS:
            with naiad.set_backend(backend):
                np.testing.assert_allclose(run(), expected, rtol=2e-3, atol=2e-3,
                                           err_msg=f"{name} on {backend}")
                times[backend] = median_ms(run, args.runs)
        rows.append((name, unit, times["cpu"], times["opencl"], times["opencl"] / times["cpu"],
                     amount / times["cpu"] / 1e6, amount / times["opencl"] / 1e6))
    widths = (28, 8, 10, 11, 18, 10, 11)
    print("".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("".join((f"{v:.3f}" if isinstance(v, float) else str(v)).ljust(w) for v, w in zip(row, widths)))
    os.makedirs(os.path.dirname(args.csv), exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    print(f"wrote {args.csv}")
    plot(args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
