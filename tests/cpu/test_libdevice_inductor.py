"""libdevice on the CPU backend: the functions that have no C library equivalent
(``__naiad_*``, computed in LLVM IR by `naiad.codegen.mathlib`) and those Inductor calls
(``erfinv``, ``erfcx``, ``cyl_bessel_i0/i1``, ``llrint``...), against SciPy / NumPy / exact
rational arithmetic, in fp32 and fp64, through masked kernels whose size is not a multiple
of the block.

Tolerances: fp32 in units in the last place of the correctly rounded result (erfinv: Giles'
approximation, 4 ulp; the functions computed in double and rounded: 1 ulp; those built on two
libm calls, such as sinpi or rcbrt: 2 ulp), fp64 relative (4e-15 for the functions of
several steps, 1e-15 or 2e-15 for the others; SciPy's own error is 1e-16 to 1e-15 where it is
the reference).  Where SciPy is less accurate than that (erfcx and ndtr far in the negative
tail, erfcinv of subnormals, sinpi, I0 and I1 near their overflow), mpmath is the reference.
Directed rounding must be exact.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import scipy.special as sp

import naiad
import naiad.language as tl
from naiad.codegen import mathlib
from naiad.codegen.hooks import NAIAD_FUNCTIONS
from naiad.compiler.errors import CompilationError
from naiad.language.extra import libdevice

pytestmark = [pytest.mark.shipped_backends,
              pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")]

BLOCK = 128
FLOATS = [np.float32, np.float64]


@naiad.jit
def unary_kernel(x, out, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, FN(tl.load(x + offs, mask=m)), mask=m)


@naiad.jit
def binary_kernel(x, y, out, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, FN(tl.load(x + offs, mask=m), tl.load(y + offs, mask=m)), mask=m)


@naiad.jit
def ternary_kernel(x, y, z, out, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, FN(tl.load(x + offs, mask=m), tl.load(y + offs, mask=m),
                            tl.load(z + offs, mask=m)), mask=m)


def apply(fn, *args, out_dtype=None):
    """``fn`` element-wise over the arrays ``args`` in a masked kernel; the output has one extra
    element past ``n``, which must keep its sentinel."""
    n = len(args[0])
    out = np.full(n + 1, 7, out_dtype or args[0].dtype)
    sentinel = out[n]
    kernel = {1: unary_kernel, 2: binary_kernel, 3: ternary_kernel}[len(args)]
    kernel[(naiad.cdiv(n, BLOCK),)](*args, out, n, FN=fn, BLOCK=BLOCK)
    assert out[n] == sentinel, "a masked-off lane was written"
    return out[:n]


def assert_accurate(got, want, dtype, ulps=1.0, rel=4e-15, what=""):
    """Finite references within ``ulps`` (fp32, against the reference rounded to fp32) or
    ``rel`` (fp64); non-finite ones (and fp32 overflow) exactly, NaN included."""
    want = np.asarray(want, np.float64)
    rounded = want.astype(dtype)
    exact = ~np.isfinite(rounded)
    np.testing.assert_array_equal(got[exact], rounded[exact], err_msg=f"{what}: non-finite results")
    got64 = got[~exact].astype(np.float64)
    if dtype == np.float32:
        error = np.abs(got64 - want[~exact]) / np.spacing(np.abs(rounded[~exact])).astype(np.float64)
        limit = ulps
    else:
        error = np.abs(got64 - want[~exact]) / np.maximum(np.abs(want[~exact]), np.finfo(dtype).tiny)
        limit = rel
    worst = int(np.argmax(error)) if error.size else 0
    assert error.size == 0 or error[worst] <= limit, \
        f"{what} {dtype.__name__}: error {error[worst]:.3g} at x={np.asarray(got)[~exact][worst]!r} " \
        f"(want {want[~exact][worst]!r}), limit {limit}"


def sample(low, high, n=3001, seed=0):
    return np.random.default_rng(seed).uniform(low, high, n)


def with_specials(x, *specials):
    return np.concatenate([x, np.array(specials, np.float64)])


# -- erfinv, erfcinv, normcdfinv ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_erfinv(dtype):
    tails = 1 - np.logspace(-16 if dtype == np.float64 else -7, -0.3, 400)
    x = with_specials(np.concatenate([sample(-1, 1), tails, -tails, np.logspace(-300, -1, 200)]),
                      0.0, -0.0, 1.0, -1.0, 1.5, -2.0, np.nan, np.inf, 1e-310, -1e-45)
    x = x.astype(dtype)
    got = apply(libdevice.erfinv, x)
    assert_accurate(got, sp.erfinv(x.astype(np.float64)), dtype, ulps=4, rel=2e-15, what="erfinv")
    assert got[-10] == 0 and not np.signbit(got[-10]) and np.signbit(got[-9])      # +-0
    assert list(got[-8:-6]) == [np.inf, -np.inf]


@pytest.mark.parametrize("dtype", FLOATS)
def test_erfcinv(dtype):
    low = -37 if dtype == np.float32 else -300
    near_two = 2 - np.logspace(-15, 0, 200)
    x = with_specials(np.concatenate([sample(0, 2), np.logspace(low, 0, 400), near_two]),
                      0.0, 2.0, 1.0, -0.5, 2.5, np.nan, np.inf)
    x = x.astype(dtype)
    got = apply(libdevice.erfcinv, x)
    assert_accurate(got, sp.erfcinv(x.astype(np.float64)), dtype, what="erfcinv")
    assert list(got[-7:-4]) == [np.inf, -np.inf, 0.0]


@pytest.mark.parametrize("dtype", FLOATS)
def test_normcdfinv_is_ndtri(dtype):
    low = -37 if dtype == np.float32 else -300
    near_one = 1 - np.logspace(-15, -0.3, 200)
    x = with_specials(np.concatenate([sample(0, 1), np.logspace(low, -0.3, 400), near_one]),
                      0.0, 1.0, 0.5, -0.1, 1.1, np.nan)
    x = x.astype(dtype)
    got = apply(libdevice.normcdfinv, x)
    assert_accurate(got, sp.ndtri(x.astype(np.float64)), dtype, what="normcdfinv")
    assert list(got[-6:-3]) == [-np.inf, np.inf, 0.0]


def test_erfcinv_of_subnormals():
    x = np.array([5e-324, 1e-320, 2.2250738585072014e-308 / 3])
    got = apply(libdevice.erfcinv, x)
    with mpmath.workdps(40):
        want = [float(mpmath.findroot(lambda t: mpmath.log(mpmath.erfc(t)) - mpmath.log(c), 27))
                for c in x]
    assert_accurate(got, want, np.float64, what="erfcinv of subnormals")


# -- erfcx, normcdf --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_erfcx(dtype):
    # SciPy rounds x*x for x < 0: it is accurate to 1e-15 only above -6.
    x = with_specials(np.concatenate([sample(-6, 30), np.logspace(-300, 300, 300)]),
                      0.0, -0.0, np.inf, -np.inf, np.nan, 1e308, 3e38, -27.0, -10.0)
    x = x.astype(dtype)
    got = apply(libdevice.erfcx, x)
    assert_accurate(got, sp.erfcx(x.astype(np.float64)), dtype, what="erfcx")
    assert list(got[-7:-5]) == [0.0, np.inf]                  # no overflow at +inf, none missed
    assert got[-2] == np.inf                                  # erfcx(-27) overflows in both
    assert (got[-1] == np.inf) == (dtype == np.float32)       # erfcx(-10) = 5.4e43


def test_erfcx_far_in_the_negative_tail():
    x = np.concatenate([-np.linspace(6, 26.5, 60), [-25.189534074337832]])
    with mpmath.workdps(40):
        want = [float(mpmath.exp(mpmath.mpf(v) ** 2) * mpmath.erfc(v)) for v in x]
    assert_accurate(apply(libdevice.erfcx, x), want, np.float64, rel=1e-15, what="erfcx")


@pytest.mark.parametrize("dtype", FLOATS)
def test_normcdf_is_ndtr(dtype):
    # SciPy rounds -x/sqrt(2), which costs it x*x/2 ulps: in fp64 it is the reference above -3.
    low = -15 if dtype == np.float32 else -3
    x = with_specials(np.concatenate([sample(low, 40), -np.logspace(-300, np.log10(-low), 300)]),
                      0.0, np.inf, -np.inf, np.nan, -40.0)
    x = x.astype(dtype)
    got = apply(libdevice.normcdf, x)
    assert_accurate(got, sp.ndtr(x.astype(np.float64)), dtype, what="normcdf")
    assert list(got[-5:-2]) == [0.5, 1.0, 0.0]


def test_normcdf_far_in_the_lower_tail():
    x = np.concatenate([-np.logspace(np.log10(3), np.log10(37.5), 60), [-36.3771287786495]])
    with mpmath.workdps(40):
        want = [float(mpmath.ncdf(v)) for v in x]
    assert_accurate(apply(libdevice.normcdf, x), want, np.float64, rel=2e-15, what="normcdf")


# -- Bessel I0, I1 ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,reference", [("cyl_bessel_i0", sp.i0), ("cyl_bessel_i1", sp.i1)])
def test_cyl_bessel(dtype, name, reference):
    # SciPy's i0/i1 overflow early (exp(x) first) and give NaN at infinity: compared below 700.
    x = with_specials(np.concatenate([sample(-60, 60), np.logspace(-300, np.log10(700), 300),
                                      -np.logspace(-300, np.log10(700), 300)]),
                      0.0, -0.0, 8.0, 20.0, -20.0, 20.000000000000004, 89.0, 95.0)
    x = x.astype(dtype)
    got = apply(getattr(libdevice, name), x)
    assert_accurate(got, reference(x.astype(np.float64)), dtype, what=name)


def test_cyl_bessel_at_infinity_and_near_overflow():
    x = np.array([np.inf, -np.inf, np.nan, -0.0, 713.98, 713.99, -713.99])
    i0, i1 = apply(libdevice.cyl_bessel_i0, x), apply(libdevice.cyl_bessel_i1, x)
    np.testing.assert_array_equal(i0[[0, 1, 5, 6]], np.inf)
    np.testing.assert_array_equal(i1[[0, 1, 5, 6]], [np.inf, -np.inf, np.inf, -np.inf])
    assert np.isnan(i0[2]) and np.isnan(i1[2])
    assert i0[3] == 1 and i1[3] == 0 and np.signbit(i1[3])
    # I0(713.98) = 1.785325134768229e308 and I1 = 1.784074433667637e308 (mpmath): finite
    np.testing.assert_allclose([i0[4], i1[4]], [1.785325134768229e308, 1.784074433667637e308],
                               rtol=4e-15)


# -- llrint ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_llrint_rounds_half_to_even_into_int64(dtype):
    big = 2.0 ** 62
    x = with_specials(sample(-1e6, 1e6), 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e15 + 0.5, big, -big)
    x = x.astype(dtype)
    got = apply(libdevice.llrint, x, out_dtype=np.int64)
    np.testing.assert_array_equal(got, np.rint(x).astype(np.int64))
    assert list(got[-9:-3]) == [0, 2, 2, 0, -2, -2]


def test_llrint_saturates_and_maps_nan_to_zero():
    x = np.array([np.nan, np.inf, -np.inf, 1e19, -1e19, 2.0 ** 63])
    got = apply(libdevice.llrint, x, out_dtype=np.int64)
    top, bottom = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    np.testing.assert_array_equal(got, [0, top, bottom, top, bottom, top])


# -- directed rounding: exact, against rational arithmetic ------------------------------------------
FORMATS = {np.float32: (24, -126, 127), np.float64: (53, -1022, 1023)}


def rounded(exact: Fraction, dtype, mode: str):
    """The value of ``dtype`` that ``exact`` (nonzero) rounds to in ``mode``."""
    precision, emin, emax = FORMATS[dtype]
    negative, magnitude = exact < 0, abs(exact)
    away = (mode == "ru" and not negative) or (mode == "rd" and negative)
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    exponent += 1 if Fraction(2) ** (exponent + 1) <= magnitude else 0
    exponent -= 1 if Fraction(2) ** exponent > magnitude else 0
    quantum = Fraction(2) ** (max(exponent, emin) - precision + 1)
    units, rest = divmod(magnitude, quantum)
    if mode == "rn":
        units += rest > quantum / 2 or (rest == quantum / 2 and units % 2 == 1)
    else:
        units += away and rest > 0
    value = units * quantum
    if value >= Fraction(2) ** (emax + 1):
        value = math.inf if mode == "rn" or away else float(np.finfo(dtype).max)
    return dtype(-float(value) if negative else float(value))


def exact_result(op: str, values) -> Fraction | None:
    """The exact result of ``op`` on finite operands (None: not a finite rational)."""
    if not all(np.isfinite(values)):
        return None
    a, b, *c = (Fraction(float(v)) for v in values)
    if op == "div":
        return a / b if b else None
    return {"add": lambda: a + b, "mul": lambda: a * b, "fma": lambda: a * b + c[0]}[op]()


def operands(dtype, n: int, arity: int, seed: int) -> list[np.ndarray]:
    """Random bit patterns (every exponent), moderate values, subnormals and small integers,
    with sums and fmas that cancel exactly or nearly."""
    rng = np.random.default_rng(seed)
    bits = np.uint32 if dtype == np.float32 else np.uint64

    def one():
        raw = rng.integers(0, np.iinfo(bits).max, n, dtype=bits, endpoint=True).view(dtype)
        moderate = (rng.uniform(-4, 4, n) * 2.0 ** rng.integers(-30, 30, n)).astype(dtype)
        tiny = (rng.uniform(-4, 4, n) * np.finfo(dtype).tiny).astype(dtype)
        small = rng.integers(-8, 9, n).astype(dtype)
        pool = np.concatenate([raw[np.isfinite(raw)], moderate, tiny, small])
        return rng.choice(pool, n)

    values = [one() for _ in range(arity)]
    if arity == 2:
        values[1] = np.where(rng.random(n) < 0.2, -values[0], values[1])
    else:
        with np.errstate(over="ignore"):
            product = (values[0].astype(np.float64) * values[1]).astype(dtype)
        values[2] = np.where(rng.random(n) < 0.3, -product, values[2])
    return values


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["add", "mul", "div", "fma"])
@pytest.mark.parametrize("mode", ["rn", "rz", "rd", "ru"])
def test_directed_rounding_is_exact(dtype, op, mode):
    values = operands(dtype, 2000, 3 if op == "fma" else 2, seed=len(op) + 7 * len(mode))
    with np.errstate(all="ignore"):
        got = apply(getattr(libdevice, f"{op}_{mode}"), *values)
    checked = 0
    for i in range(len(got)):
        exact = exact_result(op, [v[i] for v in values])
        if exact is None or exact == 0:
            continue
        want = rounded(exact, dtype, mode)
        assert got[i] == want, f"{op}_{mode}{[repr(v[i]) for v in values]} = {got[i]!r}, want {want!r}"
        checked += 1
    assert checked > 1500


@pytest.mark.parametrize("dtype", FLOATS)
def test_directed_rounding_at_the_edges(dtype):
    big, tiny = np.finfo(dtype).max, np.finfo(dtype).smallest_subnormal
    a = np.array([big, big, -big, tiny, -tiny, 1.0, 1.0], dtype)
    b = np.array([big, -big * 0, -big, tiny, tiny, np.inf, np.nan], dtype)
    with np.errstate(all="ignore"):
        up, zero, down = (apply(getattr(libdevice, f"mul_{m}"), a, b) for m in ("ru", "rz", "rd"))
    np.testing.assert_array_equal(up[:5], [np.inf, -0.0, np.inf, tiny, -0.0])
    np.testing.assert_array_equal(zero[:5], [big, -0.0, big, 0.0, -0.0])
    np.testing.assert_array_equal(down[:5], [big, -0.0, big, 0.0, -tiny])
    assert up[5] == np.inf and np.isnan(up[6]) and np.isnan(down[6])


@pytest.mark.parametrize("dtype", FLOATS)
def test_exact_zero_sums_are_negative_rounding_down(dtype):
    a = np.array([1.0, 0.0, 0.0, -0.0, 2.0], dtype)
    b = np.array([-1.0, 0.0, -0.0, -0.0, -2.0], dtype)
    for mode in ("rn", "rz", "ru", "rd"):
        total = apply(getattr(libdevice, f"add_{mode}"), a, b)
        fused = apply(getattr(libdevice, f"fma_{mode}"), a, np.ones_like(a), b)
        negative = [True, False, True, True, True] if mode == "rd" else [False, False, False, True, False]
        assert list(np.signbit(total)) == negative, (mode, total)
        assert list(np.signbit(fused)) == negative, (mode, fused)


# -- the other functions without a C equivalent ------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_sinpi_cospi(dtype):
    # mpmath is exact at any argument; NumPy's sin(pi * x) is not.
    x = np.concatenate([sample(-8, 8, 1001), sample(-1e6, 1e6, 1001), np.logspace(-300, -1, 100)])
    x = x.astype(dtype)
    sinpi, cospi = apply(libdevice.sinpi, x), apply(libdevice.cospi, x)
    with mpmath.workdps(40):
        want_sin = [float(mpmath.sinpi(mpmath.mpf(float(v)))) for v in x]
        want_cos = [float(mpmath.cospi(mpmath.mpf(float(v)))) for v in x]
    assert_accurate(sinpi, want_sin, dtype, ulps=2, rel=1e-15, what="sinpi")
    assert_accurate(cospi, want_cos, dtype, ulps=2, rel=1e-15, what="cospi")


@pytest.mark.parametrize("dtype", FLOATS)
def test_sinpi_cospi_at_integers_and_half_integers(dtype):
    x = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -0.5, 1.5, 2.0 ** 60, np.inf, np.nan], dtype)
    sinpi, cospi = apply(libdevice.sinpi, x), apply(libdevice.cospi, x)
    np.testing.assert_array_equal(sinpi, [0, -0.0, 0, -0.0, 0, 1, -1, -1, 0, np.nan, np.nan])
    np.testing.assert_array_equal(np.signbit(sinpi[:5]), [False, True, False, True, False])
    np.testing.assert_array_equal(cospi, [1, 1, -1, -1, 1, 0, 0, 0, 1, np.nan, np.nan])
    assert not np.signbit(cospi[5:8]).any(), "cospi of a half-integer is +0"


@pytest.mark.parametrize("dtype", FLOATS)
def test_reciprocal_roots_and_norms(dtype):
    x = with_specials(sample(-1e3, 1e3), 0.0, -0.0, np.inf, -8.0).astype(dtype)
    y = with_specials(sample(-1e3, 1e3, seed=1), 0.0, 3.0, 1.0, np.nan).astype(dtype)
    wide, wide_y = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(divide="ignore"):
        assert_accurate(apply(libdevice.rcbrt, x), 1 / np.cbrt(wide), dtype, ulps=2, rel=1e-15,
                        what="rcbrt")
        assert_accurate(apply(libdevice.rhypot, x, y), 1 / np.hypot(wide, wide_y), dtype, ulps=2,
                        rel=1e-15, what="rhypot")
    assert list(apply(libdevice.rcbrt, x)[-4:]) == [np.inf, -np.inf, 0.0, -0.5]


def test_saturatef_fast_dividef_fast_tanhf():
    x = np.array([-1.0, 0.25, 1.0, 3.0, -0.0, np.nan, np.inf, -np.inf], np.float32)
    np.testing.assert_array_equal(apply(libdevice.saturatef, x), [0, 0.25, 1, 1, 0, 0, 1, 0])
    y = np.full_like(x, 4.0)
    np.testing.assert_array_equal(apply(libdevice.fast_dividef, x, y), x / y)
    t = sample(-5, 5).astype(np.float32)
    assert_accurate(apply(libdevice.fast_tanhf, t), np.tanh(t.astype(np.float64)), np.float32,
                    ulps=2, what="fast_tanhf")


@pytest.mark.parametrize("dtype", FLOATS)
def test_pown(dtype):
    x = with_specials(sample(-3, 3), 0.0, -0.0, np.nan, np.inf, 2.0).astype(dtype)
    n = np.random.default_rng(2).integers(-12, 13, len(x)).astype(np.int32)
    n[-5:] = [-1, 3, 0, -2, 1000]
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), n.astype(np.float64))
    got = apply(libdevice.pown, x, n)
    assert_accurate(got, want, dtype, ulps=1, rel=1e-15, what="pown")


def test_ffs_and_mulhi():
    rng = np.random.default_rng(3)
    for kind, bits in ((np.int32, 32), (np.int64, 64)):
        x = rng.integers(np.iinfo(kind).min, np.iinfo(kind).max, 300, dtype=kind)
        x[:3] = [0, 1, np.iinfo(kind).min]
        got = apply(libdevice.ffs, x, out_dtype=np.int32)
        want = [0 if v == 0 else (int(v) & -int(v)).bit_length() for v in x]
        np.testing.assert_array_equal(got, want)
        for signed in (True, False):
            kind_ = kind if signed else (np.uint32 if bits == 32 else np.uint64)
            info = np.iinfo(kind_)
            a = rng.integers(info.min, info.max, 300, dtype=kind_, endpoint=True)
            b = rng.integers(info.min, info.max, 300, dtype=kind_, endpoint=True)
            a[:3], b[:3] = [info.max, info.min, info.max], [info.max, info.min, info.min]
            got = apply(libdevice.mulhi, a, b)
            want = np.array([(int(p) * int(q)) >> bits for p, q in zip(a, b)], dtype=object)
            np.testing.assert_array_equal(got.astype(object), want.astype(kind_).astype(object))


def test_isnan_isinf_finitef_return_booleans_as_in_triton():
    x = np.array([0.0, np.nan, np.inf, -np.inf, 1e-45], np.float32)
    assert list(apply(libdevice.isnan, x, out_dtype=np.bool_)) == [False, True, False, False, False]
    assert list(apply(libdevice.isinf, x, out_dtype=np.bool_)) == [False, False, True, True, False]
    assert list(apply(libdevice.finitef, x, out_dtype=np.bool_)) == [True, False, False, False, True]
    wide = x.astype(np.float64)
    assert list(apply(libdevice.isfinited, wide, out_dtype=np.int32)) == [1, 0, 0, 0, 1]


def test_every_naiad_symbol_has_a_cpu_implementation():
    symbols = {symbol for table in libdevice.SIGNATURES.values() for symbol, _ in table.values()
               if symbol.startswith("__naiad_")}
    missing = sorted(s for s in symbols if s not in NAIAD_FUNCTIONS and s not in mathlib.FUNCTIONS)
    assert not missing
    assert not set(mathlib.FUNCTIONS) - symbols, "an implementation no libdevice function calls"


# -- errors ------------------------------------------------------------------------------------------
@naiad.jit
def half_precision_erfinv(x, out):
    offs = tl.arange(0, 16)
    tl.store(out + offs, libdevice.erfinv(tl.load(x + offs)))


@naiad.jit
def float_saturatef_of_double(x, out):
    offs = tl.arange(0, 16)
    tl.store(out + offs, libdevice.saturatef(tl.load(x + offs)))  # E:saturatef


def test_a_dtype_without_a_version_names_the_kernel_line_and_accepted_types():
    with pytest.raises(CompilationError) as info:
        float_saturatef_of_double[(1,)](np.zeros(16), np.zeros(16))
    message = str(info.value)
    assert "float_saturatef_of_double" in message and f":{_line_of('saturatef')}:" in message
    assert "takes (fp64); it accepts (fp32)" in message


def test_fp16_arguments_are_not_promoted():
    """Triton's libdevice takes fp16 only where a version is declared: erfinv has none."""
    with pytest.raises(CompilationError, match=r"takes \(fp16\); it accepts \(fp32\), \(fp64\)"):
        half_precision_erfinv[(1,)](np.zeros(16, np.float16), np.zeros(16, np.float16))


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        (line,) = [i + 1 for i, text in enumerate(f) if text.rstrip().endswith(f"# E:{marker}")]
    return line
