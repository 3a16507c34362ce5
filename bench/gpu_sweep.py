"""GPU memory-bound kernels over a range of sizes and dtypes: Naiad against Triton and torch.

    python bench/gpu_sweep.py [--only NAME,...] [--dtypes fp32,fp16,bf16] [--sizes N,...] [--csv PATH]
    python bench/gpu_sweep.py --plot bench/results/gpu-sweep.csv     # the plot, from a CSV

The rows the LLM-sized workloads meet: one program per row over M = 4096 rows of N = 256 ...
32768 columns (softmax, layernorm, RMSNorm, row sum; the whole row in one block, warps as
Triton's tutorial 02 picks them), and 1-D fused elementwise ops over 2^16 ... 2^28 elements
(GELU(a)*b through ``erf``, SiLU(a)*b through ``exp``; 1024-element blocks), each in fp32, fp16
and bf16 (computed in fp32, stored in the input's dtype).  The kernels are written once, as
Triton-language source, and imported under Naiad and under the real Triton (`gpu.py`'s method);
torch runs its own ops.  Every result is checked against torch before it is timed, then timed
with CUDA events, the L2 cache emptied before each timed call and the columns taking turns call
by call; each column's median over 100 calls is its figure.

Prints a table of GB/s (bytes = inputs read once + outputs written once) with the ratio Naiad /
Triton, writes CSV (bench/results/gpu-sweep.csv by default) and, with matplotlib, a plot of the
ratios beside it (`plots`; the GPU machine need not have matplotlib: ``--plot CSV`` draws it
later).
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

import gpu  # the method and helpers of bench/gpu.py (it also keeps `import triton` the real one)
import plots

torch = gpu.torch

SWEEP_KERNELS = '''

@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, numerator / tl.sum(numerator, axis=0), mask=mask)


@triton.jit
def layernorm_kernel(X, Y, W, B, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    centered = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(centered * centered, axis=0) / N + eps)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    b = tl.load(B + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, centered * rstd * w + b, mask=mask)


@triton.jit
def rmsnorm_kernel(X, Y, W, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, x * rstd * w, mask=mask)


@triton.jit
def row_sum_kernel(X, Out, stride, N, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(X + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(Out + row, tl.sum(x, axis=0))


@triton.jit
def gelu_mul_kernel(A, B, Out, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    a = tl.load(A + offsets, mask=mask).to(tl.float32)
    b = tl.load(B + offsets, mask=mask).to(tl.float32)
    gelu = 0.5 * a * (1.0 + tl.erf(a * 0.7071067811865476))
    tl.store(Out + offsets, gelu * b, mask=mask)


@triton.jit
def silu_mul_kernel(A, B, Out, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    a = tl.load(A + offsets, mask=mask).to(tl.float32)
    b = tl.load(B + offsets, mask=mask).to(tl.float32)
    tl.store(Out + offsets, a / (1.0 + tl.exp(-a)) * b, mask=mask)
'''

STEM = "gpu_sweep"
#: Bytes written between timed calls to empty the L2 cache (the H200's holds 60 MB).
FLUSH_BYTES = 256 << 20
ROWS = 4096
COLUMNS = (256, 512, 768, 1024, 2048, 3000, 4096, 8192, 16384, 32768)
ELEMENTS = tuple(1 << e for e in range(16, 29, 2))
DTYPES = ("fp32", "fp16", "bf16")
#: (rtol, atol) of a result in each dtype against torch's
TOLERANCE = {"fp32": (1e-4, 1e-4), "fp16": (4e-3, 4e-3), "bf16": (2e-2, 2e-2)}


@dataclass
class Case:
    """One point of a sweep: a kernel at one size in one dtype."""
    kernel: str
    dtype: str
    size: int                      # N (columns) for row kernels, elements for 1-D ones
    bytes: int
    args: tuple
    out: Any
    launch: Callable               # (kernel module, *args, out)
    reference: Callable            # torch, (*args) -> expected out
    atol_scale: float = 1.0        # sums grow with N: their absolute tolerance with them


def torch_dtype(name: str):
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def row_block(n: int) -> tuple[int, int]:
    block = gpu.naiad.next_power_of_2(n)
    return block, gpu.row_warps(block)


def launch_softmax(k, x, out):
    block, warps = row_block(x.shape[1])
    k.softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK_SIZE=block,
                                    num_warps=warps)


def launch_layernorm(k, x, w, b, out):
    block, warps = row_block(x.shape[1])
    k.layernorm_kernel[(x.shape[0],)](x, out, w, b, x.stride(0), x.shape[1], 1e-5,
                                      BLOCK_SIZE=block, num_warps=warps)


def launch_rmsnorm(k, x, w, out):
    block, warps = row_block(x.shape[1])
    k.rmsnorm_kernel[(x.shape[0],)](x, out, w, x.stride(0), x.shape[1], 1e-6, BLOCK_SIZE=block,
                                    num_warps=warps)


def launch_row_sum(k, x, out):
    block, warps = row_block(x.shape[1])
    k.row_sum_kernel[(x.shape[0],)](x, out, x.stride(0), x.shape[1], BLOCK_SIZE=block,
                                    num_warps=warps)


def launch_elementwise(name, k, a, b, out):
    n = a.numel()
    getattr(k, name)[(gpu.naiad.cdiv(n, 1024),)](a, b, out, n, BLOCK_SIZE=1024)


def row_case(kernel: str, dtype: str, n: int) -> Case:
    t = torch_dtype(dtype)
    size = t.itemsize
    x = torch.randn(ROWS, n, device="cuda", dtype=t)
    w = (1 + 0.1 * torch.randn(n, device="cuda")).to(t)
    b = (0.1 * torch.randn(n, device="cuda")).to(t)
    F = torch.nn.functional
    if kernel == "softmax":
        return Case(kernel, dtype, n, 2 * size * ROWS * n, (x,), torch.empty_like(x),
                    launch_softmax, lambda x: torch.softmax(x, dim=1))
    if kernel == "layernorm":
        return Case(kernel, dtype, n, size * (2 * ROWS * n + 2 * n), (x, w, b), torch.empty_like(x),
                    launch_layernorm, lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5))
    if kernel == "rmsnorm":
        return Case(kernel, dtype, n, size * (2 * ROWS * n + n), (x, w), torch.empty_like(x),
                    launch_rmsnorm, lambda x, w: F.rms_norm(x, (n,), w, 1e-6))
    return Case(kernel, dtype, n, size * (ROWS * n + ROWS), (x,),
                torch.empty(ROWS, device="cuda", dtype=t), launch_row_sum,
                lambda x: x.sum(dim=1), atol_scale=math.sqrt(n))


def elementwise_case(kernel: str, dtype: str, n: int) -> Case:
    t = torch_dtype(dtype)
    a, b = (torch.randn(n, device="cuda", dtype=t) for _ in range(2))
    F = torch.nn.functional
    reference = (lambda a, b: F.gelu(a) * b) if kernel == "gelu_mul" else (lambda a, b: F.silu(a) * b)
    return Case(kernel, dtype, n, 3 * t.itemsize * n, (a, b), torch.empty_like(a),
                functools.partial(launch_elementwise, kernel + "_kernel"), reference)


SWEEPS = {**{k: (functools.partial(row_case, k), COLUMNS)
             for k in ("softmax", "layernorm", "rmsnorm", "row_sum")},
          **{k: (functools.partial(elementwise_case, k), ELEMENTS) for k in ("gelu_mul", "silu_mul")}}


def measure(case: Case, kernels: dict, settings: gpu.Settings) -> gpu.Row:
    """GB/s of torch and of each framework's kernel at one point (`gpu.bandwidth_rows`'s checks
    and timing)."""
    title = f"{case.kernel} {case.dtype} {'M=4096 N=' if case.kernel in COLUMN_KERNELS else 'n='}{case.size}"
    row = gpu.Row(title, "GB/s", {}, [], (">=", 0.97))
    expected = case.reference(*case.args)
    rtol, atol = TOLERANCE[case.dtype]
    runs = {"torch": lambda: case.reference(*case.args)}
    for framework, k in kernels.items():
        run = functools.partial(case.launch, k, *case.args, case.out)
        try:
            gpu.poison(case.out)
            run()
            gpu.check(case.out, expected, rtol, atol * case.atol_scale)
            runs[framework] = run
        except Exception as e:  # noqa: BLE001 -- a point reports its failure, the sweep goes on
            row.failures.append(f"{framework} FAIL: {gpu.first_line(e)}")
    for name, ms in interleaved_flushed_ms(runs, settings).items():
        row.values[name] = case.bytes / ms / 1e6
    return row


def interleaved_flushed_ms(runs: dict[str, Callable[[], Any]], settings: gpu.Settings) -> dict[str, float]:
    """Per column, the median time of one call, the L2 cache emptied before each (timing calls
    back to back, as `gpu.gpu_median_ms` does, let the inputs the previous call left in the 60 MB
    L2 move a point near that size by 30 %).  The columns take turns call by call, the order
    rotating each time, so that every column sees the same GPU.  (When they took turns by
    blocks of 20 calls -- torch, Naiad, Triton, then the reverse -- Naiad's block always came
    second, and 5 us kernels read 3-5 % apart where ncu, at fixed clocks, found them equal.)"""
    flush = torch.empty(FLUSH_BYTES // 4, device="cuda", dtype=torch.int32)
    for fn in runs.values():
        for _ in range(settings.warmup):
            fn()
    names = list(runs)
    calls = settings.rounds * settings.repeats
    events = {name: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                     for _ in range(calls)] for name in names}
    for i in range(calls):
        for k in range(len(names)):
            name = names[(i + k) % len(names)]
            start, end = events[name][i]
            flush.zero_()
            start.record()
            runs[name]()
            end.record()
    torch.cuda.synchronize()
    return {name: statistics.median(start.elapsed_time(end) for start, end in pairs)
            for name, pairs in events.items()}


COLUMN_KERNELS = ("softmax", "layernorm", "rmsnorm", "row_sum")
CSV_HEADER = ["kernel", "dtype", "size", "naiad GB/s", "triton GB/s", "torch GB/s",
              "naiad/triton", "failures"]


#: a measured point: (kernel, dtype, size, its row)
Point = tuple[str, str, int, gpu.Row]


def write_csv(path: str, points: list[Point]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(CSV_HEADER)
        for kernel, dtype, size, row in points:
            values = [row.values.get(name, math.nan) for name in ("naiad", "triton", "torch")]
            out.writerow([kernel, dtype, size, *(f"{v:.1f}" for v in values),
                          f"{row.ratio:.3f}", "; ".join(row.failures)])


def plot(csv_path: str) -> str | None:
    """One panel per kernel: Naiad / Triton against size, a line per dtype, the 0.97 goal
    dashed.  Returns the PNG's path (the CSV's, with .png), or None without matplotlib."""
    rows = plots.read_rows(csv_path, "kernel", "dtype", "size", "naiad/triton")
    panels = []
    for kernel in dict.fromkeys(r["kernel"] for r in rows):
        per_row = kernel in COLUMN_KERNELS
        series = {dtype: [(int(r["size"]), plots.number(r["naiad/triton"])) for r in rows
                          if r["kernel"] == kernel and r["dtype"] == dtype] for dtype in DTYPES}
        panels.append(plots.Lines(kernel + (" (M = 4096)" if per_row else " (1-D)"),
                                  "N (columns)" if per_row else "elements", "Naiad / Triton (GB/s)",
                                  series, x_log=True, reference=0.97))
    return plots.write_png(csv_path, panels, "Memory-bound kernels on the GPU: Naiad / Triton "
                           "(above 1: Naiad faster; dashed: the 0.97 goal)", columns=3)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=lambda v: [n.strip() for n in v.split(",") if n.strip()],
                        default=list(SWEEPS), metavar="NAME,...",
                        help=f"kernels to sweep (default all: {', '.join(SWEEPS)})")
    parser.add_argument("--dtypes", type=lambda v: [n.strip() for n in v.split(",") if n.strip()],
                        default=list(DTYPES), metavar="DTYPE,...")
    parser.add_argument("--sizes", type=lambda v: [int(n) for n in v.split(",") if n.strip()],
                        metavar="N,...", help="only these sizes (columns of the row kernels, "
                        "elements of the 1-D ones) of each kernel's range")
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(__file__), "results",
                                                      "gpu-sweep.csv"))
    parser.add_argument("--plot", metavar="CSV", help="only draw the plot of an earlier run's CSV")
    args = parser.parse_args()
    for given, known in ((args.only, SWEEPS), (args.dtypes, DTYPES)):
        unknown = [n for n in given if n not in known]
        if unknown:
            parser.error(f"unknown {', '.join(unknown)} (known: {', '.join(known)})")
    return args


def main() -> int:
    args = parse_args()
    if args.plot:
        plot(args.plot)
        return 0
    if torch is None or not torch.cuda.is_available():
        sys.exit("bench/gpu_sweep.py needs torch with a CUDA device")
    settings = gpu.Settings(quick=False, warmup=5, repeats=20, launches=0, launch_repeats=0,
                            cold_runs=0, rounds=5)
    torch.manual_seed(0)
    points: list[Point] = []
    with tempfile.TemporaryDirectory() as kernel_dir:
        gpu.write_kernel_modules(kernel_dir, SWEEP_KERNELS, STEM)
        kernels = gpu.load_kernels(kernel_dir, STEM)
        print(f"{torch.cuda.get_device_name()}: " + ", ".join(
            f"{name} {sys.modules[name].__version__}" for name in ("naiad", "triton", "torch")
            if name in sys.modules))
        for name in args.only:
            make, sizes = SWEEPS[name]
            sizes = [n for n in sizes if args.sizes is None or n in args.sizes]
            for dtype in args.dtypes:
                for size in sizes:
                    case = make(dtype, size)
                    try:
                        row = measure(case, kernels, settings)
                    except Exception as e:  # noqa: BLE001 -- e.g. a fault that broke the context
                        row = gpu.Row(f"{name} {dtype} {size}", "GB/s", {}, [f"FAIL: {gpu.first_line(e)}"])
                    points.append((name, dtype, size, row))
                    print(f"{row.benchmark:34s} " + " ".join(
                        f"{k} {row.values.get(k, math.nan):7.1f}" for k in ("naiad", "triton", "torch"))
                        + f"  ratio {row.ratio:.3f} {'; '.join(row.failures)}", flush=True)
                    del case            # its tensors: the 2^28-element points take GBs
                    torch.cuda.empty_cache()
                write_csv(args.csv, points)         # as it goes: a long sweep cut short keeps its points
    print(f"wrote {args.csv}")
    ratios = [row.ratio for *_, row in points if not math.isnan(row.ratio)]
    if ratios:
        missed = [row.benchmark for *_, row in points if row.ratio < 0.97]
        print(f"geomean Naiad/Triton {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} over "
              f"{len(ratios)} points; below 0.97: {len(missed)}")
    plot(args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
