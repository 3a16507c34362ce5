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

from .conftest import compile_cuda

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


def _compile(fn, pointers, scalars, constexprs, stages, dtype="*fp16"):
    signature = {**{p: dtype for p in pointers}, **{s: "i32" for s in scalars},
                 **{c: "constexpr" for c in constexprs}}
    attrs = {p: [["tt.divisibility", 16]] for p in pointers}
    return compile_cuda(fn, signature, constexprs, attrs, num_stages=stages)


ONE_TILE = (("T", "B1", "B2", "Out1", "Out2"), ("steps1", "steps2"))


def test_a_tile_read_by_two_loops_keeps_its_shared_memory_through_both():
    kernel = _compile(one_tile_two_loops, *ONE_TILE, dict(BM=128, K=64, BN1=16, BN2=64), stages=3)
    ttgir = kernel.asm["ttgir"]
    assert ttgir.count("ttg.async_load") == 1 and "stages = 1" in ttgir     # T, copied once
    # T's 16 KB, then the second loop's B tile (64 x 64 fp16, 8 KB) after it, not over it
    assert kernel.metadata["shared"] >= 128 * 64 * 2 + 64 * 64 * 2


@pytest.mark.parametrize("dtype, hoisted", [("*fp16", True), ("*fp32", False)])
def test_a_tile_read_as_a_and_as_b_is_hoisted_only_when_wgmma_reads_it_both_ways(dtype, hoisted):
    """wgmma reads a 16-bit tile K-major or MN-major: one copy serves both dots; a tf32 tile
    must be K-major for each, so it stays in registers and each dot stores it its own way."""
    kernel = _compile(tile_as_a_then_b, ("T", "B", "C", "Out1", "Out2"), ("steps",), dict(S=64), stages=3,
                      dtype=dtype)
    assert ("ttg.async_load" in kernel.asm["ttgir"]) == hoisted


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
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_tile_as_a_then_b_against_torch(gpu, stages, dtype):
    torch = gpu
    gen = torch.Generator(device="cuda").manual_seed(stages)
    t = torch.randn((64, 64), device="cuda", generator=gen).to(getattr(torch, dtype))
    b, c = (torch.randn((3, 64, 64), device="cuda", generator=gen).to(t.dtype) for _ in range(2))
    out1, out2 = (torch.full((64, 64), float("nan"), device="cuda") for _ in range(2))
    tile_as_a_then_b[(1,)](t, b, c, out1, out2, 3, S=64, num_stages=stages)
    tol = dict(atol=0.05, rtol=1e-3) if dtype == "float16" else dict(atol=0.5, rtol=1e-2)     # tf32
    torch.testing.assert_close(out1.double(), t.double() @ (2 * b.double().sum(0)), **tol)
    torch.testing.assert_close(out2.double(), (2 * c.double().sum(0)) @ t.double(), **tol)


@naiad.jit
def _dkdv_steps(dk, dv, Q, DO, M, D, k, v, stride, start_n, start_m, steps, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, HEAD: tl.constexpr, CAUSAL_MASK: tl.constexpr):
    """``steps`` blocks of BLOCK_M query rows from ``start_m`` on, added into dK and dV of the
    BLOCK_N key rows from ``start_n``: each Q and dO tile is read by two dots, once transposed."""
    rows_n = start_n + tl.arange(0, BLOCK_N)
    heads = tl.arange(0, HEAD)
    for step in range(steps):
        rows_m = start_m + step * BLOCK_M + tl.arange(0, BLOCK_M)
        q_t = tl.load(Q + rows_m[None, :] * stride + heads[:, None])          # HEAD x BLOCK_M
        p_t = tl.math.exp2(tl.dot(k, q_t) - tl.load(M + rows_m)[None, :])
        if CAUSAL_MASK:
            p_t = tl.where(rows_m[None, :] >= rows_n[:, None], p_t, 0.0)
        do = tl.load(DO + rows_m[:, None] * stride + heads[None, :])           # BLOCK_M x HEAD
        dv = tl.dot(p_t.to(do.dtype), do, dv)
        dp_t = tl.dot(v, tl.trans(do))
        ds_t = p_t * (dp_t - tl.load(D + rows_m)[None, :])
        dk = tl.dot(ds_t.to(q_t.dtype), tl.trans(q_t), dk)
    return dk, dv


@naiad.jit
def attention_dkdv(Q, K, V, DO, DK, DV, M, D, stride, n_ctx, BLOCK_N: tl.constexpr, HEAD: tl.constexpr,
                   MASKED_M: tl.constexpr, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr):
    """Attention's backward for dK and dV (the shape of Triton's tutorial 06): K and V tiles
    loaded once, read by the dots of the masked diagonal loop and of the loop after it."""
    start_n = tl.program_id(0) * BLOCK_N
    rows_n = start_n + tl.arange(0, BLOCK_N)
    heads = tl.arange(0, HEAD)
    k = tl.load(K + rows_n[:, None] * stride + heads[None, :])
    v = tl.load(V + rows_n[:, None] * stride + heads[None, :])
    dk = tl.zeros((BLOCK_N, HEAD), dtype=tl.float32)
    dv = tl.zeros((BLOCK_N, HEAD), dtype=tl.float32)
    start_m = 0
    if CAUSAL:
        dk, dv = _dkdv_steps(dk, dv, Q, DO, M, D, k, v, stride, start_n, start_n, BLOCK_N // MASKED_M,
                             MASKED_M, BLOCK_N, HEAD, True)
        start_m = start_n + BLOCK_N
    dk, dv = _dkdv_steps(dk, dv, Q, DO, M, D, k, v, stride, start_n, start_m, (n_ctx - start_m) // BLOCK_M,
                         BLOCK_M, BLOCK_N, HEAD, False)
    tl.store(DK + rows_n[:, None] * stride + heads[None, :], dk)
    tl.store(DV + rows_n[:, None] * stride + heads[None, :], dv)


def test_the_rings_of_loops_one_after_another_share_shared_memory():
    """K and V (32 KB each at HEAD 128) live through both loops; the masked loop's five-stage
    rings of Q and dO tiles (8 KB a stage) and the second loop's (16 KB a stage) are never live
    together, so they share memory: the kernel fits an H200's 227 KB."""
    ptrs = ("Q", "K", "V", "DO", "DK", "DV", "M", "D")
    signature = {**{p: "*fp16" for p in ptrs[:4]}, **{p: "*fp32" for p in ptrs[4:]}, "stride": "i32",
                 "n_ctx": "i32", **{c: "constexpr" for c in ("BLOCK_N", "HEAD", "MASKED_M", "BLOCK_M", "CAUSAL")}}
    attrs = {p: [["tt.divisibility", 16]] for p in (*ptrs, "stride", "n_ctx")}
    kernel = compile_cuda(attention_dkdv, signature, dict(BLOCK_N=128, HEAD=128, MASKED_M=16, BLOCK_M=32, CAUSAL=True),
                          attrs, num_stages=5)
    assert kernel.asm["ttgir"].count("ttg.async_load") == 2 + 2 * 5 * 2      # K, V; Q and dO of each loop
    kv, first, second = 2 * 32768, 5 * 8192, 5 * 16384
    assert kv + second <= kernel.metadata["shared"] < kv + first + second


def _dkdv_reference(torch, q, k, v, do, m, d, causal):
    p_t = torch.exp2(k.double() @ q.double().T - m.double()[None, :])
    if causal:
        n = q.shape[0]
        p_t = torch.where(torch.arange(n, device="cuda")[None, :] >= torch.arange(n, device="cuda")[:, None], p_t, 0.0)
    dv = p_t.to(q.dtype).double() @ do.double()
    ds_t = p_t * (v.double() @ do.double().T - d.double()[None, :])
    return ds_t.to(q.dtype).double() @ q.double(), dv


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("stages", [1, 3])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n_ctx, head, warps", [(256, 64, 4), (512, 64, 8), (384, 128, 4), (128, 64, 4)])
def test_attention_dkdv_against_torch(gpu, stages, causal, n_ctx, head, warps):
    torch = gpu
    gen = torch.Generator(device="cuda").manual_seed(n_ctx + head + causal)
    q, k, v, do = (0.5 * torch.randn((n_ctx, head), device="cuda", generator=gen).half() for _ in range(4))
    m = 2.0 + 0.1 * torch.randn(n_ctx, device="cuda", generator=gen)
    d = 0.1 * torch.randn(n_ctx, device="cuda", generator=gen)
    dk, dv = (torch.full((n_ctx, head), float("nan"), device="cuda") for _ in range(2))
    attention_dkdv[(n_ctx // 128,)](q, k, v, do, dk, dv, m, d, head, n_ctx, BLOCK_N=128, HEAD=head, MASKED_M=16,
                                    BLOCK_M=32, CAUSAL=causal, num_warps=warps, num_stages=stages)
    want_dk, want_dv = _dkdv_reference(torch, q, k, v, do, m, d, causal)
    for got, want in ((dk, want_dk), (dv, want_dv)):
        assert not torch.isnan(got).any()
        assert (got.double() - want).abs().max().item() <= 2e-3 * want.abs().max().item() + 0.05
