"""Kernels on the OpenCL device against numpy: element-wise ops over dtypes and sizes with
masks, reductions and scans (sub-group shuffles, local memory), dots, atomics, loops."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.usefixtures("opencl")


@naiad.jit
def axpy_kernel(x, y, out, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, a * tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8", "float64"])
@pytest.mark.parametrize("n", [1, 255, 1000, 4097])
def test_axpy_over_dtypes_and_sizes(dtype, n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 10).astype(dtype)
    y = (rng.standard_normal(n) * 10).astype(dtype)
    out = np.full(n, 77, dtype)
    axpy_kernel[(naiad.cdiv(n, 256),)](x, y, out, 3, n, BLOCK=256)
    expected = (3 * x.astype(np.float64) + y).astype(dtype) if "float" in dtype else (3 * x + y).astype(dtype)
    # (3 * x + y is one fma, rounded once: numpy rounds twice)
    # (and fp16's 3 * x is rounded to fp16 before the add: a few ulps of |3 x| apart)
    np.testing.assert_allclose(out, expected, rtol=1e-3 if dtype == "float16" else 1e-6,
                               atol={"float16": 0.05, "float32": 1e-5, "float64": 1e-12}.get(dtype, 0))


@naiad.jit
def row_reduce_kernel(x, sums, maxes, argmaxes, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * n + offs, mask=offs < n, other=-float("inf"))
    tl.store(maxes + row, tl.max(v, axis=0))
    tl.store(argmaxes + row, tl.argmax(v, axis=0))
    tl.store(sums + row, tl.sum(tl.where(offs < n, v, 0.0), axis=0))


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("n", [7, 300, 2048])
def test_row_reductions(num_warps, n):
    x = np.random.default_rng(n).standard_normal((13, n)).astype(np.float32)
    sums, maxes = np.zeros(13, np.float32), np.zeros(13, np.float32)
    argmaxes = np.zeros(13, np.int32)
    row_reduce_kernel[(13,)](x, sums, maxes, argmaxes, n, BLOCK=triton_block(n), num_warps=num_warps)
    np.testing.assert_allclose(sums, x.sum(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(maxes, x.max(1))
    np.testing.assert_array_equal(argmaxes, x.argmax(1))


def triton_block(n):
    return max(16, 1 << (n - 1).bit_length())


@naiad.jit
def softmax_kernel(out, x, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * n + offs, mask=offs < n, other=-float("inf"))
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out + row * n + offs, e / tl.sum(e, axis=0), mask=offs < n)


def test_softmax_rows():
    x = np.random.default_rng(0).standard_normal((64, 781)).astype(np.float32)
    out = np.zeros_like(x)
    softmax_kernel[(64,)](out, x, 781, BLOCK=1024)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


@naiad.jit
def cumsum_kernel(x, out, n, BLOCK: tl.constexpr, REVERSE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * n + offs, mask=offs < n, other=0)
    tl.store(out + row * n + offs, tl.cumsum(v, axis=0, reverse=REVERSE), mask=offs < n)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n, warps", [(5, 4), (128, 4), (1000, 4), (4000, 4), (4000, 8), (1000, 1)])
def test_scans(n, warps, reverse):
    """Rows of one to eight repetitions of the layout's tile, in one to eight warps."""
    x = np.random.default_rng(n).integers(-100, 100, (4, n)).astype(np.int32)
    out = np.zeros_like(x)
    cumsum_kernel[(4,)](x, out, n, BLOCK=triton_block(n), REVERSE=reverse, num_warps=warps)
    expected = np.flip(np.cumsum(np.flip(x, 1), 1), 1) if reverse else np.cumsum(x, 1)
    np.testing.assert_array_equal(out, expected)


@naiad.jit
def tile_cumsum_kernel(x, out, R: tl.constexpr, C: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tl.store(out + offs, tl.cumsum(tl.load(x + offs), axis=1))


@pytest.mark.parametrize("rows, cols, warps", [(8, 2048, 4), (16, 512, 8), (4, 4096, 2)])
def test_tile_scans_of_many_rows_and_repetitions(rows, cols, warps):
    """Several rows a thread, each in several repetitions across several warps: every
    (row, repetition)'s warp totals in shared memory at once."""
    x = np.random.default_rng(cols).integers(-100, 100, (rows, cols)).astype(np.int32)
    out = np.zeros_like(x)
    tile_cumsum_kernel[(1,)](x, out, R=rows, C=cols, num_warps=warps)
    np.testing.assert_array_equal(out, np.cumsum(x, 1))


@naiad.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), ACC)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0)
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0)
        acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("num_stages", [2, 3])         # 3: the operands in a ring of two slots
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
@pytest.mark.parametrize("shape", [(64, 64, 64), (100, 70, 45), (16, 130, 33)])
def test_tiled_matmul(dtype, shape, num_stages):
    m, n, k = shape
    rng = np.random.default_rng(m)
    if dtype == "int8":
        a, b = rng.integers(-8, 8, (m, k)).astype(np.int8), rng.integers(-8, 8, (k, n)).astype(np.int8)
        c = np.zeros((m, n), np.int32)
    else:
        a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
        c = np.zeros((m, n), np.float32)
    acc = tl.int32 if dtype == "int8" else tl.float32
    matmul_kernel[(naiad.cdiv(m, 32), naiad.cdiv(n, 32))](a, b, c, m, n, k, BM=32, BN=32, BK=16, ACC=acc,
                                                          num_stages=num_stages)
    if dtype == "int8":
        np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    else:
        np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-3, atol=2e-3)


@naiad.jit
def histogram_kernel(x, counts, total, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x + offs, mask=mask, other=0)
    tl.atomic_add(counts + v, 1, mask=mask)
    tl.atomic_add(total, tl.sum(tl.where(mask, v, 0).to(tl.float32), axis=0))


def test_atomic_adds_from_many_programs():
    x = np.random.default_rng(1).integers(0, 16, 10000).astype(np.int32)
    counts, total = np.zeros(16, np.int32), np.zeros(1, np.float32)
    histogram_kernel[(naiad.cdiv(10000, 512),)](x, counts, total, 10000, BLOCK=512)
    np.testing.assert_array_equal(counts, np.bincount(x, minlength=16))
    assert total[0] == pytest.approx(float(x.sum()))


@naiad.jit
def half_atomic_kernel(acc, values, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(acc + offs % 4, tl.load(values + offs, mask=offs < n, other=0), mask=offs < n)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_narrow_atomics_on_the_word_around_them(dtype):
    """16-bit float atomics (OpenCL has no atomics so narrow): four neighbours, two words,
    updated by 256 work-items at once."""
    torch = pytest.importorskip("torch")
    values = torch.randint(-3, 4, (256,)).to(getattr(torch, dtype))
    acc = torch.zeros(4, dtype=getattr(torch, dtype))
    half_atomic_kernel[(1,)](acc, values, 256, BLOCK=256)
    # small integers: every partial sum is exact in 16 bits, in any order
    torch.testing.assert_close(acc, values.reshape(-1, 4).sum(0), rtol=0, atol=0)


@naiad.jit
def cas_lock_kernel(lock, counter):
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    tl.store(counter, tl.load(counter) + 1)
    tl.atomic_xchg(lock, 0)


def test_a_compare_and_swap_lock_counts_every_program():
    lock, counter = np.zeros(1, np.int32), np.zeros(1, np.int32)
    cas_lock_kernel[(64,)](lock, counter)
    assert counter[0] == 64 and lock[0] == 0


@naiad.jit
def while_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=1)
    steps = tl.zeros((BLOCK,), tl.int32)
    i = 0
    while i < 20:
        odd = (v % 2) == 1
        v = tl.where(v > 1, tl.where(odd, 3 * v + 1, v // 2), v)
        steps += (v > 1).to(tl.int32)
        i += 1
    tl.store(out + offs, steps, mask=offs < n)


def test_loops_and_branches_per_element():
    x = np.arange(1, 301, dtype=np.int32)
    out = np.zeros_like(x)
    while_kernel[(2,)](x, out, 300, BLOCK=256)
    expected = []
    for v in x:
        steps = 0
        for _ in range(20):
            v = (3 * v + 1 if v % 2 else v // 2) if v > 1 else v
            steps += v > 1
        expected.append(steps)
    np.testing.assert_array_equal(out, expected)


def test_torch_cpu_tensors_are_arguments():
    torch = pytest.importorskip("torch")
    x, y = torch.randn(1000), torch.randn(1000)
    out = torch.empty(1000)
    axpy_kernel[(4,)](x, y, out, 2.0, 1000, BLOCK=256)
    torch.testing.assert_close(out, 2 * x + y)
