"""join, split, cat, gather, histogram and batched (3-D) tl.dot on the GPU, against torch; every
kernel also compiles to PTX without a GPU (the first test), so CI checks the lowering."""

from __future__ import annotations

import pytest

import naiad
import naiad.language as tl
from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def join_split(x_ptr, y_ptr, joined_ptr, back_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x, y = tl.load(x_ptr + offs), tl.load(y_ptr + offs)
    j = tl.join(x, y)                                             # (N, 2)
    tl.store(joined_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :], j)
    a, b = tl.split(j)
    tl.store(back_ptr + offs, a * 10 + b)


@naiad.jit
def cat_rows(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + tl.arange(0, 2 * N), tl.cat(tl.load(x_ptr + offs), tl.load(y_ptr + offs),
                                                  can_reorder=True))


@naiad.jit
def gather_cols(src_ptr, idx_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr):
    r = tl.arange(0, M)[:, None]
    c = tl.arange(0, N)[None, :]
    src = tl.load(src_ptr + r * N + c)
    idx = tl.load(idx_ptr + r * N + c)
    tl.store(out_ptr + r * N + c, tl.gather(src, idx, AXIS))


@naiad.jit
def histogram(x_ptr, out_ptr, N: tl.constexpr, BINS: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, BINS), tl.histogram(tl.load(x_ptr + tl.arange(0, N)), BINS))


@naiad.jit
def batched_dot(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                K: tl.constexpr):
    bi = tl.arange(0, B)[:, None, None]
    mi = tl.arange(0, M)[None, :, None]
    ni = tl.arange(0, N)[None, None, :]
    ki = tl.arange(0, K)
    a = tl.load(a_ptr + bi * M * K + mi * K + ki[None, None, :])
    b = tl.load(b_ptr + bi * K * N + ki[None, :, None] * N + ni)
    tl.store(c_ptr + bi * M * N + mi * N + ni, tl.dot(a, b))


CASES = [
    ("join_split", join_split, {"x_ptr": "*fp32", "y_ptr": "*fp32", "joined_ptr": "*fp32",
                                "back_ptr": "*fp32"}, {"N": 64}),
    ("cat", cat_rows, {"x_ptr": "*i32", "y_ptr": "*i32", "out_ptr": "*i32"}, {"N": 128}),
    ("gather0", gather_cols, {"src_ptr": "*fp32", "idx_ptr": "*i32", "out_ptr": "*fp32"},
     {"M": 16, "N": 32, "AXIS": 0}),
    ("gather1", gather_cols, {"src_ptr": "*fp32", "idx_ptr": "*i64", "out_ptr": "*fp32"},
     {"M": 16, "N": 32, "AXIS": 1}),
    ("histogram", histogram, {"x_ptr": "*i32", "out_ptr": "*i32"}, {"N": 1024, "BINS": 32}),
    ("batched_dot", batched_dot, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"},
     {"B": 2, "M": 16, "N": 32, "K": 16}),
]


@pytest.mark.parametrize("name,fn,signature,constexprs", CASES, ids=[c[0] for c in CASES])
def test_compiles_to_ptx(name, fn, signature, constexprs):
    kernel = compile_cuda(fn, signature, constexprs)
    ptx = kernel.asm["ptx"]
    assert ".entry" in ptx and kernel.metadata["shared"] > 0      # each goes through shared memory
    if name == "histogram":
        assert "atom.shared.add" in ptx


def test_join_and_split(gpu):
    torch = gpu
    x, y = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
    joined, back = torch.empty(64, 2, device="cuda"), torch.empty(64, device="cuda")
    join_split[(1,)](x, y, joined, back, N=64)
    assert torch.equal(joined, torch.stack([x, y], dim=1))
    torch.testing.assert_close(back, x * 10 + y)


def test_cat(gpu):
    torch = gpu
    x = torch.arange(128, device="cuda", dtype=torch.int32)
    y = -torch.arange(128, device="cuda", dtype=torch.int32)
    out = torch.empty(256, device="cuda", dtype=torch.int32)
    cat_rows[(1,)](x, y, out, N=128)
    assert torch.equal(out, torch.cat([x, y]))


@pytest.mark.parametrize("axis,index_dtype", [(0, "int32"), (1, "int64")])
def test_gather(gpu, axis, index_dtype):
    torch = gpu
    src = torch.randn(16, 32, device="cuda")
    size = src.shape[axis]
    idx = torch.randint(0, size, (16, 32), device="cuda", dtype=getattr(torch, index_dtype))
    out = torch.empty_like(src)
    gather_cols[(1,)](src, idx, out, M=16, N=32, AXIS=axis)
    assert torch.equal(out, torch.gather(src, axis, idx.long()))


def test_histogram_counts_only_values_in_range(gpu):
    torch = gpu
    x = torch.randint(-8, 40, (1024,), device="cuda", dtype=torch.int32)
    out = torch.empty(32, device="cuda", dtype=torch.int32)
    histogram[(1,)](x, out, N=1024, BINS=32)
    inside = x[(x >= 0) & (x < 32)].long()
    assert torch.equal(out.long(), torch.bincount(inside, minlength=32))


def test_histogram_adds_the_constant_one_behind_a_branch():
    """The increment ptxas turns into a warp-aggregated ATOMS.POPC.INC (as Triton's does)."""
    import re

    ptx = compile_cuda(histogram, {"x_ptr": "*i32", "out_ptr": "*i32"}, {"N": 1024, "BINS": 64}).asm["ptx"]
    assert re.search(r"atom\.shared\.add\.u32\s+%r\d+, \[[^\]]+\], 1;", ptx)


def test_batched_dot(gpu):
    torch = gpu
    a = torch.randn(2, 16, 16, device="cuda", dtype=torch.float16)
    b = torch.randn(2, 16, 32, device="cuda", dtype=torch.float16)
    c = torch.empty(2, 16, 32, device="cuda")
    batched_dot[(1,)](a, b, c, B=2, M=16, N=32, K=16)
    torch.testing.assert_close(c, torch.bmm(a.float(), b.float()), rtol=1e-3, atol=1e-3)


@naiad.jit
def add_one(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)


def test_reinterpreted_tensors_are_launched_as_their_base(gpu):
    """``tl.reinterpret`` (Triton's TensorWrapper): an int32 tensor read as uint32."""
    torch = gpu
    from naiad.runtime.jit import reinterpret

    x = torch.tensor([-1, 0, 5, 2**31 - 1] * 16, device="cuda", dtype=torch.int32)
    out = torch.empty_like(x)
    add_one[(1,)](reinterpret(x, tl.uint32), reinterpret(out, tl.uint32), N=64)
    assert torch.equal(out, x + 1)          # the same bits: uint32 wraps as int32 does


# -- block pointers (rewritten into pointer tensors and masks: naiad/passes/block_pointers.py) -----
def _block_kernels():
    from naiad.testing.conformance import test_memory

    return test_memory


def test_block_pointer_kernels_compile_without_block_pointers():
    kernels = _block_kernels()
    for fn, signature, constexprs in [
            (kernels.block_copy_kernel, {"x": "*fp32", "out": "*fp32", "M": "i32", "N": "i32",
                                         "stride_m": "i32", "stride_n": "i32", "out_m": "i32",
                                         "out_n": "i32"}, {"BM": 16, "BN": 8, "PAD": "nan"}),
            (kernels.block_advance_kernel, {"x": "*fp32", "out": "*fp32", "M": "i32", "N": "i32"},
             {"BM": 16, "BN": 32})]:
        kernel = compile_cuda(fn, signature, constexprs)
        assert "make_tensor_ptr" not in kernel.asm["ttir"] and "tt.advance" not in kernel.asm["ttir"]
        assert ".entry" in kernel.asm["ptx"]


@pytest.mark.parametrize("pad", ["zero", "nan"])
def test_block_pointer_padded_load(gpu, pad):
    torch = gpu
    kernels = _block_kernels()
    m, n, bm, bn = 37, 21, 16, 8
    x = torch.randn(m, n, device="cuda")
    gm, gn = -(-m // bm), -(-n // bn)
    out = torch.full((gm * bm, gn * bn), 99.0, device="cuda")
    kernels.block_copy_kernel[(gm, gn)](x, out, m, n, n, 1, gm * bm, gn * bn, BM=bm, BN=bn, PAD=pad)
    expected = torch.full(out.shape, 0.0 if pad == "zero" else float("nan"), device="cuda")
    expected[:m, :n] = x
    torch.testing.assert_close(out, expected, equal_nan=True, rtol=0, atol=0)


def test_block_pointer_advance_in_a_loop(gpu):
    torch = gpu
    kernels = _block_kernels()
    m, n = 45, 70
    x = torch.randn(m, n, device="cuda")
    out = torch.full((m + 3,), 7.0, device="cuda")
    kernels.block_advance_kernel[(-(-m // 16),)](x, out, m, n, BM=16, BN=32)
    torch.testing.assert_close(out[:m], x.sum(dim=1), rtol=1e-5, atol=1e-4)
    assert (out[m:] == 7.0).all()


# -- tensor descriptors (block pointers underneath) ----------------------------------------------
def test_host_descriptor_kernel_compiles():
    from tests.cpu import test_tensor_descriptors as descriptors

    kernel = compile_cuda(descriptors.host_copy_kernel, {"src": "tensordesc<fp32[8, 16]>",
                                                         "dst": "tensordesc<fp32[8, 16]>"}, {})
    assert "make_tensor_ptr" not in kernel.asm["ttir"] and ".entry" in kernel.asm["ptx"]


def test_host_descriptors_are_arguments(gpu):
    torch = gpu
    from naiad.runtime.tensor_descriptor import TensorDescriptor
    from tests.cpu import test_tensor_descriptors as descriptors

    a = torch.arange(20 * 24, device="cuda", dtype=torch.float32).reshape(20, 24)
    wide = torch.zeros(20, 32, device="cuda")
    out = wide[:, :24]
    descriptors.host_copy_kernel[(3, 2)](TensorDescriptor.from_tensor(a, [8, 16]),
                                         TensorDescriptor(out, list(out.shape), list(out.stride()), [8, 16]))
    assert torch.equal(out, a + 1) and (wide[:, 24:] == 0).all()
