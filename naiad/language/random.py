"""Counter-based random numbers (Philox 4x32), bit-for-bit the streams of Triton's ``tl.rand``.

Philox turns a (seed, counter) pair into four 32-bit words with ``n_rounds`` rounds of
multiply-high/xor mixing; the same seed and offsets give the same numbers on every backend and
in every program, which is what makes dropout reproducible.  The round and key constants are
the published Philox ones (Salmon et al., SC'11).
"""

from __future__ import annotations

from naiad.language import core, math
from naiad.runtime.jit import jit

N_ROUNDS_DEFAULT = core.constexpr(10)
PHILOX_KEY_A = core.constexpr(0x9E3779B9)
PHILOX_KEY_B = core.constexpr(0xBB67AE85)
PHILOX_ROUND_A = core.constexpr(0xD2511F53)
PHILOX_ROUND_B = core.constexpr(0xCD9E8D57)


@jit
def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """``n_rounds`` Philox rounds on counters c0..c3 with key (k0, k1), all uint32."""
    for _ in core.static_range(n_rounds):
        old0, old2 = c0, c2
        c0 = math.umulhi(PHILOX_ROUND_B, old2) ^ c1 ^ k0
        c2 = math.umulhi(PHILOX_ROUND_A, old0) ^ c3 ^ k1
        c1 = PHILOX_ROUND_B * old2
        c3 = PHILOX_ROUND_A * old0
        k0 = k0 + PHILOX_KEY_A
        k1 = k1 + PHILOX_KEY_B
    return c0, c1, c2, c3


@jit
def philox(seed, c0, c1, c2, c3, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Split a 64-bit seed into the key and run Philox on 32-bit counters."""
    seed = core.to_tensor(seed).to(core.uint64)
    key_lo = (seed & 0xFFFFFFFF).to(core.uint32)
    key_hi = ((seed >> 32) & 0xFFFFFFFF).to(core.uint32)
    c0 = c0.to(core.uint32, bitcast=True)
    c1 = c1.to(core.uint32, bitcast=True)
    c2 = c2.to(core.uint32, bitcast=True)
    c3 = c3.to(core.uint32, bitcast=True)
    return philox_impl(c0, c1, c2, c3, key_lo, key_hi, n_rounds)


@jit
def randint4x(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Four blocks of random uint32 for each offset."""
    core.static_assert(offset.dtype.primitive_bitwidth == 32,
                       "random offsets must be 32-bit integers (64-bit offsets are not supported yet)")
    zero = offset * 0
    return philox(seed, offset, zero, zero, zero, n_rounds)


@jit
def randint(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """A block of random uint32 (the first word of Philox) for each offset."""
    first, _, _, _ = randint4x(seed, offset, n_rounds)
    return first


@jit
def uint_to_uniform_float(x):
    """Map random 32-bit integers to floats uniform in [0, 1)."""
    x = x.to(core.int32, bitcast=True)
    x = core.where(x < 0, -x - 1, x)
    return x * 4.6566127342e-10


@jit
def rand(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Uniform floats in [0, 1), one per offset."""
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


@jit
def rand4x(seed, offsets, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    i1, i2, i3, i4 = randint4x(seed, offsets, n_rounds)
    return uint_to_uniform_float(i1), uint_to_uniform_float(i2), uint_to_uniform_float(i3), \
        uint_to_uniform_float(i4)


@jit
def pair_uniform_to_normal(u1, u2):
    """Box-Muller: two uniform blocks -> two standard normal blocks."""
    u1 = core.maximum(1.0e-7, u1)
    angle = 6.283185307179586 * u2
    radius = math.sqrt(-2.0 * math.log(u1))
    return radius * math.cos(angle), radius * math.sin(angle)


@jit
def randn(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Standard normal floats, one per offset."""
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    normal, _ = pair_uniform_to_normal(uint_to_uniform_float(i1), uint_to_uniform_float(i2))
    return normal


@jit
def randn4x(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(u1, u2)
    n3, n4 = pair_uniform_to_normal(u3, u4)
    return n1, n2, n3, n4
