"""A tile loaded before its loops and read by the tensor-core dots of several of them (the K and
V tiles of attention's backward, read by its masked and its unmasked loop).

The pipeliner copies such a tile into shared memory once (a one-slot ring) when every dot reads
it as the same operand; the ring must stay reserved through the last loop that reads it, or the
scratch tiles of a later loop overwrite it (tutorial 06's causal backward gave wrong dK and dV
that way).  A tile that one dot reads as A and another as B needs two layouts: it is not hoisted.
On the CI machine the kernels compile for sm_90 and their shared memory is checked; on the GPU
they run against torch.
"""

from __future__ import annotations

import pytest

import naiad
import naiad.language as tl
from naiad.backends.compiler import GPUTarget
from naiad.compiler.compiler import ASTSource

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def one_tile_two_loops(T, B1, B2, Out1, Out2, steps1, steps2, BM: tl.constexpr, K: tl.constexpr,
                       BN1: tl.constexpr, BN2: tl.constexpr):
    """Out1 = T @ sum of the steps1 tiles of B1 (K x BN1 each, doubled in registers), Out2 the
    same for B2 with its own width: both loops' dots read T as A."""
    rows, ks = tl.arange(0, BM), tl.arange(0, K)
    t = tl.load(T + rows[:, None] * K + ks[None, :])
    cols1, cols2 = tl.arange(0, BN1), tl.arange(0, BN2)
    acc1 = tl.zeros((BM, BN1), dtype=tl.float32)
    for i in range(steps1):
        b = tl.load(B1 + i * K * BN1 + ks[:, None] * BN1 + cols1[None, :])
        acc1 = tl.dot(t, b * 2, acc1)
    acc2 = tl.zeros((BM, BN2), dtype=tl.float32)
    for j in range(steps2):
        b = tl.load(B2 + j * K * BN2 + ks[:, None] * BN2 + cols2[None, :])
        acc2 = tl.dot(t, b * 2, acc2)
    tl.store(Out1 + rows[:, None] * BN1 + cols1[None, :], acc1)
    tl.store(Out2 + rows[:, None] * BN2 + cols2[None, :], acc2)


@naiad.jit
def tile_as_a_then_b(T, B, C, Out1, Out2, steps, S: tl.constexpr):
    """Out1 = T @ sum of the B tiles, Out2 = (sum of the C tiles) @ T: the first loop's dots
    read the S x S tile T as A, the second's as B."""
    rows, cols = tl.arange(0, S), tl.arange(0, S)
    square = rows[:, None] * S + cols[None, :]
    t = tl.load(T + square)
    acc1 = tl.zeros((S, S), dtype=tl.float32)
    for i in range(steps):
        acc1 = tl.dot(t, tl.load(B + i * S * S + square) * 2, acc1)
    acc2 = tl.zeros((S, S), dtype=tl.float32)
    for i in range(steps):
        acc2 = tl.dot(tl.load(C + i * S * S + square) * 2, t, acc2)
    tl.store(Out1 + square, acc1)
    tl.store(Out2 + square, acc2)


def _compile(fn, pointers, scalars, constexprs, stages):
    signature = {**{p: "*fp16" for p in pointers}, **{s: "i32" for s in scalars},
                 **{c: "constexpr" for c in constexprs}}
    attrs = {p: [["tt.divisibility", 16]] for p in pointers}
    source = ASTSource(fn, signature, constexprs, attrs)
    return naiad.compile(source, target=GPUTarget("cuda", 90, 32),
                         options={"num_warps": 4, "num_stages": stages})


ONE_TILE = (("T", "B1", "B2", "Out1", "Out2"), ("steps1", "steps2"))


def test_a_tile_read_by_two_loops_keeps_its_shared_memory_through_both():
    kernel = _compile(one_tile_two_loops, *ONE_TILE, dict(BM=128, K=64, BN1=16, BN2=64), stages=3)
    ttgir = kernel.asm["ttgir"]
    assert ttgir.count("ttg.async_load") == 1 and "stages = 1" in ttgir     # T, copied once
    # T's 16 KB, then the second loop's B tile (64 x 64 fp16, 8 KB) after it, not over it
    assert kernel.metadata["shared"] >= 128 * 64 * 2 + 64 * 64 * 2


def test_a_tile_read_as_a_and_as_b_is_not_hoisted():
    kernel = _compile(tile_as_a_then_b, ("T", "B", "C", "Out1", "Out2"), ("steps",), dict(S=64), stages=3)
    assert "ttg.async_load" not in kernel.asm["ttgir"]


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("stages", [1, 3])
@pytest.mark.parametrize("bm, k, bn1, bn2, steps1, steps2", [
    (128, 64, 16, 32, 8, 4), (128, 64, 16, 32, 8, 0), (64, 64, 64, 16, 3, 5), (128, 128, 32, 64, 2, 3),
    (64, 32, 128, 64, 1, 1)])
def test_one_tile_two_loops_against_torch(gpu, stages, bm, k, bn1, bn2, steps1, steps2):
    torch = gpu
    gen = torch.Generator(device="cuda").manual_seed(bm + k + bn1 + steps2)
    t = torch.randn((bm, k), device="cuda", dtype=torch.float16, generator=gen)
    b1 = torch.randn((max(steps1, 1), k, bn1), device="cuda", dtype=torch.float16, generator=gen)
    b2 = torch.randn((max(steps2, 1), k, bn2), device="cuda", dtype=torch.float16, generator=gen)
    out1 = torch.full((bm, bn1), float("nan"), device="cuda")
    out2 = torch.full((bm, bn2), float("nan"), device="cuda")
    one_tile_two_loops[(1,)](t, b1, b2, out1, out2, steps1, steps2, BM=bm, K=k, BN1=bn1, BN2=bn2,
                             num_stages=stages)
    want1 = t.double() @ (2 * b1[:steps1].double().sum(0))
    want2 = t.double() @ (2 * b2[:steps2].double().sum(0))
    torch.testing.assert_close(out1.double(), want1, atol=0.05, rtol=1e-3)
    torch.testing.assert_close(out2.double(), want2, atol=0.05, rtol=1e-3)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("stages", [1, 3])
def test_tile_as_a_then_b_against_torch(gpu, stages):
    torch = gpu
    gen = torch.Generator(device="cuda").manual_seed(stages)
    t = torch.randn((64, 64), device="cuda", dtype=torch.float16, generator=gen)
    b, c = (torch.randn((3, 64, 64), device="cuda", dtype=torch.float16, generator=gen) for _ in range(2))
    out1, out2 = (torch.full((64, 64), float("nan"), device="cuda") for _ in range(2))
    tile_as_a_then_b[(1,)](t, b, c, out1, out2, 3, S=64, num_stages=stages)
    torch.testing.assert_close(out1.double(), t.double() @ (2 * b.double().sum(0)), atol=0.05, rtol=1e-3)
    torch.testing.assert_close(out2.double(), (2 * c.double().sum(0)) @ t.double(), atol=0.05, rtol=1e-3)
