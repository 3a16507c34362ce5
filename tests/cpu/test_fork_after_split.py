"""A process whose launches were split across threads forks (multiprocessing's default on
Linux, as data loaders and compile workers do); the child's own split launches must run, not
wait forever for the parent's worker threads, which a child does not have (Naiad's thread pool
and GCC's libgomp both keep them in their books).  Each case runs in a fresh interpreter under a
time limit, so a hang fails the test instead of the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")

SCRIPT = textwrap.dedent("""
    import multiprocessing, sys
    import numpy as np
    if sys.argv[1] == "torch":
        import torch
        torch.ones(64) @ torch.ones(64)
    import naiad
    import naiad.language as tl
    from naiad.backends.cpu import driver, openmp

    @naiad.jit
    def scaled_sin(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.sin(tl.load(x_ptr + offs, mask=mask)) * alpha, mask=mask)

    def split_launch(n, seed):
        x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
        out = np.full(n, np.nan, np.float32)
        grid = (naiad.cdiv(n, 128),)
        kernel = scaled_sin[grid](x, out, n, 1.5, BLOCK=128)
        kernel.launcher.threads = 3                 # split even on a machine of one core
        for _ in range(4):                          # the warm ones natively, once built
            kernel.launcher.work.program_s = 1.0    # as if each program took a second
            out[:] = np.nan
            scaled_sin[grid](x, out, n, 1.5, BLOCK=128)
            np.testing.assert_allclose(out, np.sin(x) * 1.5, rtol=1e-5, atol=1e-6)

    def child(queue):
        split_launch(5000, 2)
        queue.put((driver._pool is not None, openmp.loaded_team() is not None))

    split_launch(4099, 1)
    print("parent", driver._pool is not None, openmp.loaded_team() is not None)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=child, args=(queue,), daemon=True)
    process.start()
    process.join(60)
    if process.exitcode is None:
        process.kill()
        print("child hung")
    else:
        print("child", process.exitcode, *queue.get(timeout=5))
""")


def _run(tmp_path, mode: str) -> list[str]:
    script = tmp_path / "fork_after_split.py"          # a file: @naiad.jit reads its source
    script.write_text(SCRIPT)
    result = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True,
                            timeout=150, env={**os.environ, "NAIAD_CPU_OPENMP": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.split("\n")


def test_a_child_forked_after_a_split_launch_splits_its_own_on_a_new_pool(tmp_path):
    parent, child = _run(tmp_path, "plain")[:2]
    assert parent == "parent True False"            # the parent's launch went to the thread pool
    assert child == "child 0 True False"            # the child's too, on a pool of its own


def test_a_child_forked_after_an_openmp_region_uses_the_thread_pool(tmp_path):
    pytest.importorskip("torch")
    from naiad.backends.cpu import openmp

    if not hasattr(os, "RTLD_NOLOAD") or openmp.loaded_team() is None:
        pytest.skip("no OpenMP runtime loaded with torch on this platform")
    parent, child = _run(tmp_path, "torch")[:2]
    assert parent == "parent False True"            # the parent's launch was an OpenMP region
    assert child == "child 0 True False"            # the child leaves libgomp alone
