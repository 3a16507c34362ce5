"""Triton kernels written by the user, called inside torch.compile'd functions (Inductor traces
them as user-defined kernels and launches them among its own): plain, through
``torch.library.wrap_triton`` / ``triton_op``, and autotuned."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton


@triton.jit
def scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * alpha + y, mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["n"])
@triton.jit
def tuned_square(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * x, mask=mask)


def test_a_plain_kernel_among_inductor_s_own():
    def f(x, y):
        out = torch.empty_like(x)
        n = x.numel()
        scale_add[(triton.cdiv(n, 128),)](x, torch.relu(y), out, n, 0.5, BLOCK=128)
        return out.sin() + 1

    x, y = torch.randn(1000), torch.randn(1000)
    torch.testing.assert_close(torch.compile(f)(x, y), (x * 0.5 + torch.relu(y)).sin() + 1)


@triton_op("naiad_tests::scale_add", mutates_args=())
def scale_add_op(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    wrap_triton(scale_add)[(triton.cdiv(n, 256),)](x, y, out, n, alpha, BLOCK=256)
    return out


def test_a_kernel_through_triton_op_and_wrap_triton():
    x, y = torch.randn(37, 11), torch.randn(37, 11)
    eager = scale_add_op(x, y, 2.0)
    compiled = torch.compile(lambda x, y: scale_add_op(x * 2, y, 2.0) - 1)(x, y)
    torch.testing.assert_close(eager, x * 2.0 + y)
    torch.testing.assert_close(compiled, (x * 2) * 2.0 + y - 1)


def test_an_autotuned_kernel():
    def f(x):
        out = torch.empty_like(x)
        n = x.numel()
        tuned_square[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
        return out + x

    x = torch.randn(777)
    torch.testing.assert_close(torch.compile(f)(x), x * x + x)
