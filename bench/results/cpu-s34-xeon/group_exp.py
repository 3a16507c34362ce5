"""The gallery's matmul against its peer (numpy fp32, torch bf16, torch._int_mm int8), all in one
process: GFLOP/s per tile, median of 5 rounds of best-of-2 calls, and the ratio.  Runs the naiad
tree named by NAIAD_TREE (a checkout or an unpacked `git archive`); BK sets BLOCK_K.
Usage: NAIAD_TREE=<tree> python group_exp.py DTYPE SIZE TILES (e.g. bf16 2048 64,128)."""
import os, sys, time, statistics
sys.path.insert(0, os.environ["NAIAD_TREE"])
import numpy as np
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))   # bench/
import naiad
assert naiad.__file__.startswith(os.environ["NAIAD_TREE"]), naiad.__file__
import cpu_matmul_parts as parts
from naiad.tools.gallery import matmul_kernel

dtype, size, tiles = sys.argv[1], int(sys.argv[2]), [int(t) for t in sys.argv[3].split(",")]
rng = np.random.default_rng(0)
a, b = parts.operands(dtype, (size, size), rng), parts.operands(dtype, (size, size), rng)
c = parts.results(dtype, (size, size))
flops, bk = 2.0 * size ** 3, int(os.environ.get('BK', parts.BLOCK_K[dtype]))
name, lib = parts.peer(dtype, a, b)
calls = {name: lib}
for tile in tiles:
    calls[f"t{tile}"] = (lambda tile=tile: matmul_kernel[(size // tile, size // tile)](
        a, b, c, size, size, size, size, 1, size, 1, size, 1, BLOCK_M=tile, BLOCK_N=tile, BLOCK_K=bk))
rates = {k: [] for k in calls}
for f in calls.values():
    f()
for _ in range(5):
    for k, f in calls.items():
        best = 0.0
        for _ in range(2):
            s = time.perf_counter(); f(); best = max(best, flops / (time.perf_counter() - s) / 1e9)
        rates[k].append(best)
peer = statistics.median(rates[name])
print(f"bk={bk} group={os.environ.get('NAIAD_DOT_GROUP', 8)} {dtype} {size} thr={os.environ.get('NAIAD_CPU_THREADS', 'all')}: "
      + "  ".join(f"{k} {statistics.median(r):7.1f} ({statistics.median(r) / peer:4.2f})" for k, r in rates.items()),
      flush=True)
