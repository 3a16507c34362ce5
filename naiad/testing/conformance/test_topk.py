"""tl.sort, tl.topk and tl.bitonic_merge against numpy: every row of a 2-D block, both orders,
k = 1 (a plain max/min), k between 1 and n (bitonic top-k), k = n, one-element rows, and the
compile-time checks on k and the dimension."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.compiler.errors import CompileTimeAssertionFailure



@naiad.jit
def topk_kernel(X, Z, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, DESC: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    x = tl.load(X + rows * N + tl.arange(0, N)[None, :])
    tl.store(Z + rows * K + tl.arange(0, K)[None, :], tl.topk(x, K, descending=DESC))


@naiad.jit
def sort_kernel(X, Z, M: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(Z + offs, tl.sort(tl.load(X + offs), descending=DESC))


@naiad.jit
def merge_kernel(X, Z, N: tl.constexpr, DESC: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(Z + offs, tl.bitonic_merge(tl.load(X + offs), descending=DESC))


def expected_topk(x: np.ndarray, k: int, descending: bool) -> np.ndarray:
    ordered = np.sort(x, axis=-1)
    return ordered[:, ::-1][:, :k] if descending else ordered[:, :k]


@pytest.mark.parametrize("m, n, k, dtype, descending", [(4, 16, 4, np.float32, True), (4, 16, 4, np.float32, False),
                                                         (8, 8, 1, np.int32, False), (2, 32, 32, np.float16, True),
                                                         (1, 64, 2, np.int32, False)])
def test_topk_matches_numpy(m, n, k, dtype, descending):
    rng = np.random.default_rng(n * k)
    x = (rng.standard_normal((m, n)) * 1000).astype(dtype)
    x[0, : n // 2] = x[0, 0]                                # ties
    z = np.zeros((m, k), dtype)
    topk_kernel[(1,)](x, z, m, n, k, descending)
    np.testing.assert_array_equal(z, expected_topk(x, k, descending))


@pytest.mark.parametrize("m, n, descending", [(1, 1, True), (8, 1, False), (4, 32, True), (4, 32, False)])
def test_sort_matches_numpy(m, n, descending):
    x = np.random.default_rng(m + n).integers(-50, 50, (m, n)).astype(np.int32)
    z = np.zeros_like(x)
    sort_kernel[(1,)](x, z, m, n, descending)
    np.testing.assert_array_equal(z, expected_topk(x, n, descending))


def test_topk_of_a_single_element_row_is_that_element():
    x = np.array([[3.5], [-1.0]], np.float32)
    z = np.zeros_like(x)
    topk_kernel[(1,)](x, z, 2, 1, 1, True)
    np.testing.assert_array_equal(z, x)


@pytest.mark.parametrize("descending", [True, False])
def test_bitonic_merge_sorts_a_bitonic_row(descending):
    x = np.concatenate([np.arange(0, 16, 2), np.arange(15, 0, -2)]).astype(np.float32)   # up, then down
    z = np.zeros_like(x)
    merge_kernel[(1,)](x, z, 16, descending)
    np.testing.assert_array_equal(z, np.sort(x)[::-1] if descending else np.sort(x))


@naiad.jit
def topk_unused_kernel(X, K: tl.constexpr):
    tl.topk(tl.load(X + tl.arange(0, 8)), K)


@pytest.mark.parametrize("k, message", [(0, "topk: k must be greater than 0"), (3, "topk: k must be a power of two"),
                                        (16, "topk: k must not exceed the size of the selected dimension")])
def test_bad_k_is_a_compile_time_error(k, message):
    with pytest.raises(CompileTimeAssertionFailure, match=message):
        topk_unused_kernel[(1,)](np.zeros(8, np.float32), k)


@naiad.jit
def sort_rows_kernel(X, N: tl.constexpr):
    offs = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(X + offs, tl.sort(tl.load(X + offs), dim=0))


def test_sorting_another_dimension_says_what_to_do():
    with pytest.raises(CompileTimeAssertionFailure, match=r"sort_rows_kernel(.|\n)*only along the last dimension"):
        sort_rows_kernel[(1,)](np.zeros((4, 4), np.float32), 4)
