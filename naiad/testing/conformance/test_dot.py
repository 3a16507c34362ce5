"""``tl.dot`` for fp32, fp16, bf16, int8 and fp64 inputs on square and non-square tiles, with and
without an accumulator, and a full tiled matmul with masks -- against numpy in float64."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .reference import assert_dot_close, bf16_round, empty, from_kernel, to_kernel



@naiad.jit
def dot_kernel(a, b, c, out, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               ACC: tl.constexpr, OUT_DTYPE: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    rk = tl.arange(0, K)
    x = tl.load(a + rm * K + rk[None, :])
    y = tl.load(b + rk[:, None] * N + rn)
    if ACC:
        result = tl.dot(x, y, tl.load(c + rm * N + rn))
    else:
        result = tl.dot(x, y, out_dtype=OUT_DTYPE)
    tl.store(out + rm * N + rn, result)


def _operand(name: str, shape, rng) -> np.ndarray:
    if name == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    values = rng.uniform(-2, 2, shape)
    return bf16_round(values) if name == "bfloat16" else values.astype(name)


_ACCUMULATOR = {"float32": "float32", "float16": "float32", "bfloat16": "float32", "int8": "int32",
                "float64": "float64"}


@pytest.mark.parametrize("m,n,k", [(16, 16, 16), (32, 64, 16), (128, 16, 32), (16, 128, 64), (64, 32, 128)])
@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "int8"])
def test_dot(name, m, n, k):
    rng = np.random.default_rng(m + n + k)
    a, b = _operand(name, (m, k), rng), _operand(name, (k, n), rng)
    acc_name = _ACCUMULATOR[name]
    use_acc = (m + n) % 3 != 0            # about two cases in three add an accumulator
    c = rng.integers(-1000, 1000, (m, n)) if acc_name == "int32" else rng.normal(size=(m, n))
    c = c.astype(acc_name)
    out = np.zeros((m, n), acc_name)
    dot_kernel[(1,)](to_kernel(a, name), to_kernel(b, name), c, out, M=m, N=n, K=k, ACC=use_acc,
                     OUT_DTYPE=getattr(tl, acc_name))
    expected = a.astype(np.float64) @ b.astype(np.float64) + (c if use_acc else 0)
    if name == "int8":
        np.testing.assert_array_equal(out, expected.astype(np.int64).astype(np.int32))
    else:
        assert_dot_close(out, expected, a, b, rtol=1e-4, atol=1e-4 * k)


@naiad.jit
def precision_kernel(a, b, out, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                     PRECISION: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    rk = tl.arange(0, K)
    x = tl.load(a + rm * K + rk[None, :])
    y = tl.load(b + rk[:, None] * N + rn)
    tl.store(out + rm * N + rn, tl.dot(x, y, input_precision=PRECISION))


@pytest.mark.parametrize("precision", ["ieee", "tf32", "tf32x3"])
def test_fp32_dot_input_precisions(precision):
    """"ieee" is fp32 on every backend (float32 rounding of float64's result); "tf32" may round
    the inputs to tf32; "tf32x3" recovers about fp32 from three tf32 products."""
    rng = np.random.default_rng(13)
    m, n, k = 64, 32, 64
    a, b = rng.normal(size=(m, k)).astype(np.float32), rng.normal(size=(k, n)).astype(np.float32)
    out = np.zeros((m, n), np.float32)
    precision_kernel[(1,)](a, b, out, M=m, N=n, K=k, PRECISION=precision)
    expected = a.astype(np.float64) @ b
    magnitude = np.abs(a.astype(np.float64)) @ np.abs(b)
    allowed = {"ieee": 2.0 ** -17, "tf32": 2.0 ** -10, "tf32x3": 2.0 ** -17}[precision]
    error = np.abs(out - expected) / magnitude
    assert error.max() <= allowed, (precision, error.max())


@pytest.mark.parametrize("name,out_name", [("float16", "float16"), ("float64", "float64")])
def test_dot_output_types(name, out_name):
    """fp16 inputs may accumulate into fp16 (``out_dtype``); fp64 inputs compute in fp64."""
    rng = np.random.default_rng(9)
    m, n, k = 32, 16, 64
    a, b = _operand(name, (m, k), rng), _operand(name, (k, n), rng)
    out = np.zeros((m, n), out_name)
    dot_kernel[(1,)](a, b, out, out, M=m, N=n, K=k, ACC=False, OUT_DTYPE=getattr(tl, out_name))
    expected = a.astype(np.float64) @ b.astype(np.float64)
    rtol = 1e-12 if name == "float64" else 1e-2
    np.testing.assert_allclose(out, expected, rtol=rtol, atol=rtol * k)


@naiad.jit
def bf16_output_kernel(a, b, out, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    rk = tl.arange(0, K)
    acc = tl.dot(tl.load(a + rm * K + rk[None, :]), tl.load(b + rk[:, None] * N + rn))
    tl.store(out + rm * N + rn, acc.to(tl.bfloat16))


def test_bf16_dot_result_rounds_to_bf16():
    rng = np.random.default_rng(10)
    m, n, k = 16, 32, 16
    a, b = _operand("bfloat16", (m, k), rng), _operand("bfloat16", (k, n), rng)
    out = empty((m, n), "bfloat16")
    bf16_output_kernel[(1,)](to_kernel(a, "bfloat16"), to_kernel(b, "bfloat16"), out, M=m, N=n, K=k)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(from_kernel(out), bf16_round(exact), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("shape,blocks", [((300, 200, 250), (64, 64, 32)), ((33, 17, 70), (16, 32, 16)),
                                          ((128, 128, 128), (128, 128, 32))])
def test_tiled_matmul_with_masks(shape, blocks):
    from naiad.tools.gallery import matmul

    m, k, n = shape
    rng = np.random.default_rng(11)
    a = rng.normal(size=(m, k)).astype(np.float32)
    b = rng.normal(size=(k, n)).astype(np.float32)
    c = matmul(a, b, *blocks)
    assert_dot_close(c, a.astype(np.float64) @ b.astype(np.float64), a, b)


@naiad.jit
def loop_kernel(a, b, out, gram, K, M: tl.constexpr, N: tl.constexpr, BK: tl.constexpr):
    """acc = dot(a, b, acc) in a loop over masked K blocks, then acc @ acc.T."""
    rm = tl.arange(0, M)[:, None]
    rn = tl.arange(0, N)[None, :]
    rk = tl.arange(0, BK)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for k0 in range(0, K, BK):
        x = tl.load(a + rm * K + (k0 + rk)[None, :], mask=(k0 + rk)[None, :] < K, other=0.0)
        y = tl.load(b + (k0 + rk)[:, None] * N + rn, mask=(k0 + rk)[:, None] < K, other=0.0)
        acc = tl.dot(x, y, acc)
    tl.store(out + rm * N + rn, acc)
    tl.store(gram + rm * M + tl.arange(0, M)[None, :], tl.dot(acc, tl.trans(acc)))


def test_dot_accumulating_in_a_loop():
    rng = np.random.default_rng(12)
    m, n, k = 16, 32, 100
    a = rng.normal(size=(m, k)).astype(np.float32)
    b = rng.normal(size=(k, n)).astype(np.float32)
    out, gram = np.zeros((m, n), np.float32), np.zeros((m, m), np.float32)
    loop_kernel[(1,)](a, b, out, gram, k, M=m, N=n, BK=32)
    expected = a.astype(np.float64) @ b
    assert_dot_close(out, expected, a, b)
    # the second dot multiplies the first one's result as the kernel holds it
    assert_dot_close(gram, out.astype(np.float64) @ out.T, out, out.T, atol=1e-2)
