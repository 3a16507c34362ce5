"""How the CPU backend reads ``tl.dot``'s operands: a block whose elements run consecutively down
its columns (attention's K read as Kᵀ: ``k[d, n]`` at ``n * D + d``) is read a column at a time
with vector loads and turned over in registers, not gathered element by element.  Checked
against numpy in fp32 and bf16, at block shapes that are and are not square, and in the LLVM
IR (no gather left)."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.tools import gallery

from .matmuls import check_product, operands, result

pytestmark = pytest.mark.shipped_backends

torch = pytest.importorskip("torch")


@naiad.jit
def times_transposed(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """``c = a @ bᵀ`` with ``b`` stored ``[N, K]`` row-major and read as a ``[K, N]`` block."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    bt = tl.load(b_ptr + rn[None, :] * K + rk[:, None])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, bt))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("m, n, k", [(16, 16, 16), (32, 64, 16), (64, 32, 128), (16, 128, 64)])
def test_dot_with_an_operand_read_down_its_columns(dtype, m, n, k):
    rng = np.random.default_rng(m + 3 * n + 7 * k)
    a = torch.from_numpy(rng.standard_normal((m, k)).astype(np.float32)).to(getattr(torch, dtype))
    b = torch.from_numpy(rng.standard_normal((n, k)).astype(np.float32)).to(getattr(torch, dtype))
    c = torch.full((m, n), float("nan"))
    compiled = times_transposed[(1,)](a, b, c, M=m, N=n, K=k)
    want = a.double().numpy() @ b.double().numpy().T
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-4)
    assert "masked.gather" not in compiled.asm["llir"]


@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("bfloat16", 2e-2)])
@pytest.mark.parametrize("n_ctx, head_dim", [(64, 64), (192, 32)])
def test_gallery_attention_matches_torch(dtype, rtol, n_ctx, head_dim):
    """Tutorial 06's forward (K read as Kᵀ, P cast to V's dtype) against torch's SDPA in fp32."""
    gen = torch.Generator().manual_seed(n_ctx + head_dim)
    q, k, v = (torch.randn(2, 3, n_ctx, head_dim, generator=gen).to(getattr(torch, dtype)) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    gallery.attention(q, k, v, out)
    want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    error = ((out.float() - want).abs().max() / want.abs().max()).item()
    assert error <= rtol, error


def test_bounds_checks_see_an_operand_read_down_its_columns():
    """Under bounds checks the column-wise copy is not used: a Kᵀ block read past the end of its
    array is reported, naming the kernel, not read."""
    from naiad.backends.cpu.runtime import OutOfBoundsError

    a = torch.ones(16, 16)
    b = torch.ones(8, 16)             # 8 rows where the kernel reads 16
    c = torch.empty(16, 16)
    with pytest.raises(OutOfBoundsError, match="times_transposed"):
        times_transposed[(1,)](a, b, c, M=16, N=16, K=16, bounds_check=True)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("stored", ["b transposed", "a transposed", "both transposed"])
@pytest.mark.parametrize("m, n, k, block", [(128, 128, 128, 64), (100, 70, 90, 32), (33, 65, 130, 32),
                                            (48, 64, 193, 32)])
def test_the_gallery_matmul_of_operands_stored_transposed(dtype, stored, m, n, k, block):
    """``x @ wᵀ`` (a linear layer's weight stored ``[N, K]``) and its kin through the gallery
    kernel, B's or A's strides ``(1, rows)``: the blocks inside the matrices are copied a column
    at a time, the edge blocks (masked along M, N or K) as their pointers have them; an odd K
    puts bf16 columns two bytes off a 32-bit word."""
    rng = np.random.default_rng(m + n + k + len(stored))
    a = operands(dtype, (k, m), rng).t() if stored != "b transposed" else operands(dtype, (m, k), rng)
    b = operands(dtype, (n, k), rng).t() if stored != "a transposed" else operands(dtype, (k, n), rng)
    c = result(dtype, m, n)
    gallery.matmul_kernel[(naiad.cdiv(m, block), naiad.cdiv(n, block))](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), n, 1,
        BLOCK_M=block, BLOCK_N=block, BLOCK_K=64 if dtype == "int8" else 32)
    check_product(c, a, b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_masked_block_read_down_its_columns_is_tested_whole(dtype, tested_tiles):
    """The gallery kernel's B given as ``wᵀ`` (masked, its column stride given at run time) is
    tested at run time as columns one stride apart -- the copy a column at a time -- and A, rows
    of consecutive elements, is not tested down its columns."""
    x = torch.zeros(64, 64).to(getattr(torch, dtype))
    c = torch.zeros(64, 64)
    naiad.jit(gallery.matmul_kernel.fn).warmup(x, x.t(), c, 64, 64, 64, 64, 1, 1, 64, 64, 1, BLOCK_M=32, BLOCK_N=32,
                                               BLOCK_K=32, grid=(2, 2))
    assert True in tested_tiles and None not in tested_tiles
    assert tested_tiles.count(False) == (1 if dtype == "bfloat16" else 0)      # fp32 rows are not tested


@naiad.jit
def linear_whole(x_ptr, w_ptr, y_ptr, N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr):
    """``y = x @ wᵀ`` in whole blocks, no masks, ``w``'s block turned over by ``.T``."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(x_ptr + rm[:, None] * K + (k + rk)[None, :])
        w = tl.load(w_ptr + rn[:, None] * K + (k + rk)[None, :])
        acc = tl.dot(x, w.T, acc)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("m, n, k, block", [(128, 128, 256, 64), (100, 70, 90, 32), (33, 65, 130, 32),
                                            (64, 256, 64, 128)])
def test_a_block_turned_over_by_trans(dtype, m, n, k, block):
    """``tl.dot(x, tl.trans(w))`` (the gallery's linear kernel): the blocks inside the matrices
    read a row of ``w`` at a time and turned over in registers, the masked edges element by
    element."""
    rng = np.random.default_rng(m + 2 * n + 3 * k)
    x, w = operands(dtype, (m, k), rng), operands(dtype, (n, k), rng)
    y = result(dtype, m, n)
    gallery.linear_kernel[(naiad.cdiv(m, block), naiad.cdiv(n, block))](
        x, w, y, m, n, k, BLOCK_M=block, BLOCK_N=block, BLOCK_K=64 if dtype == "int8" else 32)
    check_product(y, x, w.t())


def test_the_gallery_linear_of_numpy_arrays():
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((70, 96), dtype=np.float32), rng.standard_normal((50, 96), dtype=np.float32)
    np.testing.assert_allclose(gallery.linear(x, w, 32, 32, 32), x.astype(np.float64) @ w.T.astype(np.float64),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("block", [(16, 16, 16), (32, 64, 32), (64, 32, 64)])
def test_a_whole_block_turned_over_by_dot_t(dtype, block):
    bm, bn, bk = block
    m, n, k = 2 * bm, 3 * bn, 4 * bk
    rng = np.random.default_rng(bm + bn + bk)
    x, w = operands(dtype, (m, k), rng), operands(dtype, (n, k), rng)
    y = result(dtype, m, n)
    compiled = linear_whole[(2, 3)](x, w, y, N=n, K=k, BM=bm, BN=bn, BK=bk)
    check_product(y, x, w.t())
    assert "masked.gather" not in compiled.asm["llir"]


def test_a_block_turned_over_is_tested_whole_and_kept(tested_tiles):
    """The gallery linear kernel's masked ``w`` under ``tl.trans`` is tested at run time as rows
    one stride apart (the copy a square at a time), and its copies are kept across programs (the
    launch allocates their memory)."""
    x, y = torch.zeros(64, 64), torch.zeros(64, 64)
    compiled = naiad.jit(gallery.linear_kernel.fn).warmup(x, x, y, 64, 64, 64, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32,
                                                          grid=(2, 2))
    assert tested_tiles == [False]          # w's rows (fp32 x's rows are not tested)
    assert "malloc" in compiled.asm["llir"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("m, n, k, block", [(128, 128, 128, 64), (100, 70, 90, 32)])
def test_the_tutorial_matmul_of_a_weight_stored_transposed(dtype, m, n, k, block, tested_tiles):
    """Triton's tutorial matmul over ``wᵀ``: its B pointers are held in a buffer before the K loop
    (their column term, ``% N``, too costly to compute again each trip) and advanced each trip;
    index arithmetic alone, so still taken apart and tested down their columns."""
    rng = np.random.default_rng(m + k)
    a, w = operands(dtype, (m, k), rng), operands(dtype, (n, k), rng)
    b = w.t()
    c = result(dtype, m, n)
    gallery.matmul_tutorial_kernel[(naiad.cdiv(m, block) * naiad.cdiv(n, block),)](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), n, 1, BLOCK_SIZE_M=block,
        BLOCK_SIZE_N=block, BLOCK_SIZE_K=32, GROUP_SIZE_M=4)
    check_product(c, a, b)
    assert True in tested_tiles
