"""Inductor's compile workers (separate processes that import only ``triton``) and its caches
with Naiad: a model compiled through workers matches eager, and a second process finds every
graph in Inductor's FX-graph cache and compiles no kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import json, sys
    import naiad.compat
    naiad.compat.enable()
    import os, torch, torch._inductor.config as config
    from torch._dynamo.utils import counters
    from naiad import knobs

    torch.set_default_device(os.environ.get("NAIAD_TORCH_COMPILE_DEVICE", "cpu"))

    config.cpu_backend = "triton"
    config.compile_threads = int(sys.argv[1])
    compiled = []
    knobs.compilation.listener = lambda src, metadata, times, hit: compiled.append(hit)

    def f(x, w):
        return torch.nn.functional.gelu(torch.layer_norm(x @ w, (40,))).softmax(-1).sum(0)

    torch.manual_seed(0)
    x, w = torch.randn(33, 24), torch.randn(24, 40)
    error = (torch.compile(f)(x, w) - f(x, w)).abs().max().item()
    print(json.dumps({"error": error, "fx_hits": counters["inductor"]["fxgraph_cache_hit"],
                      "kernels_compiled_here": compiled.count(False)}))
''')


def _run(tmp_path, threads: int) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
               NAIAD_CACHE_DIR=str(tmp_path / "naiad"), TORCHINDUCTOR_FX_GRAPH_CACHE="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(threads)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_compile_workers_and_a_warm_start(tmp_path):
    first = _run(tmp_path, threads=2)            # through Inductor's subprocess workers
    assert first["error"] < 1e-5 and first["fx_hits"] == 0
    second = _run(tmp_path, threads=1)
    assert second["error"] < 1e-5
    assert second["fx_hits"] >= 1 and second["kernels_compiled_here"] == 0
