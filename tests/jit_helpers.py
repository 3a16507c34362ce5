"""Module-level kernels shared by tests (globals must live in a real module): test_jit,
test_compile, test_cache and the CPU launch tests."""

from __future__ import annotations

import naiad
import naiad.language as tl

SCALE = tl.constexpr(2)


@naiad.jit
def helper(x):
    return x + 1


@naiad.jit
def uses_helper(x_ptr, out_ptr):
    tl.store(out_ptr, helper(tl.load(x_ptr)) * SCALE)


@naiad.jit
def annotated(x_ptr, n: int, m: "tl.int64", flag: bool, block: "tl.constexpr"):
    tl.store(x_ptr + tl.arange(0, block), n + m)


@naiad.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@naiad.jit
def scaled_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    """out = x * alpha + y over n elements."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * alpha + y, mask=mask)


SCALE_SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
