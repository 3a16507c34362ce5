"""Naiad's own ``erff``, ``tanhf`` and ``expm1f`` (`naiad.codegen.mathlib.without_libm`), which
the hip backend uses for want of a device math library: the same IR compiled for this host and
run against SciPy / numpy in double precision, over random and edge values, one lane and four."""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

import numpy as np
import pytest

from tests.hip.host_math import host_function, ulp_distance

special = pytest.importorskip("scipy.special")

REFERENCES = {"erff": special.erf, "tanhf": np.tanh, "expm1f": np.expm1}
DOUBLE_REFERENCES = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10}
MAX_ULPS = 4
MAX_DOUBLE_ULPS = 2


def _compiled(name: str, lanes: int, double: bool = False, arity: int = 1):
    """Naiad's own ``name`` over ``lanes`` floats (doubles), on this host."""
    from naiad.codegen.hooks import TargetHooks
    from naiad.codegen.mathlib import without_libm

    return host_function(without_libm.FUNCTIONS[name], TargetHooks(), lanes, double, arity)


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    tiny = 10.0 ** rng.uniform(-40, 2, 4000) * rng.choice([-1.0, 1.0], 4000)
    edges = [0.0, -0.0, 1e-45, -1e-45, 1e-38, 0.84375, -0.84375, 4.0, -4.0, 9.0, -9.0, 88.0, 88.7,
             89.0, -87.0, -104.0, 1e30, -1e30, np.inf, -np.inf]
    xs = np.concatenate([rng.uniform(-10, 10, 8000), rng.uniform(-1, 1, 8000), tiny, edges])
    return xs.astype(np.float32)[: len(xs) // 4 * 4]


@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_within_a_few_ulps_of_the_double_precision_result(name, lanes):
    xs = _inputs()
    got = _compiled(name, lanes)(xs)
    with np.errstate(over="ignore"):
        want = REFERENCES[name](xs.astype(np.float64)).astype(np.float32)
    ulps = ulp_distance(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= MAX_ULPS, f"{name}({xs[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_nan_gives_nan(name):
    assert np.isnan(_compiled(name, 1)(np.array([np.nan], np.float32))[0])


def _double_inputs(name: str) -> np.ndarray:
    rng = np.random.default_rng(11)
    if name.startswith("log"):
        xs = [10.0 ** rng.uniform(-310, 308, 6000), rng.uniform(0.5, 2, 4000),
              [1.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]]
    else:
        top = 1100.0 if name == "exp2" else 760.0
        xs = [rng.uniform(-top, top * 0.94, 6000), rng.uniform(-1, 1, 4000),
              [0.0, -0.0, 709.78, -745.13, 1023.99, -1074.0, -1075.0, 1e-300]]
    return np.concatenate(xs).astype(np.float64)[: 10000]


@pytest.mark.parametrize("name", sorted(DOUBLE_REFERENCES))
def test_double_precision_within_an_ulp_or_two(name):
    """One lane, as the GPU lowering computes (x86's code generator has no vector ``frexp``)."""
    xs = _double_inputs(name)
    got = _compiled(name, 1, double=True)(xs)
    with np.errstate(all="ignore"):
        want = DOUBLE_REFERENCES[name](xs)
    ulps = ulp_distance(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= MAX_DOUBLE_ULPS, f"{name}({xs[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"


@pytest.mark.parametrize("name, x, want", [("exp", np.inf, np.inf), ("exp", -np.inf, 0.0),
                                           ("exp", np.nan, np.nan), ("exp2", 2000.0, np.inf),
                                           ("log", 0.0, -np.inf), ("log", -1.0, np.nan),
                                           ("log", np.inf, np.inf), ("log10", np.nan, np.nan)])
def test_double_precision_special_values(name, x, want):
    got = _compiled(name, 1, double=True)(np.array([x], np.float64))[0]
    assert (np.isnan(got) and np.isnan(want)) or got == want


def _trig_inputs() -> np.ndarray:
    rng = np.random.default_rng(13)
    hard = [6381956970095103.0 * 2.0**797, 5.319372648326541e+255, 1e22, np.pi / 2, np.pi,
            1.7976931348623157e308, 2.0 ** -1074, 0.785398163397448, 2.0 ** -10]
    xs = [rng.uniform(-10, 10, 1500), 10.0 ** rng.uniform(-12, 308, 1500) * rng.choice([-1.0, 1.0], 1500),
          rng.uniform(-1e6, 1e6, 500), hard]
    return np.concatenate(xs).astype(np.float64)


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sine_and_cosine_over_the_whole_range(name):
    """Against mpmath at 2,000 bits (glibc's own cos is 8 ulp off at 5.3e255): the reduction by
    pi/2 keeps its precision for the largest doubles and next to multiples of pi/2."""
    mpmath = pytest.importorskip("mpmath")
    xs = _trig_inputs()
    got = _compiled(name, 1, double=True)(xs)
    with mpmath.workprec(2000):
        reference = getattr(mpmath, name)
        want = np.array([float(reference(mpmath.mpf(float(x)))) for x in xs])
    ulps = ulp_distance(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= MAX_DOUBLE_ULPS, f"{name}({xs[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"


@pytest.mark.parametrize("name, x, want", [("sin", -0.0, -0.0), ("sin", 0.0, 0.0), ("cos", -0.0, 1.0),
                                           ("sin", np.inf, np.nan), ("cos", -np.inf, np.nan),
                                           ("sin", np.nan, np.nan)])
def test_sine_and_cosine_special_values(name, x, want):
    got = _compiled(name, 1, double=True)(np.array([x], np.float64))[0]
    assert (np.isnan(got) and np.isnan(want)) or (got == want and np.signbit(got) == np.signbit(want))


def _c_pow() -> Any:
    """The C library's own ``pow`` (C99's special cases, within an ulp elsewhere)."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.pow.argtypes, libm.pow.restype = (ctypes.c_double, ctypes.c_double), ctypes.c_double
    vectorized = np.vectorize(libm.pow, otypes=[np.float64])

    def c_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return vectorized(x, y)
    return c_pow


def test_pow_within_an_ulp_or_two_and_c99_special_cases():
    rng = np.random.default_rng(17)
    bases = np.concatenate([10.0 ** rng.uniform(-300, 300, 1500), rng.uniform(0, 4, 1500),
                            -rng.uniform(0, 4, 500)])
    powers = np.concatenate([rng.uniform(-30, 30, 1500), rng.uniform(-500, 500, 1500),
                             rng.integers(-40, 40, 500).astype(np.float64)])
    specials = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, np.nan]
    grid = np.array([(a, c) for a in specials for c in specials], np.float64)
    got = _compiled("pow", 1, double=True, arity=2)(bases, powers)
    want = _c_pow()(bases, powers)
    ulps = ulp_distance(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= MAX_DOUBLE_ULPS, f"pow({bases[worst]!r}, {powers[worst]!r}) = {got[worst]!r}"
    x, y = grid[:, 0].copy(), grid[:, 1].copy()
    got, want = _compiled("pow", 1, double=True, arity=2)(x, y), _c_pow()(x, y)
    for a, c, g, w in zip(x, y, got, want):
        exact = np.isinf(w) or w == 0 or np.isnan(w) or w in (1.0, -1.0)
        if exact:
            assert (np.isnan(g) and np.isnan(w)) or (g == w and np.signbit(g) == np.signbit(w)), (a, c, g, w)
        else:
            assert ulp_distance(np.array([g]), np.array([w]))[0] <= 1, (a, c, g, w)


def test_exp10_within_an_ulp():
    rng = np.random.default_rng(19)
    xs = np.concatenate([rng.uniform(-330, 309, 3000), rng.uniform(-1, 1, 2000),
                         [0.0, 308.25, 308.26, -323.3, -324.0, np.inf, -np.inf]])
    got = _compiled("exp10", 1, double=True)(xs)
    with np.errstate(all="ignore"):
        want = 10.0 ** xs
    ulps = ulp_distance(got, want)
    assert ulps.max() <= MAX_DOUBLE_ULPS, xs[int(np.argmax(ulps))]


def test_erf_in_double_precision_within_an_ulp():
    """Against mpmath: the series near 0, 1 - erfc through the fitted intervals, 1 from 6 on."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(23)
    xs = np.concatenate([rng.uniform(-7, 7, 3000), 10.0 ** rng.uniform(-300, 0, 500) * rng.choice([-1.0, 1.0], 500),
                         [0.0, 0.84375, 2.0, 4.0, 6.0, 5.9999999, -6.5]]).astype(np.float64)
    got = _compiled("erf", 1, double=True)(xs)
    with mpmath.workprec(200):
        want = np.array([float(mpmath.erf(mpmath.mpf(float(x)))) for x in xs])
    ulps = ulp_distance(got, want)
    assert ulps.max() <= 1, xs[int(np.argmax(ulps))]
    specials = _compiled("erf", 1, double=True)(np.array([np.nan, np.inf, -np.inf, -0.0]))
    assert np.isnan(specials[0]) and list(specials[1:3]) == [1.0, -1.0] and np.signbit(specials[3])


@pytest.mark.parametrize("double", [True, False], ids=["fp64", "fp32"])
def test_erfc_through_its_whole_range(double):
    """Against mpmath: ``1 - erf`` near 0 (where the subtraction costs up to 4 ulp of double),
    the fitted intervals to 6, the continued fraction to where it underflows (27.2), ``2 - erfc``
    below -0.84375; fp32 computed in double and rounded once."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(29)
    xs = np.concatenate([rng.uniform(-3, 3, 2000), rng.uniform(-30, 30, 2000),
                         10.0 ** rng.uniform(-300, 0, 300) * rng.choice([-1.0, 1.0], 300),
                         [0.0, -0.0, 0.84375, -0.84375, 5.99, 6.0, 6.01, 10.0, 26.5, 27.2, 27.3]])
    xs = xs.astype(np.float64 if double else np.float32)
    got = _compiled("erfc" if double else "erfcf", 1, double=double)(xs)
    with mpmath.workprec(300):
        want = np.array([float(mpmath.erfc(mpmath.mpf(float(x)))) for x in xs]).astype(xs.dtype)
    ulps = ulp_distance(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= (4 if double else 0), f"erfc({xs[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"
    specials = _compiled("erfc" if double else "erfcf", 1, double=double)(
        np.array([np.nan, np.inf, -np.inf, 0.0], xs.dtype))
    assert np.isnan(specials[0]) and list(specials[1:]) == [0.0, 2.0, 1.0]
