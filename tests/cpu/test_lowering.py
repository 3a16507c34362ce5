"""What the CPU backend's lowering itself must get right, beyond the results the portable suite
(naiad/testing/conformance) checks on every backend: the f16 -> integer path through f32, and
the 64-bit ``tl.umulhi`` of a target without i128."""

from __future__ import annotations

import re

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.testing.conformance.reference import DTYPES, empty, to_kernel
from naiad.testing.conformance.test_elementwise import cast_kernel

pytestmark = pytest.mark.shipped_backends


def test_half_to_int_goes_through_f32():
    # LLVM's saturating f16 -> i16 conversion on AVX512-FP16 CPUs turns NaN into -32768 (seen
    # on a Sapphire Rapids host); the f32 path saturates NaN to 0 on every CPU.
    outs = [empty(8, t) for t in DTYPES] + [empty(8, "bool")]
    llir = cast_kernel.warmup(to_kernel(np.zeros(8), "float16"), *outs, 8, BLOCK=8).asm["llir"]
    conversions = re.findall(r"@llvm\.fpto[su]i\.sat\.(\w+)\.(\w+)\(", llir)
    assert conversions and all(source.endswith("f32") for _, source in conversions), conversions


@naiad.jit
def umulhi_kernel(x, y, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.umulhi(tl.load(x + offs), tl.load(y + offs)))


@pytest.mark.parametrize("widest", [128, 64])
def test_64_bit_umulhi_with_and_without_a_128_bit_integer(monkeypatch, widest):
    """A target whose widest integer is 64 bits (SPIR-V) computes the high half of a 64-bit
    product from the halves' products; both ways give the exact high word."""
    from naiad.backends.cpu.hooks import CPUHooks

    monkeypatch.setattr(CPUHooks, "widest_integer", widest)
    monkeypatch.setattr(naiad.knobs.compilation, "always_compile", True)
    umulhi_kernel.cache.clear()
    rng = np.random.default_rng(11)
    x = rng.integers(0, 2**64, 64, dtype=np.uint64)
    y = rng.integers(0, 2**64, 64, dtype=np.uint64)
    x[:4] = [2**64 - 1, 2**64 - 1, 0, 2**32]
    y[:4] = [2**64 - 1, 1, 5, 2**32]
    out = np.zeros(64, np.uint64)
    umulhi_kernel[(1,)](x, y, out, BLOCK=64)
    expected = np.array([(int(a) * int(b)) >> 64 for a, b in zip(x, y)], dtype=np.uint64)
    np.testing.assert_array_equal(out, expected)
