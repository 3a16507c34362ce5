"""fp8 on the CPU: decoding every byte, rounding fp32 (and fp16, bf16, fp64, fp8) to every fp8
format to nearest even and toward zero, loads and stores, bit-preserving ops, constants, and
``tl.dot`` on fp8 operands -- against torch's conversions and an independent numpy reference.

The reference is built from the published format constants only (exponent and mantissa widths,
bias, and where the infinities and NaNs are).  Where Triton on NVIDIA and torch disagree, the
tests follow Triton (sm_90's ``cvt.rn.satfinite``): out-of-range values and infinities saturate
to the largest finite value instead of becoming NaN (torch's e4m3fn and FNUZ formats) or
infinity (torch's e5m2); rounding toward zero keeps fp8e5's infinities.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

import naiad
import naiad.language as tl

from naiad.testing.conformance.test_dot import dot_kernel

pytestmark = pytest.mark.shipped_backends


@dataclass(frozen=True)
class Spec:
    """A format's published constants.  ``specials``: "ieee", infinities and NaNs in the top
    binade; "fn", no infinities and S.1..1.1..1 is NaN; "fnuz", 0x80 is the only NaN (and
    there is no negative zero)."""

    exponent_bits: int
    mantissa_bits: int
    bias: int
    specials: str
    torch_dtype: object


SPECS = {
    "fp8e4nv": Spec(4, 3, 7, "fn", torch.float8_e4m3fn),
    "fp8e5": Spec(5, 2, 15, "ieee", torch.float8_e5m2),
    "fp8e4b8": Spec(4, 3, 8, "fnuz", torch.float8_e4m3fnuz),
    "fp8e5b16": Spec(5, 2, 16, "fnuz", torch.float8_e5m2fnuz),
    "fp8e4b15": Spec(4, 3, 15, "fn", None),      # Triton's tl.float8e4b15: bias 15
}
TORCH_FORMATS = [name for name, spec in SPECS.items() if spec.torch_dtype is not None]


class Fp8Bits:
    """A uint8 array of fp8 bits that kernels see as a pointer to ``name`` (through the dtype
    name, as for torch tensors); for fp8e4b15, which neither torch nor numpy has."""

    def __init__(self, bits: np.ndarray, name: str):
        self.bits = bits
        self.__array_interface__ = bits.__array_interface__
        self.dtype = type("dtype", (), {"name": name.replace("fp8", "float8")})()


def decode(spec: Spec) -> np.ndarray:
    """The value of each of the 256 bytes, in float64, from the format's definition."""
    b = np.arange(256)
    sign = np.where(b & 0x80, -1.0, 1.0)
    e = (b >> spec.mantissa_bits) & ((1 << spec.exponent_bits) - 1)
    m = (b & ((1 << spec.mantissa_bits) - 1)).astype(np.float64)
    scale = 2.0 ** spec.mantissa_bits
    value = sign * np.where(e == 0, m / scale * 2.0 ** (1 - spec.bias),
                            (1 + m / scale) * 2.0 ** (e - spec.bias))
    top = e == (1 << spec.exponent_bits) - 1
    if spec.specials == "ieee":
        value[top] = np.where(m[top] == 0, sign[top] * np.inf, np.nan)
    elif spec.specials == "fn":
        value[top & (m == scale - 1)] = np.nan
    else:
        value[0x80] = np.nan
    return value


def reference(spec: Spec, x, rounding: str) -> np.ndarray:
    """The fp8 bytes of ``x`` (float64-exact) by search over the format's finite values:
    "rtne" the nearest (ties to the even code), "rtz" the largest magnitude not above |x|;
    both saturate at the largest finite value, except that rtz keeps fp8e5's infinities.
    NaN inputs get 0xFF, which callers check separately."""
    x = np.asarray(x, np.float64)
    table = decode(spec)[:128]
    codes = np.nonzero(np.isfinite(table))[0]                 # increasing values
    values = table[codes]
    a = np.abs(np.where(np.isnan(x), 0.0, x))
    above = np.clip(np.searchsorted(values, a), 0, len(values) - 1)
    below = np.clip(np.searchsorted(values, a, side="right") - 1, 0, len(values) - 1)
    if rounding == "rtz":
        code = codes[below]
        if spec.specials == "ieee":
            code = np.where(np.isinf(a), np.nonzero(np.isposinf(table))[0][0], code)
    else:
        up, down = values[above] - a, a - values[below]
        take_up = (up < down) | ((up == down) & (codes[above] % 2 == 0))
        code = np.where(take_up, codes[above], codes[below])
    sign = np.signbit(x) & ((code != 0) | (spec.specials != "fnuz"))
    return np.where(np.isnan(x), 0xFF, code | np.where(sign, 0x80, 0)).astype(np.uint8)


def largest(spec: Spec) -> float:
    values = decode(spec)
    return values[np.isfinite(values)].max()


def samples(spec: Spec, seed: int = 0) -> np.ndarray:
    """float32 values over the whole range: every fp8 value, every midpoint (the ties) and
    its float32 neighbours, random magnitudes from below the smallest subnormal to beyond
    the largest value, and the specials."""
    rng = np.random.default_rng(seed)
    table = decode(spec)[:128]
    values = np.sort(table[np.isfinite(table)])
    mids = ((values[:-1] + values[1:]) / 2).astype(np.float32)
    top = values[-1]
    step = top - values[-2]
    edges = [top + step / 2, top + step / 4, top + step, 2 * top, values[1] / 2, values[1] / 4,
             3 * values[1] / 4, np.finfo(np.float32).max, np.finfo(np.float32).tiny,
             np.float32(2.0 ** -149), np.inf, np.nan]
    low, high = -spec.bias - spec.mantissa_bits - 3, np.log2(top) + 3
    random = np.exp2(rng.uniform(low, high, 4000)) * rng.uniform(1, 2, 4000)
    positive = np.concatenate([values, mids, np.nextafter(mids, np.float32(np.inf)),
                               np.nextafter(mids, np.float32(0)), np.array(edges), random])
    positive = positive.astype(np.float32)
    return np.concatenate([positive, -positive])


# -- kernels -------------------------------------------------------------------------------------

@naiad.jit
def convert_kernel(src, dst, n, ROUNDING: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(src + offs, mask=m)
    tl.store(dst + offs, x.to(dst.dtype.element_ty, fp_downcast_rounding=ROUNDING), mask=m)


@naiad.jit
def convert_scalar_kernel(src, dst, ROUNDING: tl.constexpr):
    i = tl.program_id(0)
    tl.store(dst + i, tl.load(src + i).to(dst.dtype.element_ty, fp_downcast_rounding=ROUNDING))


def _fp8_array(name: str, n: int):
    """Zeroed fp8 storage of ``n`` elements, and a function giving its bytes as numpy."""
    spec = SPECS[name]
    if spec.torch_dtype is None:
        bits = np.zeros(n, np.uint8)
        return Fp8Bits(bits, name), lambda: bits.copy()
    t = torch.zeros(n, dtype=spec.torch_dtype)
    return t, lambda: t.view(torch.uint8).numpy().copy()


def _all_bytes(name: str, reverse: bool = False):
    """The 256 bytes in order (or reversed), as an fp8 array of format ``name``."""
    spec = SPECS[name]
    bits = np.arange(256, dtype=np.uint8)
    bits = bits[::-1].copy() if reverse else bits
    if spec.torch_dtype is None:
        return Fp8Bits(bits, name)
    return torch.from_numpy(bits).view(spec.torch_dtype)


def _convert(src, dst, n: int, rounding: str | None, scalar: bool) -> None:
    if scalar:
        convert_scalar_kernel[(n,)](src, dst, ROUNDING=rounding)
    else:
        convert_kernel[(naiad.cdiv(n, 256),)](src, dst, n, ROUNDING=rounding, BLOCK=256)


def _assert_same_values(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal values, NaN where NaN, and zeros of the same sign."""
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    finite = ~np.isnan(expected)
    np.testing.assert_array_equal(actual[finite], expected[finite])
    np.testing.assert_array_equal(np.signbit(actual[finite]), np.signbit(expected[finite]))


# -- fp8 -> fp32 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("scalar", [False, True], ids=["vector", "scalar"])
@pytest.mark.parametrize("name", TORCH_FORMATS)
def test_decode_every_byte_like_torch(name, scalar):
    src = _all_bytes(name)
    out = torch.empty(256, dtype=torch.float32)
    _convert(src, out, 256, None, scalar)
    _assert_same_values(out.numpy(), src.to(torch.float32).numpy())


@pytest.mark.parametrize("name", list(SPECS))
def test_decode_every_byte_like_the_format_definition(name):
    out = torch.empty(256, dtype=torch.float32)
    _convert(_all_bytes(name), out, 256, None, False)
    _assert_same_values(out.numpy().astype(np.float64), decode(SPECS[name]))


@pytest.mark.parametrize("target", ["float16", "bfloat16", "float64"])
@pytest.mark.parametrize("name", list(SPECS))
def test_decode_to_other_floats(name, target):
    if name == "fp8e4b15" and target != "float16":
        pytest.skip("Triton converts fp8e4b15 only to and from fp16 and fp32")
    out = torch.empty(256, dtype=getattr(torch, target))
    _convert(_all_bytes(name), out, 256, None, False)
    _assert_same_values(out.to(torch.float64).numpy(), decode(SPECS[name]))


# -- fp32 -> fp8 ---------------------------------------------------------------------------------

def _encode(name: str, x: np.ndarray, rounding: str, scalar: bool = False) -> np.ndarray:
    dst, read = _fp8_array(name, len(x))
    _convert(torch.from_numpy(x), dst, len(x), rounding, scalar)
    return read()


def _assert_bytes(name: str, x: np.ndarray, actual: np.ndarray, expected: np.ndarray) -> None:
    """``actual == expected`` byte for byte, except that a NaN input needs only a NaN result."""
    nan_in = np.isnan(x)
    assert np.isnan(decode(SPECS[name])[actual[nan_in]]).all()
    bad = np.nonzero((actual != expected) & ~nan_in)[0]
    assert len(bad) == 0, [(float(x[i]), hex(actual[i]), hex(expected[i])) for i in bad[:8]]


@pytest.mark.parametrize("scalar", [False, True], ids=["vector", "scalar"])
@pytest.mark.parametrize("name", TORCH_FORMATS)
def test_round_to_nearest_even_like_torch(name, scalar):
    spec = SPECS[name]
    x = samples(spec, seed=len(name))
    if scalar:
        x = np.ascontiguousarray(x[::7])
    actual = _encode(name, x, "rtne", scalar)
    expected = torch.from_numpy(x).to(spec.torch_dtype).view(torch.uint8).numpy()
    # Triton saturates where torch overflows to inf (e5m2) or NaN (e4m3fn, FNUZ).
    overflow = ~np.isnan(x) & ~np.isfinite(decode(spec)[expected])
    assert (np.abs(x[overflow]) > largest(spec)).all()
    expected = np.where(overflow, reference(spec, x, "rtne"), expected)
    _assert_bytes(name, x, actual, expected)


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
@pytest.mark.parametrize("name", list(SPECS))
def test_rounding_like_the_reference(name, rounding):
    spec = SPECS[name]
    x = samples(spec, seed=7)
    _assert_bytes(name, x, _encode(name, x, rounding), reference(spec, x, rounding))


@pytest.mark.parametrize("name", ["fp8e4nv", "fp8e5"])
def test_overflow_rules(name):
    """Triton on NVIDIA: to nearest, finite overflow and infinities saturate (satfinite, fp8e5
    too); toward zero, fp8e5 keeps infinities; NaN stays NaN."""
    spec = SPECS[name]
    top = largest(spec)
    x = np.array([top * 1.1, -top * 1.1, np.inf, -np.inf, np.nan, 3e38], np.float32)
    values = decode(spec)
    nearest = values[_encode(name, x, "rtne")]
    _assert_same_values(nearest, np.array([top, -top, top, -top, np.nan, top]))
    toward_zero = values[_encode(name, x, "rtz")]
    inf = np.inf if spec.specials == "ieee" else top
    _assert_same_values(toward_zero, np.array([top, -top, inf, -inf, np.nan, top]))


@pytest.mark.parametrize("rounding", ["rtne", "rtz"])
@pytest.mark.parametrize("source", ["float16", "bfloat16", "float64", "fp8e4nv"])
def test_round_other_sources_once(source, rounding):
    """fp16, bf16, fp64 and fp8e4nv values rounded to fp8e5 with a single rounding (fp64
    values next to a tie must not be rounded to the tie through fp32 first)."""
    spec = SPECS["fp8e5"]
    x = samples(spec, seed=3).astype(np.float64)
    x = np.concatenate([x, x[np.isfinite(x)] * (1 + 2.0 ** -40)])
    if source == "fp8e4nv":
        if rounding == "rtz":
            pytest.skip("an fp8 -> fp8 conversion is not a narrowing one: it rounds to nearest")
        src, x, rounding = _all_bytes("fp8e4nv"), decode(SPECS["fp8e4nv"]), None
    else:
        src = torch.from_numpy(x).to(getattr(torch, source))
        x = src.to(torch.float64).numpy()
    dst, read = _fp8_array("fp8e5", len(x))
    convert_kernel[(naiad.cdiv(len(x), 256),)](src, dst, len(x), ROUNDING=rounding, BLOCK=256)
    _assert_bytes("fp8e5", x, read(), reference(spec, x, rounding or "rtne"))


# -- memory and bit-preserving ops ---------------------------------------------------------------

@naiad.jit
def copy_kernel(src, other, same, bits, picked, wide, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(src + offs, mask=m)
    y = tl.load(other + offs, mask=m)
    tl.store(same + offs, x, mask=m)
    tl.store(bits + offs, x.to(tl.int8, bitcast=True), mask=m)
    tl.store(picked + offs, tl.where(offs % 3 == 0, x, y), mask=m)
    tl.store(wide + offs, x.to(tl.float32), mask=m)


@pytest.mark.parametrize("name", list(SPECS))
def test_loads_stores_and_bit_moves_keep_every_byte(name):
    n = 250                                   # not a multiple of the block: masked lanes
    src, other = _all_bytes(name), _all_bytes(name, reverse=True)
    outputs = [_fp8_array(name, 256) for _ in range(2)]
    bits, wide = torch.full((256,), 5, dtype=torch.int8), torch.zeros(256)
    copy_kernel[(4,)](src, other, outputs[0][0], bits, outputs[1][0], wide, n, BLOCK=64)
    every = np.arange(256, dtype=np.uint8)
    same, picked = outputs[0][1](), outputs[1][1]()
    np.testing.assert_array_equal(same[:n], every[:n])
    np.testing.assert_array_equal(same[n:], 0)                       # masked off: untouched
    np.testing.assert_array_equal(bits.numpy().view(np.uint8)[:n], every[:n])
    np.testing.assert_array_equal(bits.numpy()[n:], 5)
    np.testing.assert_array_equal(picked[:n], np.where(every % 3 == 0, every, every[::-1])[:n])
    _assert_same_values(wide.numpy()[:n].astype(np.float64), decode(SPECS[name])[:n])


@pytest.mark.parametrize("name", list(SPECS))
def test_fp32_round_trip(name):
    """fp8 -> fp32 -> fp8 gives the same byte back for every finite value (NaNs give a NaN,
    fp8e5's infinities saturate, as every fp32 -> fp8 conversion does)."""
    wide = torch.empty(256)
    _convert(_all_bytes(name), wide, 256, None, False)
    back = _encode(name, wide.numpy(), "rtne")
    values = decode(SPECS[name])
    finite = np.isfinite(values)
    np.testing.assert_array_equal(back[finite], np.arange(256)[finite])
    expected_inf = largest(SPECS[name]) * np.sign(values[np.isinf(values)])
    np.testing.assert_array_equal(values[back[np.isinf(values)]], expected_inf)
    assert np.isnan(values[back[np.isnan(values)]]).all()


@naiad.jit
def constants_kernel(src, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(src + offs)
    tl.store(out + offs, x * 2)
    tl.store(out + BLOCK + offs, tl.full((BLOCK,), 2.7, tl.float8e5) + x)
    tl.store(out + 2 * BLOCK + offs, tl.where(offs % 2 == 0, x, 0.3))


def test_constants_are_rounded_like_values():
    spec = SPECS["fp8e5"]
    x = np.array([0.5, 1.25, -3.0, 7.0, 0.0, -0.75, 96.0, 2.0 ** -15], np.float32)
    src = torch.from_numpy(x).to(torch.float8_e5m2)
    x = src.to(torch.float64).numpy()
    out, read = _fp8_array("fp8e5", 3 * len(x))
    constants_kernel[(1,)](src, out, BLOCK=len(x))
    values = decode(spec)
    rounded = lambda v: values[reference(spec, v, "rtne")]  # noqa: E731
    expected = np.concatenate([rounded(x * 2), rounded(rounded(2.7) + x),
                               np.where(np.arange(len(x)) % 2 == 0, x, rounded(0.3))])
    _assert_same_values(values[read()], expected)


# -- tl.dot --------------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,k", [(16, 16, 32), (32, 64, 16), (64, 16, 128)])
@pytest.mark.parametrize("a_name,b_name", [("fp8e5", "fp8e5"), ("fp8e4nv", "fp8e4nv"),
                                           ("fp8e5", "fp8e4nv")])
def test_dot(a_name, b_name, m, n, k):
    rng = np.random.default_rng(m + n + k)
    a = torch.from_numpy(rng.normal(0, 4, (m, k)).astype(np.float32)).to(SPECS[a_name].torch_dtype)
    b = torch.from_numpy(rng.normal(0, 4, (k, n)).astype(np.float32)).to(SPECS[b_name].torch_dtype)
    use_acc = k != 32
    c = rng.normal(0, 10, (m, n)).astype(np.float32)
    out = np.zeros((m, n), np.float32)
    dot_kernel[(1,)](a, b, c, out, M=m, N=n, K=k, ACC=use_acc, OUT_DTYPE=tl.float32)
    a64, b64 = a.to(torch.float64).numpy(), b.to(torch.float64).numpy()
    expected = a64 @ b64 + (c if use_acc else 0)
    # Each product is exact in fp32; k fp32 additions each err by at most half an ulp.
    bound = (k + 1) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64) + np.abs(c))
    assert (np.abs(out - expected) <= bound).all()
