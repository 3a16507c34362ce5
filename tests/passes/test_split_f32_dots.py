"""The split of fp32 dots into bf16 / tf32 dots (naiad/passes/split_f32_dots.py), run where it can
be checked without a GPU: inserted after the CPU backend's ttir stage (through the
stages-inspection hook), the CPU computes the part dots, and the sums must be as close to the
fp64 product as each precision promises -- far closer than one dot of the narrow type."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.ir import print_module
from naiad.passes.split_f32_dots import split_f32_dots

from .ttir import after_ttir_stage

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               PRECISION: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, c, input_precision=PRECISION))


@pytest.fixture
def split():
    """Every dot compiled in the test is split after the CPU's ttir stage; the TTIR texts."""
    seen = []

    def split_all(module):
        for func in module.body.ops:
            split_f32_dots(func, lambda dot, part: True)
        module.verify()
        seen.append(print_module(module))

    with after_ttir_stage("split-f32-dots", split_all):
        dot_kernel.cache.clear()
        yield seen
    dot_kernel.cache.clear()


def _run(precision, a, b, c):
    m, k = a.shape
    n = b.shape[1]
    out = np.full((m, n), np.nan, np.float32)
    dot_kernel[(1,)](a, b, c, out, M=m, N=n, K=k, PRECISION=precision)
    return out


def _inputs(m, n, k, seed):
    rng = np.random.default_rng(seed)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
    return a, b, c


def _relative_error(out, a, b, c):
    exact = a.astype(np.float64) @ b.astype(np.float64) + c
    return np.abs(out - exact).max() / np.abs(exact).max()


def _bf16(x):
    """x rounded to bf16 (to nearest even), as fp32."""
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("precision, dots, bound", [("bf16x3", 3, 2e-5), ("bf16x6", 6, 2e-6),
                                                    ("tf32x3", 3, 2e-6)])
@pytest.mark.parametrize("m, n, k", [(16, 16, 16), (32, 64, 32), (64, 16, 128)])
def test_split_dots_are_nearly_fp32(split, precision, dots, bound, m, n, k):
    a, b, c = _inputs(m, n, k, m + n + k)
    out = _run(precision, a, b, c)
    assert split and all(text.count("tt.dot") == dots for text in split)
    part = "bf16" if precision.startswith("bf16") else "f32"
    assert all(f"tensor<{m}x{k}x{part}>" in text for text in split)
    assert _relative_error(out, a, b, c) < bound
    # one dot of the narrow type is 100x further off: the bound can fail
    single = _bf16(a).astype(np.float64) @ _bf16(b).astype(np.float64) + c
    assert _relative_error(single.astype(np.float32), a, b, c) > 50 * bound


@pytest.mark.parametrize("precision", ["bf16x3", "bf16x6", "tf32x3"])
def test_inf_and_nan_operands_give_what_fp32_gives(split, precision):
    a, b, c = _inputs(16, 16, 16, 7)
    a[0, 3] = np.inf                     # row 0: +inf (b's column signs decide the sign)
    a[1, 5] = np.nan                     # row 1: NaN everywhere
    b = np.abs(b)                        # ... so that row 0 is +inf, not inf - inf
    out = _run(precision, a, b, c)
    assert np.isposinf(out[0]).all()
    assert np.isnan(out[1]).all()
    assert np.isfinite(out[2:]).all()
    assert _relative_error(out[2:], a[2:], b, c[2:]) < 2e-5


def test_other_precisions_and_types_are_left_alone(split):
    a, b, c = _inputs(16, 16, 16, 3)
    out = _run("ieee", a, b, c)
    assert split and all(text.count("tt.dot") == 1 for text in split)
    assert _relative_error(out, a, b, c) < 1e-6


def test_a_dot_the_backend_declines_is_not_split():
    """The predicate decides: one that says no leaves the fp32 dot whole."""
    seen = []

    def ask(module):
        for func in module.body.ops:
            assert not split_f32_dots(func, lambda dot, part: seen.append(part) or False)

    with after_ttir_stage("split-f32-dots-declined", ask):
        dot_kernel.cache.clear()
        a, b, c = _inputs(16, 16, 16, 5)
        out = _run("tf32x3", a, b, c)
    dot_kernel.cache.clear()
    assert seen == ["tf32"]
    assert _relative_error(out, a, b, c) < 1e-6
