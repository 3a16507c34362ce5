"""Tensor-core dots that read a tile through ``tl.trans`` (attention's ``q @ k.T``; its backward
reads each Q and dO tile twice, once transposed).

A transpose that only dots read moves nothing: a tile the pipeliner copied into shared memory is
read with its dimensions swapped (wgmma reads 16-bit tiles either way), and registers are
relabelled and stored into the dot's tile as they are.  On the CI machine the kernels compile
for sm_90 and the TTGIR shows which loads are pipelined; on the GPU every mode runs against
torch over dtypes, shapes and stage counts.
"""

from __future__ import annotations

import re

import pytest

import naiad
import naiad.language as tl

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def transposed_dots(X, Y, Out, steps, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                    MODE: tl.constexpr):
    """Out = the sum over ``steps`` tiles of one product, by MODE:
    "a_bt": X_i (M x K) @ trans(Y_i), Y_i N x K (K contiguous: attention's q @ k.T);
    "at_b": trans(X_i) @ Y_i, X_i K x M (M contiguous), Y_i K x N;
    "both": X_i (M x K) @ Y_i (K x N), plus the same Y_i read again as trans(Y_i) by a second
            dot, X_i @ trans(trans(Y_i)) -- one staged tile, two readers (backward's dO);
    "regs": X_i @ trans(Y_i * 2): a transpose of registers."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for i in range(steps):
        if MODE == "a_bt":
            x = tl.load(X + i * M * K + rm[:, None] * K + rk[None, :])
            y = tl.load(Y + i * N * K + rn[:, None] * K + rk[None, :])
            acc = tl.dot(x, tl.trans(y), acc)
        elif MODE == "at_b":
            x = tl.load(X + i * M * K + rk[:, None] * M + rm[None, :])
            y = tl.load(Y + i * K * N + rk[:, None] * N + rn[None, :])
            acc = tl.dot(tl.trans(x), y, acc)
        elif MODE == "both":
            x = tl.load(X + i * M * K + rm[:, None] * K + rk[None, :])
            y = tl.load(Y + i * K * N + rk[:, None] * N + rn[None, :])
            acc = tl.dot(x, y, acc)
            yt = tl.trans(y)
            acc = tl.dot(x, tl.trans(yt), acc)
        else:
            x = tl.load(X + i * M * K + rm[:, None] * K + rk[None, :])
            y = tl.load(Y + i * N * K + rn[:, None] * K + rk[None, :])
            acc = tl.dot(x, tl.trans(y * 2), acc)
    tl.store(Out + rm[:, None] * N + rn[None, :], acc)


def _compile(mode, m, n, k, stages, dtype="*fp16"):
    signature = {"X": dtype, "Y": dtype, "Out": "*fp32", "steps": "i32", "M": "constexpr", "N": "constexpr",
                 "K": "constexpr", "MODE": "constexpr"}
    attrs = {p: [["tt.divisibility", 16]] for p in ("X", "Y", "Out")}
    return compile_cuda(transposed_dots, signature, dict(M=m, N=n, K=k, MODE=mode), attrs, num_stages=stages)


@pytest.mark.parametrize("mode, dtype, pipelined", [
    ("a_bt", "*fp16", 2), ("a_bt", "*fp32", 2),        # K-major through the transpose: any type
    ("at_b", "*fp16", 2),                               # MN-major tiles: 16-bit ones
    ("at_b", "*fp32", 2),                               # 4-byte ones copied into K-major tiles
    ("at_b", "*fp8e4nv", 0),                            # 1-byte ones cannot be
    ("both", "*fp16", 2), ("regs", "*fp16", 1)])
def test_loads_read_through_a_transpose_are_pipelined(mode, dtype, pipelined):
    stages = 3
    ttgir = _compile(mode, 128, 64, 64, stages, dtype).asm["ttgir"]
    # each pipelined load: its prologue's copies (stages - 1) and the loop's own
    assert ttgir.count("ttg.async_load") == pipelined * stages


def _inputs(torch, mode, m, n, k, steps, dtype):
    gen = torch.Generator(device="cuda").manual_seed(m + n + k + steps)
    shapes = {"a_bt": ((m, k), (n, k)), "at_b": ((k, m), (k, n)), "both": ((m, k), (k, n)),
              "regs": ((m, k), (n, k))}[mode]
    x, y = (torch.randn((steps, *shape), device="cuda", generator=gen).to(dtype) for shape in shapes)
    xd, yd = x.double(), y.double()
    want = {"a_bt": lambda: (xd @ yd.transpose(1, 2)).sum(0), "at_b": lambda: (xd.transpose(1, 2) @ yd).sum(0),
            "both": lambda: 2 * (xd @ yd).sum(0), "regs": lambda: (xd @ (2 * yd).transpose(1, 2)).sum(0)}[mode]()
    return x, y, want


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("stages", [1, 3])
@pytest.mark.parametrize("mode", ["a_bt", "at_b", "both", "regs"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("m, n, k, steps", [(128, 64, 64, 5), (64, 128, 32, 3), (128, 16, 64, 4), (64, 64, 128, 1)])
def test_transposed_dots_against_torch(gpu, stages, mode, dtype, m, n, k, steps):
    torch = gpu
    x, y, want = _inputs(torch, mode, m, n, k, steps, getattr(torch, dtype))
    out = torch.full((m, n), float("nan"), device="cuda")
    transposed_dots[(1,)](x, y, out, steps, M=m, N=n, K=k, MODE=mode, num_stages=stages)
    scale = want.abs().max().item()
    tol = 2e-3 if dtype == "float16" else 1e-2          # bf16 and tf32 round their inputs
    assert (out.double() - want).abs().max().item() <= tol * max(scale, 1.0) * 4


def _wgmma_flags(ptx):
    """The operand flags (scales and transpositions) of each distinct wgmma instruction."""
    return sorted(set(re.findall(r"(wgmma\.mma_async\.\S+) .*p((?:, \d+)+);", ptx)))


@pytest.mark.parametrize("mode", ["a_bt", "at_b", "both", "regs"])
def test_staged_tiles_are_read_as_the_registers_stored_ones(mode):
    """With and without pipelining, each dot reads its operands with the same transpositions:
    a staged tile read through a transpose, or by a dot that takes it as A, is read K-major or
    MN-major exactly as the tile stored from registers would be."""
    unstaged, staged = (_compile(mode, 128, 64, 64, stages).asm for stages in (1, 3))
    assert "ttg.async_load" in staged["ttgir"] and "ttg.async_load" not in unstaged["ttgir"]
    assert _wgmma_flags(staged["ptx"]) == _wgmma_flags(unstaged["ptx"]) != []
