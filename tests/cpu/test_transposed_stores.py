"""A tile stored transposed (``tl.store(out + rn[:, None] * s + rm[None, :], tl.trans(x),
mask=tl.trans(mask))``): the axis information follows ``tl.trans`` dimension by dimension, so
the transposed mask and pointers keep their runs (on the GPU the stores move 16 bytes at a
time, tests/nvidia/test_transposed_store_ptx.py).  Values against numpy on the default
backend, over dtypes, tile sizes and edges that cut the tiles."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def transpose_kernel(Out, In, M, N, stride_in, stride_out, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(In + rm[:, None] * stride_in + rn[None, :], mask=mask)
    tl.store(Out + rn[:, None] * stride_out + rm[None, :], tl.trans(x), mask=tl.trans(mask))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int64])
@pytest.mark.parametrize("m, n, bm, bn", [(64, 64, 32, 32), (96, 48, 32, 16), (50, 37, 16, 32), (1, 5, 8, 8)])
def test_transposed_tiles_match_numpy(dtype, m, n, bm, bn):
    rng = np.random.default_rng(m * n)
    x = (rng.normal(size=(m, n)) * 50).astype(dtype)
    out = np.full((n, m), 7, dtype)
    transpose_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](out, x, m, n, n, m, BM=bm, BN=bn)
    np.testing.assert_array_equal(out, x.T)


def test_a_transposed_store_leaves_the_rest_of_a_wider_output_alone():
    """Output rows longer than M (stride_out > M): the masked-off columns keep their values."""
    m, n = 20, 30
    x = np.arange(m * n, dtype=np.float32).reshape(m, n)
    out = np.full((n, 40), -1, np.float32)
    transpose_kernel[(naiad.cdiv(m, 16), naiad.cdiv(n, 16))](out, x, m, n, n, 40, BM=16, BN=16)
    np.testing.assert_array_equal(out[:, :m], x.T)
    np.testing.assert_array_equal(out[:, m:], -1)
