"""The C math functions the hip backend composes from ``exp``, ``log``, ``sin``, ``cos`` and
``sqrt`` (`naiad.codegen.mathlib.composed`), for want of a device math library: built through
the hip backend's own hooks (so that ``double`` ``exp`` and ``log`` are Naiad's, as on the GPU),
compiled for this host and run against numpy (glibc, within an ulp) over random, edge and
special values; fp32 results are the correctly rounded ones (computed in double), fp64 within
two ulp (``tan``, the quotient of ``sin`` and ``cos``: four).  And a kernel calling them compiles for gfx942."""

from __future__ import annotations

import math

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.language.extra import libdevice
from tests.hip.host_math import host_function, ulp_distance
from tests.hip.test_compile import _compile

pytestmark = pytest.mark.shipped_backends


def _compiled(symbol: str, double: bool, arity: int = 1, result=None):
    """``symbol`` over one lane on this host, its calls of ``exp``, ``log``... answered by the
    hip backend's own hooks (Naiad's ``double`` functions, as on the GPU)."""
    from naiad.backends.hip.hooks import AMDGPUHooks
    from naiad.codegen.mathlib import bessel_jy, composed, gamma

    functions = {**composed.FUNCTIONS, **gamma.FUNCTIONS, **bessel_jy.FUNCTIONS}
    return host_function(functions[symbol], AMDGPUHooks("gfx942", 64, ""), 1, double, arity, result)


def _inputs(kind: str) -> np.ndarray:
    rng = np.random.default_rng(sum(map(ord, kind)))
    specials = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan]
    parts = {
        "any": [rng.uniform(-1, 1, 1500), rng.uniform(-12, 12, 1500),
                10.0 ** rng.uniform(-300, 300, 1500) * rng.choice([-1.0, 1.0], 1500),
                [0.5, 1e-310, 709.5, 710.4, -710.4, 1e-8, 22.5, 3e8, 2.0 ** -900]],
        "unit": [rng.uniform(-1, 1, 3000), [1e-300, 0.9999999, -0.999999999999, 1.5, -7.0]],
        "from one": [1 + 10.0 ** rng.uniform(-16, 1, 1500), 10.0 ** rng.uniform(0, 300, 1500), [0.5, -3.0]],
        "above minus one": [10.0 ** rng.uniform(-300, 300, 1500), -rng.uniform(0, 1, 1500),
                            rng.uniform(-1e-5, 1e-5, 500), [-2.0]],
    }[kind]
    return np.concatenate(parts + [specials])


def _logb(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        exponent = np.where(x == 0, -np.inf, np.where(np.isinf(x), np.inf, np.frexp(x)[1] - 1.0))
        return np.where(np.isnan(x), x, exponent)


UNARY = {"atan": (np.arctan, "any", 2), "asin": (np.arcsin, "unit", 2), "acos": (np.arccos, "unit", 2),
         "tan": (np.tan, "any", 4), "expm1": (np.expm1, "any", 2), "sinh": (np.sinh, "any", 2),
         "cosh": (np.cosh, "any", 2), "tanh": (np.tanh, "any", 2), "log1p": (np.log1p, "above minus one", 2),
         "asinh": (np.arcsinh, "any", 2), "acosh": (np.arccosh, "from one", 2),
         "atanh": (np.arctanh, "unit", 2), "cbrt": (np.cbrt, "any", 2), "logb": (_logb, "any", 0)}


@pytest.mark.parametrize("double", [True, False], ids=["fp64", "fp32"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions_against_numpy(name, double):
    reference, kind, double_ulps = UNARY[name]
    dtype = np.float64 if double else np.float32
    with np.errstate(all="ignore"):
        xs = _inputs(kind).astype(dtype)
        want = reference(xs.astype(np.float64)).astype(dtype)
    got = _compiled(name if double else name + "f", double)(xs)
    ulps = ulp_distance(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= (double_ulps if double else 0), \
        f"{name}({xs[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"


def _pairs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    specials = [0.0, -0.0, 1.0, -1.0, 3.5, -2.0, 1e-310, np.inf, -np.inf, np.nan]
    grid = np.array([(a, c) for a in specials for c in specials])
    y = np.concatenate([rng.uniform(-10, 10, 2000), 10.0 ** rng.uniform(-300, 300, 1000), grid[:, 0],
                        [5.5, -5.5, 7.5, 1e300, 3e-300]])
    x = np.concatenate([rng.uniform(-10, 10, 2000), 10.0 ** rng.uniform(-300, 300, 1000), grid[:, 1],
                        [2.0, 2.0, -3.0, 3e-300, 1e300]])
    return y, x


def _fdim(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(np.isnan(x) | np.isnan(y), x + y, np.where(x > y, x - y, 0.0))


def _remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C99's remainder (Python's math.remainder raises where C gives NaN)."""
    def one(a: float, b: float) -> float:
        if np.isnan(a) or np.isnan(b) or np.isinf(a) or b == 0:
            return float("nan")
        return a if np.isinf(b) else math.remainder(a, b)
    return np.array([one(a, b) for a, b in zip(x, y)])


BINARY = {"atan2": (np.arctan2, 2), "hypot": (np.hypot, 2), "fdim": (_fdim, 0), "nextafter": (np.nextafter, 0),
          "fmod": (np.fmod, 0), "remainder": (_remainder, 0)}


@pytest.mark.parametrize("double", [True, False], ids=["fp64", "fp32"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_functions_against_numpy_with_c99_special_cases(name, double):
    """Signed zeros, infinities and NaN as C99 says (atan2(+-0, -0) = +-pi, hypot(inf, NaN) =
    inf, fmod(x, 0) = NaN...): numpy follows the C library; fmod and remainder are exact, ties
    of remainder to the even quotient (5.5 rem 2 = -0.5, 7.5 rem -3 = 1.5)."""
    reference, double_ulps = BINARY[name]
    dtype = np.float64 if double else np.float32
    with np.errstate(all="ignore"):
        y, x = (v.astype(dtype) for v in _pairs())
        want = reference(y.astype(np.float64), x.astype(np.float64)).astype(dtype) \
            if name != "nextafter" else reference(y, x)
    got = _compiled(name if double else name + "f", double, arity=2)(y, x)
    ulps = ulp_distance(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= (double_ulps if double else 0), \
        f"{name}({y[worst]!r}, {x[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"
    exact = np.isinf(want) | (want == 0)
    assert (np.signbit(got[exact]) == np.signbit(want[exact])).all()


@pytest.mark.parametrize("double", [True, False], ids=["fp64", "fp32"])
def test_ilogb(double):
    dtype = np.float64 if double else np.float32
    xs = np.array([1.0, 0.75, 1024.0, -3.0, 1e-310 if double else 1e-40, 0.0, np.inf, -np.inf, np.nan], dtype)
    with np.errstate(all="ignore"):
        want = [0, -1, 10, 1, np.frexp(xs[4])[1] - 1, -2 ** 31, 2 ** 31 - 1, 2 ** 31 - 1, -2 ** 31]
    got = _compiled("ilogb" if double else "ilogbf", double, result=np.int32)(xs)
    assert got.tolist() == want


@naiad.jit
def bearing(y_ptr, x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y, x = tl.load(y_ptr + offs), tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, libdevice.atan2(y, x) + libdevice.log1p(tl.abs(x)))


def test_a_kernel_with_inverse_trigonometry_compiles_for_gfx942():
    for ty in ("*fp32", "*fp64"):
        kernel = _compile(bearing, {"y_ptr": ty, "x_ptr": ty, "out_ptr": ty}, {"BLOCK": 256})
        assert kernel.asm["hsaco"][:4] == b"\x7fELF"


def _gamma_reference(name: str, xs: np.ndarray) -> np.ndarray:
    """mpmath's lgamma / tgamma at 200 bits, with C99's poles and infinities."""
    mpmath = pytest.importorskip("mpmath")

    def one(v: float) -> float:
        if np.isnan(v):
            return v
        pole = v == -math.inf or (v <= 0 and v == math.floor(v))
        if name == "lgamma":
            return math.inf if pole or v == math.inf else float(mpmath.log(abs(mpmath.gamma(v))))
        if v == 0 or v == math.inf:
            return math.copysign(math.inf, v)
        if pole:
            return math.nan
        value = mpmath.gamma(v)
        return float(value) if abs(value) < 1.7976931348623157e308 else math.copysign(math.inf, float(value))
    with mpmath.workprec(200):
        return np.array([one(float(v)) for v in xs])


def _gamma_inputs() -> np.ndarray:
    rng = np.random.default_rng(31)
    return np.concatenate([rng.uniform(-20, 20, 600), rng.uniform(0.5, 3, 400), 10.0 ** rng.uniform(-5, 2.2, 300),
                           [1.0, 2.0, 0.0, -0.0, -1.0, -2.5, 0.5, 171.6, 172.0, 1 + 1e-10, 2 - 1e-9,
                            np.inf, -np.inf, np.nan]])


@pytest.mark.parametrize("name", ["lgamma", "tgamma"])
def test_gamma_functions(name):
    """fp32 correctly rounded (computed in double); fp64: lgamma within 1e-14 of max(1, |value|)
    (Lanczos, and the series at its zeros 1 and 2), tgamma within 2e-13 relative (at 171.6; less
    below); poles, zeros and infinities as C99 says."""
    xs = _gamma_inputs()
    want = _gamma_reference(name, xs)
    got = _compiled(name, True)(xs)
    exact = ~np.isfinite(want)
    assert np.array_equal(got[exact], want[exact], equal_nan=True)
    assert (np.signbit(got[exact & ~np.isnan(want)]) == np.signbit(want[exact & ~np.isnan(want)])).all()
    finite = ~exact
    scale = np.maximum(1.0, np.abs(want[finite])) if name == "lgamma" else np.abs(want[finite])
    error = np.abs(got[finite] - want[finite]) / scale
    assert error.max() <= (1e-14 if name == "lgamma" else 2e-13), xs[finite][np.argmax(error)]
    single = xs.astype(np.float32)
    with np.errstate(over="ignore"):
        want32 = _gamma_reference(name, single.astype(np.float64)).astype(np.float32)
    distance = ulp_distance(_compiled(name + "f", False)(single), want32)
    assert distance.max() <= 1, single[int(np.argmax(distance))]


@pytest.mark.parametrize("name", ["j0", "j1", "y0", "y1"])
def test_bessel_functions(name):
    """Against mpmath at 200 bits: fp64 within 2e-15 of the function's size (its magnitude, or
    its envelope sqrt(2 / (pi x)) next to its zeros, as the C library's are), fp32 within an ulp;
    C99's values at 0, +inf, below 0 (Y) and for NaN; J1 odd."""
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(37)
    xs = np.concatenate([rng.uniform(0, 8, 500), rng.uniform(8, 100, 300), 10.0 ** rng.uniform(-300, 300, 300),
                         [1e-310, 8.0, 7.999999999, 8.0000001, 2.404825557695773, 3.8317059702075125, 1e6]])
    order = int(name[1])
    function = mpmath.besselj if name[0] == "j" else mpmath.bessely
    with mpmath.workprec(200):
        want = np.array([float(function(order, mpmath.mpf(float(v)))) for v in xs])
    got = _compiled(name, True)(xs)
    with np.errstate(over="ignore"):
        size = np.maximum(np.abs(want), np.minimum(1.0, np.sqrt(2 / (np.pi * xs))))
    finite = np.isfinite(want)
    error = np.abs(got[finite] - want[finite]) / size[finite]
    assert error.max() <= 2e-15, xs[finite][np.argmax(error)]
    assert np.array_equal(got[~finite], want[~finite])                     # y1 overflowing near 0
    with np.errstate(over="ignore"):
        single = xs.astype(np.float32)
    with mpmath.workprec(200):
        want32 = np.array([float(function(order, mpmath.mpf(float(v)))) if 0 < v < np.inf else np.nan
                           for v in single]).astype(np.float32)
    keep = np.isfinite(want32) & (single > 0)
    distance = ulp_distance(_compiled(name + "f", False)(single)[keep], want32[keep])
    assert distance.max() <= 1, single[keep][int(np.argmax(distance))]
    specials = np.array([0.0, np.inf, -2.5, np.nan])
    expected = {"j0": [1.0, 0.0, float(mpmath.besselj(0, 2.5)), np.nan],
                "j1": [0.0, 0.0, -float(mpmath.besselj(1, 2.5)), np.nan],
                "y0": [-np.inf, 0.0, np.nan, np.nan], "y1": [-np.inf, 0.0, np.nan, np.nan]}[name]
    np.testing.assert_allclose(_compiled(name, True)(specials), expected, rtol=0, atol=2e-15)
