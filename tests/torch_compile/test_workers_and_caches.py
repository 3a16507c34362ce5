"""Inductor's compile workers (separate processes that import only ``triton``) and its caches
with Naiad: a model compiled through workers matches eager, a second process finds every
graph in Inductor's FX-graph cache and compiles no kernel, and every kernel's binary is where
Inductor looks for Triton's (``<TRITON_CACHE_DIR>/<hash>/<name>.<ext>``): on CUDA it launches
them with its own static launcher, as it does real Triton's."""

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
    compiled, kernels = [], []

    def listen(src, metadata, times, hit):
        compiled.append(hit)
        kernels.append([metadata["hash"], metadata["name"]])

    knobs.compilation.listener = listen
    if config.compile_threads > 1:         # Inductor compiles in its workers once they are up:
        from torch._inductor.async_compile import AsyncCompile     # wait, so that it does here
        AsyncCompile.use_process_pool()
        AsyncCompile._ready_future.result(timeout=300)
    from torch._inductor.runtime import triton_heuristics
    static = triton_heuristics.StaticTritonCompileResult
    static_launches = []
    static.make_launcher = (lambda make: lambda self: static_launches.append(1) or make(self))(static.make_launcher)

    def f(x, w):
        return torch.nn.functional.gelu(torch.layer_norm(x @ w, (40,))).softmax(-1).sum(0)

    torch.manual_seed(0)
    x, w = torch.randn(33, 24), torch.randn(24, 40)
    error = (torch.compile(f)(x, w) - f(x, w)).abs().max().item()
    print(json.dumps({"error": error, "fx_hits": counters["inductor"]["fxgraph_cache_hit"],
                      "kernels_compiled_here": compiled.count(False), "kernels": kernels,
                      "static_launchers": len(static_launches), "triton_cache_dir": os.environ.get("TRITON_CACHE_DIR")}))
''')


def _run(tmp_path, threads: int) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
               NAIAD_CACHE_DIR=str(tmp_path / "naiad"), TORCHINDUCTOR_FX_GRAPH_CACHE="1")
    env.pop("TRITON_CACHE_DIR", None)          # Inductor sets it (in this process too, by earlier tests)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(threads)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_binaries_are_where_inductor_looks_for_tritons(tmp_path):
    """Each kernel's binary, byte for byte as Naiad's cache holds it, in Inductor's Triton cache
    folder; on CUDA Inductor then launches every kernel with its static launcher."""
    from naiad.compiler import cache

    out = _run(tmp_path, threads=1)
    assert out["error"] < 1e-5 and out["kernels"]
    assert out["triton_cache_dir"].startswith(str(tmp_path / "inductor"))
    manager = cache.FileCacheManager(str(tmp_path / "naiad"))
    for key, name in out["kernels"]:
        published = [f for f in os.listdir(os.path.join(out["triton_cache_dir"], key)) if not f.startswith(".")]
        assert len(published) == 1 and published[0].startswith(name + ".")
        with open(os.path.join(out["triton_cache_dir"], key, published[0]), "rb") as f:
            assert f.read() == manager.get(key)[published[0]]
    if os.environ.get("NAIAD_TORCH_COMPILE_DEVICE", "cpu") == "cuda":
        assert out["static_launchers"] == len(out["kernels"])
    else:
        assert out["static_launchers"] == 0          # Inductor launches CPU kernels through kernel.run


def test_compile_workers_and_a_warm_start(tmp_path):
    """The workers send each kernel back pickled, its JIT function with it (which failed,
    "ctypes objects containing pointers cannot be pickled", until the JIT function left its
    warm-launch machinery out of its pickled state)."""
    first = _run(tmp_path, threads=2)            # through Inductor's subprocess workers
    assert first["error"] < 1e-5 and first["fx_hits"] == 0
    assert first["kernels_compiled_here"] == 0 and first["kernels"] == []   # all in the workers
    second = _run(tmp_path, threads=1)
    assert second["error"] < 1e-5
    assert second["fx_hits"] >= 1 and second["kernels_compiled_here"] == 0
