"""Property-based tests (hypothesis): random data and sizes through fixed kernels, so that only
the data and the runtime sizes vary (each kernel compiles once or twice)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import naiad
import naiad.language as tl

from naiad.testing.conformance.reference import c_div, c_mod

pytestmark = pytest.mark.shipped_backends

SETTINGS = settings(max_examples=25, deadline=None)
BLOCK = 256

finite_f32 = st.floats(-1e4, 1e4, allow_nan=False, width=32)
any_f32 = st.floats(width=32)      # NaN and infinities included
i32 = st.integers(-2**31, 2**31 - 1)


def _pair(elements, dtype):
    return st.integers(1, 600).flatmap(lambda n: st.tuples(
        hnp.arrays(dtype, n, elements=elements), hnp.arrays(dtype, n, elements=elements)))


@naiad.jit
def float_expr_kernel(x, y, fused, select, cmp, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    tl.store(fused + offs, (a - b) * 0.5 + tl.abs(a), mask=m)
    tl.store(select + offs, tl.where(a > b, a, b), mask=m)
    tl.store(cmp + offs, (a <= b) | (a != a), mask=m)


@SETTINGS
@given(_pair(any_f32, np.float32))
def test_float_elementwise(pair):
    x, y = pair
    n = x.size
    fused, select = np.zeros(n, np.float32), np.zeros(n, np.float32)
    cmp = np.zeros(n, bool)
    float_expr_kernel[(naiad.cdiv(n, BLOCK),)](x, y, fused, select, cmp, n, BLOCK=BLOCK)
    with np.errstate(all="ignore"):
        expected = (x - y) * np.float32(0.5) + np.abs(x)
    np.testing.assert_allclose(fused, expected, rtol=1e-6, atol=1e-30, equal_nan=True)
    np.testing.assert_array_equal(select, np.where(x > y, x, y))
    np.testing.assert_array_equal(cmp, (x <= y) | np.isnan(x))


@naiad.jit
def int_expr_kernel(x, y, mixed, quotient, remainder, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    tl.store(mixed + offs, (a ^ b) + (a >> 3) * 7 - (b & 0xFF), mask=m)
    nonzero = tl.where(b == 0, 1, b)
    tl.store(quotient + offs, a // nonzero, mask=m)
    tl.store(remainder + offs, a % nonzero, mask=m)


@SETTINGS
@given(_pair(i32, np.int32))
def test_int_elementwise(pair):
    x, y = pair
    n = x.size
    outs = [np.zeros(n, np.int32) for _ in range(3)]
    int_expr_kernel[(naiad.cdiv(n, BLOCK),)](x, y, *outs, n, BLOCK=BLOCK)
    nonzero = np.where(y == 0, 1, y).astype(np.int32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(outs[0], (x ^ y) + (x >> 3) * np.int32(7) - (y & 0xFF))
    np.testing.assert_array_equal(outs[1], c_div(x, nonzero))
    np.testing.assert_array_equal(outs[2], c_mod(x, nonzero))


@naiad.jit
def reduce_kernel(x, out_f, out_i, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m, other=0.0)
    low = tl.where(m, v, -float("inf"))
    tl.store(out_f, tl.sum(v, axis=0))
    tl.store(out_f + 1, tl.max(low, axis=0))
    tl.store(out_f + 2, tl.min(tl.where(m, v, float("inf")), axis=0))
    tl.store(out_i, tl.argmax(low, axis=0))
    tl.store(out_i + 1, tl.sum((v > 0).to(tl.int32), axis=0))


@SETTINGS
@given(st.integers(1, BLOCK).flatmap(lambda n: hnp.arrays(np.float32, n, elements=finite_f32)))
def test_float_reductions(x):
    n = x.size
    out_f, out_i = np.zeros(3, np.float32), np.zeros(2, np.int32)
    reduce_kernel[(1,)](x, out_f, out_i, n, BLOCK=BLOCK)
    np.testing.assert_allclose(out_f[0], x.astype(np.float64).sum(), rtol=1e-5,
                               atol=1e-5 * np.abs(x).sum() + 1e-30)
    assert out_f[1] == x.max() and out_f[2] == x.min()
    assert out_i[0] == np.argmax(x) and out_i[1] == (x > 0).sum()


@naiad.jit
def int_reduce_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0)
    tl.store(out, tl.sum(v, axis=0))
    tl.store(out + 1, tl.xor_sum(v, axis=0))
    tl.store(out + 2 + offs, tl.cumsum(v, axis=0), mask=offs < n)


@SETTINGS
@given(st.integers(1, BLOCK).flatmap(lambda n: hnp.arrays(np.int64, n, elements=st.integers(-2**62, 2**62))))
def test_int_reductions_and_scans_wrap_around_exactly(x):
    n = x.size
    out = np.zeros(2 + n, np.int64)
    int_reduce_kernel[(1,)](x, out, n, BLOCK=BLOCK)
    with np.errstate(over="ignore"):
        assert out[0] == x.sum() and out[1] == np.bitwise_xor.reduce(x)
        np.testing.assert_array_equal(out[2:], np.cumsum(x))
