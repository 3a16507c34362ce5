"""Philox random numbers: the published known-answer vectors (4x32 and 4x64), bit-exact streams
against a numpy Philox 4x32-10 (32- and 64-bit offsets), the statistics of tl.rand / tl.randn /
tl.randint and the limits of the uniform mapping."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.compiler.errors import CompileTimeAssertionFailure


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


# -- 64-bit offsets and seeds, Philox 4x64, the uniform mapping's limits ------------------------

@naiad.jit
def randint4x_int64_kernel(out, offsets, seed, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    a, b, c, d = tl.randint4x(seed, tl.load(offsets + i, mask=m))
    tl.store(out + i, a, mask=m)
    tl.store(out + n + i, b, mask=m)
    tl.store(out + 2 * n + i, c, mask=m)
    tl.store(out + 3 * n + i, d, mask=m)


@pytest.mark.parametrize("seed", [5, 0x0000000FCAFEB0BA])
def test_int64_offsets_put_their_high_word_in_the_second_counter(seed):
    offsets = np.concatenate([np.arange(3), 2**32 + np.arange(3), 7 * 2**40 + 12345 + np.arange(3),
                              -1 - np.arange(3)]).astype(np.int64)
    n = offsets.size
    out = np.zeros(4 * n, np.uint32)
    randint4x_int64_kernel[(1,)](out, offsets, seed, n, BLOCK=16)
    counters = np.zeros((4, n), np.uint32)
    counters[0] = offsets & 0xFFFFFFFF
    counters[1] = (offsets >> 32) & 0xFFFFFFFF
    expected = philox4x32_10(counters, (seed & 0xFFFFFFFF, seed >> 32))
    np.testing.assert_array_equal(out.reshape(4, n), expected)
    assert (expected[:, 0] != expected[:, 3]).all()     # offset 2**32 is not offset 0


# Random123's kat_vectors for philox4x64_10: (counter, key) -> output.
PHILOX4X64_KAT = [((0, 0, 0, 0), (0, 0),
                   (0x16554D9ECA36314C, 0xDB20FE9D672D0FDC, 0xD7E772CEE186176B, 0x7E68B68AEC7BA23B)),
                  ((2**64 - 1,) * 4, (2**64 - 1, 2**64 - 1),
                   (0x87B092C3013FE90B, 0x438C3C67BE8D0224, 0x9CC7D7C69CD777B6, 0xA09CAEBF594F0BA0))]


@naiad.jit
def philox_impl_kernel(out, c, k):
    i = tl.arange(0, 1)
    w0, w1, w2, w3 = tl.philox_impl(tl.load(c + i), tl.load(c + 1 + i), tl.load(c + 2 + i), tl.load(c + 3 + i),
                                    tl.load(k + i), tl.load(k + 1 + i))
    tl.store(out + i, w0)
    tl.store(out + 1 + i, w1)
    tl.store(out + 2 + i, w2)
    tl.store(out + 3 + i, w3)


@pytest.mark.parametrize("counter, key, expected", PHILOX4X64_KAT)
def test_philox_4x64_known_answer_vectors(counter, key, expected):
    out = np.zeros(4, np.uint64)
    philox_impl_kernel[(1,)](out, np.array(counter, np.uint64), np.array(key, np.uint64))
    assert tuple(int(v) for v in out) == expected


@naiad.jit
def uniform_kernel(x, out, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out + i, tl.random.uint_to_uniform_float(tl.load(x + i)))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_uniform_float_of_the_extreme_words(dtype):
    """Read as signed, the words fold onto 0 .. 2**(bits-1) - 1: both ends of the range land just
    below 1 (never on it), 0 and all-ones on 0."""
    info = np.iinfo(dtype)
    signed_min, signed_max = (info.min, info.max) if info.min else (info.max // 2 + 1, info.max // 2)
    x = np.array([signed_min, signed_max, 0, dtype(-1) if info.min else info.max], dtype)
    out = np.zeros(4, np.float32)
    uniform_kernel[(1,)](x, out, 4)
    assert out[0] == out[1] and 1.0 - np.finfo(np.float32).eps <= out[0] < 1.0
    assert out[2] == out[3] == 0.0


@naiad.jit
def float_seed_kernel(out, seed):
    tl.store(out + tl.arange(0, 2), tl.rand(seed, tl.arange(0, 2)))


@naiad.jit
def float_offset_kernel(out, seed):
    offs = tl.arange(0, 2)
    tl.store(out + offs, tl.rand(seed, offs.to(tl.float32)))


def test_non_integer_seed_or_offset_is_a_compile_time_error():
    out = np.zeros(2, np.float32)
    with pytest.raises(CompileTimeAssertionFailure, match="float_seed_kernel(.|\n)*seed must be an integer"):
        float_seed_kernel[(1,)](out, 2.5)
    with pytest.raises(CompileTimeAssertionFailure, match="float_offset_kernel(.|\n)*offsets must be integers"):
        float_offset_kernel[(1,)](out, 1)
