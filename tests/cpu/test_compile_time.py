"""Compile time stays bounded for big tiles: tile ops become loops of native-width vector
operations, never vectors of thousands of lanes."""

from __future__ import annotations

import time

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def warm_up_kernel(x):
    tl.store(x, tl.load(x) + 1)


@naiad.jit
def big_tile_kernel(x, out, B: tl.constexpr):
    """Softmax of a B x B tile, a transpose, a product with itself, a scan, a gather."""
    rows = tl.arange(0, B)[:, None]
    cols = tl.arange(0, B)[None, :]
    t = tl.load(x + rows * B + cols)
    u = tl.exp(t - tl.max(t, axis=1, keep_dims=True))
    u = u / tl.sum(u, axis=1, keep_dims=True)
    v = tl.trans(u) + t * 2
    w = tl.dot(v, u) + tl.cumsum(v, axis=0)
    tl.store(out + rows * B + cols, w + tl.gather(t, (rows + cols) % B, 1))


def test_a_128x128_fp32_tile_kernel_compiles_in_well_under_a_second():
    warm_up_kernel[(1,)](np.zeros(1, np.float32))
    b = 128
    x = np.random.default_rng(0).uniform(-1, 1, (b, b)).astype(np.float32)
    out = np.zeros_like(x)
    start = time.process_time()
    big_tile_kernel.warmup(x, out, B=b, grid=(1,))
    elapsed = time.process_time() - start
    big_tile_kernel[(1,)](x, out, B=b)
    u = np.exp(x - x.max(axis=1, keepdims=True))
    u /= u.sum(axis=1, keepdims=True)
    v = u.T + x * 2
    r, c = np.arange(b)[:, None], np.arange(b)[None, :]
    expected = v.astype(np.float64) @ u + np.cumsum(v, axis=0) + np.take_along_axis(x, (r + c) % b, 1)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    assert elapsed < 1.0, f"compiling took {elapsed:.2f} s of CPU time"
