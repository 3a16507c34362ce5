"""CPU matmuls and attention: Naiad's ``tl.dot`` kernels against numpy's BLAS and torch, in one run.

    python bench/cpu_matmul.py [--sizes 256,512,1024,2048] [--tiles 32,64,128]
                               [--dtypes fp32,bf16,int8,linear,attention] [--csv PATH]
    python bench/cpu_matmul.py --plot bench/results/cpu-matmul.csv     # the plot, from a CSV

Rows: the gallery's matmul kernel (`naiad.tools.gallery`: one program per tile x tile block
of C, a K loop of 32, masked edges) in fp32 against numpy (BLAS)
and torch, in bf16 against torch's bf16 matmul (oneDNN: AMX or AVX-512 BF16 where the
processor has them) and in int8 into int32 (K loop of 64) against torch's ``_int_mm`` (GOP/s
in the GFLOP/s columns), over square sizes and tiles; ``x @ wᵀ`` with ``w`` stored ``[N, K]``
(`linear_rows`); and the gallery's attention forward (Triton's
tutorial 06: online softmax over blocks of 64 keys, head dim 64, fp32 and bf16) against
torch's CPU ``scaled_dot_product_attention``.  Every result is checked against torch in fp32
first.  Times are medians of repeated calls after a warm-up, every column of a row timed in
turn, round after round, so that the machine's drift falls on all alike, each block after a
rest that lets the previous library's spinning threads go to sleep; GFLOP/s = 2 M N K
(attention: 4 B H N^2 D).  Prints a table, writes CSV (bench/results/cpu-matmul.csv by
default) and, with matplotlib, its plot beside it (`plots`: GFLOP/s against size, fp32, bf16
and attention).  On a shared 2-core machine the figures move by tens of percent from run to run:
compare the ratios.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import statistics
import time
from typing import Any, Callable

import numpy as np

import naiad
from naiad.tools import gallery

import plots

try:
    import torch
except ImportError:
    torch = None


def naiad_matmul(a: Any, b: Any, c: Any, tile: int, block_k: int = 32) -> None:
    """``c = a @ b`` with the gallery's kernel (Triton's tutorial shape), ``tile`` x ``tile``
    blocks of C and a K loop of ``block_k``."""
    m, k = a.shape
    n = b.shape[1]
    gallery.matmul_kernel[(naiad.cdiv(m, tile), naiad.cdiv(n, tile))](
        a, b, c, m, n, k, k, 1, n, 1, n, 1, BLOCK_M=tile, BLOCK_N=tile, BLOCK_K=block_k)


#: Seconds of rest before each block of calls: a library's threads keep spinning on the cores
#: for a while after its call (OpenBLAS's for about 0.1 s by default), which slowed whatever ran
#: next on this 2-core machine by up to 4x.
REST = 0.25


#: Seconds a block of calls lasts at least (up to `MOST_REPEATS` calls): a single call of a few
#: milliseconds, right after the block's wake-up call, read 2-10x apart from round to round on
#: the 16-core Xeon.
BLOCK_SECONDS = 0.05
MOST_REPEATS = 100


def timed(calls: dict[str, Callable[[], Any]], rounds: int, repeats: int) -> dict[str, float]:
    """Median seconds of one call of each, over ``rounds`` rounds of at least ``repeats`` calls
    (more where a call is short: `BLOCK_SECONDS`) taking the columns in turn (the order
    reversing each round), each block after a rest (`REST`)."""
    counts = {}
    for name, call in calls.items():
        start = time.perf_counter()
        call()
        seconds = time.perf_counter() - start
        counts[name] = max(repeats, min(MOST_REPEATS, math.ceil(BLOCK_SECONDS / max(seconds, 1e-9))))
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            time.sleep(REST)
            calls[name]()                   # the block's first call wakes its threads
            for _ in range(counts[name]):
                start = time.perf_counter()
                calls[name]()
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def check(got: Any, want: Any, rtol: float, what: str) -> None:
    error = float(np.max(np.abs(got - want)) / max(1e-30, float(np.max(np.abs(want)))))
    if not error <= rtol:
        raise AssertionError(f"{what}: relative error {error:.2e} over {rtol:.0e}")


def matmul_rows(sizes: list[int], tiles: list[int], rounds: int, dtypes: set[str]) -> list[list[Any]]:
    rows = []
    rng = np.random.default_rng(0)
    for size in sizes:
        flops = 2 * size ** 3
        a = rng.standard_normal((size, size), dtype=np.float32)
        b = rng.standard_normal((size, size), dtype=np.float32)
        repeats = max(1, int(2e9 // flops))
        if "fp32" in dtypes:
            rows += fp32_rows(a, b, tiles, rounds, repeats)
        if torch is None:
            continue
        if "bf16" in dtypes:
            rows += bf16_rows(a, b, tiles, rounds, repeats)
        if "int8" in dtypes:
            rows += int8_rows(size, tiles, rounds, repeats, rng)
        if "linear" in dtypes:
            rows += linear_rows(a, b, tiles, rounds, repeats)
    return rows


def linear_rows(x: Any, w: Any, tiles: list[int], rounds: int, repeats: int) -> list[list[Any]]:
    """``x @ wᵀ`` with ``w`` stored ``[N, K]`` (a linear layer's weight), two ways: the gallery's
    matmul over ``wᵀ``'s strides (``(1, K)``: B's blocks run down their columns) and its linear
    kernel (``tl.trans`` of ``w``'s rows); fp32 against numpy's ``x @ w.T`` and torch's
    ``F.linear``, bf16 against torch's (torch is needed: `matmul_rows` asks only with it)."""
    size = x.shape[0]
    flops = 2 * size ** 3
    rows = []
    for dtype in ("fp32", "bf16"):
        bf16 = dtype == "bf16"
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        if bf16:
            tx, tw = tx.bfloat16(), tw.bfloat16()
        xs, ws = (tx, tw) if bf16 else (x, w)
        want = (tx.double() @ tw.double().T).numpy()
        for tile in tiles:
            y = torch.empty(size, size)
            grid = (naiad.cdiv(size, tile), naiad.cdiv(size, tile))
            ways = {
                "strides": lambda: gallery.matmul_kernel[grid](xs, ws.T, y, size, size, size, size, 1, 1, size,
                                                               size, 1, BLOCK_M=tile, BLOCK_N=tile, BLOCK_K=32),
                "tl.trans": lambda: gallery.linear_kernel[grid](xs, ws, y, size, size, size, BLOCK_M=tile,
                                                                BLOCK_N=tile, BLOCK_K=32),
            }
            for way, call in ways.items():
                call()
                check(y.numpy(), want, 1e-4, f"linear {dtype} {size} tile {tile} {way}")
                calls = {"naiad": call, "torch": lambda: torch.nn.functional.linear(tx, tw)}
                if not bf16:
                    calls["numpy"] = lambda: x @ w.T
                seconds = timed(calls, rounds, repeats)
                peer = seconds["torch"] if bf16 else seconds["numpy"]
                rows.append([f"linear {dtype} {size}^3 ({way})", tile,
                             *(flops / seconds.get(k, float("nan")) / 1e9 for k in ("naiad", "numpy", "torch")),
                             peer / seconds["naiad"]])
    return rows


def fp32_rows(a: Any, b: Any, tiles: list[int], rounds: int, repeats: int) -> list[list[Any]]:
    size = a.shape[0]
    flops = 2 * size ** 3
    want = a.astype(np.float64) @ b.astype(np.float64)
    rows = []
    for tile in tiles:
        c = np.empty((size, size), np.float32)
        naiad_matmul(a, b, c, tile)
        check(c, want, 1e-4, f"fp32 {size} tile {tile}")
        calls = {"naiad": lambda: naiad_matmul(a, b, c, tile), "numpy": lambda: a @ b}
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            calls["torch"] = lambda: ta @ tb
        seconds = timed(calls, rounds, repeats)
        rows.append([f"matmul fp32 {size}^3", tile, *(flops / seconds.get(k, float("nan")) / 1e9
                                                     for k in ("naiad", "numpy", "torch")),
                     seconds["numpy"] / seconds["naiad"]])
    return rows


def bf16_rows(a: Any, b: Any, tiles: list[int], rounds: int, repeats: int) -> list[list[Any]]:
    ta, tb = torch.from_numpy(a).bfloat16(), torch.from_numpy(b).bfloat16()
    return torch_rows("bf16", ta, tb, torch.float32, (ta.double() @ tb.double()).numpy(), 1e-4,
                      lambda: ta @ tb, 32, tiles, rounds, repeats)


def int8_rows(size: int, tiles: list[int], rounds: int, repeats: int, rng: Any) -> list[list[Any]]:
    """int8 x int8 -> int32 (exact) against torch's ``_int_mm``, with a K loop of 64 (a whole
    AMX tile row; the block int8 kernels pick)."""
    if torch is None or not hasattr(torch, "_int_mm"):
        return []
    a, b = (torch.from_numpy(rng.integers(-128, 128, (size, size)).astype(np.int8)) for _ in range(2))
    want = a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)
    return torch_rows("int8", a, b, torch.int32, want, 0, lambda: torch._int_mm(a, b), 64, tiles, rounds,
                      repeats)


def torch_rows(dtype: str, a: Any, b: Any, out_dtype: Any, want: Any, rtol: float, peer: Callable[[], Any],
               block_k: int, tiles: list[int], rounds: int, repeats: int) -> list[list[Any]]:
    """Rows of the gallery matmul of torch tensors ``a @ b`` into ``out_dtype`` against
    ``peer()`` (torch's own), each tile's result checked against ``want`` first."""
    size = a.shape[0]
    flops = 2 * size ** 3
    rows = []
    for tile in tiles:
        c = torch.empty(size, size, dtype=out_dtype)
        naiad_matmul(a, b, c, tile, block_k)
        check(c.numpy(), want, rtol, f"{dtype} {size} tile {tile}")
        seconds = timed({"naiad": lambda: naiad_matmul(a, b, c, tile, block_k), "torch": peer}, rounds, repeats)
        rows.append([f"matmul {dtype} {size}^3", tile, flops / seconds["naiad"] / 1e9, float("nan"),
                     flops / seconds["torch"] / 1e9, seconds["torch"] / seconds["naiad"]])
    return rows


def attention_rows(rounds: int) -> list[list[Any]]:
    rows = []
    batch, heads, head_dim = 1, 8, 64
    for n_ctx in (512, 1024, 2048):
        flops = 4 * batch * heads * n_ctx * n_ctx * head_dim
        for dtype in (torch.float32, torch.bfloat16):
            gen = torch.Generator().manual_seed(n_ctx)
            q, k, v = (torch.randn(batch, heads, n_ctx, head_dim, generator=gen).to(dtype) for _ in range(3))
            out = torch.empty_like(q)
            gallery.attention(q, k, v, out)
            want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
            check(out.float().numpy(), want.numpy(), 1e-4 if dtype == torch.float32 else 2e-2,
                  f"attention {dtype} {n_ctx}")
            sdpa = torch.nn.functional.scaled_dot_product_attention
            seconds = timed({"naiad": lambda: gallery.attention(q, k, v, out), "torch": lambda: sdpa(q, k, v)},
                            rounds, max(1, int(1e9 // flops)))
            name = "fp32" if dtype == torch.float32 else "bf16"
            rows.append([f"attention fwd {name} B{batch} H{heads} N{n_ctx} D{head_dim}", 64,
                         flops / seconds["naiad"] / 1e9, float("nan"), flops / seconds["torch"] / 1e9,
                         seconds["torch"] / seconds["naiad"]])
    return rows


#: Benchmark names in the CSV: "matmul fp32 256^3", "linear bf16 1024^3 (tl.trans)",
#: "attention fwd bf16 B1 H8 N512 D64".
MATMUL_NAME = re.compile(r"(matmul|linear) (\w+) (\d+)\^3(?: \((.+)\))?")
ATTENTION_NAME = re.compile(r"attention fwd (\w+) .*\bN(\d+)\b")


def matmul_panel(rows: list[dict[str, str]], dtype: str, peers: tuple[str, ...], kind: str = "matmul") -> plots.Lines:
    """GFLOP/s against size in one dtype of ``kind``'s rows (the gallery's matmul, or ``x @
    wᵀ``): a line per tile of Naiad's (and per way, where rows name one), one per peer library
    (each size's median over the rows, which time the peer again)."""
    points = [(int(m[3]), m[4], r) for r in rows for m in [MATMUL_NAME.fullmatch(r["benchmark"])]
              if m and m[1] == kind and m[2] == dtype]
    lines = sorted({(int(r["tile"]), way or "") for _, way, r in points})
    series = {f"Naiad, tile {t}{', ' + way if way else ''}": [
        (size, plots.number(r["naiad GFLOP/s"])) for size, w, r in points if int(r["tile"]) == t and (w or "") == way]
        for t, way in lines}
    for peer in peers:
        sizes = sorted({size for size, _, _ in points})
        series[peer] = [(size, statistics.median(plots.number(r[f"{peer} GFLOP/s"]) for s, _, r in points
                                                  if s == size)) for size in sizes]
    title = f"matmul {dtype}" if kind == "matmul" else f"x @ wᵀ {dtype}"
    return plots.Lines(title, "M = N = K", "GFLOP/s", series, x_log=True, dashed=peers, y_from_zero=True)


def attention_panel(rows: list[dict[str, str]]) -> plots.Lines:
    """GFLOP/s of the attention forward against sequence length: Naiad and torch per dtype."""
    points = [(m[1], int(m[2]), r) for r in rows for m in [ATTENTION_NAME.match(r["benchmark"])] if m]
    series = {}
    for dtype in dict.fromkeys(d for d, _, _ in points):
        for label, column in (("Naiad", "naiad GFLOP/s"), ("torch SDPA", "torch GFLOP/s")):
            series[f"{label}, {dtype}"] = [(n, plots.number(r[column])) for d, n, r in points if d == dtype]
    return plots.Lines("attention forward (B1 H8 D64)", "N (sequence)", "GFLOP/s", series, x_log=True,
                       dashed=tuple(label for label in series if label.startswith("torch")),
                       y_from_zero=True)


def plot(csv_path: str) -> str | None:
    """The CSV's rows as panels of GFLOP/s (fp32, bf16 and int8 matmuls, x @ wᵀ, attention) in a PNG
    beside it; returns its path, or None without matplotlib."""
    rows = plots.read_rows(csv_path, "benchmark", "tile", "naiad GFLOP/s", "numpy GFLOP/s",
                           "torch GFLOP/s")
    panels = [matmul_panel(rows, "fp32", ("numpy", "torch")), matmul_panel(rows, "bf16", ("torch",)),
              matmul_panel(rows, "int8", ("torch",)), matmul_panel(rows, "fp32", ("numpy", "torch"), "linear"),
              matmul_panel(rows, "bf16", ("torch",), "linear"), attention_panel(rows)]
    return plots.write_png(csv_path, [p for p in panels if any(p.series.values())],
                           "CPU: Naiad's tl.dot kernels against numpy (BLAS) and torch", columns=2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,512,1024,2048")
    parser.add_argument("--tiles", default="32,64,128")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dtypes", default="fp32,bf16,int8,linear,attention",
                        help="which rows: matmuls of fp32, bf16, int8, x @ w.T (linear), and attention")
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(__file__), "results", "cpu-matmul.csv"))
    parser.add_argument("--plot", metavar="CSV", help="only draw the plot of an earlier run's CSV")
    args = parser.parse_args()
    if args.plot:
        plot(args.plot)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    tiles = [int(t) for t in args.tiles.split(",")]
    dtypes = set(args.dtypes.split(","))
    rows = matmul_rows(sizes, tiles, args.rounds, dtypes)
    if torch is not None and "attention" in dtypes:
        rows += attention_rows(args.rounds)
    header = ["benchmark", "tile", "naiad GFLOP/s", "numpy GFLOP/s", "torch GFLOP/s", "peer/naiad time (speed ratio)"]
    print(f"{header[0]:44s} {'tile':>5s} {'naiad':>8s} {'numpy':>8s} {'torch':>8s} {'ratio':>7s}")
    for name, tile, ours, np_rate, torch_rate, ratio in rows:
        print(f"{name:44s} {tile:5d} {ours:8.1f} {np_rate:8.1f} {torch_rate:8.1f} {ratio:7.3f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(header)
        out.writerows([[r[0], r[1], *(f"{x:.4g}" for x in r[2:])] for r in rows])
    print(f"wrote {args.csv} (ratio: numpy's time for fp32 rows, torch's for bf16, int8 and attention, over Naiad's)")
    plot(args.csv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
