"""What naiad.profiler costs a warm launch: bench/launch.py's kernel (4 arguments, grid (1,),
64 float32 elements, CPU backend) launched with no profile, with launch hooks that do nothing
(what any hook costs: the launch leaves the native entry), inside ``with
naiad.profiler.profile()``, and after such a block (its hooks gone, the native entry back).

    python bench/profiler_overhead.py [--launches N] [--repeats R] [--csv PATH]

Each row is the median over R repeats of (time of N back-to-back calls) / N, in microseconds
(bench/launch.py's `median_us`).  Writes the rows to bench/results/profiler_overhead.csv.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import launch as launch_bench  # noqa: E402  (bench/launch.py: the kernel, the timing, the table and CSV)
import naiad
import naiad.language as tl
from naiad import profiler


def _nothing(metadata):
    """A launch hook that does nothing."""


def _work(grid, metadata, args):
    """Triton's launch_metadata convention: what one launch computes and moves."""
    n = args["n"]
    return {"flops": n, "bytes": 3 * n * args["x"].itemsize}


@naiad.jit(launch_metadata=_work)
def add_counted(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(__file__), "results",
                                                      "profiler_overhead.csv"))
    args = parser.parse_args()

    x = np.ones(64, np.float32)
    y = np.ones(64, np.float32)
    o = np.empty_like(x)
    add, median = launch_bench.add, launch_bench.median_us
    launch, counted = add[(1,)], add_counted[(1,)]
    launch(x, y, o, 64, BLOCK=64)                       # compile and warm
    counted(x, y, o, 64, BLOCK=64)
    assert (o == 2).all()
    n, r = args.launches, args.repeats
    rows = [("no profile: launch(x, y, o, 64, BLOCK=64), launch = add[(1,)] held from before",
             median(lambda: launch(x, y, o, 64, BLOCK=64), n, r)),
            ("no profile: add[(1,)](x, y, o, 64, BLOCK=64)",
             median(lambda: add[(1,)](x, y, o, 64, BLOCK=64), n, r))]
    hooks = (naiad.knobs.runtime.launch_enter_hook, naiad.knobs.runtime.launch_exit_hook)
    for chain in hooks:                     # what any launch hook costs, the profiler's or not
        chain.add(_nothing)
    rows.append(("no profile, an enter and an exit hook that do nothing: launch(...)",
                 median(lambda: launch(x, y, o, 64, BLOCK=64), n, r)))
    for chain in hooks:
        chain.remove(_nothing)
    with profiler.profile() as p:
        rows += [("profile on: launch(x, y, o, 64, BLOCK=64)",
                  median(lambda: launch(x, y, o, 64, BLOCK=64), n, r)),
                 ("profile on: add[(1,)](x, y, o, 64, BLOCK=64)",
                  median(lambda: add[(1,)](x, y, o, 64, BLOCK=64), n, r)),
                 ("profile on: counted(...), a kernel with launch_metadata (flops, bytes)",
                  median(lambda: counted(x, y, o, 64, BLOCK=64), n, r))]
    assert len(p.events) >= 3 * n * r and not naiad.knobs.runtime.launch_hooked()
    rows.append(("after the profile: launch(x, y, o, 64, BLOCK=64)",
                 median(lambda: launch(x, y, o, 64, BLOCK=64), n, r)))
    launch_bench.report(rows, args.csv, n, r)


if __name__ == "__main__":
    main()
