"""Which tensors the CPU backend holds in a buffer and which it computes again at each use.

A held tensor costs a store and a reload of every element, and its buffer crowds the cache (an
[8, 1024] fp32 block is a whole L1).  Consecutive and once-per-row loads are read again rather
than held, index arithmetic is recomputed, and uses that meet in one consumer are evaluated once
per chunk anyway; gathers and values a later store could change are still held.  Each kernel is
checked against numpy (with masked, odd widths) and, where the point is what is held, in its
LLVM IR."""

from __future__ import annotations

import re

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


def _buffers(kernel) -> list[str]:
    """The stack buffers of the compiled kernel, as LLVM types (``[8192 x float]``)."""
    return re.findall(r"alloca (\[\d+ x \w+\])", kernel.asm["llir"])


@naiad.jit
def layernorm_gelu(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, n_rows, n_cols, ROWS: tl.constexpr,
                   COLS: tl.constexpr):
    """Inductor's fused layer norm and GELU: ``x - mean`` used by the variance and the output,
    the normalized value used twice by the GELU, the offsets by the load and the store."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, COLS)[None, :]
    mask = (rows < n_rows) & (cols < n_cols)
    offsets = rows * n_cols + cols
    x = tl.load(x_ptr + offsets, mask, other=0.0)
    mean = tl.sum(x, 1)[:, None] / n_cols
    centered = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(centered * centered, 1)[:, None] / n_cols + 1e-5)
    y = centered * rstd * tl.load(w_ptr + cols, cols < n_cols) + tl.load(b_ptr + cols, cols < n_cols)
    tl.store(out_ptr + offsets, 0.5 * y * (1 + tl.erf(y * 0.7071067811865476)), mask)
    tl.store(mean_ptr + rows, mean, rows < n_rows)


def _layernorm_gelu_reference(x, w, b):
    from math import erf
    mean = x.mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * w + b
    return 0.5 * y * (1 + np.vectorize(erf)(y / np.sqrt(2))), mean[:, 0]


@pytest.mark.parametrize("n_rows, n_cols, rows", [(16, 64, 8), (13, 50, 4), (9, 1000, 2), (3, 7, 1)])
def test_layernorm_gelu_matches_numpy(n_rows, n_cols, rows):
    rng = np.random.default_rng(n_cols)
    x = rng.standard_normal((n_rows, n_cols)).astype(np.float32) * 3 + 1
    w, b = (rng.standard_normal(n_cols).astype(np.float32) for _ in range(2))
    out = np.full_like(x, np.nan)
    mean = np.full(n_rows, np.nan, np.float32)
    cols = naiad.next_power_of_2(n_cols)
    layernorm_gelu[(naiad.cdiv(n_rows, rows),)](x, w, b, out, mean, n_rows, n_cols, ROWS=rows, COLS=cols)
    want, want_mean = _layernorm_gelu_reference(x.astype(np.float64), w, b)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-5, atol=1e-5)


def test_consecutive_loads_and_indices_are_not_held():
    """Of the [8, 1024] blocks only the output is held (a later store could change what its
    loads read, so it is computed before the store of the mean); the loaded rows, the centered
    values and the offsets are computed again where they are used."""
    x = np.zeros((8, 1024), np.float32)
    w = np.zeros(1024, np.float32)
    kernel = layernorm_gelu.warmup(x, w, w, x, w, 8, 1024, ROWS=8, COLS=1024, grid=(1,))
    assert _buffers(kernel).count("[8192 x float]") <= 1
    assert "[8192 x i32]" not in _buffers(kernel)


@naiad.jit
def gather_twice(table_ptr, ids_ptr, out_ptr, BLOCK: tl.constexpr):
    """A gathered block used twice is held: reading it again would gather again."""
    offsets = tl.arange(0, BLOCK)
    values = tl.load(table_ptr + tl.load(ids_ptr + offsets))
    tl.store(out_ptr + offsets, values * values + values)
    tl.store(out_ptr + BLOCK + offsets, values - 1)


def test_gathered_values_used_twice_are_held_and_right():
    rng = np.random.default_rng(0)
    table = rng.standard_normal(100).astype(np.float32)
    ids = rng.integers(0, 100, 1024).astype(np.int32)
    out = np.zeros(2048, np.float32)
    kernel = gather_twice[(1,)](table, ids, out, BLOCK=1024)
    values = table[ids]
    np.testing.assert_allclose(out[:1024], values * values + values, rtol=1e-6)
    np.testing.assert_allclose(out[1024:], values - 1, rtol=1e-6)
    assert "[1024 x float]" in _buffers(kernel)


@naiad.jit
def read_store_reuse(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """A consecutive load used before and after a store over the same memory: the use after
    the store sees what was loaded before it."""
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask)
    tl.store(out_ptr + offsets, x * 2, mask)
    tl.store(x_ptr + offsets, x + 100, mask)
    tl.store(out_ptr + BLOCK + offsets, x - 1, mask)


@pytest.mark.parametrize("n", [64, 61])
def test_load_used_after_a_store_over_it_keeps_its_value(n):
    x = np.arange(64, dtype=np.float32)
    original = x.copy()
    out = np.zeros(128, np.float32)
    read_store_reuse[(1,)](x, out, n, BLOCK=64)
    np.testing.assert_array_equal(out[:n], original[:n] * 2)
    np.testing.assert_array_equal(out[64:64 + n], original[:n] - 1)
    np.testing.assert_array_equal(x[:n], original[:n] + 100)
