"""Counter-based random numbers (Philox 4x32), bit-for-bit the streams of Triton's ``tl.rand``.

Philox turns a (seed, counter) pair into four 32-bit words with ``n_rounds`` rounds of
multiply-high/xor mixing; the same seed and offsets give the same numbers on every backend and
in every program, which is what makes dropout reproducible.  The round and key constants are
the published Philox ones (Salmon et al., SC'11).  A 64-bit offset puts its high word in the
second counter word, so offsets past 2**32 give new numbers; ``philox`` on 64-bit counters runs
Philox 4x64.
"""

from __future__ import annotations

from naiad.language import core, math
from naiad.language.core import constexpr_function
from naiad.language.kernel_function import library

N_ROUNDS_DEFAULT = core.constexpr(10)


@constexpr_function
def _is_int_of_width(dtype, *widths):
    return dtype.is_int() and dtype.primitive_bitwidth in widths


@constexpr_function
def _is_philox_word(dtype):
    return dtype == core.uint32 or dtype == core.uint64


@constexpr_function
def _philox_constants(counter_dtype):
    """(key A, key B, round A, round B) of Philox 4x32, or of Philox 4x64 (numpy's constants) for
    64-bit counters."""
    if counter_dtype.primitive_bitwidth == 32:
        return 0x9E3779B9, 0xBB67AE85, 0xD2511F53, 0xCD9E8D57
    return 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B, 0xD2E7470EE14C6C93, 0xCA5A826395121157


@library
def philox_impl(c0, c1, c2, c3, k0, k1, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """``n_rounds`` Philox rounds on counters c0..c3 with key (k0, k1), all uint32 or all uint64."""
    core.static_assert(_is_philox_word(c0.dtype), "philox_impl needs uint32 or uint64 counters")
    constants: core.constexpr = _philox_constants(c0.dtype)
    key_a: core.constexpr = constants[0]
    key_b: core.constexpr = constants[1]
    round_a: core.constexpr = constants[2]
    round_b: core.constexpr = constants[3]
    for _ in core.static_range(n_rounds):
        old0, old2 = c0, c2
        c0 = math.umulhi(round_b, old2) ^ c1 ^ k0
        c2 = math.umulhi(round_a, old0) ^ c3 ^ k1
        c1 = round_b * old2
        c3 = round_a * old0
        k0 = k0 + key_a
        k1 = k1 + key_b
    return c0, c1, c2, c3


@library
def philox(seed, c0, c1, c2, c3, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Philox on the counters (c0, c1, c2, c3) keyed by an integer seed: 32-bit counters take the
    seed's low and high words as the key, 64-bit counters (Philox 4x64) the whole seed and 0."""
    seed = core.to_tensor(seed)
    core.static_assert(seed.dtype.is_int(), "the random seed must be an integer (a Python int or an integer "
                                            "scalar argument), not a tensor, pointer or float")
    seed = seed.to(core.uint64)
    c0 = core.to_tensor(c0)
    core.static_assert(_is_int_of_width(c0.dtype, 32, 64), "philox counters must be 32- or 64-bit integers")
    if c0.dtype.primitive_bitwidth == 32:
        counter_type: core.constexpr = core.uint32
        key_lo = (seed & 0xFFFFFFFF).to(core.uint32)
        key_hi = ((seed >> 32) & 0xFFFFFFFF).to(core.uint32)
    else:
        counter_type: core.constexpr = core.uint64
        key_lo = seed
        key_hi = seed * 0
    c0 = c0.to(counter_type, bitcast=True)
    c1 = core.to_tensor(c1).to(counter_type, bitcast=True)
    c2 = core.to_tensor(c2).to(counter_type, bitcast=True)
    c3 = core.to_tensor(c3).to(counter_type, bitcast=True)
    return philox_impl(c0, c1, c2, c3, key_lo, key_hi, n_rounds)


@library
def randint4x(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Four blocks of random uint32 for each offset: Philox 4x32 on the counter (low word of the
    offset, high word of a 64-bit offset or 0, 0, 0)."""
    offset = core.to_tensor(offset)
    core.static_assert(offset.dtype.is_int(), "random offsets must be integers")
    low = offset.to(core.uint32)
    zero = low * 0
    if offset.dtype.primitive_bitwidth > 32:
        high = (offset >> 32).to(core.uint32)
    else:
        high = zero
    return philox(seed, low, high, zero, zero, n_rounds)


@library
def randint(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """A block of random uint32 (the first word of Philox) for each offset."""
    first, _, _, _ = randint4x(seed, offset, n_rounds)
    return first


@constexpr_function
def _uniform_scale(bits):
    """The fold below maps random words onto 0 .. 2**(bits-1) - 1; this scale keeps the top of
    that range just below 1 after rounding to float32."""
    return 4.6566127342e-10 if bits == 32 else 1.0842020432385337e-19


@library
def uint_to_uniform_float(x):
    """Map random 32- or 64-bit integers to float32 uniform in [0, 1): read as signed, fold the
    negative half onto the positive one with ``~`` (no overflow at the minimum) and scale."""
    core.static_assert(_is_int_of_width(x.dtype, 32, 64), "uint_to_uniform_float needs 32- or 64-bit integers")
    bits: core.constexpr = x.dtype.primitive_bitwidth
    x = x.to(core.get_int_dtype(bits, True), bitcast=True)
    x = core.where(x < 0, ~x, x)
    return x * _uniform_scale(bits)


@library
def rand(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Uniform floats in [0, 1), one per offset."""
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


@library
def rand4x(seed, offsets, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    i1, i2, i3, i4 = randint4x(seed, offsets, n_rounds)
    return uint_to_uniform_float(i1), uint_to_uniform_float(i2), uint_to_uniform_float(i3), \
        uint_to_uniform_float(i4)


@library
def pair_uniform_to_normal(u1, u2):
    """Box-Muller: two uniform blocks -> two standard normal blocks."""
    u1 = core.maximum(1.0e-7, u1)
    angle = 6.283185307179586 * u2
    radius = math.sqrt(-2.0 * math.log(u1))
    return radius * math.cos(angle), radius * math.sin(angle)


@library
def randn(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    """Standard normal floats, one per offset."""
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    normal, _ = pair_uniform_to_normal(uint_to_uniform_float(i1), uint_to_uniform_float(i2))
    return normal


@library
def randn4x(seed, offset, n_rounds: core.constexpr = N_ROUNDS_DEFAULT):
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    n1, n2 = pair_uniform_to_normal(u1, u2)
    n3, n4 = pair_uniform_to_normal(u3, u4)
    return n1, n2, n3, n4
