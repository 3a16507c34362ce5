"""Dots on FMA (fp32 in "ieee" precision, fp64, int8) in loops: with ``num_stages`` 3 (the
default) their operands go through a ring of two shared-memory slots
(`naiad.codegen.gpu.operand_rings`), one ``bar.sync`` a trip instead of two.  On the CI
machine the PTX is checked; on the GPU the kernels run against torch with several warps, so
that a slot written again too early would show as a wrong product."""

from __future__ import annotations

import re

import pytest

import naiad
import naiad.language as tl

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def fma_matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), ACC)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0)
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0)
        acc = tl.dot(x, y, acc, input_precision="ieee")
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@naiad.jit
def every_other_trip(a, b, c, K, N: tl.constexpr, BK: tl.constexpr):
    """The dot on even trips only: under a branch, so it gets no ring."""
    rm, rn, rk = tl.arange(0, N), tl.arange(0, N), tl.arange(0, BK)
    acc = tl.zeros((N, N), tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        if (k // BK) % 2 == 0:
            acc = tl.dot(x, y, acc, input_precision="ieee")
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


def _loop(ptx: str) -> str:
    """The PTX of the kernel's outermost loop (from its label to the branch back to it)."""
    spans = []
    for branch in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx):
        label = ptx.find(branch.group(1) + ":")
        if 0 <= label < branch.start():
            spans.append((label, branch.end()))
    assert spans, "no loop in the PTX"
    first, last = max(spans, key=lambda span: span[1] - span[0])
    return ptx[first:last]


MATMUL_SIGNATURE = {"a": "*fp32", "b": "*fp32", "c": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
ALIGNED = {name: [["tt.divisibility", 16]] for name in ("a", "b", "c", "M", "N", "K")}


@pytest.mark.parametrize("stages, barriers", [(2, 2), (3, 1)])
def test_three_stages_wait_once_a_trip(stages, barriers):
    constexprs = {"BM": 32, "BN": 32, "BK": 16, "ACC": tl.float32}
    kernel = compile_cuda(fma_matmul, MATMUL_SIGNATURE, constexprs, ALIGNED, num_stages=stages)
    assert _loop(kernel.asm["ptx"]).count("bar.sync") == barriers
    assert kernel.metadata["shared"] >= (2 if stages == 3 else 1) * 2 * 32 * 16 * 4


def test_a_dot_that_may_skip_trips_gets_no_ring():
    signature = {"a": "*fp32", "b": "*fp32", "c": "*fp32", "K": "i32"}
    aligned = {name: ALIGNED[name] for name in signature}
    two, three = (compile_cuda(every_other_trip, signature, {"N": 32, "BK": 16}, aligned, num_stages=stages)
                  for stages in (2, 3))
    assert three.metadata["shared"] == two.metadata["shared"]


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
@pytest.mark.parametrize("shape, warps", [((64, 64, 64), 4), ((100, 70, 45), 4), ((130, 96, 300), 8)])
def test_fma_matmuls_against_torch(gpu, stages, dtype, shape, warps):
    torch = gpu
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(m + k)
    if dtype == "int8":
        a = torch.randint(-8, 8, (m, k), device="cuda", dtype=torch.int8, generator=gen)
        b = torch.randint(-8, 8, (k, n), device="cuda", dtype=torch.int8, generator=gen)
        c = torch.full((m, n), -1, device="cuda", dtype=torch.int32)
    else:
        a = torch.randn((m, k), device="cuda", generator=gen).to(getattr(torch, dtype))
        b = torch.randn((k, n), device="cuda", generator=gen).to(a.dtype)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=a.dtype)
    acc = {"float32": tl.float32, "float64": tl.float64, "int8": tl.int32}[dtype]
    fma_matmul[(naiad.cdiv(m, 32), naiad.cdiv(n, 32))](a, b, c, m, n, k, BM=32, BN=32, BK=16, ACC=acc,
                                                      num_warps=warps, num_stages=stages)
    want = a.double() @ b.double()
    if dtype == "int8":
        assert torch.equal(c.double(), want)
    else:
        torch.testing.assert_close(c.double(), want, atol=1e-3, rtol=1e-4)


@pytest.mark.usefixtures("gpu")
def test_a_dot_on_every_other_trip_against_torch(gpu):
    torch = gpu
    gen = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn((32, 160), device="cuda", generator=gen)
    b = torch.randn((160, 32), device="cuda", generator=gen)
    c = torch.full((32, 32), float("nan"), device="cuda")
    every_other_trip[(1,)](a, b, c, 160, N=32, BK=16, num_stages=3)
    want = sum(a[:, k:k + 16].double() @ b[k:k + 16].double() for k in range(0, 160, 32))
    torch.testing.assert_close(c.double(), want, atol=1e-3, rtol=1e-4)
