"""torch.compile with Naiad as Inductor's Triton, against Inductor's own path, in one run.

On the CPU the peer is Inductor's C++ backend (``cpu_backend="cpp"``) and Naiad runs Inductor's
Triton kernels (``cpu_backend="triton"``); on a GPU the peer is the real Triton, and Naiad's
cuda backend runs the same Triton kernels.  Each framework runs in a process of its own (the
compatibility layer is chosen before torch's compiler is imported); both processes compile every
model first and stay up, then the bench times each row in short blocks that alternate between the
two, so that both frameworks of a row are measured within the same second or so: on a shared
machine whose speed drifts by tens of percent over minutes, rows timed minutes apart compare the
machine, not the compilers.  Rows: small models, forward and backward (a training step without
the optimizer), at a few sizes; and the per-call time of one small fused pointwise kernel (what a
call costs beyond its arithmetic).  Prints a table, writes CSV with ``--csv``.

    python bench/torch_compile.py                       # CPU: Naiad vs Inductor's C++ backend
    python bench/torch_compile.py --device cuda         # GPU: Naiad vs Triton
    python bench/torch_compile.py --against ../old      # this Naiad vs another checkout's
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import tempfile
import sys

#: model -> sizes, per device: (batch, width)
SIZES = {"cpu": {"mlp": [(64, 256), (256, 1024)], "transformer_block": [(4, 64), (8, 128)],
                 "classifier": [(256, 64), (2048, 128)], "convnet": [(8, 32), (32, 64)]},
         "cuda": {"mlp": [(1024, 1024), (4096, 4096)], "transformer_block": [(16, 256), (32, 512)],
                  "classifier": [(8192, 256), (65536, 512)], "convnet": [(64, 64), (256, 128)]}}

#: The checkout this bench belongs to: its Naiad is the one measured.
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: tests/torch_compile/small_models.py: the models of the suite, at the widths above.
MODELS_DIR = os.path.join(CHECKOUT, "tests", "torch_compile")

WORKER = r'''
import json, statistics, sys, time
framework, device, sizes, models_dir = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
top = int(sys.argv[5])
if framework == "naiad":
    import naiad.compat
    naiad.compat.enable()
import torch, torch._inductor.config as config
sys.path.insert(0, models_dir)
from small_models import MLP, Block, Classifier, ConvNet
config.compile_threads = 1
if device == "cpu":
    config.cpu_backend = "triton" if framework == "naiad" else "cpp"
    config.cpp.enable_kernel_profile = top > 0
torch.set_default_device(device)
torch.manual_seed(0)


def sync():
    if device != "cpu":
        torch.cuda.synchronize()


def make(name, batch, width):
    if name == "mlp":
        return MLP(width), (torch.randn(batch, width),)
    if name == "transformer_block":
        return Block(width, heads=8), (torch.randn(batch, 128, width),)
    if name == "classifier":
        return Classifier(width, 10000, 100), (torch.randint(0, 10000, (batch, 16)),)
    return ConvNet(width), (torch.randn(batch, 3, 32, 32),)


def seconds(step, repeats):
    """Median of ``repeats`` timed steps, after one untimed step (the other framework's process
    has just had the caches)."""
    step()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return times


def kernel_times(step):
    """Time (us) of each kernel and aten op in one step, by name: where a model's time goes.  GPU
    time on a GPU; on the CPU the ops' own time (Inductor's C++ kernels are named when
    ``cpp.enable_kernel_profile`` is on, its Triton kernels always)."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device != "cpu" else [])
    with profile(activities=activities) as prof:
        step()
        sync()
    if device != "cpu":
        times = {e.key: e.self_device_time_total for e in prof.key_averages()
                 if e.device_type == torch.autograd.DeviceType.CUDA and e.self_device_time_total > 0}
    else:
        times = {e.key: e.self_cpu_time_total for e in prof.key_averages() if e.self_cpu_time_total > 0}
    return dict(sorted(times.items(), key=lambda kv: -kv[1])[:top])


def model_step(name, batch, width):
    model, inputs = make(name, batch, width)
    compiled = torch.compile(model)
    return lambda: compiled(*inputs).sum().backward()


#: row -> (step, how many calls one step makes)
steps = {}
for name, shapes in sizes.items():
    for batch, width in shapes:
        steps[f"{name} {batch}x{width}"] = (model_step(name, batch, width), 1)
x, y = torch.randn(1024), torch.randn(1024)
pointwise = torch.compile(lambda x, y: torch.relu(x * 2 + y))
steps["per call: relu(2x+y), 1024 elements"] = (lambda: [pointwise(x, y) for _ in range(200)], 200)
for step, _ in steps.values():      # compile, and let Inductor autotune, before anything is timed
    for _ in range(3):
        step()
sync()
print(json.dumps(list(steps)), flush=True)
for line in sys.stdin:              # "time ROW N" | "kernels ROW"
    verb, n, row = line.rstrip("\n").split(" ", 2)
    step, calls = steps[row]
    if verb == "time":
        reply = [t / calls for t in seconds(step, int(n))]
    else:
        reply = kernel_times(step)
    print(json.dumps(reply), flush=True)
'''


class Worker:
    """One framework's process: it compiles every row on start, then times a row on request.  It
    gets an empty Inductor cache: Inductor keeps each kernel's autotuned config on disk, keyed by
    the kernel's source, so a cache from an earlier run (another Naiad) would pick configs for
    code that has changed since."""

    def __init__(self, framework: str, device: str, top: int, checkout: str | None = None):
        """``checkout``: the root of a Naiad source tree, imported before any installed Naiad."""
        self.framework = framework
        self._cache = tempfile.TemporaryDirectory(prefix="naiad-bench-inductor-")
        self._stderr = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ, TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_CACHE_DIR=self._cache.name)
        if checkout is not None:
            env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(checkout), env.get("PYTHONPATH", "")])
        self._process = subprocess.Popen([sys.executable, "-c", WORKER, framework, device,
                                          json.dumps(SIZES[device]), MODELS_DIR, str(top)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                         text=True, env=env, cwd=tempfile.gettempdir())
        self.rows = self._reply()

    def _reply(self):
        line = self._process.stdout.readline()
        if not line:
            self._stderr.seek(0)
            raise RuntimeError(f"{self.framework}: {self._stderr.read().strip()[-3000:]}")
        return json.loads(line)

    def ask(self, verb: str, row: str, n: int = 0):
        self._process.stdin.write(f"{verb} {n} {row}\n")
        self._process.stdin.flush()
        return self._reply()

    def close(self) -> None:
        self._process.stdin.close()
        self._process.wait(timeout=60)
        self._cache.cleanup()


def print_kernels(naiad: dict, peer_kernels: dict, peer: str) -> None:
    """Each model's slowest kernels (one profiled step after the timed ones), Naiad's beside the peer's."""
    for row, times in naiad.items():
        print(f"-- {row}: time a step, us")
        other = peer_kernels.get(row, {})
        for name in dict.fromkeys([*times, *other]):
            a, b = times.get(name), other.get(name)
            print(f"   {name[:70]:70s} {a or float('nan'):10.1f} {b or float('nan'):10.1f}  ({peer})")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--rounds", type=int, default=7,
                        help="timed blocks per row and framework, the two frameworks alternating")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per block")
    parser.add_argument("--csv")
    parser.add_argument("--kernels", type=int, default=0, metavar="K",
                        help="also print each model's K slowest kernels and ops in both frameworks (one profiled "
                             "step; GPU time on a GPU, the ops' own time on the CPU)")
    parser.add_argument("--against", metavar="CHECKOUT",
                        help="compare with the Naiad of another source tree (e.g. a `git worktree` of an "
                             "older commit) instead of the peer: what a change did, paired the same way")
    args = parser.parse_args()
    peer = "inductor_cpp" if args.device == "cpu" else "triton"
    # one after the other: each autotunes its kernels while compiling, which a busy machine skews
    workers = {"naiad": Worker("naiad", args.device, args.kernels, checkout=CHECKOUT)}
    if args.against:
        peer = "against"
        workers[peer] = Worker("naiad", args.device, args.kernels, checkout=args.against)
    else:
        workers[peer] = Worker(peer, args.device, args.kernels)
    samples: dict[str, dict[str, list[float]]] = {"naiad": {}, peer: {}}
    for row in workers["naiad"].rows:
        for r in range(args.rounds):
            for framework in (("naiad", peer) if r % 2 == 0 else (peer, "naiad")):
                samples[framework].setdefault(row, []).extend(workers[framework].ask("time", row, args.steps))
    if args.kernels:
        kernels = {f: {row: w.ask("kernels", row) for row in w.rows} for f, w in workers.items()}
        print_kernels(kernels["naiad"], kernels[peer], peer)
    for worker in workers.values():
        worker.close()
    rows = []
    for row in samples["naiad"]:
        naiad, other = (statistics.median(samples[f][row]) for f in ("naiad", peer))
        unit = "us" if row.startswith("per call") else "ms"
        scale = 1e6 if unit == "us" else 1e3
        # a speed ratio: the peer's time over Naiad's (above 1: Naiad faster)
        rows.append([row, unit, naiad * scale, other * scale, other / naiad])
    models = [r[4] for r in rows if not r[0].startswith("per call")]
    geomean = math.exp(sum(math.log(v) for v in models) / len(models))
    print(f"{'row':45s} {'unit':4s} {'naiad':>10s} {peer:>12s} {'speed ratio':>11s}")
    for row, unit, a, b, ratio in rows:
        print(f"{row:45s} {unit:4s} {a:10.3f} {b:12.3f} {ratio:11.3f}")
    print(f"{'geomean of the model rows':45s} {'':4s} {'':>10s} {'':>12s} {geomean:11.3f}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["row", "unit", "naiad", peer, f"{peer}/naiad (speed ratio)"])
            out.writerows([[r, u, f"{a:.4g}", f"{b:.4g}", f"{x:.4f}"] for r, u, a, b, x in rows])
            out.writerow(["geomean of the model rows", "", "", "", f"{geomean:.4f}"])


if __name__ == "__main__":
    main()
