"""Module-level kernels for tests/test_jit.py (globals must live in a real module)."""

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
