"""``tl.dot_scaled`` on the CPU against a numpy decoding of the OCP microscaling formats.

The reference decodes every format from its definition (fp4 e2m1 by its value table, fp8 by
exponent/mantissa widths and bias, bf16 as the top half of an fp32, e8m0 scales as powers of
two) and multiplies in float64; the kernel emulates the product in fp32, so the two agree to
fp32 rounding.  bf16 operands travel as ``uint16`` bits and fp8 ones as ``uint8`` bits (the
formats Triton accepts besides the float types themselves).
"""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.compiler.errors import CompilationError


FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
FP8 = {"e4m3": (3, 7), "e5m2": (2, 15)}          # mantissa bits, bias (4 or 5 exponent bits)


@naiad.jit
def scaled_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, acc_ptr, out_ptr,
                  A_ROWS: tl.constexpr, A_COLS: tl.constexpr, B_ROWS: tl.constexpr,
                  B_COLS: tl.constexpr, M: tl.constexpr, N: tl.constexpr, GROUPS: tl.constexpr,
                  FA: tl.constexpr, FB: tl.constexpr, A_K_PACK: tl.constexpr,
                  B_K_PACK: tl.constexpr, FAST: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, A_ROWS)[:, None] * A_COLS + tl.arange(0, A_COLS)[None, :])
    b = tl.load(b_ptr + tl.arange(0, B_ROWS)[:, None] * B_COLS + tl.arange(0, B_COLS)[None, :])
    sa = sa_ptr
    if sa_ptr is not None:
        sa = tl.load(sa_ptr + tl.arange(0, M)[:, None] * GROUPS + tl.arange(0, GROUPS)[None, :])
    sb = sb_ptr
    if sb_ptr is not None:
        sb = tl.load(sb_ptr + tl.arange(0, N)[:, None] * GROUPS + tl.arange(0, GROUPS)[None, :])
    out_offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    acc = acc_ptr
    if acc_ptr is not None:
        acc = tl.load(acc_ptr + out_offs)
    c = tl.dot_scaled(a, sa, FA, b, sb, FB, acc=acc, fast_math=FAST, lhs_k_pack=A_K_PACK,
                      rhs_k_pack=B_K_PACK)
    tl.store(out_ptr + out_offs, c)


@naiad.jit
def batched_kernel(a_ptr, sa_ptr, b_ptr, out_ptr, B: tl.constexpr, M: tl.constexpr,
                   N: tl.constexpr, K: tl.constexpr):
    batch = tl.arange(0, B)[:, None, None]
    a = tl.load(a_ptr + batch * (M * K // 2) + tl.arange(0, M)[None, :, None] * (K // 2)
                + tl.arange(0, K // 2)[None, None, :])
    sa = tl.load(sa_ptr + batch * (M * K // 32) + tl.arange(0, M)[None, :, None] * (K // 32)
                 + tl.arange(0, K // 32)[None, None, :])
    b = tl.load(b_ptr + batch * (K * N) + tl.arange(0, K)[None, :, None] * N
                + tl.arange(0, N)[None, None, :])
    c = tl.dot_scaled(a, sa, "e2m1", b, None, "fp16")
    tl.store(out_ptr + batch * (M * N) + tl.arange(0, M)[None, :, None] * N
             + tl.arange(0, N)[None, None, :], c)


# -- the reference -----------------------------------------------------------------------------
def decode_fp4(codes: np.ndarray) -> np.ndarray:
    value = FP4_VALUES[codes & 7]
    return np.where(codes & 8, -value, value)


def unpack_fp4(packed: np.ndarray, axis: int) -> np.ndarray:
    """Each byte's two codes, the low nibble first, consecutive along ``axis``."""
    codes = np.stack([packed & 0xF, packed >> 4], axis=axis + 1)
    shape = list(packed.shape)
    shape[axis] *= 2
    return decode_fp4(codes.reshape(shape))


def decode_fp8(bits: np.ndarray, fmt: str) -> np.ndarray:
    mbits, bias = FP8[fmt]
    bits = bits.astype(np.int64)
    e = (bits >> mbits) & ((1 << (7 - mbits)) - 1)
    m = (bits & ((1 << mbits) - 1)).astype(np.float64) / 2.0 ** mbits
    magnitude = np.where(e == 0, m * 2.0 ** (1 - bias), (1 + m) * 2.0 ** (e - bias))
    return np.where(bits & 0x80, -magnitude, magnitude)


def decode(x: np.ndarray, fmt: str, pack_axis: int) -> np.ndarray:
    if fmt == "e2m1":
        return unpack_fp4(x, pack_axis)
    if fmt in FP8:
        return decode_fp8(x, fmt)
    if fmt == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def scale_values(s: np.ndarray, k: int) -> np.ndarray:
    """e8m0 bytes as Triton's emulation reads them (0 -> 0, 0xFF -> NaN), repeated over K."""
    values = np.where(s == 0, 0.0, 2.0 ** (s.astype(np.float64) - 127))
    values = np.where(s == 0xFF, np.nan, values)
    return np.repeat(values, k // s.shape[-1], axis=-1)


def operands(a, sa, fa, b, sb, fb, a_k_pack=True, b_k_pack=True) -> tuple[np.ndarray, np.ndarray]:
    """The values (float64) that ``tl.dot_scaled`` multiplies: decoded and scaled."""
    x = decode(a, fa, 1 if a_k_pack else 0)
    y = decode(b, fb, 0 if b_k_pack else 1)
    if sa is not None:
        x = x * scale_values(sa, x.shape[1])
    if sb is not None:
        y = y * scale_values(sb, y.shape[0]).T
    return x, y


def reference(a, sa, fa, b, sb, fb, acc=None, a_k_pack=True, b_k_pack=True) -> np.ndarray:
    x, y = operands(a, sa, fa, b, sb, fb, a_k_pack, b_k_pack)
    with np.errstate(invalid="ignore"):
        return x @ y + (0.0 if acc is None else acc)


def operand(fmt: str, shape, rng) -> np.ndarray:
    """Random finite bits (or values) of ``fmt`` in an array of ``shape``."""
    if fmt == "fp16":
        return rng.uniform(-4, 4, shape).astype(np.float16)
    if fmt == "bf16":
        values = rng.uniform(-4, 4, shape).astype(np.float32)
        return (values.view(np.uint32) >> 16).astype(np.uint16)
    bits = rng.integers(0, 256, shape, dtype=np.uint8)
    if fmt == "e4m3":
        bits = np.where(bits & 0x7F == 0x7F, bits & 0xF0, bits)      # no NaN
    if fmt == "e5m2":
        bits = np.where(bits & 0x7C == 0x7C, bits & 0x83, bits)      # no inf / NaN
    return bits.astype(np.uint8)


def run(a, sa, fa, b, sb, fb, m, n, acc=None, a_k_pack=True, b_k_pack=True, fast=False):
    out = np.zeros((m, n), np.float32)
    groups = next((s.shape[1] for s in (sa, sb) if s is not None), 1)
    scaled_kernel[(1,)](a, sa, b, sb, acc, out, *a.shape, *b.shape, m, n, groups, fa, fb,
                        a_k_pack, b_k_pack, fast)
    return out


# -- tests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fa, fb, scaled", [
    ("e2m1", "bf16", "lhs"),
    ("fp16", "e2m1", "rhs"),
    ("e4m3", "e5m2", "both"),
    ("e5m2", "e4m3", "none"),
])
def test_dot_scaled_matches_the_mx_decoding(fa, fb, scaled):
    rng = np.random.default_rng(0)
    m, n, k = 32, 16, 64
    a = operand(fa, (m, k // 2 if fa == "e2m1" else k), rng)
    b = operand(fb, (k // 2 if fb == "e2m1" else k, n), rng)
    sa = rng.integers(118, 136, (m, k // 32), dtype=np.uint8) if scaled in ("lhs", "both") else None
    sb = rng.integers(118, 136, (n, k // 32), dtype=np.uint8) if scaled in ("rhs", "both") else None
    out = run(a, sa, fa, b, sb, fb, m, n)
    np.testing.assert_allclose(out, reference(a, sa, fa, b, sb, fb), rtol=1e-5, atol=1e-6)


def test_fp4_packed_along_m_and_n_with_accumulator_and_group_16():
    rng = np.random.default_rng(1)
    m, n, k = 32, 32, 32
    a = operand("e2m1", (m // 2, k), rng)        # lhs_k_pack=False: two rows per byte
    b = operand("e2m1", (k, n // 2), rng)        # rhs_k_pack=False: two columns per byte
    sa = rng.integers(120, 134, (m, k // 16), dtype=np.uint8)
    sb = rng.integers(120, 134, (n, k // 16), dtype=np.uint8)
    acc = rng.standard_normal((m, n)).astype(np.float32)
    out = run(a, sa, "e2m1", b, sb, "e2m1", m, n, acc=acc, a_k_pack=False, b_k_pack=False)
    expected = reference(a, sa, "e2m1", b, sb, "e2m1", acc, a_k_pack=False, b_k_pack=False)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fast", [False, True])
def test_scale_bytes_0_and_0xff(fast):
    """Byte 0 scales to zero; 0xFF is NaN, or (fast_math) infinity as the exponent field says."""
    m, n, k = 16, 16, 32
    a = np.full((m, k), 0x38, np.uint8)          # e4m3 1.0
    b = np.full((k, n), 0x38, np.uint8)
    sa = np.full((m, 1), 127, np.uint8)
    sa[0], sa[1] = 0, 0xFF
    out = run(a, sa, "e4m3", b, None, "e4m3", m, n, fast=fast)
    assert (out[0] == 0).all() and (out[2:] == k).all()
    assert np.isinf(out[1]).all() if fast else np.isnan(out[1]).all()


def test_batched_operands():
    rng = np.random.default_rng(2)
    batch, m, n, k = 2, 16, 16, 64
    a = operand("e2m1", (batch, m, k // 2), rng)
    sa = rng.integers(120, 134, (batch, m, k // 32), dtype=np.uint8)
    b = operand("fp16", (batch, k, n), rng)
    out = np.zeros((batch, m, n), np.float32)
    batched_kernel[(1,)](a, sa, b, out, batch, m, n, k)
    for i in range(batch):
        np.testing.assert_allclose(out[i], reference(a[i], sa[i], "e2m1", b[i], None, "fp16"),
                                   rtol=1e-5, atol=1e-5)


def test_unknown_format_is_a_clear_error():
    a = np.zeros((16, 32), np.uint8)
    with pytest.raises(CompilationError, match=r"unknown lhs_format 'e3m2'.*'e2m1', 'e4m3'"):
        run(a, None, "e3m2", a.T.copy(), None, "e4m3", 16, 16)


def test_wrong_operand_type_is_a_clear_error():
    a, b = np.zeros((16, 32), np.uint8), np.zeros((32, 16), np.float32)
    with pytest.raises(CompilationError, match="rhs in format 'e4m3' must be fp8e4nv or uint8, "
                                               "got fp32 -- fix"):
        run(a, None, "e4m3", b, None, "e4m3", 16, 16)


def test_bad_scale_shape_is_a_clear_error():
    a = np.zeros((32, 64), np.uint8)
    b = np.zeros((64, 16), np.uint8)
    sb = np.zeros((16, 8), np.uint8)               # one scale per 8 values along K = 64
    with pytest.raises(CompilationError, match=r"rhs_scale has shape \[16, 8\] but must be "
                                               r"\[16, 2\] or \[16, 4\] for K = 64"):
        run(a, None, "e4m3", b, sb, "e4m3", 32, 16)


def test_k_pack_false_on_fp8_is_a_clear_error():
    a = np.zeros((16, 32), np.uint8)
    with pytest.raises(CompilationError, match="lhs_k_pack=False is for packed e2m1 operands"):
        run(a, None, "e4m3", a.T.copy(), None, "e4m3", 16, 16, a_k_pack=False)


def test_mismatched_k_is_a_clear_error():
    a = np.zeros((16, 32), np.uint8)               # e2m1: K = 64
    b = np.zeros((32, 16), np.uint8)               # e4m3: K = 32
    with pytest.raises(CompilationError, match="lhs holds K = 64 .* rhs K = 32"):
        run(a, None, "e2m1", b, None, "e4m3", 16, 16)
