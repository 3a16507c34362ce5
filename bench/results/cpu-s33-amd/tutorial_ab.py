"""Triton's tutorial matmul (gallery.matmul_tutorial_kernel) with B stored plainly and as w.T, fp32, under $NAIAD_TREE, timed as bench/cpu_matmul.py times (rests, medians)."""
import os, sys
sys.path.insert(0, os.environ["NAIAD_TREE"])
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import numpy as np
import naiad
assert naiad.__file__.startswith(os.environ["NAIAD_TREE"])
from naiad.tools import gallery
from cpu_matmul import timed
size = int(sys.argv[1])
rng = np.random.default_rng(0)
a = rng.standard_normal((size, size), dtype=np.float32); w = rng.standard_normal((size, size), dtype=np.float32)
out = []
for tile in [int(t) for t in sys.argv[2].split(",")]:
    for name, b in (("plain", np.ascontiguousarray(w.T)), ("w.T", w.T)):
        c = gallery.matmul_tutorial(a, b, tile, tile, 32, 8)
        assert np.abs(c - a @ b).max() < 1e-2
        s = timed({"numpy": lambda: a @ b, "naiad": lambda: gallery.matmul_tutorial(a, b, tile, tile, 32, 8)}, 3, max(1, int(2e9 // (2 * size ** 3))))
        out.append(f"t{tile} {name} {s['numpy'] / s['naiad']:.2f}")
print(os.path.basename(os.environ["NAIAD_TREE"]), size, "  ".join(out), flush=True)
