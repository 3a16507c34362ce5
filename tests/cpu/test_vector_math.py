"""The CPU backend's vector fp32 erf, log, log2 and tanh (`naiad.codegen.fastmath`): within a
few ulp of the double-precision result over the whole range, IEEE answers at zeros, infinities,
NaN and subnormals, and computed on vectors (no scalar libm call per lane, which made a GELU
layer norm spend 90 % of its time in ``erff``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.language.extra import libdevice

pytestmark = pytest.mark.shipped_backends

BLOCK = 256


@naiad.jit
def vector_math(x, erf_out, log_out, log2_out, tanh_out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(x + offsets, mask=mask, other=1.0)
    tl.store(erf_out + offsets, tl.erf(a), mask=mask)
    tl.store(log_out + offsets, tl.log(a), mask=mask)
    tl.store(log2_out + offsets, tl.log2(a), mask=mask)
    tl.store(tanh_out + offsets, libdevice.tanh(a), mask=mask)


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 1.1754942e-38,
                     3.4e38, 1.0, -1.0, 0.55, -0.55, 0.99999994, 1.0000001, 3.92, 3.9199998,
                     2.0, 0.5, 9.0, -9.5, 44.0, 100.0], np.float32)


def _inputs(rng: np.random.Generator, n: int) -> np.ndarray:
    parts = [rng.uniform(-6, 6, n), np.exp(rng.uniform(-103, 88.7, n)), rng.uniform(0.5, 2, n),
             rng.uniform(-1e-3, 1e-3, n // 4), -np.exp(rng.uniform(-20, 20, n // 4)), SPECIALS]
    return np.concatenate(parts).astype(np.float32)


def _references(x: np.ndarray) -> dict[str, np.ndarray]:
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        return {"erf": np.array([math.erf(v) for v in xd]), "log": np.log(xd),
                "log2": np.log2(xd), "tanh": np.tanh(xd)}


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    rounded = want.astype(np.float32)
    spacing = np.spacing(np.maximum(np.abs(rounded), np.float32(2.0 ** -126))).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


@pytest.mark.parametrize("n", [4000, 1, 255])
def test_vector_math_is_within_a_few_ulp(n):
    x = _inputs(np.random.default_rng(n), n)
    outs = {name: np.empty_like(x) for name in ("erf", "log", "log2", "tanh")}
    vector_math[(naiad.cdiv(x.size, BLOCK),)](x, *outs.values(), x.size, BLOCK=BLOCK)
    for name, want in _references(x).items():
        got, rounded = outs[name], want.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(rounded), err_msg=f"{name}: NaN")
        infinite = np.isinf(rounded)
        np.testing.assert_array_equal(got[infinite], rounded[infinite], err_msg=f"{name}: inf")
        finite = np.isfinite(rounded)
        worst = _ulps(got[finite], want[finite])
        assert worst.max() <= 3.0, f"{name}: {worst.max():.2f} ulp at x={x[finite][worst.argmax()]!r}"
        zeros = x == 0
        if name in ("erf", "tanh"):      # odd functions keep the sign of zero
            np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(x[zeros]))


def test_vector_math_calls_no_scalar_library_function():
    x = np.linspace(0.1, 3, 300, dtype=np.float32)
    outs = [np.empty_like(x) for _ in range(4)]
    kernel = vector_math[(naiad.cdiv(300, BLOCK),)](x, *outs, 300, BLOCK=BLOCK)
    llir = kernel.asm["llir"]
    for symbol in ("@erff", "@logf", "@log2f", "@tanhf", "@llvm.log.", "@llvm.log2."):
        assert symbol not in llir, symbol
