"""CPU benchmarks: Naiad's CPU backend against numpy, torch and Triton's interpreter, in one run.

    pip install -r bench/requirements.txt && python bench/cpu.py [--quick] [--csv PATH]
    python bench/cpu.py --plot bench/results/cpu.csv     # the plot, from a CSV

Prints a table of median times and ratios (peer time / Naiad time: above 1 means Naiad is
faster) and writes the same rows as CSV and, with matplotlib, their plot beside it (`plots`:
bars of each library's time, log scale).  The kernels are the gallery's (naiad/tools/gallery.py);
Triton's interpreter runs the very same Python functions with ``tl`` bound to triton.language.
Also measures cold compile of softmax in a fresh process (imports excluded and included).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import types

os.environ.setdefault("TRITON_INTERPRET", "1")   # before any import of triton

import numpy as np  # noqa: E402

import naiad  # noqa: E402
from naiad.tools import gallery  # noqa: E402
from host_timing import median_ms  # noqa: E402
import plots  # noqa: E402


def optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


def interpreted(triton, kernel):
    """The gallery kernel's Python function, with ``tl`` bound to triton.language, under
    Triton's interpreter."""
    fn = kernel.fn
    globals_ = dict(fn.__globals__, tl=triton.language)
    clone = types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__, fn.__closure__)
    clone.__module__ = fn.__module__
    clone.__qualname__ = fn.__qualname__
    return triton.jit(clone)


def workloads(quick: bool):
    rng = np.random.default_rng(0)
    n = 1 << (20 if quick else 24)
    rows, cols = (512, 1024) if quick else (4096, 1024)
    size = 256 if quick else 1024
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    m = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.standard_normal(cols, dtype=np.float32)
    b = rng.standard_normal(cols, dtype=np.float32)
    a = rng.standard_normal((size, size), dtype=np.float32)
    c = rng.standard_normal((size, size), dtype=np.float32)
    out_n, out_m = np.empty_like(x), np.empty_like(m)
    return [
        dict(name=f"vector add 2^{int(np.log2(n))} fp32", bytes=3 * 4 * n,
             naiad=lambda: gallery.add_kernel[(naiad.cdiv(n, 1024),)](x, y, out_n, n, BLOCK=1024),
             numpy=lambda: np.add(x, y, out=out_n),
             torch=lambda t: (lambda tx, ty, to: lambda: t.add(tx, ty, out=to))(
                 t.from_numpy(x), t.from_numpy(y), t.from_numpy(out_n)),
             triton=lambda tr, t: (lambda k, tx, ty, to: lambda: k[(naiad.cdiv(n, 1024),)](
                 tx, ty, to, n, BLOCK=1024))(interpreted(tr, gallery.add_kernel), t.from_numpy(x),
                                             t.from_numpy(y), t.from_numpy(out_n))),
        dict(name=f"softmax {rows}x{cols} fp32", bytes=2 * 4 * rows * cols,
             naiad=lambda: gallery.softmax(m),
             numpy=lambda: gallery.softmax_reference(m),
             torch=lambda t: (lambda tm: lambda: t.softmax(tm, dim=1))(t.from_numpy(m)),
             triton=lambda tr, t: (lambda k, tm, to: lambda: k[(rows,)](
                 to, tm, cols, cols, BLOCK=cols))(interpreted(tr, gallery.softmax_kernel),
                                                  t.from_numpy(m), t.from_numpy(out_m))),
        dict(name=f"layernorm {rows}x{cols} fp32", bytes=2 * 4 * rows * cols,
             naiad=lambda: gallery.layernorm(m, w, b),
             numpy=lambda: gallery.layernorm_reference(m, w, b),
             torch=lambda t: (lambda tm, tw, tb: lambda: t.nn.functional.layer_norm(
                 tm, (cols,), tw, tb, 1e-5))(t.from_numpy(m), t.from_numpy(w), t.from_numpy(b)),
             triton=lambda tr, t: (lambda k, tm, tw, tb, to: lambda: k[(rows,)](
                 tm, to, tw, tb, cols, cols, 1e-5, BLOCK=cols))(
                 interpreted(tr, gallery.layernorm_kernel), t.from_numpy(m), t.from_numpy(w),
                 t.from_numpy(b), t.from_numpy(out_m))),
        dict(name=f"matmul {size}^3 fp32", flops=2 * size ** 3,
             naiad=lambda: gallery.matmul(a, c),
             numpy=lambda: a @ c,
             torch=lambda t: (lambda ta, tc: lambda: t.matmul(ta, tc))(t.from_numpy(a), t.from_numpy(c)),
             triton=lambda tr, t: (lambda k, ta, tc, to: lambda: k[(size // 64, size // 64)](
                 ta, tc, to, size, size, size, size, 1, size, 1, size, 1,
                 BLOCK_M=64, BLOCK_N=64, BLOCK_K=32))(
                 interpreted(tr, gallery.matmul_kernel), t.from_numpy(a), t.from_numpy(c),
                 t.from_numpy(np.empty((size, size), np.float32)))),
        dict(name=f"matmul {size}^3 fp32, tutorial kernel", flops=2 * size ** 3,
             naiad=lambda: gallery.matmul_tutorial(a, c),
             numpy=lambda: a @ c,
             torch=lambda t: (lambda ta, tc: lambda: t.matmul(ta, tc))(t.from_numpy(a), t.from_numpy(c)),
             triton=lambda tr, t: (lambda k, ta, tc, to: lambda: k[((size // 128) ** 2,)](
                 ta, tc, to, size, size, size, size, 1, size, 1, size, 1, BLOCK_SIZE_M=128,
                 BLOCK_SIZE_N=128, BLOCK_SIZE_K=32, GROUP_SIZE_M=8))(
                 interpreted(tr, gallery.matmul_tutorial_kernel), t.from_numpy(a), t.from_numpy(c),
                 t.from_numpy(np.empty((size, size), np.float32)))),
    ]


COLD_COMPILE = """
import time
t0 = time.perf_counter()
import numpy as np, naiad, llvmlite.binding
from naiad.tools import gallery
import naiad.compiler.frontend, naiad.passes, naiad.backends.cpu.compiler, naiad.backends.cpu.driver
import naiad.backends.cpu.lowering.kernel, naiad.language.extra.cpu.libdevice
t1 = time.perf_counter()
gallery.softmax(np.ones((4, 1000), np.float32))
t2 = time.perf_counter()
print(t2 - t1, t1 - t0)
"""


def cold_compile() -> tuple[float, float]:
    """(compile + first run of softmax in a fresh process with an empty cache, ms; the one-time
    import of Naiad's compiler and its libraries -- xDSL, llvmlite, numpy -- before it, ms)."""
    out = subprocess.run([sys.executable, "-c", COLD_COMPILE], capture_output=True, text=True,
                         check=True)
    compile_s, imports_s = map(float, out.stdout.split())
    return compile_s * 1000, imports_s * 1000


def plot(csv_path: str) -> str | None:
    """The workloads' median times, Naiad's beside each peer's, as bars on a log scale (Triton's
    interpreter is thousands of times slower) in a PNG beside the CSV; returns its path, or None
    without matplotlib."""
    columns = (("Naiad", "naiad_ms"), ("numpy", "numpy_ms"), ("torch", "torch_ms"),
               ("Triton's interpreter", "triton_interp_ms"))
    rows = plots.read_rows(csv_path, "workload", *(column for _, column in columns))
    rows = [r for r in rows if r["numpy_ms"]]        # not the cold-compile rows, Naiad's alone
    panel = plots.Bars("median time of one call (lower is better)", "ms (log scale)",
                       [r["workload"] for r in rows],
                       {label: [plots.number(r[column]) for r in rows] for label, column in columns},
                       x_log=True)
    return plots.write_png(csv_path, [panel], "CPU: Naiad against numpy, torch and Triton's interpreter",
                           columns=1, panel_width=9)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(__file__), "results", "cpu.csv"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-triton", action="store_true", help="skip Triton's interpreter")
    parser.add_argument("--plot", metavar="CSV", help="only draw the plot of an earlier run's CSV")
    args = parser.parse_args()
    if args.plot:
        plot(args.plot)
        return 0
    torch = optional("torch")
    triton = None if args.no_triton else optional("triton")
    if torch is not None:
        torch.set_num_threads(os.cpu_count() or 1)
    rows = []
    header = ("workload", "naiad_ms", "numpy_ms", "torch_ms", "triton_interp_ms",
              "numpy/naiad", "torch/naiad", "triton/naiad", "naiad_GB/s_or_GFLOP/s")
    print(f"Naiad {naiad.__version__} CPU backend, {os.cpu_count()} cores, threads="
          f"{naiad.knobs.cpu.threads or os.cpu_count()}")
    for w in workloads(args.quick):
        naiad_ms = median_ms(w["naiad"], args.runs)
        numpy_ms = median_ms(w["numpy"], args.runs)
        torch_ms = median_ms(w["torch"](torch), args.runs) if torch is not None else float("nan")
        triton_ms = float("nan")
        if triton is not None and torch is not None:
            triton_ms = median_ms(w["triton"](triton, torch), 1)
        rate = (w["bytes"] / naiad_ms / 1e6) if "bytes" in w else (w["flops"] / naiad_ms / 1e6)
        rows.append((w["name"], naiad_ms, numpy_ms, torch_ms, triton_ms, numpy_ms / naiad_ms,
                     torch_ms / naiad_ms, triton_ms / naiad_ms, rate))
    compile_ms, imports_ms = cold_compile()
    widths = [28] + [14] * (len(header) - 1)
    print("".join(h.ljust(wd) for h, wd in zip(header, widths)))
    for row in rows:
        print("".join((f"{v:.3f}" if isinstance(v, float) else str(v)).ljust(wd)
                      for v, wd in zip(row, widths)))
    print(f"cold compile of softmax (new process, nothing cached): {compile_ms:.0f} ms, after "
          f"{imports_ms:.0f} ms of importing the compiler's libraries once per process")
    os.makedirs(os.path.dirname(args.csv), exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
        writer.writerow(("cold compile softmax (ms)", compile_ms, "", "", "", "", "", "", ""))
        writer.writerow(("compiler imports (ms)", imports_ms, "", "", "", "", "", "", ""))
    print(f"wrote {args.csv}")
    plot(args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
