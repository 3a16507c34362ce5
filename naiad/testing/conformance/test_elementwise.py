"""Casts, bitcasts, unary math, NaN-aware min/max, shifts, C integer division, against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .reference import (DTYPES, FLOATS, INTS, BF16Array, assert_close, bf16_bits, bf16_round,
                        c_div, c_mod, empty, from_kernel, random, storage, to_kernel)


N = 200
BLOCK = 64


@naiad.jit
def cast_kernel(x, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, b1, n,
                BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    tl.store(i8 + offs, a.to(tl.int8), mask=m)
    tl.store(i16 + offs, a.to(tl.int16), mask=m)
    tl.store(i32 + offs, a.to(tl.int32), mask=m)
    tl.store(i64 + offs, a.to(tl.int64), mask=m)
    tl.store(u8 + offs, a.to(tl.uint8), mask=m)
    tl.store(u16 + offs, a.to(tl.uint16), mask=m)
    tl.store(u32 + offs, a.to(tl.uint32), mask=m)
    tl.store(u64 + offs, a.to(tl.uint64), mask=m)
    tl.store(f16 + offs, a.to(tl.float16), mask=m)
    tl.store(bf16 + offs, a.to(tl.bfloat16), mask=m)
    tl.store(f32 + offs, a.to(tl.float32), mask=m)
    tl.store(f64 + offs, a.to(tl.float64), mask=m)
    tl.store(b1 + offs, a.to(tl.int1), mask=m)


def _cast_reference(a: np.ndarray, src: str, dst: str) -> np.ndarray:
    """numpy's conversions are C's, except: float -> bf16 goes through float32 and rounds to
    nearest even, and bf16 sources are their float32 values."""
    with np.errstate(all="ignore"):
        if dst == "bfloat16":
            return bf16_round(a)
        if src in FLOATS and dst in INTS:     # saturating, as GPUs do (NaN -> 0)
            info = np.iinfo(dst)
            exact = [0 if np.isnan(v) else min(max(int(v), info.min), info.max) if np.isfinite(v)
                     else (info.max if v > 0 else info.min) for v in a.astype(np.float64)]
            return np.array(exact, dtype=dst)
        return a.astype(storage(dst))


@pytest.mark.parametrize("src", DTYPES + ("bool",))
def test_casts_to_every_type(src):
    rng = np.random.default_rng(DTYPES.index(src) if src in DTYPES else 99)
    if src == "bool":
        a = rng.integers(0, 2, N).astype(bool)
    else:
        # Floats cover negatives, fractions and values out of range of the narrow integers.
        a = random(src, N, rng, -300, 300) if src in FLOATS else random(src, N, rng)
        a[:3] = 0
        if src in FLOATS:
            a[8:11] = [np.nan, np.inf, -np.inf]
        if src == "float64":     # ties of f16 / bf16 that rounding through f32 would break
            a[3:8] = [1 + 2**-11 + 2**-40, -(1 + 2**-11 + 2**-40), 1 + 2**-8 + 2**-40, 1 + 2**-8,
                      1 + 2**-11]
    targets = [t for t in DTYPES] + ["bool"]
    outs = [empty(N, t) for t in targets]
    cast_kernel[(naiad.cdiv(N, BLOCK),)](to_kernel(a, src) if src != "bool" else a, *outs, N,
                                         BLOCK=BLOCK)
    for dst, out in zip(targets, outs):
        actual = from_kernel(out)
        if dst == "bool":
            expected = a != 0
        else:
            expected = _cast_reference(a, src, dst)
        # Conversions between floats round once, exactly; ints -> f16/bf16 may round twice.
        exact = {"rtol": 0, "atol": 0} if src in FLOATS and dst in FLOATS else {}
        try:
            assert_close(actual, expected, dst if dst != "bool" else "bool", **exact)
        except AssertionError as e:
            raise AssertionError(f"{src} -> {dst}: {e}") from None


@naiad.jit
def bitcast_kernel(x, out, n, DST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m).to(DST, bitcast=True), mask=m)


_BITCASTS = [("float32", "int32"), ("int32", "float32"), ("float32", "uint32"),
             ("float64", "int64"), ("uint64", "float64"), ("float16", "int16"),
             ("uint16", "float16"), ("bfloat16", "int16"), ("uint16", "bfloat16"),
             ("float16", "bfloat16"), ("int8", "uint8")]


@pytest.mark.parametrize("src,dst", _BITCASTS)
def test_bitcast(src, dst):
    rng = np.random.default_rng(3)
    a = random(src, N, rng)
    out = empty(N, dst)
    dst_type = getattr(tl, dst)
    bitcast_kernel[(naiad.cdiv(N, BLOCK),)](to_kernel(a, src), out, N, DST=dst_type, BLOCK=BLOCK)
    bits = bf16_bits(a) if src == "bfloat16" else a
    expected_bits = bits.view(np.uint16 if dst == "bfloat16" else dst)
    actual = out.bits if isinstance(out, BF16Array) else out
    np.testing.assert_array_equal(actual.view(np.uint8), expected_bits.view(np.uint8))


@naiad.jit
def bf16_arith_kernel(x, y, out_bits, out_f32, n, BLOCK: tl.constexpr):
    """bf16 from raw bits (bitcast), arithmetic in bf16, stored back as bits and as float32."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m).to(tl.bfloat16, bitcast=True)
    b = tl.load(y + offs, mask=m).to(tl.bfloat16, bitcast=True)
    c = a * b + a
    tl.store(out_bits + offs, c.to(tl.uint16, bitcast=True), mask=m)
    tl.store(out_f32 + offs, c.to(tl.float32), mask=m)


def test_bf16_arithmetic_rounds_each_operation_to_nearest_even():
    rng = np.random.default_rng(4)
    a = bf16_round(rng.normal(size=N).astype(np.float32) * 100)
    b = bf16_round(rng.normal(size=N).astype(np.float32))
    a[:4] = [np.inf, -np.inf, np.nan, 0.0]
    out_bits, out_f32 = np.zeros(N, np.uint16), np.zeros(N, np.float32)
    bf16_arith_kernel[(naiad.cdiv(N, BLOCK),)](bf16_bits(a), bf16_bits(b), out_bits, out_f32, N,
                                               BLOCK=BLOCK)
    with np.errstate(all="ignore"):
        expected = bf16_round(bf16_round(a * b) + a)
    np.testing.assert_array_equal(out_f32, expected)
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(out_bits[finite], bf16_bits(expected)[finite])
    assert np.isnan(out_f32[2]) and out_bits[2] & 0x7FC0 == 0x7FC0


@naiad.jit
def unary_float_kernel(x, y, exp, log, sqrt, sin, cos, floor, ceil, abs_, erf, rsqrt, exp2, log2,
                       fma, sigmoid, neg, mn, mx, mn_nan, mx_nan, clamp, clamp_nan, n,
                       BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    pos = tl.abs(a) + 0.5
    tl.store(exp + offs, tl.exp(a), mask=m)
    tl.store(log + offs, tl.log(pos), mask=m)
    tl.store(sqrt + offs, tl.sqrt(pos), mask=m)
    tl.store(sin + offs, tl.sin(a), mask=m)
    tl.store(cos + offs, tl.cos(a), mask=m)
    tl.store(floor + offs, tl.floor(a), mask=m)
    tl.store(ceil + offs, tl.ceil(a), mask=m)
    tl.store(abs_ + offs, tl.abs(a), mask=m)
    tl.store(erf + offs, tl.erf(a), mask=m)
    tl.store(rsqrt + offs, tl.rsqrt(pos), mask=m)
    tl.store(exp2 + offs, tl.exp2(a), mask=m)
    tl.store(log2 + offs, tl.log2(pos), mask=m)
    tl.store(fma + offs, tl.fma(a, b, a), mask=m)
    tl.store(sigmoid + offs, tl.sigmoid(a), mask=m)
    tl.store(neg + offs, -a, mask=m)
    tl.store(mn + offs, tl.minimum(a, b), mask=m)
    tl.store(mx + offs, tl.maximum(a, b), mask=m)
    tl.store(mn_nan + offs, tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL), mask=m)
    tl.store(mx_nan + offs, tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL), mask=m)
    tl.store(clamp + offs, tl.clamp(a, -1.0, 2.0), mask=m)
    tl.store(clamp_nan + offs, tl.clamp(a, -1.0, 2.0, propagate_nan=tl.PropagateNan.ALL), mask=m)


def _erf(values: np.ndarray) -> np.ndarray:
    return np.array([math.erf(v) for v in values.astype(np.float64)])


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_unary_math(name):
    rng = np.random.default_rng(5)
    a = rng.uniform(-6, 6, N).astype(name)
    b = rng.uniform(-6, 6, N).astype(name)
    a[:3], b[1:5] = np.nan, np.nan           # NaN on either side, or both
    keys = ("exp log sqrt sin cos floor ceil abs erf rsqrt exp2 log2 fma sigmoid neg mn mx "
            "mn_nan mx_nan clamp clamp_nan").split()
    outs = {k: empty(N, name) for k in keys}
    unary_float_kernel[(naiad.cdiv(N, BLOCK),)](a, b, *outs.values(), N, BLOCK=BLOCK)
    pos = np.abs(a) + name_cast(0.5, name)
    with np.errstate(all="ignore"):
        expected = {
            "exp": np.exp(a), "log": np.log(pos), "sqrt": np.sqrt(pos), "sin": np.sin(a),
            "cos": np.cos(a), "floor": np.floor(a), "ceil": np.ceil(a), "abs": np.abs(a),
            "erf": _erf(a), "rsqrt": 1 / np.sqrt(pos), "exp2": np.exp2(a), "log2": np.log2(pos),
            "fma": a * b + a, "sigmoid": 1 / (1 + np.exp(-a)), "neg": -a,
            "mn": np.fmin(a, b), "mx": np.fmax(a, b), "mn_nan": np.minimum(a, b),
            "mx_nan": np.maximum(a, b), "clamp": np.clip(a, -1, 2), "clamp_nan": np.clip(a, -1, 2)}
    # Without propagate_nan, Triton's clamp returns min(max(x, lo), hi) with NaN-ignoring ops.
    expected["clamp"] = np.fmin(np.fmax(a, -1), 2)
    tol = 3e-6 if name == "float32" else 1e-12
    for key, value in expected.items():
        try:
            assert_close(outs[key], value.astype(name), name, rtol=tol, atol=tol)
        except AssertionError as e:
            raise AssertionError(f"tl.{key} on {name}: {e}") from None


def name_cast(value, name):
    return np.dtype(name).type(value)


@naiad.jit
def integer_kernel(x, y, div, mod, shl, shr, absolute, inv, cdiv, umulhi, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    tl.store(div + offs, a // b, mask=m)
    tl.store(mod + offs, a % b, mask=m)
    shift = (b & (a.dtype.primitive_bitwidth - 1)).to(a.dtype)
    tl.store(shl + offs, a << shift, mask=m)
    tl.store(shr + offs, a >> shift, mask=m)
    tl.store(absolute + offs, tl.abs(a), mask=m)
    tl.store(inv + offs, ~a, mask=m)
    tl.store(cdiv + offs, tl.cdiv(a, b), mask=m)
    if a.dtype == tl.uint32 or a.dtype == tl.int32:
        tl.store(umulhi + offs, tl.umulhi(a, b), mask=m)


@pytest.mark.parametrize("name", INTS)
def test_integer_ops_with_c_semantics(name):
    """``//`` and ``%`` truncate toward zero (C), ``>>`` is arithmetic on signed types."""
    rng = np.random.default_rng(6)
    small = name.startswith("int")
    a = random(name, N, rng, -1000 if small else 0, 1000)
    b = random(name, N, rng, -20 if small else 1, 20, nonzero=True)
    a[:8] = random(name, 8, rng)                  # a few from the whole range
    outs = [empty(N, name) for _ in range(8)]
    umulhi_out = outs[7] if name in ("int32", "uint32") else empty(1, "int8")
    integer_kernel[(naiad.cdiv(N, BLOCK),)](a, b, *outs[:7], umulhi_out, N, BLOCK=BLOCK)
    bits = np.dtype(name).itemsize * 8
    shift = (b & (bits - 1)).astype(name)
    with np.errstate(all="ignore"):
        expected = [c_div(a, b), c_mod(a, b), a << shift, a >> shift, np.abs(a), ~a,
                    c_div(a + b - name_cast(1, name), b)]
    for label, out, value in zip("div mod shl shr abs invert cdiv".split(), outs, expected):
        try:
            assert_close(out, value.astype(name), name)
        except AssertionError as e:
            raise AssertionError(f"{label} on {name}: {e}") from None
    if name in ("int32", "uint32"):
        wide = a.astype(np.uint32).astype(np.uint64) * b.astype(np.uint32).astype(np.uint64)
        assert_close(outs[7], (wide >> 32).astype(np.uint32).astype(name), name)


@naiad.jit
def division_by_masked_zero_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) // tl.load(y + offs, mask=m), mask=m)


def test_integer_division_in_masked_lanes_does_not_trap():
    """Masked-off lanes hold zeros; dividing them must not raise SIGFPE (x86 traps on it)."""
    x = np.arange(1, 6, dtype=np.int32)
    y = np.array([1, -2, 3, -4, 5], np.int32)
    out = np.zeros(5, np.int32)
    division_by_masked_zero_kernel[(1,)](x, y, out, 5, BLOCK=16)
    np.testing.assert_array_equal(out, c_div(x, y))


@naiad.jit
def mul_add_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) * 1.1 + 0.3, mask=m)


@pytest.mark.parametrize("fusion", [True, False])
def test_multiply_add_rounds_as_enable_fp_fusion_allows(fusion):
    """enable_fp_fusion=False: each operation rounds, as numpy's; True: a backend may fuse the
    multiply-add into one rounding (an fma, as NVIDIA GPUs do) but gives one of the two."""
    x = np.random.default_rng(3).uniform(0.5, 2.0, 1000).astype(np.float32)
    out = np.empty_like(x)
    mul_add_kernel[(naiad.cdiv(1000, 256),)](x, out, 1000, BLOCK=256, enable_fp_fusion=fusion)
    separate = x * np.float32(1.1) + np.float32(0.3)
    fused = (x.astype(np.float64) * np.float64(np.float32(1.1)) + np.float64(np.float32(0.3))).astype(np.float32)
    assert not np.array_equal(separate, fused)        # the data tells the two apart
    if fusion:
        np.testing.assert_array_equal(np.where(out == fused, separate, out), separate)
    else:
        np.testing.assert_array_equal(out, separate)
