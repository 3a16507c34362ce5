"""The CPU backend's vector fp32 exp, exp2, erf, log, log2 and tanh (`naiad.codegen.fastmath`):
within a few ulp of the double-precision result over the whole range, IEEE answers at zeros,
infinities, NaN and subnormals, and computed on vectors (no scalar libm call per lane, which
made a GELU layer norm spend 90 % of its time in ``erff``)."""

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


def _check(name: str, x: np.ndarray, got: np.ndarray, want: np.ndarray, most_ulp: float) -> None:
    """NaN where the reference is NaN, the same infinities, and finite results within
    ``most_ulp`` of the double-precision reference."""
    with np.errstate(over="ignore"):                 # beyond fp32's range: inf, as it should
        rounded = want.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(rounded), err_msg=f"{name}: NaN")
    infinite = np.isinf(rounded)
    np.testing.assert_array_equal(got[infinite], rounded[infinite], err_msg=f"{name}: inf")
    finite = np.isfinite(rounded)
    worst = _ulps(got[finite], want[finite])
    assert worst.max() <= most_ulp, f"{name}: {worst.max():.2f} ulp at x={x[finite][worst.argmax()]!r}"


@pytest.mark.parametrize("n", [4000, 1, 255])
def test_vector_math_is_within_a_few_ulp(n):
    x = _inputs(np.random.default_rng(n), n)
    outs = {name: np.empty_like(x) for name in ("erf", "log", "log2", "tanh")}
    vector_math[(naiad.cdiv(x.size, BLOCK),)](x, *outs.values(), x.size, BLOCK=BLOCK)
    for name, want in _references(x).items():
        got = outs[name]
        _check(name, x, got, want, 3.0)
        zeros = x == 0
        if name in ("erf", "tanh"):      # odd functions keep the sign of zero
            np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(x[zeros]))


@naiad.jit
def exponentials(x, exp_out, exp2_out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(x + offsets, mask=mask, other=0.0)
    tl.store(exp_out + offsets, tl.exp(a), mask=mask)
    tl.store(exp2_out + offsets, tl.exp2(a), mask=mask)


#: Around where exp and exp2 overflow, turn subnormal and round to 0 (both directions of each).
EXP_EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.72284, 88.75, 88.8, 88.9,
                      1000.0, -87.33654, -87.33655, -100.0, -103.97207, -103.97209, -104.0,
                      -104.1, -1000.0, 127.99999, 128.0, 128.5, -125.99999, -126.0, -126.5,
                      -149.0, -149.49998, -149.5, -149.50002, -150.0, -150.5, -151.0, 1e-45,
                      -1e-45, 0.5, -0.5], np.float32)


@pytest.mark.parametrize("scaling", ["scalef", "two steps"])
def test_exp_and_exp2_are_within_two_ulp_at_every_edge(scaling, monkeypatch):
    """Both ways of scaling by a power of two: AVX-512's ``vscalefps`` and two multiplies
    (other targets); results that overflow, turn subnormal or round to 0 come out of the
    scaling itself."""
    from naiad.backends.cpu.hooks import CPUHooks

    if scaling == "two steps":
        made = CPUHooks.__init__
        monkeypatch.setattr(CPUHooks, "__init__", lambda self, *a, **k: (
            made(self, *a, **k), setattr(self, "scalef", False))[0])
    monkeypatch.setattr(naiad.knobs.compilation, "always_compile", True)
    exponentials.cache.clear()
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-160, 130, 3000), rng.uniform(-2, 2, 500), EXP_EDGES,
                        np.nextafter(EXP_EDGES, np.float32(np.inf)),
                        np.nextafter(EXP_EDGES, np.float32(-np.inf))]).astype(np.float32)
    outs = [np.empty_like(x), np.empty_like(x)]
    kernel = exponentials[(naiad.cdiv(x.size, BLOCK),)](x, *outs, x.size, BLOCK=BLOCK)
    from naiad.backends.cpu.target import host_features

    avx512 = {"+avx512f", "+avx512vl"} <= set(host_features().split(","))
    assert ("scalef" in kernel.asm["llir"]) == (scaling == "scalef" and avx512)
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        references = {"exp": np.exp(xd), "exp2": np.exp2(xd)}
    for (name, want), got in zip(references.items(), outs):
        _check(name, x, got, want, 2.0)
        far_below = xd < (-105.0 if name == "exp" else -151.0)
        np.testing.assert_array_equal(got[far_below], 0.0, err_msg=f"{name}: far below underflow")


def test_vector_math_calls_no_scalar_library_function():
    x = np.linspace(0.1, 3, 300, dtype=np.float32)
    outs = [np.empty_like(x) for _ in range(4)]
    kernel = vector_math[(naiad.cdiv(300, BLOCK),)](x, *outs, 300, BLOCK=BLOCK)
    llir = kernel.asm["llir"]
    for symbol in ("@erff", "@logf", "@log2f", "@tanhf", "@llvm.log.", "@llvm.log2."):
        assert symbol not in llir, symbol


def test_erf_from_one_to_where_it_rounds_to_one():
    """The range where erf is 1 - erfc's polynomial, densely, both signs, and the two switches
    (1 and 3.92) from either side: within 2 ulp (erfc's absolute error against erf's ulp)."""
    x = np.linspace(0.9, 4.1, 1 << 16).astype(np.float32)
    edges = np.array([np.nextafter(np.float32(v), np.float32(d)) for v in (1.0, 3.92) for d in (0, 9)],
                     np.float32)
    x = np.concatenate([x, -x, edges, -edges])
    outs = {name: np.empty_like(x) for name in ("erf", "log", "log2", "tanh")}
    vector_math[(naiad.cdiv(x.size, BLOCK),)](x, *outs.values(), x.size, BLOCK=BLOCK)
    _check("erf", x, outs["erf"], _references(x)["erf"], 2.0)
