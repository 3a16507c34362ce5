"""The first launch of a kernel in a new process: from the local disk cache, from a remote Redis
cache (another node compiled it; this one's local cache is empty), and compiled -- in one run.

    python bench/remote_cache.py [--rounds 7] [--csv PATH]

Starts Debian's ``redis-server`` on 127.0.0.1 at a free port (skips the Redis row without it),
compiles the gallery's kernels once into it (the "first node"), then, round after round and in
turn, starts fresh processes that time their first launch of each kernel: with the first node's
local cache (a local hit), with an empty local cache and the Redis URL (a remote hit: fetched,
checked against the manifest, copied into the local cache, loaded), and with neither (a cold
compile).  Times are medians over the rounds; the ratio is the remote hit's over the local one's
(the goal is at most 1.2).  Prints a table, writes CSV (bench/results/remote-cache.csv).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: One node: the first launch of each gallery kernel, timed in this new process.
NODE = """
import json, time, numpy as np
t0 = time.perf_counter()
import naiad
from naiad.tools import gallery
imported = time.perf_counter() - t0
x = np.random.rand(4096).astype(np.float32)
m = np.random.rand(64, 1000).astype(np.float32)
runs = {"vector add": lambda: gallery.add(x, x), "softmax": lambda: gallery.softmax(m),
        "matmul": lambda: gallery.matmul(m[:, :64].copy(), m[:64, :64].copy())}
out = {"import": imported}
for name, run in runs.items():
    start = time.perf_counter()
    run()
    out[name] = time.perf_counter() - start
print(json.dumps(out))
"""


def node(cache_dir: str, remote: str | None) -> dict[str, float]:
    env = dict(os.environ, NAIAD_CACHE_DIR=cache_dir, PYTHONPATH=ROOT)
    env.pop("NAIAD_REMOTE_CACHE", None)
    if remote:
        env["NAIAD_REMOTE_CACHE"] = remote
    out = subprocess.run([sys.executable, "-c", NODE], env=env, capture_output=True, text=True, check=True)
    import json

    return json.loads(out.stdout.strip().splitlines()[-1])


def start_redis(directory: str) -> tuple[subprocess.Popen, str] | None:
    program = shutil.which("redis-server")
    if program is None:
        return None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([program, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", directory],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return process, f"redis://127.0.0.1:{port}/0"
        time.sleep(0.05)
    process.kill()
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--csv", default=os.path.join(HERE, "results", "remote-cache.csv"))
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="naiad-remote-bench-")
    redis = start_redis(work)
    try:
        url = redis[1] if redis else None
        first = os.path.join(work, "first")
        node(first, url)                                          # the first node compiles, publishes
        samples: dict[str, list[dict[str, float]]] = {"local hit": [], "remote hit": [], "compile": []}
        for r in range(args.rounds):
            samples["local hit"].append(node(first, None))
            if url:
                samples["remote hit"].append(node(os.path.join(work, f"empty-{r}"), url))
            samples["compile"].append(node(os.path.join(work, f"cold-{r}"), None))
    finally:
        if redis:
            redis[0].send_signal(signal.SIGTERM)
            redis[0].wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    kernels = ["vector add", "softmax", "matmul"]
    rows = []
    for kernel in kernels:
        median = {how: statistics.median(s[kernel] for s in runs) if runs else float("nan")
                  for how, runs in samples.items()}
        rows.append({"kernel": kernel, **{f"{how} ms": round(v * 1e3, 2) for how, v in median.items()},
                     "remote / local": round(median["remote hit"] / median["local hit"], 3)})
    imports = statistics.median(s["import"] for s in samples["local hit"])
    fields = list(rows[0])
    print(" | ".join(fields))
    for row in rows:
        print(" | ".join(str(row[f]) for f in fields))
    print(f"(first launch in a new process, median of {args.rounds}; import naiad: {imports * 1e3:.0f} ms, "
          f"not included; Redis on this machine: {url or 'not installed'})")
    os.makedirs(os.path.dirname(args.csv), exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
