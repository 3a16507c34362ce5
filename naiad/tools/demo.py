"""``naiad demo``: the README's first command.

Shows the backends on this machine, then compiles and runs the gallery (vector add, softmax,
layernorm, matmul, dropout) on the default backend, checks each result against numpy and prints
the compile and run times.
"""

from __future__ import annotations

import time
from typing import Callable

import naiad
from naiad.tools import backends_cmd


def _cases(np):
    from naiad.tools import gallery

    rng = np.random.default_rng(0)
    x = rng.standard_normal(1 << 20, dtype=np.float32)
    y = rng.standard_normal(1 << 20, dtype=np.float32)
    rows = rng.standard_normal((1024, 781), dtype=np.float32)
    w = rng.standard_normal(781, dtype=np.float32)
    b = rng.standard_normal(781, dtype=np.float32)
    a = rng.standard_normal((300, 200), dtype=np.float32)
    m = rng.standard_normal((200, 250), dtype=np.float32)

    def dropout_check(out):
        kept = out != 0
        return np.allclose(out[kept], 2 * x[kept]) and 0.45 < kept.mean() < 0.55

    return [
        ("vector add (2^20 fp32)", lambda: gallery.add(x, y),
         lambda out: np.array_equal(out, x + y)),
        ("softmax (1024x781 fp32)", lambda: gallery.softmax(rows),
         lambda out: np.allclose(out, gallery.softmax_reference(rows), atol=1e-6)),
        ("layernorm (1024x781 fp32)", lambda: gallery.layernorm(rows, w, b),
         lambda out: np.allclose(out, gallery.layernorm_reference(rows, w, b), atol=1e-4)),
        ("matmul (300x200 @ 200x250 fp32)", lambda: gallery.matmul(a, m),
         lambda out: np.allclose(out, a @ m, atol=1e-3)),
        ("dropout (p=0.5, 2^20 fp32)", lambda: gallery.dropout(x, 0.5, 1234), dropout_check),
    ]


def _run(name: str, call: Callable, check: Callable, write: Callable[[str], None]) -> bool:
    start = time.perf_counter()
    out = call()                       # first call: compile and run
    first = time.perf_counter() - start
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        call()
        runs.append(time.perf_counter() - start)
    ok = bool(check(out))
    write(f"  {name:<34} {'ok' if ok else 'WRONG':<6} compile+run {first * 1000:8.1f} ms   "
          f"run {sorted(runs)[2] * 1000:8.2f} ms\n")
    return ok


def main(write: Callable[[str], None]) -> int:
    write(f"Naiad {naiad.__version__}\n\nBackends on this machine:\n")
    backends_cmd.list_backends(write)
    from naiad.backends.selection import select
    from naiad.errors import BackendSelectionError

    try:
        backend = select([])
    except BackendSelectionError as e:
        write(f"\nNo backend can run the gallery here:\n{e}\n")
        return 1
    import numpy as np

    write(f"\nRunning the gallery on the '{backend.name}' backend (results checked against numpy):\n")
    results = [_run(name, call, check, write) for name, call, check in _cases(np)]
    write(f"\n{sum(results)} of {len(results)} kernels correct.\n")
    return 0 if all(results) else 1
