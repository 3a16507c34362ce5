"""Reductions folded into a loop-carried value (``acc += tl.sum(x, 1)``), which the CPU backend
keeps per vector lane until the loop ends (naiad/passes/reduce_locality.py): results against
numpy for every fold the pass takes, on 2-D rows and on a 1-D block folded into a scalar; the
TTGIR holds one reduction inside the loop and one after it; loops the rewrite must not touch
(the carried value used elsewhere, a reduction along another axis, a block too narrow) keep
theirs and still compute the right thing."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def row_fold(X, Y, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, OP: tl.constexpr,
             INIT: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)
    acc = tl.full([BLOCK_M], INIT, dtype=X.dtype.element_ty)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        x = tl.load(X + rows[:, None] * N + cols[None, :])
        if OP == "sum":
            acc = acc + tl.sum(x, axis=1)
        elif OP == "max":
            acc = tl.maximum(acc, tl.max(x, axis=1))
        else:
            acc = tl.minimum(acc, tl.min(x, axis=1))
    tl.store(Y + rows, acc)


@naiad.jit
def vector_sum(X, Y, N, BLOCK: tl.constexpr):
    total = 0.0
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        total += tl.sum(tl.load(X + offs, mask=offs < N, other=0.0), axis=0)
    tl.store(Y, total)


@naiad.jit
def running_sum_also_stored(X, Y, Z, N, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, 4)
    acc = tl.zeros([4], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        acc = acc + tl.sum(tl.load(X + rows[:, None] * N + cols[None, :]), axis=1)
        tl.store(Z + start // BLOCK_N * 4 + rows, acc)        # the carried value is used: no rewrite
    tl.store(Y + rows, acc)


def _data(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("op, reference", [("sum", np.sum), ("max", np.max), ("min", np.min)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_row_folds_match_numpy(op, reference, dtype):
    m, n = 8, 512
    x = _data(dtype, (m, n))
    y = np.empty(m, dtype=dtype)
    init = {"sum": 0, "max": -(2 ** 31) if dtype == np.int32 else float("-inf"),
            "min": 2 ** 31 - 1 if dtype == np.int32 else float("inf")}[op]
    kernel = row_fold[(1,)](x, y, n, BLOCK_M=m, BLOCK_N=64, OP=op, INIT=init)
    np.testing.assert_allclose(y, reference(x, axis=1), rtol=1e-5)
    ttgir = kernel.asm["ttgir"]
    assert ttgir.count('"tt.reduce"') == 2
    loop = ttgir[ttgir.index("scf.for"):ttgir.index("scf.yield")]
    assert loop.count('"tt.reduce"') == 1 and "tt.reshape" in loop


def test_a_nonzero_start_value_is_folded_in_after_the_loop():
    x = _data(np.float32, (8, 256))
    y = np.empty(8, dtype=np.float32)
    row_fold[(1,)](x, y, 256, BLOCK_M=8, BLOCK_N=64, OP="max", INIT=5.0)
    np.testing.assert_allclose(y, np.maximum(5.0, x.max(axis=1)))


@pytest.mark.parametrize("n", [3, 100, 4096, 5000])
def test_a_block_folded_into_a_scalar(n):
    x = _data(np.float32, (n,), seed=n)
    y = np.zeros(1, dtype=np.float32)
    kernel = vector_sum[(1,)](x, y, n, BLOCK=256)
    np.testing.assert_allclose(y[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-4)
    assert "tensor<8xf32>" in kernel.asm["ttgir"] or "tensor<16xf32>" in kernel.asm["ttgir"]


def test_a_carried_value_used_inside_the_loop_is_left_alone():
    x = _data(np.float32, (4, 128))
    y, z = np.empty(4, dtype=np.float32), np.empty(4 * 4, dtype=np.float32)
    kernel = running_sum_also_stored[(1,)](x, y, z, 128, BLOCK_N=32)
    np.testing.assert_allclose(z.reshape(4, 4), np.cumsum(x.reshape(4, 4, 32).sum(axis=2), axis=1).T,
                               rtol=1e-5)
    np.testing.assert_allclose(y, x.sum(axis=1), rtol=1e-5)
    assert kernel.asm["ttgir"].count('"tt.reduce"') == 1


def test_a_block_narrower_than_two_vectors_is_left_alone():
    x = _data(np.float32, (8, 64))
    y = np.empty(8, dtype=np.float32)
    kernel = row_fold[(1,)](x, y, 64, BLOCK_M=8, BLOCK_N=8, OP="sum", INIT=0.0)
    np.testing.assert_allclose(y, x.sum(axis=1), rtol=1e-5)
    assert kernel.asm["ttgir"].count('"tt.reduce"') == 1


@naiad.jit
def rowsum_advancing_pointers(X, Y, N, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, 4)
    ptrs = X + rows[:, None] * N + tl.arange(0, BLOCK_N)[None, :]
    acc = tl.zeros([4], dtype=tl.float32)
    for _ in range(0, N, BLOCK_N):
        acc += tl.sum(tl.load(ptrs), axis=1)
        ptrs += BLOCK_N
    tl.store(Y + rows, acc)


def test_a_loop_that_also_carries_pointers():
    x = _data(np.float32, (4, 256))
    y = np.empty(4, dtype=np.float32)
    kernel = rowsum_advancing_pointers[(1,)](x, y, 256, BLOCK_N=64)
    np.testing.assert_allclose(y, x.sum(axis=1), rtol=1e-5)
    assert kernel.asm["ttgir"].count('"tt.reduce"') == 2
