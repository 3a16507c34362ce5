"""The C math functions the hip backend composes from ``exp``, ``log``, ``sin``, ``cos`` and
``sqrt`` (`naiad.codegen.mathlib.composed`), for want of a device math library: built through
the hip backend's own hooks (so that ``double`` ``exp`` and ``log`` are Naiad's, as on the GPU),
compiled for this host and run against numpy (glibc, within an ulp) over random, edge and
special values; fp32 results are the correctly rounded ones (computed in double), fp64 within
two ulp (``tan``, the quotient of ``sin`` and ``cos``: four).  And a kernel calling them compiles for gfx942."""

from __future__ import annotations

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
    from naiad.codegen.mathlib import composed

    return host_function(composed.FUNCTIONS[symbol], AMDGPUHooks("gfx942", 64, ""), 1, double, arity, result)


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
    y = np.concatenate([rng.uniform(-10, 10, 2000), 10.0 ** rng.uniform(-300, 300, 1000), grid[:, 0]])
    x = np.concatenate([rng.uniform(-10, 10, 2000), 10.0 ** rng.uniform(-300, 300, 1000), grid[:, 1]])
    return y, x


def _fdim(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(np.isnan(x) | np.isnan(y), x + y, np.where(x > y, x - y, 0.0))


BINARY = {"atan2": (np.arctan2, 2), "hypot": (np.hypot, 2), "fdim": (_fdim, 0), "nextafter": (np.nextafter, 0)}


@pytest.mark.parametrize("double", [True, False], ids=["fp64", "fp32"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_functions_against_numpy_with_c99_special_cases(name, double):
    """Signed zeros, infinities and NaN as C99 says (atan2(+-0, -0) = +-pi, hypot(inf, NaN) =
    inf...): numpy follows the C library."""
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
