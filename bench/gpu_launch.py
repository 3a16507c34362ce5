"""Where a warm GPU launch's host time goes: Naiad's cuda backend, piece by piece, next to
Triton's and torch's whole launch in the same run.

    python bench/gpu_launch.py [--launches N] [--repeats R] [--csv PATH]

The kernel is bench/gpu.py's vector add (64 fp32, grid (1,)), imported under Naiad and under
the real Triton as gpu.py does.  Each row is the median over R repeats of (time of N
back-to-back calls, then one torch.cuda.synchronize) / N, in microseconds.  Rows:

* whole launches: ``kernel[(1,)](x, y, out, 64, BLOCK_SIZE=64)`` for Naiad and Triton, and
  ``torch.add(x, y, out=out)``;
* Naiad's pieces: the launch entry alone (the prepared launcher swapped for a no-op: argument
  keys, selection state, validity, grid), three of its steps, the prepared direct launcher
  alone (``_Prepared.direct``: device and stream, argument packing, cuLaunchKernelEx), its
  argument packer alone, the current device and stream
  alone, and cuLaunchKernelEx alone through ctypes with a buffer packed once (and the older
  cuLaunchKernel, 11 arguments instead of 4, the same way);
* a Python function call with the same arguments and nothing in it (the floor of any launch
  written in Python).

Writes the rows to bench/results/gpu_launch.csv and, with matplotlib, their bars beside it
(bench/launch.py's `report`; ``python bench/launch.py --plot CSV`` draws them later).  Needs a
CUDA device and torch.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu  # noqa: E402  (bench/gpu.py: kernel modules, environment for the real Triton)
import launch as launch_bench  # noqa: E402  (bench/launch.py: the table and CSV of timings)

import torch  # noqa: E402


def median_us(call, launches: int, repeats: int) -> float:
    for _ in range(200):
        call()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(launches):
            call()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / launches * 1e6)
    return statistics.median(samples)


def naiad_pieces(kernels, x, y, out, timed) -> list[tuple[str, float]]:
    """The calls that make up one warm Naiad launch, each timed alone by ``timed(call)``."""
    from naiad.backends.cuda.launcher import LAUNCH_CONFIG
    from naiad.runtime import jit

    fn = kernels.add_kernel
    launch = fn[(1,)]
    launch(x, y, out, 64, BLOCK_SIZE=64)
    prepared = next(iter(fn._fast.values()))
    kernel, driver = prepared.kernel, prepared.driver
    launcher = kernel.launcher
    args = [x.data_ptr(), y.data_ptr(), out.data_ptr(), 64]     # as the launch entry passes them
    device, stream = driver.device_and_stream()
    buffer = launcher.pack(args, device, 1, 1, 1, stream)
    address = ctypes.addressof(buffer)
    table = address + LAUNCH_CONFIG.size     # where the kernelParams pointers start
    raw = driver.cuda.cuLaunchKernelEx
    function = kernel.function

    classic = ctypes.CDLL("libcuda.so.1").cuLaunchKernel       # what cuLaunchKernelEx replaced
    P, U = ctypes.c_void_p, ctypes.c_uint
    classic.argtypes, classic.restype = (P, U, U, U, U, U, U, U, P, P, P), ctypes.c_int
    block, shared = launcher.block, launcher.shared

    def empty(grid, hooks, x, y, out, n, /, **options):
        return None

    real, prepared.direct = prepared.direct, lambda grid, args: None
    try:          # the launch entry with the prepared launcher swapped for a no-op
        entry = timed(lambda: launch(x, y, out, 64, BLOCK_SIZE=64))
    finally:
        prepared.direct = real

    return [(name, timed(call)) for name, call in [
        ("naiad: whole launch kernel[(1,)](...)", lambda: launch(x, y, out, 64, BLOCK_SIZE=64)),
        ("naiad: entry's key of one CUDA tensor",
         lambda: (x.dtype, x.get_device() if x.is_cuda else x.device.type, x.data_ptr() % 16 == 0)),
        ("naiad: entry's selection-state token", jit._state),
        ("naiad: entry's check that the prepared launch is valid", lambda: prepared.valid(fn)),
        ("naiad: prepared direct launcher", lambda: prepared.direct((1, 1, 1), args)),
        ("naiad: argument packer", lambda: launcher.pack(args, device, 1, 1, 1, stream)),
        ("naiad: current device and stream", lambda: driver.device_and_stream()),
        ("naiad: cuLaunchKernelEx via ctypes, packed once",
         lambda _keep=buffer: raw(address, function, table, None)),
        ("naiad: cuLaunchKernel (11 arguments) via ctypes, packed once",
         lambda _keep=buffer: classic(function, 1, 1, 1, block, 1, 1, shared, stream, table, None)),
        ("python: empty function, same arguments", lambda: empty((1,), False, x, y, out, 64,
                                                                 BLOCK_SIZE=64)),
    ]] + [("naiad: launch entry alone (launcher a no-op)", entry)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(__file__), "results",
                                                      "gpu_launch.csv"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as kernel_dir:
        gpu.write_kernel_modules(kernel_dir)
        kernels = gpu.load_kernels(kernel_dir)
        x, y = gpu.randn(64), gpu.randn(64)
        out = torch.empty_like(x)

        def timed(call):
            return median_us(call, args.launches, args.repeats)

        results = [("torch: torch.add(x, y, out=out)", timed(lambda: torch.add(x, y, out=out)))]
        if "triton" in kernels:
            triton_launch = kernels["triton"].add_kernel[(1,)]
            results.append(("triton: whole launch kernel[(1,)](...)",
                            timed(lambda: triton_launch(x, y, out, 64, BLOCK_SIZE=64))))
        results += naiad_pieces(kernels["naiad"], x, y, out, timed)
    launch_bench.report(results, args.csv, args.launches, args.repeats)


if __name__ == "__main__":
    main()
