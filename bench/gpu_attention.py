"""Triton's tutorial-06 fused attention, unmodified, on Naiad's cuda backend against the real
Triton and torch's SDPA, in one run.

    python bench/gpu_attention.py --tutorial PATH/06-fused-attention.py [--quick] [--csv PATH]

The tutorial file (from Triton's source tree, ``python/tutorials``) is imported twice: once
with Naiad's compatibility layer on, so that its ``import triton`` is Naiad, and once under
the real Triton.  Both run the tutorial's own ``attention`` (an autograd function: the forward
kernel, the backward's preprocess and dK/dV/dQ kernels) with the tutorial's testing config (its ``PYTEST_VERSION`` switch: BLOCK_M 128, BLOCK_N 64,
2 stages, 4 warps), the same for both frameworks -- autotuning each over the tutorial's 24
configs would cost minutes of compilation per shape.  Under Triton the forward gets host
tensor descriptors on sm_90; under Naiad ``driver.active`` (asked with no arguments) is the
default backend's, the CPU's, so the tutorial's ``is_cuda()`` is false and its kernel builds
the descriptors from plain pointers (``tl.make_tensor_descriptor`` of rows ``Z * H * N_CTX``:
tensor maps the launcher computes, `naiad.backends.cuda.tensor_maps`).

Rows: forward and backward, fp16, batch 4, 32 heads, N_CTX 1024 and 4096 (2048 with --quick),
head dim 64 and 128, causal and not.  TFLOP/s as the tutorial counts them (forward 4 B H N^2 D,
halved when causal; backward 2.5 times the forward).  The backward row times ``o.backward(do)``
after one forward, as the tutorial's benchmark does.  Every result (output and dQ, dK, dV) is
checked against torch's SDPA first; then the median of torch.cuda.Event times over rounds
that time the columns in turn (bench/gpu.py's `interleaved_medians_ms`).

Prints the table, writes CSV (bench/results/gpu-attention.csv by default).  Needs a CUDA
device, torch and Triton 3.6 (without Triton, its column stays empty).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

os.environ["PYTEST_VERSION"] = "bench"     # the tutorial's single testing config, both frameworks
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu  # noqa: E402  (bench/gpu.py: Row, Settings, timing, checks, the table; real Triton)

import naiad.compat  # noqa: E402

torch = gpu.torch


def load_tutorial(path: str) -> dict:
    """framework -> the tutorial imported under it (Naiad first: the compatibility layer must
    be on before anything imports the real Triton, and off again before it is)."""
    modules = {}
    for framework in gpu.FRAMEWORKS:
        spec = importlib.util.spec_from_file_location(f"tutorial06_{framework}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            if framework == "naiad":
                naiad.compat.enable()
            spec.loader.exec_module(module)
            modules[framework] = module
        except Exception as e:  # noqa: BLE001 -- Triton missing: Naiad and torch still run
            print(f"tutorial 06 does not import under {framework} ({gpu.first_line(e)})",
                  file=sys.stderr)
        finally:
            naiad.compat.disable()
    return modules


def inputs(z: int, h: int, n_ctx: int, head_dim: int):
    torch.manual_seed(20)
    return [torch.empty((z, h, n_ctx, head_dim), dtype=torch.float16, device="cuda")
            .normal_(mean=0.0, std=0.5).requires_grad_() for _ in range(3)]


def sdpa(q, k, v, causal: bool):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=SCALE)


def with_gradients(run, q, k, v, causal: bool, do):
    """``run(q, k, v, causal)``'s output and, given ``do``, the gradients it gives q, k, v."""
    for t in (q, k, v):
        t.grad = None
    out = run(q, k, v, causal)
    if do is None:
        return [out.detach()]
    out.backward(do)
    return [out.detach(), q.grad.clone(), k.grad.clone(), v.grad.clone()]


SCALE = 0.5


def timed_call(run, q, k, v, causal: bool, mode: str):
    """What one timing runs: a forward, or a backward after one forward (``retain_graph``)."""
    if mode == "fwd":
        def forward():
            with torch.no_grad():
                return run(q, k, v, causal)
        return forward
    out = run(q, k, v, causal)
    do = torch.randn_like(out)
    return lambda: out.backward(do, retain_graph=True)


def attention_row(modules: dict, z: int, h: int, n_ctx: int, head_dim: int, causal: bool,
                  mode: str, settings) -> gpu.Row:
    flops = 4 * z * h * n_ctx * n_ctx * head_dim * (0.5 if causal else 1) * (2.5 if mode == "bwd" else 1)
    title = f"tutorial-06 attention {mode} fp16 B{z} H{h} N{n_ctx} D{head_dim}{' causal' if causal else ''}"
    row = gpu.Row(title, "TFLOP/s", {}, [], (">=", 0.9 if mode == "bwd" else 1.0))
    q, k, v = inputs(z, h, n_ctx, head_dim)
    do = torch.randn_like(q) if mode == "bwd" else None
    expected = with_gradients(sdpa, q, k, v, causal, do)
    calls = {"torch": timed_call(sdpa, q, k, v, causal, mode)}
    for framework, module in modules.items():
        run = lambda q, k, v, causal, m=module: m.attention(q, k, v, causal, SCALE, False)  # noqa: E731
        try:
            for got, want in zip(with_gradients(run, q, k, v, causal, do), expected):
                gpu.check(got, want, 0.0, 2e-2)
            calls[framework] = timed_call(run, q, k, v, causal, mode)
        except Exception as e:  # noqa: BLE001 -- a row reports its failure, the run goes on
            row.failures.append(f"{framework} FAIL: {gpu.first_line(e)}")
    for name, ms in gpu.interleaved_medians_ms(calls, settings).items():
        row.values[name] = flops / ms / 1e9
    return row


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tutorial", required=True, help="path of Triton's 06-fused-attention.py")
    parser.add_argument("--quick", action="store_true", help="N_CTX 2048 only, fewer repeats")
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "results", "gpu-attention.csv"))
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if torch is None or not torch.cuda.is_available():
        sys.exit("bench/gpu_attention.py needs torch with a CUDA device")
    if not os.path.isfile(args.tutorial):
        sys.exit(f"--tutorial {args.tutorial}: no such file (Triton's python/tutorials/06-fused-attention.py)")
    settings = gpu.Settings.of(args.quick)
    modules = load_tutorial(args.tutorial)
    print(f"{torch.cuda.get_device_name()}: naiad {naiad.__version__}, "
          f"triton {getattr(sys.modules.get('triton'), '__version__', '-')}, torch {torch.__version__}")
    rows = []
    for n_ctx in ((2048,) if args.quick else (1024, 4096)):
        for head_dim in (64, 128):
            for causal in (False, True):
                for mode in ("fwd", "bwd"):
                    print(f"running {mode} N{n_ctx} D{head_dim} causal={causal} ...", file=sys.stderr, flush=True)
                    rows.append(attention_row(modules, 4, 32, n_ctx, head_dim, causal, mode, settings))
                    torch.cuda.empty_cache()
    gpu.print_table(rows)
    gpu.write_csv(args.csv, rows)
    print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
