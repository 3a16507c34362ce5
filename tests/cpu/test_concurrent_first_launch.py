"""Threads that launch one kernel for the first time at once: each launch must run in machine
code that stays loaded.  Two threads both loaded such a kernel, the second load replaced the
first, and the first thread's launch ran in freed code: the process crashed (a segmentation
fault, about one run in two with 8 threads).  Run in a fresh interpreter, so a crash fails the
test rather than the suite; every result is checked against numpy."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys, threading
    import numpy as np
    import naiad
    import naiad.language as tl

    @naiad.jit
    def scaled_add(x_ptr, y_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, tl.sqrt(tl.abs(x)) * SCALE + tl.load(y_ptr + offs, mask=mask), mask=mask)

    threads, rounds = int(sys.argv[1]), int(sys.argv[2])
    n = 1 << 20
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    outs = [np.empty_like(x) for _ in range(threads)]
    grid = (naiad.cdiv(n, 256),)
    errors = []
    for scale in range(1, rounds + 1):                  # a new kernel each round
        scaled_add.warmup(x, y, outs[0], n, SCALE=scale, BLOCK=256, grid=grid)   # compiled, not loaded
        start = threading.Barrier(threads)

        def launch(i):
            try:
                start.wait()
                scaled_add[grid](x, y, outs[i], n, SCALE=scale, BLOCK=256)
                np.testing.assert_allclose(outs[i], np.sqrt(np.abs(x)) * scale + y, rtol=1e-6)
            except Exception as e:
                errors.append(repr(e)[:300])

        running = [threading.Thread(target=launch, args=(i,)) for i in range(threads)]
        for t in running:
            t.start()
        for t in running:
            t.join()
    print("errors", len(errors), *errors[:2])
""")


def test_threads_launching_a_new_kernel_at_once(tmp_path):
    script = tmp_path / "first_launch.py"            # a file: @naiad.jit reads its source
    script.write_text(SCRIPT)
    result = subprocess.run([sys.executable, str(script), "8", "12"], capture_output=True, text=True,
                            timeout=600, env={**os.environ, "NAIAD_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 0, f"exit status {result.returncode}: {result.stderr[-2000:]}"
    assert result.stdout.strip() == "errors 0"
