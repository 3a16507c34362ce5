"""Cold compile of Naiad source trees against each other and Triton, interleaved.

One change to the compile path moves a cold first launch by a few percent, less than the drift of
a machine over a minute; timing tree A's runs and then tree B's confounds the two.  This script
times each tree's first launch (bench/gpu.py's `cold_start_ms`: a new process, empty caches) and
Triton's, round after round, the order reversed every other round, and reports medians and each
tree's ratio to Triton's median.

    python3 bench/compile_ab.py --tree head=. --tree before=/tmp/before --rounds 6 \\
        --workload matmul --csv bench/results/gpu-compile-ab.csv

Each tree is a checkout (or `git archive` export) holding `naiad/` and `bench/gpu.py`; its runs
import that tree's Naiad.  Needs a CUDA GPU, torch and Triton (as bench/gpu.py).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys

#: Run in a tree's root: the first launch of a workload in a new process, as bench/gpu.py does.
_ONE_RUN = ("import sys, tempfile; sys.path.insert(0, 'bench'); import gpu; d = tempfile.mkdtemp(); "
            "gpu.write_kernel_modules(d); print(*gpu.cold_start_ms(sys.argv[1], d, sys.argv[2]))")


def first_launch_ms(tree: str, framework: str, workload: str) -> float:
    done = subprocess.run([sys.executable, "-c", _ONE_RUN, framework, workload], cwd=tree,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{framework} in {tree}: {done.stderr.strip()[-400:]}")
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH",
                        help="a Naiad tree to time (repeat; the first also times Triton)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--workload", default="matmul", help="softmax or matmul (bench/gpu.py's)")
    parser.add_argument("--csv", help="write every run here")
    args = parser.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    runs = [(name, "naiad") for name in trees] + [(next(iter(trees)), "triton")]
    samples: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
    for r in range(args.rounds):
        for name, framework in (runs if r % 2 == 0 else runs[::-1]):
            ms = first_launch_ms(os.path.abspath(trees[name]), framework, args.workload)
            samples[name, framework].append(ms)
            print(f"round {r}: {name} {framework} {ms:.1f} ms", flush=True)
    triton = statistics.median(samples[runs[-1]])
    print(f"\n{'tree':12s} {'framework':9s} {'median ms':>10s} {'/ triton':>9s}")
    for (name, framework), values in samples.items():
        median = statistics.median(values)
        print(f"{name:12s} {framework:9s} {median:10.1f} {median / triton:9.3f}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["tree", "framework", "round", f"first {args.workload} launch (ms)"])
            for (name, framework), values in samples.items():
                out.writerows([name, framework, i, round(v, 1)] for i, v in enumerate(values))


if __name__ == "__main__":
    main()
