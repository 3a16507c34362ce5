"""One launch of each framework's kernel of bench/gpu.py's compute rows, between
cudaProfilerStart and cudaProfilerStop, for Nsight Compute to profile:

    ncu --profile-from-start off --clock-control none --metrics sm__cycles_elapsed.max \\
        python3 bench/gpu_profile.py matmul_fp16_8192,attention_d128

Each kernel runs once first (its compile and the module load stay outside the profile); then
Naiad's and Triton's launches are profiled in that order, one after the other, per row.  Cycle
counts of one launch are what tell two kernels apart when the GPU's clock differs between
timed runs (bench/gpu.py's ratios are of times).
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu  # noqa: E402  (bench/gpu.py: the workloads and each framework's kernel module)


def main() -> int:
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else []
    unknown = [n for n in names if n not in gpu.COMPUTE]
    if not names or unknown:
        sys.exit(f"usage: gpu_profile.py NAME,... (compute rows: {', '.join(gpu.COMPUTE)})")
    torch = gpu.torch
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as kernel_dir:
        gpu.write_kernel_modules(kernel_dir)
        kernels = gpu.load_kernels(kernel_dir)
        for name in names:
            w = gpu.COMPUTE[name](False)
            runs = {fw: functools.partial(w.launch, k, *w.args, w.out) for fw, k in kernels.items()}
            for run in runs.values():
                run()
            torch.cuda.synchronize()
            for framework, run in runs.items():
                print(f"profiling {name} under {framework}", file=sys.stderr, flush=True)
                torch.cuda.profiler.start()
                run()
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
