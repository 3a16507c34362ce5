"""The whole make_ttir pipeline on kernels written in Python: the result verifies, every call
is inlined, no private function is left, the module shrinks, and the ops that carry the
kernel's meaning (loads, stores, dots, reductions) are all still there.  Also the registry."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.passes import ModulePass

import naiad.language as tl
from naiad.compiler.frontend import ttir_for
from naiad.ir import parse_module, print_module
from naiad.passes import (
    TTIR_PIPELINE,
    PassError,
    get_pass,
    register_pass,
    registered_passes,
    run_passes,
    run_ttir_pipeline,
)
from naiad.runtime.jit import jit

from .ttir import count, op_count, ops


@jit
def vector_add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@jit
def softmax(x, out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + row * n + offs, mask=m, other=-float("inf"))
    v = v - tl.max(v, axis=0)
    e = tl.exp(v)
    tl.store(out + row * n + offs, e / tl.sum(e, axis=0), mask=m)


@jit
def matmul(a, b, c, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * BN + rn[None, :], acc)


@jit
def argmax(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out, tl.argmax(tl.load(x + offs), axis=0))


@jit
def scale(v, factor):
    return v * factor + 0.0


@jit
def branches_and_while(x, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    i = 0
    while i < n:
        acc += tl.load(x + i * BLOCK + offs)
        i += 1
    if n > 10:
        acc = scale(acc, 2.0)
    tl.store(out + offs, acc)


@jit
def unrolled(x, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.range(0, n, loop_unroll_factor=2):
        acc += tl.load(x + i * BLOCK + offs)
    tl.store(out + offs, acc)


F32 = np.zeros(4096, np.float32)
I32 = np.zeros(4, np.int32)

KERNELS = {
    "vector_add": lambda: ttir_for(vector_add, F32, F32, F32, 1000, BLOCK=128),
    "softmax": lambda: ttir_for(softmax, F32, F32, 1000, BLOCK=1024),
    "matmul": lambda: ttir_for(matmul, F32, F32, F32, 64, BM=32, BN=32, BK=16),
    "argmax": lambda: ttir_for(argmax, F32, I32, BLOCK=128),
    "branches_and_while": lambda: ttir_for(branches_and_while, F32, F32, 100, BLOCK=128),
    "unrolled": lambda: ttir_for(unrolled, F32, F32, 100, BLOCK=128),
}
MEANINGFUL = ("tt.load", "tt.store", "tt.dot", "tt.reduce")
SHRINK = {"vector_add": 1.0, "softmax": 0.7, "matmul": 0.8, "argmax": 0.6,
          "branches_and_while": 0.85}
"""At most this fraction of the ops may remain (vector add is already minimal; the unrolled
loop grows, as unrolling should)."""


@pytest.mark.parametrize("name", KERNELS)
def test_pipeline_optimizes_kernels_and_keeps_their_meaning(name) -> None:
    mod = KERNELS[name]()
    before = op_count(mod)
    meaning = {op: count(mod, op) for op in MEANINGFUL}
    run_ttir_pipeline(mod)  # verifies
    parse_module(print_module(mod))  # and prints as valid TTIR
    assert count(mod, "tt.call") == 0
    assert [f.sym_visibility.data for f in ops(mod, "tt.func")] == ["public"]
    after = op_count(mod)
    if name == "unrolled":  # two copies of the body in the unrolled loop, one in the rest
        meaning["tt.load"] = 3
    assert {op: count(mod, op) for op in MEANINGFUL} == meaning
    if name in SHRINK:
        assert after <= SHRINK[name] * before, (before, after)


def test_matmul_accumulates_in_the_dot_and_hoists_pointer_math() -> None:
    mod = run_ttir_pipeline(KERNELS["matmul"]())
    loop, = ops(mod, "scf.for")
    body = [op.name for op in loop.body.block.ops]
    assert "arith.addf" not in body and body.count("tt.dot") == 1
    assert "tt.make_range" not in body and body.count("tt.splat") == 1


def test_registry_lists_the_pipeline_and_runs_passes_by_name() -> None:
    assert set(TTIR_PIPELINE) <= set(registered_passes())
    mod = KERNELS["softmax"]()
    run_passes(mod, ["inline", "canonicalize"])
    assert count(mod, "tt.call") == 0


def test_plugins_register_functions_or_module_passes() -> None:
    seen = []

    class Marker(ModulePass):
        name = "test-marker"

        def apply(self, ctx, op) -> None:
            seen.append(("pass", op))

    register_pass("test-function", lambda module: seen.append(("fn", module)), replace=True)
    register_pass("test-marker", Marker(), replace=True)
    mod = KERNELS["vector_add"]()
    run_passes(mod, ["test-function", "test-marker"])
    assert seen == [("fn", mod), ("pass", mod)]
    with pytest.raises(PassError, match="already registered"):
        register_pass("test-function", lambda module: None)
    with pytest.raises(PassError, match="no pass named 'nope'"):
        get_pass("nope")
