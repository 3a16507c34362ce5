"""Edge cases fixed after the first round of CPU tests: rounding toward zero, bf16 scalars,
splitting two elements into scalars, freeing compiled kernels."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.compiler.errors import CompilationError

from .reference import bf16_round



@naiad.jit
def narrow_toward_zero(x_ptr, f16_ptr, bf16_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(f16_ptr + offs, x.to(tl.float16, fp_downcast_rounding="rtz"), mask=mask)
    tl.store(bf16_ptr + offs, x.to(tl.bfloat16, fp_downcast_rounding="rtz").to(tl.float32), mask=mask)


def _toward_zero_f16(x: np.ndarray) -> np.ndarray:
    """Reference: the float16 of largest magnitude not above |x|, by search over all halves."""
    halves = np.arange(0, 0x7C01, dtype=np.uint16).view(np.float16).astype(np.float64)
    index = np.searchsorted(halves, np.abs(x.astype(np.float64)), side="right") - 1
    out = halves[np.clip(index, 0, len(halves) - 1)] * np.sign(x)
    return np.where(np.isnan(x), np.nan, np.where(np.isinf(x), x, out)).astype(np.float16)


def test_rounding_toward_zero():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(200) * 10.0 ** rng.integers(-9, 6, 200),
                        [70000.0, -70000.0, 65519.0, 1e-8, -1e-8, 0.0, np.inf, -np.inf, np.nan]])
    x = x.astype(np.float32)
    f16, bf = np.zeros(x.size, np.float16), np.zeros(x.size, np.float32)
    narrow_toward_zero[(1,)](x, f16, bf, x.size, BLOCK=256)
    np.testing.assert_array_equal(f16, _toward_zero_f16(x))
    truncated = (x.view(np.uint32) & 0xFFFF0000).view(np.float32)
    np.testing.assert_array_equal(bf[~np.isnan(x)], truncated[~np.isnan(x)])
    assert np.isnan(bf[np.isnan(x)]).all()


@naiad.jit
def store_bf16_scalar(out_ptr, value: tl.bfloat16):
    tl.store(out_ptr, value.to(tl.float32))


@pytest.mark.parametrize("value", [1 + 2**-8 + 2**-10, -3.14159, 1e30, 2.0**-130])
def test_bf16_scalar_arguments_round_to_nearest(value):
    out = np.zeros(1, np.float32)
    store_bf16_scalar[(1,)](out, value)
    assert out[0] == bf16_round(np.array([value], np.float32))[0]


@naiad.jit
def split_pair(x_ptr, out_ptr):
    a, b = tl.split(tl.load(x_ptr + tl.arange(0, 2)))
    tl.store(out_ptr, a * 10 + b)


def test_split_of_two_elements_gives_scalars():
    out = np.zeros(1, np.float32)
    split_pair[(1,)](np.array([3.0, 4.0], np.float32), out)
    assert out[0] == 34.0


@naiad.jit
def cas_scalar_pointer(ptr, BLOCK: tl.constexpr):
    tl.atomic_cas(ptr, tl.zeros((BLOCK,), tl.int32), 1)


def test_atomic_cas_scalar_pointer_with_block_operands_is_a_clear_error():
    with pytest.raises(CompilationError, match="pointer is a scalar but cmp or val is a block"):
        cas_scalar_pointer[(1,)](np.zeros(4, np.int32), BLOCK=4)


@naiad.jit
def add_one(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)


def test_freeing_compiled_kernels_keeps_the_compiler_working():
    for block in (4, 8, 16):
        x = np.zeros(block, np.float32)
        add_one[(1,)](x, BLOCK=block)
        add_one.cache.clear()                 # drop the kernel and its execution engine
        gc.collect()
        assert (x == 1).all()
