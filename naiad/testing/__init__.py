"""Benchmarking and checking helpers for kernel authors: ``do_bench``, ``assert_close``,
``perf_report``.  They work with whichever backend is active: timing goes through that
driver's benchmarker, so the same script measures a CPU or a GPU.  (``triton.testing`` under
the compatibility layer.)
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from naiad.backends.driver import sample_quantiles

_RETURN_MODES = ("min", "max", "mean", "median", "all")


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, grad_to_none: Any = None,
             quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> Any:
    """Run ``fn`` repeatedly for about ``rep`` ms and return its time in ms.

    With ``quantiles`` the result is a list, one time per quantile; otherwise ``return_mode``
    picks the statistic ("mean", "median", "min", "max", or "all" for every sample).
    """
    from naiad.backends.selection import active_driver

    if return_mode not in _RETURN_MODES:
        raise ValueError(f"do_bench: return_mode must be one of {', '.join(_RETURN_MODES)}, "
                         f"not {return_mode!r}")

    def call() -> None:
        for tensor in grad_to_none or ():
            tensor.grad = None
        fn()

    times = sorted(active_driver().get_benchmarker()(call, quantiles=None, warmup=warmup, rep=rep))
    if quantiles is not None:
        result = sample_quantiles(times, quantiles)
        return result[0] if len(result) == 1 else result
    if return_mode == "all":
        return times
    if return_mode == "mean":
        return sum(times) / len(times)
    return {"min": times[0], "max": times[-1], "median": sample_quantiles(times, [0.5])[0]}[return_mode]


#: fp8 language dtype names -> torch's names for the same formats.
_TORCH_FP8 = {"fp8e4nv": "float8_e4m3fn", "fp8e5": "float8_e5m2", "fp8e4b8": "float8_e4m3fnuz",
              "fp8e5b16": "float8_e5m2fnuz"}


def _as_numpy(value: Any) -> Any:
    import numpy as np

    from naiad.runtime.tensor_wrapper import TensorWrapper

    if isinstance(value, TensorWrapper):          # the memory read as the dtype it names
        import torch

        base, name = value.base.detach().cpu(), value.dtype.name
        if name in _TORCH_FP8:
            return base.view(getattr(torch, _TORCH_FP8[name])).float().numpy()
        return base.numpy().view(np.dtype(name))
    if hasattr(value, "detach"):                  # torch
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def assert_close(x: Any, y: Any, atol: float | None = None, rtol: float | None = None,
                 err_msg: str = "") -> None:
    """Assert that two arrays (numpy, torch, scalars) agree within ``atol + rtol * |y|``."""
    import numpy as np

    dtype = getattr(x, "dtype", None)             # Triton accepts tolerances as functions of it
    atol = atol(dtype) if callable(atol) else atol
    rtol = rtol(dtype) if callable(rtol) else rtol
    a, b = _as_numpy(x), _as_numpy(y)
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        np.testing.assert_array_equal(a, b, err_msg=err_msg)
        return
    atol = 1e-2 if atol is None else atol
    rtol = 0.0 if rtol is None else rtol
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=atol, rtol=rtol,
                               equal_nan=True, err_msg=err_msg)


class Benchmark:
    """One sweep for `perf_report`: ``x_names`` take each of ``x_vals``; each of ``line_vals``
    (passed as ``line_arg``) is one line; ``args`` are fixed keyword arguments."""

    def __init__(self, x_names: list[str], x_vals: list[Any], line_arg: str, line_vals: list[Any],
                 line_names: list[str], plot_name: str, args: dict[str, Any], xlabel: str = "",
                 ylabel: str = "", x_log: bool = False, y_log: bool = False, styles: Any = None):
        self.x_names, self.x_vals = list(x_names), list(x_vals)
        self.line_arg, self.line_vals, self.line_names = line_arg, list(line_vals), list(line_names)
        self.plot_name, self.args = plot_name, dict(args)
        self.xlabel, self.ylabel, self.x_log, self.y_log, self.styles = xlabel, ylabel, x_log, y_log, styles


class Mark:
    """A benchmark function with its sweeps; ``.run()`` measures, prints and saves them."""

    def __init__(self, fn: Callable[..., Any], benchmarks: Benchmark | list[Benchmark]):
        self.fn = fn
        self.benchmarks = benchmarks

    def _table(self, bench: Benchmark, **kwargs: Any) -> tuple[list[str], list[list[Any]]]:
        header = list(bench.x_names)
        for name in bench.line_names:
            header += [name, f"{name}-min", f"{name}-max"]
        rows = []
        for x in bench.x_vals:
            values = list(x) if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
            if len(values) != len(bench.x_names):
                raise ValueError(f"perf_report {bench.plot_name!r}: x value {x!r} has {len(values)} "
                                 f"entries for {len(bench.x_names)} x_names {bench.x_names}")
            point = dict(zip(bench.x_names, values))
            row = list(values)
            for line in bench.line_vals:
                result = self.fn(**point, **{bench.line_arg: line}, **bench.args, **kwargs)
                mid, low, high = result if isinstance(result, tuple) else (result, result, result)
                row += [mid, low, high]
            rows.append(row)
        return header, rows

    def run(self, show_plots: bool = False, print_data: bool = False, save_path: str = "",
            return_df: bool = False, **kwargs: Any) -> Any:
        """Measure every sweep; print the table (main columns), write ``<plot_name>.csv`` under
        ``save_path``; plots need matplotlib and are skipped quietly without it.  Other keyword
        arguments go to the benchmark function."""
        kwargs.pop("diff_col", None)
        kwargs.pop("save_precision", None)
        tables = []
        for bench in self.benchmarks if isinstance(self.benchmarks, list) else [self.benchmarks]:
            header, rows = self._table(bench, **kwargs)
            tables.append((header, rows))
            shown = [i for i, h in enumerate(header) if not h.endswith(("-min", "-max"))]
            if print_data:
                print(f"{bench.plot_name}:")
                print("  ".join(f"{header[i]:>14}" for i in shown))
                for row in rows:
                    print("  ".join(f"{_fmt(row[i]):>14}" for i in shown))
            if save_path:
                os.makedirs(save_path, exist_ok=True)
                with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w") as f:
                    f.write(",".join(header) + "\n")
                    f.writelines(",".join(str(v) for v in row) + "\n" for row in rows)
            if show_plots or save_path:
                _plot(bench, header, rows, save_path, show_plots)
        if return_df:
            return tables if len(tables) > 1 else tables[0]
        return None


def _fmt(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _plot(bench: Benchmark, header: list[str], rows: list[list[Any]], save_path: str,
          show: bool) -> None:
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        return
    xs = [row[0] for row in rows]
    fig, ax = plt.subplots()
    for name in bench.line_names:
        col = header.index(name)
        ax.plot(xs, [row[col] for row in rows], label=name)
    ax.set_xlabel(bench.xlabel or bench.x_names[0])
    ax.set_ylabel(bench.ylabel)
    ax.set_xscale("log" if bench.x_log else "linear")
    ax.set_yscale("log" if bench.y_log else "linear")
    ax.legend()
    if save_path:
        fig.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
    if show:
        plt.show()
    plt.close(fig)


def perf_report(benchmarks: Benchmark | list[Benchmark]) -> Callable[[Callable[..., Any]], Mark]:
    """Decorator: ``@perf_report(Benchmark(...))`` turns a function returning ms (or
    (mid, min, max)) into a `Mark` whose ``.run()`` sweeps it."""
    return lambda fn: Mark(fn, benchmarks)
