"""One "node" of the remote-cache tests, run as its own process (``python -m
tests.remote_cache_node KERNEL...``) with its own ``NAIAD_CACHE_DIR``: launches the kernels
named, checks each result against numpy, and prints one JSON line -- how many compilations ran
(the compile counter: ``knobs.compilation.listener``), how many came from a cache, the
warnings, and the seconds of each kernel's first launch."""

from __future__ import annotations

import json
import sys
import time
import warnings

import numpy as np

import naiad
import naiad.language as tl


@naiad.jit
def scaled_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


@naiad.jit
def row_max(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(x, axis=0))


@naiad.autotune(configs=[naiad.Config({"BLOCK": 64}), naiad.Config({"BLOCK": 128}),
                         naiad.Config({"BLOCK": 256})], key=["n"], cache_results=True)
@naiad.jit
def tuned_square(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * x, mask=mask)


def _scaled_add(block: int) -> None:
    rng = np.random.default_rng(block)
    x, y = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    out = np.empty_like(x)
    scaled_add[(naiad.cdiv(1000, block),)](x, y, out, 1000, 2.5, BLOCK=block)
    np.testing.assert_allclose(out, 2.5 * x + y, rtol=1e-6)


def _row_max(block: int) -> None:
    """(``block`` at least 128: each program reads its whole row of 100.)"""
    x = np.random.default_rng(block).standard_normal((7, 100)).astype(np.float32)
    out = np.empty(7, np.float32)
    row_max[(7,)](x, out, 100, BLOCK=max(block, 128))
    np.testing.assert_array_equal(out, x.max(axis=1))


def _tuned_square(_: int) -> None:
    x = np.random.default_rng(3).standard_normal(3000).astype(np.float32)
    out = np.empty_like(x)
    tuned_square[lambda meta: (naiad.cdiv(3000, meta["BLOCK"]),)](x, out, 3000)
    np.testing.assert_allclose(out, x * x, rtol=1e-6)


RUNS = {"add": _scaled_add, "max": _row_max, "tuned": _tuned_square}


def main(names: list[str]) -> None:
    counts = {"compiles": 0, "hits": 0}

    def listener(src, metadata, times, cache_hit):
        counts["hits" if cache_hit else "compiles"] += 1

    naiad.knobs.compilation.listener = listener
    first_launch = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in names:
            kind, _, block = name.partition(":")
            start = time.perf_counter()
            RUNS[kind](int(block or 64))
            first_launch[name] = time.perf_counter() - start
    print(json.dumps({**counts, "warnings": [str(w.message) for w in caught], "seconds": first_launch}))


if __name__ == "__main__":
    main(sys.argv[1:])
