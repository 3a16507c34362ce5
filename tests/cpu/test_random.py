"""Philox random numbers: the published known-answer vector, bit-exact streams against a numpy
Philox 4x32-10, and the statistics of tl.rand / tl.randn / tl.randint."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends

# Random123's kat_vectors: philox4x32_10 with counter 0 and key 0.
PHILOX_KAT = (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)


def philox4x32_10(counters: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Salmon et al.'s Philox 4x32 with 10 rounds on a (4, n) uint32 array of counters."""
    m0, m1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    w0, w1 = 0x9E3779B9, 0xBB67AE85
    c = [counters[i].astype(np.uint64) for i in range(4)]
    k0, k1 = key
    for _ in range(10):
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & np.uint64(0xFFFFFFFF),
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & np.uint64(0xFFFFFFFF)]
        k0, k1 = (k0 + w0) & 0xFFFFFFFF, (k1 + w1) & 0xFFFFFFFF
    return np.stack(c).astype(np.uint32)


@naiad.jit
def randint4x_kernel(out, seed, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a, b, c, d = tl.randint4x(seed, offs)
    m = offs < n
    tl.store(out + offs, a, mask=m)
    tl.store(out + n + offs, b, mask=m)
    tl.store(out + 2 * n + offs, c, mask=m)
    tl.store(out + 3 * n + offs, d, mask=m)


def test_philox_known_answer_vector():
    out = np.zeros(4, np.uint32)
    randint4x_kernel[(1,)](out, 0, 1, BLOCK=16)
    assert tuple(int(v) for v in out) == PHILOX_KAT
    np.testing.assert_array_equal(philox4x32_10(np.zeros((4, 1), np.uint32), (0, 0))[:, 0], PHILOX_KAT)


@pytest.mark.parametrize("seed", [1, 7, 12345, 2**40 + 77])    # 1 arrives as a constexpr
def test_streams_match_philox_bit_for_bit(seed):
    n = 1000
    out = np.zeros(4 * n, np.uint32)
    randint4x_kernel[(naiad.cdiv(n, 128),)](out, seed, n, BLOCK=128)
    counters = np.zeros((4, n), np.uint32)
    counters[0] = np.arange(n)
    expected = philox4x32_10(counters, (seed & 0xFFFFFFFF, seed >> 32))
    np.testing.assert_array_equal(out.reshape(4, n), expected)


@naiad.jit
def distributions_kernel(uniform, normal, ints, seed, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(uniform + offs, tl.rand(seed, offs), mask=m)
    tl.store(normal + offs, tl.randn(seed, offs), mask=m)
    tl.store(ints + offs, tl.randint(seed, offs), mask=m)


def test_distributions():
    n, seed = 200_000, 42
    uniform, normal = np.zeros(n, np.float32), np.zeros(n, np.float32)
    ints = np.zeros(n, np.uint32)
    distributions_kernel[(naiad.cdiv(n, 1024),)](uniform, normal, ints, seed, n, BLOCK=1024)
    counters = np.zeros((4, n), np.uint32)
    counters[0] = np.arange(n)
    words = philox4x32_10(counters, (seed, 0))
    np.testing.assert_array_equal(ints, words[0])
    # uniform: the first word mapped to [0, 1) as Triton does (|x| of the int32, scaled)
    signed = words[0].view(np.int32).astype(np.int64)
    magnitude = np.where(signed < 0, -signed - 1, signed)
    expected_uniform = (magnitude * np.float32(4.6566127342e-10)).astype(np.float32)
    np.testing.assert_allclose(uniform, expected_uniform, rtol=1e-6)
    assert 0.0 <= uniform.min() and uniform.max() < 1.0
    assert abs(uniform.mean() - 0.5) < 0.005 and abs(uniform.var() - 1 / 12) < 0.002
    hist = np.histogram(uniform, bins=10, range=(0, 1))[0]
    assert (np.abs(hist - n / 10) < 5 * np.sqrt(n / 10)).all()
    assert abs(normal.mean()) < 0.01 and abs(normal.std() - 1) < 0.01
    assert abs((np.abs(normal) < 1).mean() - 0.6827) < 0.005
    assert abs(ints.astype(np.float64).mean() / 2**32 - 0.5) < 0.005
