"""int8 ``tl.dot`` into int32 on the CPU: four k at a time on AVX-512 VNNI (``vpdpbusd``, A's
bytes moved up by 128 and the sums corrected by B's column sums), on AMX tiles (``tdpbssd``)
where the processor has them, widened to int32 elsewhere.  Exact either way: checked against
numpy's int64 products over block shapes, masked edges, the extremes of int8, an accumulator
carried through the K loop and batched (3-D) dots."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends.cpu import amx
from naiad.backends.cpu.knobs import KNOBS
from naiad.backends.cpu.target import host_features
from naiad.tools.gallery import matmul_kernel

pytestmark = pytest.mark.shipped_backends

FEATURES = host_features().split(",")


def _instruction():
    """The instruction the lowering should have chosen on this processor, under the knobs as
    they are in the test (the tests' conftest clears the NAIAD_ variables)."""
    if amx.tiles_usable(FEATURES, "int8", KNOBS.amx):
        return "llvm.x86.tdpbssd"
    return "llvm.x86.avx512.vpdpbusd.512" if "+avx512vnni" in FEATURES else None


def _matmul(a, b, c, bm, bn, bk):
    """``c = a @ b`` by the gallery's matmul (it accumulates int8 in int32)."""
    (m, k), n = a.shape, b.shape[1]
    return matmul_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](a, b, c, m, n, k, k, 1, n, 1, n, 1,
                                                                 BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)


@naiad.jit
def batched_int8(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    i = tl.arange(0, B)[:, None, None]
    a = tl.load(a_ptr + i * M * K + tl.arange(0, M)[None, :, None] * K + tl.arange(0, K)[None, None, :])
    b = tl.load(b_ptr + i * K * N + tl.arange(0, K)[None, :, None] * N + tl.arange(0, N)[None, None, :])
    c = tl.load(c_ptr + i * M * N + tl.arange(0, M)[None, :, None] * N + tl.arange(0, N)[None, None, :])
    c = tl.dot(a, b, c)
    tl.store(c_ptr + i * M * N + tl.arange(0, M)[None, :, None] * N + tl.arange(0, N)[None, None, :], c)


def _exact(a, b):
    return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)


@pytest.mark.parametrize("m, n, k, bm, bn, bk", [
    (64, 64, 64, 32, 32, 32), (128, 128, 256, 64, 64, 64), (16, 16, 16, 16, 16, 16),
    (100, 70, 50, 32, 32, 32),                  # masked edges both ways and along K
    (33, 48, 20, 16, 16, 16), (130, 200, 300, 64, 128, 128), (48, 80, 192, 16, 16, 64)])
def test_int8_matmul_matches_numpy(m, n, k, bm, bn, bk):
    rng = np.random.default_rng(m * n + k)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    c = np.full((m, n), -1, np.int32)
    compiled = _matmul(a, b, c, bm, bn, bk)
    np.testing.assert_array_equal(c, _exact(a, b))
    instruction = _instruction()
    if instruction and not (instruction.endswith("tdpbssd") and bk % 64):
        assert instruction in compiled.asm["llir"]


@pytest.mark.parametrize("low, high", [(-128, -127), (127, 128), (-128, 128)])
def test_int8_extremes_match_numpy(low, high):
    """All -128 (A moved up by 128 becomes 0: the correction alone), all 127, both."""
    rng = np.random.default_rng(abs(low + high))
    a = rng.integers(low, high, (64, 256)).astype(np.int8)
    b = rng.integers(-128, 128, (256, 64)).astype(np.int8)
    c = np.zeros((64, 64), np.int32)
    _matmul(a, b, c, 32, 32, 64)
    np.testing.assert_array_equal(c, _exact(a, b))


@pytest.mark.parametrize("count, m, n, k", [(1, 32, 32, 64), (2, 16, 32, 64), (4, 32, 16, 128)])
def test_batched_int8_dot_matches_numpy(count, m, n, k):
    rng = np.random.default_rng(count + m + n)
    a = rng.integers(-128, 128, (count, m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (count, k, n)).astype(np.int8)
    start = rng.integers(-1000, 1000, (count, m, n)).astype(np.int32)
    c = start.copy()
    batched_int8[(1,)](a, b, c, B=count, M=m, N=n, K=k)
    np.testing.assert_array_equal(c, start + np.stack([_exact(a[i], b[i]) for i in range(count)]))
