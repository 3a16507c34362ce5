"""Elements a thread for rows whose accesses cannot be vectorized (compile-only: the TTGIR
layouts and the PTX).  A row of 3,000 bf16 elements (masks and row starts not multiples of 8)
gets one element a thread, so that a warp's load reads consecutive elements, as Triton's
coalescing gives it -- but only where the block fills every thread either way: a 64-element
block on 4 warps stays in one warp (spread over two, an in-place shift would race).  A 16-bit
row reduced to a scalar reads 8 elements a thread, without a conversion through shared memory."""

from __future__ import annotations

import pytest

import naiad
import naiad.language as tl

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends

_DIV = [["tt.divisibility", 16]]


@naiad.jit
def softmax(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + cols, numerator / tl.sum(numerator, axis=0), mask=mask)


@naiad.jit
def shift(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs + 1, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


@naiad.jit
def layernorm(X, Y, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + tl.program_id(0) * N + cols, mask=cols < N, other=0.0).to(tl.float32)
    centered = tl.where(cols < N, x - tl.sum(x, axis=0) / N, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(centered * centered, axis=0) / N + 1e-5)
    tl.store(Y + tl.program_id(0) * N + cols, centered * rstd, mask=cols < N)


def _per_thread(kernel) -> set[str]:
    ttgir = str(kernel.asm["ttgir"])
    return set(part.split("]")[0] for part in ttgir.split("sizePerThread = [")[1:])


def test_an_unaligned_wide_row_is_read_one_coalesced_element_a_thread():
    sig = {"out_ptr": "*bf16", "in_ptr": "*bf16", "stride": "i32", "n_cols": "i32", "BLOCK": "constexpr"}
    kernel = compile_cuda(softmax, sig, {"BLOCK": 4096}, {(0,): _DIV, (1,): _DIV}, num_warps=16)
    assert _per_thread(kernel) == {"1"}
    assert "ld.global.b16" in kernel.asm["ptx"]
    aligned = compile_cuda(softmax, sig, {"BLOCK": 4096}, {(i,): _DIV for i in range(4)}, num_warps=16)
    assert _per_thread(aligned) == {"8"} and "ld.global.v4.b32" in aligned.asm["ptx"]


def test_a_block_smaller_than_the_threads_keeps_its_vector_layout():
    kernel = compile_cuda(shift, {"x": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 64},
                          {(0,): _DIV}, num_warps=4)
    assert _per_thread(kernel) == {"4"}


def test_a_16_bit_row_reduced_to_a_scalar_needs_no_shared_memory_conversion():
    sig = {"X": "*bf16", "Y": "*bf16", "N": "i32", "BLOCK": "constexpr"}
    kernel = compile_cuda(layernorm, sig, {"BLOCK": 16384}, {(i,): _DIV for i in range(3)}, num_warps=16)
    assert "ttg.convert" not in str(kernel.asm["ttgir"])
    assert kernel.metadata["shared"] <= 64          # the reductions' 16 partial sums, not the row
