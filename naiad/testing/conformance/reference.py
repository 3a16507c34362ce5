"""numpy references for the CPU backend's differential tests, written independently of Naiad.

numpy has no bfloat16: a bf16 value is kept on the host as the float32 it equals, and as its
16 bits (``uint16``) when it is passed to a kernel; `bf16_round` rounds to bf16 (to nearest,
ties to even) with float64 arithmetic, independently of the bit manipulations the compiler uses.
"""

from __future__ import annotations

import numpy as np

INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
FLOATS = ("float16", "bfloat16", "float32", "float64")
DTYPES = INTS + FLOATS


class BF16Array:
    """A uint16 array of bf16 bits that kernels see as ``*bf16`` (through its dtype name)."""

    class dtype:  # noqa: N801 -- read as ``array.dtype.name`` like numpy's
        name = "bfloat16"

    def __init__(self, bits: np.ndarray):
        assert bits.dtype == np.uint16
        self.bits = bits
        self.__array_interface__ = bits.__array_interface__

    def to_float32(self) -> np.ndarray:
        return bf16_to_f32(self.bits)


def bf16_round(values) -> np.ndarray:
    """The float32 holding the bf16 nearest to ``values`` (ties to even), with one rounding
    from float64: 8 significant bits, a fixed quantum of 2**-133 below the normal range."""
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(all="ignore"):
        _, e = np.frexp(x)
        e = np.maximum(e, -125)
        q = np.ldexp(np.rint(np.ldexp(x, 8 - e)), e - 8)
        return np.where(np.isfinite(x), q, x).astype(np.float32)


def bf16_bits(values) -> np.ndarray:
    """The bf16 nearest to ``values``, as bits; NaNs become quiet NaNs."""
    f = bf16_round(values)
    bits = (f.view(np.uint32) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), bits | 0x40, bits).astype(np.uint16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def storage(name: str) -> np.dtype:
    """The numpy dtype that holds values of Triton-type ``name`` (bf16 as float32)."""
    return np.dtype(np.float32 if name == "bfloat16" else name)


def to_kernel(values: np.ndarray, name: str):
    """A kernel argument holding ``values`` as type ``name``."""
    if name == "bfloat16":
        return BF16Array(bf16_bits(values))
    return np.ascontiguousarray(values, dtype=name)


def empty(shape, name: str):
    """An output argument of type ``name`` (filled with a sentinel) -- read it with `from_kernel`."""
    if name == "bfloat16":
        return BF16Array(np.full(shape, 0x7FC1, np.uint16))
    out = np.empty(shape, name)
    out.fill(np.nan if out.dtype.kind == "f" else 123)
    return out


def from_kernel(arg) -> np.ndarray:
    return arg.to_float32() if isinstance(arg, BF16Array) else arg


def random(name: str, shape, rng: np.random.Generator, low=None, high=None, nonzero=False) -> np.ndarray:
    """Random values representable in ``name`` (bf16 values as float32), in [low, high)."""
    if name in INTS:
        info = np.iinfo(name)
        lo = info.min if low is None else max(low, info.min)
        hi = info.max if high is None else min(high, info.max)
        values = rng.integers(lo, hi, size=shape, dtype=name, endpoint=True)
        if nonzero:
            values[values == 0] = 1
        return values
    lo, hi = (-8.0 if low is None else low), (8.0 if high is None else high)
    values = rng.uniform(lo, hi, size=shape)
    if nonzero:
        values[np.abs(values) < 0.25] = 0.5
    if name == "bfloat16":
        return bf16_round(values.astype(np.float32))
    return values.astype(name)


# -- Triton's type promotion for binary operators (its computation_type_impl) ------------------
def _bits(name: str) -> int:
    return np.dtype(name).itemsize * 8


def promote(a: str, b: str, div_or_mod: bool = False) -> str | None:
    """The computation dtype of ``a <op> b`` for two tensors, or None when Triton rejects it."""
    if "float64" in (a, b):
        return "float64"
    if a in FLOATS or b in FLOATS:
        if div_or_mod or "float32" in (a, b):
            return "float32"
        if "float16" in (a, b):
            return "float16"
        return "bfloat16" if a == b == "bfloat16" else "float32"
    a_signed, b_signed = a.startswith("int"), b.startswith("int")
    if a_signed == b_signed:
        return a if _bits(a) > _bits(b) else b
    if div_or_mod:
        return None
    unsigned, signed = (a, b) if not a_signed else (b, a)
    return unsigned if _bits(unsigned) >= _bits(signed) else signed


def compute(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` in the numpy type arithmetic of ``name`` runs in (bf16 in float32)."""
    return values.astype(storage(name))


def rounded(values: np.ndarray, name: str) -> np.ndarray:
    """A float result stored as ``name``: bf16 results are rounded to bf16."""
    values = values.astype(storage(name))
    return bf16_round(values) if name == "bfloat16" else values


def c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's integer division: the quotient truncated toward zero."""
    with np.errstate(all="ignore"):
        q = a // b
        fix = (q < 0) & (q * b != a) if a.dtype.kind == "i" else np.zeros(a.shape, bool)
    return np.where(fix, q + 1, q).astype(a.dtype)


def c_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's ``%``: the remainder takes the sign of the dividend (``np.fmod``)."""
    with np.errstate(all="ignore"):
        return np.fmod(a, b)


def assert_close(actual: np.ndarray, expected: np.ndarray, name: str, rtol=None, atol=None) -> None:
    """Integers exactly; floats within the precision of ``name``; NaNs where expected."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if name in INTS or name == "bool":
        np.testing.assert_array_equal(actual, expected)
        return
    default = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12}[name]
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                               rtol=default if rtol is None else rtol,
                               atol=default if atol is None else atol, equal_nan=True)


#: The relative error of one product whose fp32 factors were rounded to tf32 (10 stored mantissa
#: bits each): Triton's default ``input_precision`` for fp32 dots on NVIDIA GPUs allows it.
TF32_PRODUCT_ERROR = 2.0 ** -10


def assert_dot_close(actual, expected, a, b, rtol=1e-4, atol=1e-4, product_error=None) -> None:
    """``actual`` (a kernel's ``tl.dot(a, b)`` plus whatever ``expected`` adds) against
    ``expected`` in float64.  Each element may also be off by ``product_error`` times its
    ``|a| @ |b|`` -- by default `TF32_PRODUCT_ERROR` when an operand is fp32 (the dot may run in
    tf32), else nothing: the bound follows the element's own magnitudes (cancellation in a long
    sum leaves small results with large errors), so a wrong element still fails."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    if product_error is None:
        product_error = TF32_PRODUCT_ERROR if np.float32 in (a.dtype, b.dtype) else 0.0
    bound = atol + rtol * np.abs(expected)
    if product_error:
        bound = bound + product_error * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    error = np.abs(actual - expected)
    wrong = ~(error <= bound)
    if wrong.any():
        first = tuple(int(i) for i in np.argwhere(wrong)[0])
        raise AssertionError(f"{int(wrong.sum())} of {wrong.size} elements off; first at {first}: "
                             f"{actual[first]!r} (actual), {expected[first]!r} (expected), "
                             f"allowed error {bound[first]:.3g}")
