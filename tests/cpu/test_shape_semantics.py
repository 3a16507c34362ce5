"""Triton's semantics of shape builtins and of tl.dot's operand shapes, on the CPU against numpy:
tl.cat in order along any dimension (``can_reorder`` is ignored, as in Triton), join and
interleave of scalars, histogram with a mask, tl.trans without dims on batched tensors, tl.dot
on small blocks and on several batch dimensions; and the errors Triton raises for bad axes and
tensor-descriptor block shapes."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.compiler.errors import CompilationError

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def cat_1d_kernel(x, y, z, N: tl.constexpr, CAN_REORDER: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(z + tl.arange(0, 2 * N), tl.cat(tl.load(x + offs), tl.load(y + offs), can_reorder=CAN_REORDER))


@pytest.mark.parametrize("can_reorder", [False, True])
def test_cat_keeps_the_order(can_reorder):
    x = np.arange(0, 64, dtype=np.int16)
    y = np.arange(-64, 0, dtype=np.int16)
    z = np.zeros(128, np.int16)
    cat_1d_kernel[(1,)](x, y, z, N=64, CAN_REORDER=can_reorder)
    np.testing.assert_array_equal(z, np.concatenate([x, y]))


@naiad.jit
def cat_3d_kernel(x, y, z, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, DIM: tl.constexpr):
    offs = (tl.arange(0, A)[:, None, None] * B + tl.arange(0, B)[None, :, None]) * C \
        + tl.arange(0, C)[None, None, :]
    joined = tl.cat(tl.load(x + offs), tl.load(y + offs), dim=DIM)
    tl.store(z + tl.arange(0, 2 * A * B * C), tl.reshape(joined, [2 * A * B * C]))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat_along_each_dimension(dim):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 4, 8)).astype(np.float32)
    y = rng.normal(size=(2, 4, 8)).astype(np.float32)
    z = np.zeros(2 * x.size, np.float32)
    cat_3d_kernel[(1,)](x, y, z, A=2, B=4, C=8, DIM=dim)
    np.testing.assert_array_equal(z, np.concatenate([x, y], axis=dim).reshape(-1))


@naiad.jit
def join_scalars_kernel(x, y, joined, interleaved, a, b):
    pair = tl.join(tl.load(x), tl.load(y))
    tl.static_assert(pair.shape == [2])
    tl.store(joined + tl.arange(0, 2), pair)
    tl.store(interleaved + tl.arange(0, 2), tl.interleave(a, b))


def test_join_and_interleave_of_scalars():
    joined, interleaved = np.zeros(2, np.int32), np.zeros(2, np.float32)
    join_scalars_kernel[(1,)](np.array([42], np.int32), np.array([100], np.int32), joined,
                              interleaved, 10, 20)
    np.testing.assert_array_equal(joined, [42, 100])
    np.testing.assert_array_equal(interleaved, [10, 20])


@naiad.jit
def histogram_mask_kernel(x, z, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, 2 * M)
    tl.store(z + tl.arange(0, N), tl.histogram(tl.load(x + offs), N, offs < M))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_histogram_counts_only_unmasked_values(dtype):
    rng = np.random.default_rng(4)
    counted = rng.integers(0, 16, 256).astype(dtype)
    masked_off = rng.integers(0, 16, 256).astype(dtype)
    z = np.zeros(16, np.int32)
    histogram_mask_kernel[(1,)](np.concatenate([counted, masked_off]), z, M=256, N=16)
    np.testing.assert_array_equal(z, np.bincount(counted, minlength=16))


@naiad.jit
def small_dot_kernel(x, y, z, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(x + rm[:, None] * K + rk[None, :])
    b = tl.load(y + rk[:, None] * N + rn[None, :])
    tl.store(z + rm[:, None] * N + rn[None, :], tl.dot(a, b))


@pytest.mark.parametrize("m,n,k", [(8, 8, 4), (16, 8, 4), (1, 2, 1)])
def test_dot_of_blocks_smaller_than_16(m, n, k):
    """The CPU backend's minimum dot size is 1 (GPUs need 16)."""
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(m, k)), rng.normal(size=(k, n))
    z = np.zeros((m, n))
    small_dot_kernel[(1,)](a, b, z, M=m, N=n, K=k)
    np.testing.assert_allclose(z, a @ b, rtol=1e-12)


@naiad.jit
def batched_dot_kernel(x, y, z, RANK: tl.constexpr, TRANS_A: tl.constexpr, TRANS_B: tl.constexpr):
    a = tl.load(x + tl.arange(0, 64 << RANK)).reshape([2] * (RANK - 2) + [16, 16])
    b = tl.load(y + tl.arange(0, 64 << RANK)).reshape([2] * (RANK - 2) + [16, 16])
    if TRANS_A:
        a = tl.trans(a)
    if TRANS_B:
        b = b.T
    tl.store(z + tl.arange(0, 64 << RANK), tl.dot(a, b).reshape([64 << RANK]))


@pytest.mark.parametrize("rank", [3, 4, 5])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True)])
def test_dot_over_batch_dimensions_with_batched_transposes(rank, trans_a, trans_b):
    shape = (2,) * (rank - 2) + (16, 16)
    rng = np.random.default_rng(6)
    a = rng.integers(-4, 5, shape).astype(np.float32)
    b = rng.integers(-4, 5, shape).astype(np.float32)
    z = np.zeros(shape, np.float32)
    batched_dot_kernel[(1,)](a, b, z, rank, trans_a, trans_b)
    a = np.swapaxes(a, -1, -2) if trans_a else a
    b = np.swapaxes(b, -1, -2) if trans_b else b
    np.testing.assert_array_equal(z, a @ b)


# -- errors Triton raises -------------------------------------------------------------------------

@naiad.jit
def expand_dims_below_range(x, N: tl.constexpr):
    tl.expand_dims(tl.arange(0, N), -3)


@naiad.jit
def expand_dims_above_range(x, N: tl.constexpr):
    tl.expand_dims(tl.arange(0, N), 2)


@naiad.jit
def expand_dims_scalar_axis(x, N: tl.constexpr):
    tl.expand_dims(tl.sum(tl.arange(0, N)), 1)


@naiad.jit
def expand_dims_duplicate_axes(x, N: tl.constexpr):
    tl.expand_dims(tl.arange(0, N), (0, -3))


@naiad.jit
def unsqueeze_below_range(x, N: tl.constexpr):
    tl.unsqueeze(tl.arange(0, N), -3)


@naiad.jit
def squeeze_below_range(x, N: tl.constexpr):
    tl.squeeze(tl.expand_dims(tl.arange(0, N), 1), -3)


@naiad.jit
def trans_of_a_vector(x, N: tl.constexpr):
    tl.trans(tl.arange(0, N))


@naiad.jit
def cat_of_different_shapes(x, N: tl.constexpr):
    tl.cat(tl.arange(0, N), tl.arange(0, 2 * N))


@naiad.jit
def cat_dim_out_of_range(x, N: tl.constexpr):
    tl.cat(tl.arange(0, N), tl.arange(0, N), dim=1)


@naiad.jit
def histogram_int_mask(x, N: tl.constexpr):
    tl.histogram(tl.arange(0, N), N, tl.arange(0, N))


@pytest.mark.parametrize("kernel,message", [
    (expand_dims_below_range, "invalid axis -3. Expected -2 <= axis < 2 -- fix: use an axis from -2 to 1"),
    (expand_dims_above_range, "invalid axis 2. Expected -2 <= axis < 2"),
    (expand_dims_scalar_axis, "invalid axis 1. Expected -1 <= axis < 1"),
    (expand_dims_duplicate_axes, "expand_dims received duplicate axes, normalized axes = [0, 0]"),
    (unsqueeze_below_range, "invalid axis -3"),
    (squeeze_below_range, "tl.squeeze(-3) needs a dimension of size 1"),
    (trans_of_a_vector, "tl.trans without dims swaps the last two dimensions, but the tensor has rank 1"),
    (cat_of_different_shapes, "tl.cat needs two blocks of one shape, got [8] and [16]"),
    (cat_dim_out_of_range, "invalid axis 1. Expected -1 <= axis < 1"),
    (histogram_int_mask, "tl.histogram's mask must be a boolean (int1) tensor, got int32"),
])
def test_shape_errors(kernel, message):
    with pytest.raises(CompilationError) as error:
        kernel[(1,)](np.zeros(1, np.float32), 8)
    assert message in str(error.value)
    assert message in str(error.value.__cause__)      # Triton's tests read the cause


@naiad.jit
def descriptor_kernel(ptr, B0: tl.constexpr, B1: tl.constexpr):
    desc = tl.make_tensor_descriptor(ptr, [128, 128], [128, 1], [B0, B1])
    desc.load([0, 0])


@pytest.mark.parametrize("dtype,block,message", [
    (np.int32, (1, 2), "Descriptor block shape must have at least 16 bytes in the last dimension, "
                       "but got 2 * 4 = 8 bytes -- fix: make the last dimension of block_shape at "
                       "least 4 elements"),
    (np.int16, (8, 4), "but got 4 * 2 = 8 bytes"),
])
def test_tensor_descriptor_block_shape_is_checked_first(dtype, block, message):
    with pytest.raises(CompilationError) as error:
        descriptor_kernel[(1,)](np.zeros((128, 128), dtype), *block)
    assert message in str(error.value.__cause__)


def test_dot_minimum_size_comes_from_the_backend():
    """A backend states its smallest M, N, K (``min_dot_size``); without one it is 16 each."""
    from naiad.compiler.frontend import make_ttir

    signature, sizes = {"x": "*fp64", "y": "*fp64", "z": "*fp64"}, {"M": 8, "N": 8, "K": 4}
    with pytest.raises(CompilationError, match=r"tl.dot: K must be >= 32, but K = 4 .* at least 32"):
        make_ttir(small_dot_kernel, signature, sizes, codegen_fns={"min_dot_size": lambda a, b: (1, 1, 32)})
    with pytest.raises(CompilationError, match="tl.dot: every dimension must be >= 16, but M = 8"):
        make_ttir(small_dot_kernel, signature, sizes)
