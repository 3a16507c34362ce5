"""Binary operators on every pair of dtypes Triton accepts, against numpy in the promoted type."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .reference import (DTYPES, FLOATS, INTS, assert_close, c_div, c_mod, compute, empty,
                        from_kernel, promote, random, rounded, to_kernel)


N = 300   # not a multiple of BLOCK: the last program is masked
BLOCK = 128


@naiad.jit
def binary_kernel(x, y, add, sub, mul, lt, eq, ne, ge, mx, sel, div, mod, fdiv, band, bor, bxor,
                  n, DIV: tl.constexpr, INT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    tl.store(add + offs, a + b, mask=m)
    tl.store(sub + offs, a - b, mask=m)
    tl.store(mul + offs, a * b, mask=m)
    tl.store(lt + offs, a < b, mask=m)
    tl.store(eq + offs, a == b, mask=m)
    tl.store(ne + offs, a != b, mask=m)
    tl.store(ge + offs, a >= b, mask=m)
    tl.store(mx + offs, tl.maximum(a, b), mask=m)
    tl.store(sel + offs, tl.where(a < b, a, b), mask=m)
    if DIV:
        tl.store(div + offs, a / b, mask=m)
        tl.store(mod + offs, a % b, mask=m)
    if INT:
        tl.store(fdiv + offs, a // b, mask=m)
        tl.store(band + offs, a & b, mask=m)
        tl.store(bor + offs, a | b, mask=m)
        tl.store(bxor + offs, a ^ b, mask=m)


def _inputs(a_name: str, b_name: str, rng: np.random.Generator):
    both_int = a_name in INTS and b_name in INTS
    low, high = (None, None) if both_int else (-60, 60)
    a = random(a_name, N, rng, low, high)
    b = random(b_name, N, rng, low, high, nonzero=True)
    if both_int and a_name == b_name and a_name.startswith("int"):
        a[:2], b[:2] = np.iinfo(a_name).min, -1     # the one overflowing quotient: wraps
    return a, b


def _true_div_type(a_name: str, b_name: str) -> str:
    t = promote(a_name, b_name, div_or_mod=True)
    return t if t in FLOATS else "float32"


def _expected(a, b, a_name, b_name):
    """Every operator of `binary_kernel` on numpy arrays, with Triton's promotions."""
    t = promote(a_name, b_name)
    div_type = promote(a_name, b_name, div_or_mod=True)
    with np.errstate(all="ignore"):
        ca, cb = compute(a, t), compute(b, t)
        expected = {"add": (rounded(ca + cb, t), t), "sub": (rounded(ca - cb, t), t),
                    "mul": (rounded(ca * cb, t), t), "lt": (ca < cb, "bool"),
                    "eq": (ca == cb, "bool"), "ne": (ca != cb, "bool"), "ge": (ca >= cb, "bool"),
                    "mx": (np.maximum(ca, cb), t), "sel": (np.where(ca < cb, ca, cb), t)}
        if div_type is not None:
            da, db = compute(a, div_type), compute(b, div_type)
            q = _true_div_type(a_name, b_name)
            expected["div"] = (rounded(compute(da, q) / compute(db, q), q), q)
            expected["mod"] = (c_mod(da, db), div_type)
        if div_type in INTS:
            expected["fdiv"] = (c_div(da, db), div_type)
            for key, fn in (("band", np.bitwise_and), ("bor", np.bitwise_or), ("bxor", np.bitwise_xor)):
                expected[key] = (fn(da, db), div_type)
    return expected


def _check(outs, expected, a_name, b_name):
    for key, (value, name) in expected.items():
        tol = {"rtol": 2e-3, "atol": 2e-3} if key == "mod" and name != "float64" else {}
        try:
            assert_close(from_kernel(outs[key]), value, name, **tol)
        except AssertionError as e:
            raise AssertionError(f"{a_name} {key} {b_name}: {e}") from None


@pytest.mark.parametrize("name", DTYPES)
def test_binary_ops_on_one_dtype(name):
    """Every operator, on operands of one dtype (full range for integers: wrap-around)."""
    rng = np.random.default_rng(DTYPES.index(name))
    a, b = _inputs(name, name, rng)
    expected = _expected(a, b, name, name)
    outs = {k: empty(N, expected[k][1] if k in expected else "int8") for k in _OUTPUTS}
    binary_kernel[(naiad.cdiv(N, BLOCK),)](to_kernel(a, name), to_kernel(b, name), *outs.values(),
                                           N, DIV=True, INT=name in INTS, BLOCK=BLOCK)
    _check(outs, expected, name, name)


_OUTPUTS = ("add", "sub", "mul", "lt", "eq", "ne", "ge", "mx", "sel", "div", "mod", "fdiv",
            "band", "bor", "bxor")


@naiad.jit
def scalar_binary_kernel(x, y, add, sub, mul, lt, eq, ne, ge, mx, sel, div, mod, fdiv, band, bor,
                         bxor, INT: tl.constexpr):
    """`binary_kernel` on scalars: one element per program."""
    i = tl.program_id(0)
    a = tl.load(x + i)
    b = tl.load(y + i)
    tl.store(add + i, a + b)
    tl.store(sub + i, a - b)
    tl.store(mul + i, a * b)
    tl.store(lt + i, a < b)
    tl.store(eq + i, a == b)
    tl.store(ne + i, a != b)
    tl.store(ge + i, a >= b)
    tl.store(mx + i, tl.maximum(a, b))
    tl.store(sel + i, tl.where(a < b, a, b))
    tl.store(div + i, a / b)
    tl.store(mod + i, a % b)
    if INT:
        tl.store(fdiv + i, a // b)
        tl.store(band + i, a & b)
        tl.store(bor + i, a | b)
        tl.store(bxor + i, a ^ b)


@pytest.mark.parametrize("name", DTYPES)
def test_binary_ops_on_scalars(name):
    rng = np.random.default_rng(100 + DTYPES.index(name))
    a, b = _inputs(name, name, rng)
    expected = _expected(a, b, name, name)
    outs = {k: empty(N, expected[k][1] if k in expected else "int8") for k in _OUTPUTS}
    scalar_binary_kernel[(N,)](to_kernel(a, name), to_kernel(b, name), *outs.values(),
                               INT=name in INTS)
    _check(outs, expected, name, name)


@naiad.jit
def mixed_kernel(x, y, add, lt, div, n, DIV: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    tl.store(add + offs, a * b + a, mask=m)
    tl.store(lt + offs, a < b, mask=m)
    if DIV:
        tl.store(div + offs, a / b, mask=m)


@pytest.mark.parametrize("a_name,b_name", [p for p in itertools.product(DTYPES, DTYPES) if p[0] != p[1]])
def test_binary_ops_on_mixed_dtypes(a_name, b_name):
    """Promotion of every pair of different dtypes (the operators themselves are covered per
    dtype above; this checks the conversions into the computation type)."""
    rng = np.random.default_rng(DTYPES.index(a_name) * 16 + DTYPES.index(b_name))
    a, b = _inputs(a_name, b_name, rng)
    t = promote(a_name, b_name)
    has_div = promote(a_name, b_name, div_or_mod=True) is not None
    q = _true_div_type(a_name, b_name) if has_div else "int8"
    outs = {"add": empty(N, t), "lt": empty(N, "bool"), "div": empty(N, q)}
    mixed_kernel[(naiad.cdiv(N, BLOCK),)](to_kernel(a, a_name), to_kernel(b, b_name), *outs.values(),
                                          N, DIV=has_div, BLOCK=BLOCK, enable_fp_fusion=False)
    with np.errstate(all="ignore"):
        ca, cb = compute(a, t), compute(b, t)
        expected = {"add": (rounded(rounded(ca * cb, t) + ca, t), t), "lt": (ca < cb, "bool")}
        if has_div:
            d = promote(a_name, b_name, div_or_mod=True)
            expected["div"] = (rounded(compute(compute(a, d), q) / compute(compute(b, d), q), q), q)
    _check(outs, expected, a_name, b_name)


@naiad.jit
def scalar_operand_kernel(x, out_add, out_mul, out_rsub, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    tl.store(out_add + offs, a + 3, mask=m)
    tl.store(out_mul + offs, a * s, mask=m)
    tl.store(out_rsub + offs, 2 - a, mask=m)


@pytest.mark.parametrize("name", ["int8", "uint16", "int64", "float16", "bfloat16", "float64"])
def test_python_scalar_operands_keep_the_tensor_type(name):
    """``int8 + 3`` stays int8; a runtime int scalar (an i32 argument) promotes like a tensor."""
    rng = np.random.default_rng(1)
    a = random(name, N, rng, 0, 100)
    s_type = promote(name, "int32")
    outs = [empty(N, name), empty(N, s_type), empty(N, name)]
    scalar_operand_kernel[(naiad.cdiv(N, BLOCK),)](to_kernel(a, name), *outs, N, 7, BLOCK=BLOCK)
    with np.errstate(all="ignore"):
        c = compute(a, name)
        assert_close(from_kernel(outs[0]), rounded(c + compute(np.array(3), name), name), name)
        product = rounded(compute(a, s_type) * compute(np.array(7), s_type), s_type)
        assert_close(from_kernel(outs[1]), product, s_type)
        assert_close(from_kernel(outs[2]), rounded(compute(np.array(2), name) - c, name), name)


@naiad.jit
def shift_kernel(x, y, shl, shr, const_shl, shl_const, shr_const, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    tl.store(shl + offs, a << b, mask=m)
    tl.store(shr + offs, a >> b, mask=m)
    tl.store(const_shl + offs, 3 << b, mask=m)
    tl.store(shl_const + offs, a << 4, mask=m)
    tl.store(shr_const + offs, a >> 2, mask=m)


@naiad.jit
def scalar_shift_kernel(x, y, shl, shr, const_shl, shl_const, shr_const):
    """`shift_kernel` on scalars: one element per program (``3 << b`` of a scalar ``b`` is the
    case the address analysis once failed on)."""
    i = tl.program_id(0)
    a = tl.load(x + i)
    b = tl.load(y + i)
    tl.store(shl + i, a << b)
    tl.store(shr + i, a >> b)
    tl.store(const_shl + i, 3 << b)
    tl.store(shl_const + i, a << 4)
    tl.store(shr_const + i, a >> 2)


@pytest.mark.parametrize("scalar", [False, True], ids=["blocks", "scalars"])
@pytest.mark.parametrize("name", INTS)
def test_shifts(name, scalar):
    """``<<`` wraps in the operand's type, ``>>`` is arithmetic for signed types and logical for
    unsigned ones, by a tensor or a constant, a constant shifted by a tensor included."""
    rng = np.random.default_rng(200 + INTS.index(name))
    bits = np.dtype(name).itemsize * 8
    a = random(name, N, rng)
    b = rng.integers(0, bits, N).astype(name)
    outs = [empty(N, name) for _ in range(5)]
    if scalar:
        scalar_shift_kernel[(N,)](a, b, *outs)
    else:
        shift_kernel[(naiad.cdiv(N, BLOCK),)](a, b, *outs, N, BLOCK=BLOCK)
    three = np.array(3, name)
    expected = [np.left_shift(a, b), np.right_shift(a, b), np.left_shift(three, b),
                np.left_shift(a, np.array(4, name)), np.right_shift(a, np.array(2, name))]
    for label, out, want in zip(("a << b", "a >> b", "3 << b", "a << 4", "a >> 2"), outs, expected):
        np.testing.assert_array_equal(out, want, err_msg=f"{name} {label}")
