"""Tensor descriptors against numpy: ``tl.make_tensor_descriptor`` in the kernel and host
``TensorDescriptor`` arguments; loads of partial edge blocks (zero and NaN padding), stores
that leave the outside alone, 1 to 5 dimensions, descriptors through loops, ``if``, calls and
returns, atomics, gather/scatter, and the errors for bad descriptors."""

from __future__ import annotations

import re

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.runtime.tensor_descriptor import TensorDescriptor
from naiad.compiler.errors import CompilationError
from naiad.compiler.frontend import specialize
from naiad.runtime.jit import LaunchError

pytestmark = pytest.mark.shipped_backends


def strides_of(a: np.ndarray) -> list[int]:
    return [s // a.itemsize for s in a.strides]


# -- in-kernel descriptors ---------------------------------------------------------------------
@naiad.jit
def copy_kernel(out, a, M, N, LD_OUT, MB: tl.constexpr, NB: tl.constexpr):
    src = tl.make_tensor_descriptor(a, shape=[M, N], strides=[N, 1], block_shape=[MB, NB])
    dst = tl.make_tensor_descriptor(out, shape=[M, N], strides=[LD_OUT, 1], block_shape=[MB, NB])
    m, n = tl.program_id(0) * MB, tl.program_id(1) * NB
    dst.store([m, n], src.load([m, n]) * 2)


@pytest.mark.parametrize("dtype, shape, block", [
    (np.float32, (30, 50), (8, 16)), (np.int8, (7, 33), (4, 16)), (np.float16, (17, 40), (16, 32)),
    (np.int32, (5, 4), (8, 4)),
])
def test_partial_edge_blocks_are_read_and_written_inside_only(dtype, shape, block):
    """Edge blocks stick out of the tensor: what is outside is neither read nor written (the
    output lives in a wider buffer whose extra columns must keep their -1)."""
    m, n = shape
    a = np.random.default_rng(m * n).integers(-50, 50, shape).astype(dtype)
    out = np.full((m, n + 16), -1, dtype)
    copy_kernel[(naiad.cdiv(m, block[0]), naiad.cdiv(n, block[1]))](out, a, m, n, n + 16, *block)
    np.testing.assert_array_equal(out[:, :n], a * 2)
    assert (out[:, n:] == -1).all()


@naiad.jit
def padded_load_kernel(out, a, M, N, OUT_N, MB: tl.constexpr, NB: tl.constexpr,
                       PADDING: tl.constexpr):
    desc = tl.make_tensor_descriptor(a, [M, N], [N, 1], [MB, NB], padding_option=PADDING)
    m, n = tl.program_id(0) * MB, tl.program_id(1) * NB
    rows, cols = m + tl.arange(0, MB), n + tl.arange(0, NB)
    tl.store(out + rows[:, None] * OUT_N + cols[None, :], desc.load([m, n]))


@pytest.mark.parametrize("padding, fill", [("zero", 0.0), ("nan", np.nan)])
def test_padding_fills_what_lies_outside(padding, fill):
    a = np.arange(12 * 20, dtype=np.float32).reshape(12, 20)
    out = np.full((16, 32), 5.0, np.float32)
    padded_load_kernel[(2, 2)](out, a, 12, 20, 32, 8, 16, padding)
    expected = np.full((16, 32), fill, np.float32)
    expected[:12, :20] = a
    np.testing.assert_array_equal(out, expected)


@naiad.jit
def nd_kernel(out, a, shape, strides, BLOCK: tl.constexpr, OFFSETS: tl.constexpr):
    """Load the block at OFFSETS of an N-d tensor and store it densely into ``out``."""
    desc = tl.make_tensor_descriptor(a, shape=shape, strides=strides, block_shape=BLOCK)
    ndim: tl.constexpr = len(BLOCK)
    idx = tl.full(BLOCK, 0, tl.int32)
    step = 1
    for k in tl.static_range(ndim - 1, -1, -1):
        r = tl.arange(0, BLOCK[k])
        for _ in tl.static_range(k):
            r = tl.expand_dims(r, 0)
        for _ in tl.static_range(k + 1, ndim):
            r = tl.expand_dims(r, -1)
        idx += r * step
        step *= BLOCK[k]
    tl.store(out + idx, desc.load(OFFSETS))


@pytest.mark.parametrize("ndim", [1, 2, 3, 4, 5])
def test_one_to_five_dimensions(ndim):
    shape = (3, 2, 5, 7, 13)[-ndim:]
    block = (4, 2, 4, 8, 16)[-ndim:]
    offsets = (1, 0, 2, 4, 8)[-ndim:]
    a = np.random.default_rng(ndim).standard_normal(shape).astype(np.float32)
    out = np.full(block, 9.0, np.float32)
    nd_kernel[(1,)](out, a, shape, tuple(strides_of(a)), tuple(tl.constexpr(b) for b in block),
                    tuple(tl.constexpr(o) for o in offsets))
    expected = np.zeros(block, np.float32)
    window = a[tuple(slice(o, o + b) for o, b in zip(offsets, block))]
    expected[tuple(slice(0, s) for s in window.shape)] = window
    np.testing.assert_array_equal(out, expected)


@naiad.jit
def properties_kernel(out, a, M, N, MB: tl.constexpr, NB: tl.constexpr):
    desc = tl.make_tensor_descriptor(a, [M, N], [N, 1], [MB, NB])
    tl.static_assert(desc.block_shape == [MB, NB])
    tl.static_assert(desc.dtype == tl.float16)
    tl.store(out + 0, desc.shape[0])
    tl.store(out + 1, desc.shape[1])
    tl.store(out + 2, desc.strides[0].to(tl.int32))
    tl.store(out + 3, desc.strides[1].to(tl.int32))


def test_shape_strides_block_shape_and_dtype():
    out = np.zeros(4, np.int32)
    properties_kernel[(1,)](out, np.zeros((6, 48), np.float16), 6, 48, 4, 16)
    np.testing.assert_array_equal(out, [6, 48, 48, 1])


@naiad.jit
def downcast_kernel(out, M, N, MB: tl.constexpr, NB: tl.constexpr):
    desc = tl.make_tensor_descriptor(out, [M, N], [N, 1], [MB, NB])
    rows, cols = tl.arange(0, MB)[:, None], tl.arange(0, NB)[None, :]
    tl.store_tensor_descriptor(desc, [0, 0], (rows * N + cols).to(tl.float32) + 0.25)


def test_store_casts_to_the_element_type():
    out = np.zeros((8, 16), np.float16)
    downcast_kernel[(1,)](out, 8, 16, 8, 16)
    np.testing.assert_array_equal(out, (np.arange(128, dtype=np.float32) + 0.25).reshape(8, 16)
                                  .astype(np.float16))


# -- control flow, calls and returns ----------------------------------------------------------
@naiad.jit
def loop_kernel(a, M, N, MB: tl.constexpr, NB: tl.constexpr):
    m = tl.program_id(0) * MB
    desc = tl.make_tensor_descriptor(a, [M, N], [N, 1], [MB, NB])
    for i in range(0, N, NB):
        if i % (2 * NB) == 0:       # a descriptor made in a branch and carried by the loop
            desc = tl.make_tensor_descriptor(a, [M, N], [N, 1], [MB, NB])
        desc.store([m, i], desc.load([m, i]) + 10)
    n = 0
    while n < N:
        desc = tl.make_tensor_descriptor(a, [M, N], [N, 1], [MB, NB])
        desc.store([m, n], desc.load([m, n]) + 5)
        n += NB


def test_descriptors_through_loops_and_branches():
    a = np.ones((16, 100), np.float32)
    loop_kernel[(2,)](a, 16, 100, 8, 32)
    assert (a == 16).all()


@naiad.jit
def choose_kernel(out, a, b, N, USE_A):
    src = tl.make_tensor_descriptor(a, [N], [1], [16]) if USE_A > 0 else \
        tl.make_tensor_descriptor(b, [N], [1], [16])
    tl.make_tensor_descriptor(out, [N], [1], [16]).store([0], src.load([0]))


def test_descriptor_from_a_conditional_expression():
    a, b, out = np.arange(10, dtype=np.float32), -np.arange(10, dtype=np.float32), np.zeros(16, np.float32)
    choose_kernel[(1,)](out, a, b, 10, 3)
    np.testing.assert_array_equal(out[:10], a)
    choose_kernel[(1,)](out, a, b, 10, -3)
    np.testing.assert_array_equal(out, np.concatenate([b, np.zeros(6, np.float32)]))


@naiad.jit(noinline=True)
def make_helper(ptr, M, N, MB: tl.constexpr, NB: tl.constexpr):
    return tl.make_tensor_descriptor(ptr, [M, N], [N, 1], [MB, NB])


@naiad.jit(noinline=True)
def negate_helper(src, dst, MB: tl.constexpr, NB: tl.constexpr):
    m, n = tl.program_id(0) * MB, tl.program_id(1) * NB
    dst.store([m, n], -src.load([m, n]))


@naiad.jit
def call_kernel(out, a, M, N, MB: tl.constexpr, NB: tl.constexpr):
    negate_helper(make_helper(a, M, N, MB, NB), make_helper(out, M, N, MB, NB), MB, NB)


def test_descriptors_as_arguments_and_results_of_functions():
    a = np.random.default_rng(3).standard_normal((20, 40)).astype(np.float32)
    out = np.zeros_like(a)
    call_kernel[(3, 3)](out, a, 20, 40, 8, 16)
    np.testing.assert_array_equal(out, -a)


# -- host descriptors -------------------------------------------------------------------------
@naiad.jit
def host_copy_kernel(src, dst):
    MB: tl.constexpr = src.block_shape[0]
    NB: tl.constexpr = src.block_shape[1]
    m, n = tl.program_id(0) * MB, tl.program_id(1) * NB
    dst.store([m, n], src.load([m, n]) + 1)


@naiad.jit
def host_tuple_kernel(out, pair, M: tl.constexpr, N: tl.constexpr):
    first, second = pair
    tl.store(out + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :],
             first.load([0, 0]) + second.load([0, 0]))


def test_host_descriptors_are_arguments():
    a = np.arange(20 * 24, dtype=np.float32).reshape(20, 24)
    out = np.zeros((20, 32), np.float32)[:, :24]           # a strided view of a wider buffer
    host_copy_kernel[(3, 2)](TensorDescriptor.from_tensor(a, [8, 16]),
                             TensorDescriptor(out, out.shape, strides_of(out), [8, 16]))
    np.testing.assert_array_equal(out, a + 1)
    assert (out.base[:, 24:] == 0).all()

    b = np.ones((4, 8), np.float32)                           # its rows 4.. read as NaN
    pair = (TensorDescriptor.from_tensor(b, [8, 8], padding="nan"), TensorDescriptor.from_tensor(a, [8, 8]))
    result = np.zeros((8, 8), np.float32)
    host_tuple_kernel[(1,)](result, pair, 8, 8)
    np.testing.assert_array_equal(result[:4], a[:4, :8] + 1)
    assert np.isnan(result[4:]).all()


def test_host_descriptor_signature_and_parameters():
    a = np.zeros((8, 32), np.float32)
    signature, _, _, _ = specialize(host_copy_kernel, TensorDescriptor.from_tensor(a, [4, 16]),
                                    TensorDescriptor.from_tensor(a, [4, 16], padding="nan"))
    assert signature == {"src": "tensordesc<fp32[4, 16]>", "dst": "tensordesc<fp32[4, 16],nan>"}
    kernel = host_copy_kernel.warmup(TensorDescriptor.from_tensor(a, [4, 16]),
                                     TensorDescriptor.from_tensor(a, [4, 16]), grid=(1,))
    ttir = kernel.asm["ttir"]
    header = ttir[ttir.index("tt.func"):ttir.index("{\n", ttir.index("tt.func"))]
    params = re.findall(r"%arg\d+: (!tt\.ptr<f32>|i32|i64)( \{tt\.divisibility = 16 : i32\})?", header)
    # Each descriptor arrives as its base pointer, two int32 sizes and two int64 strides ...
    assert [t for t, _ in params] == ["!tt.ptr<f32>", "i32", "i32", "i64", "i64"] * 2
    # ... specialized as arrays and ints are: the aligned base, the size 32 and the stride 32
    # are divisible by 16; the size 8 and the unit stride are not
    aligned = a.ctypes.data % 16 == 0
    assert [bool(d) for _, d in params] == [aligned, False, True, True, False] * 2
    # and a load is a block-pointer load checked on both dimensions.
    assert "tt.make_tensor_ptr" in ttir and "boundaryCheck = array<i32: 0, 1>" in ttir


# -- atomics, gather and scatter --------------------------------------------------------------
@naiad.jit
def atomic_kernel(out, a, M, N, LD, MB: tl.constexpr, NB: tl.constexpr, KIND: tl.constexpr):
    m, n = tl.program_id(0) * MB, tl.program_id(1) * NB
    val = tl.load(a + (m + tl.arange(0, MB))[:, None] * NB * 2 + (n + tl.arange(0, NB))[None, :])
    desc = tl.make_tensor_descriptor(out, [M, N], [LD, 1], [MB, NB])
    if KIND == "add":
        desc.atomic_add([m, n], val)
    elif KIND == "max":
        desc.atomic_max([m, n], val)
    else:
        desc.atomic_xor([m, n], val)


@pytest.mark.parametrize("kind, reference", [("add", np.add), ("max", np.maximum),
                                             ("xor", np.bitwise_xor)])
def test_atomics_update_inside_only(kind, reference):
    rng = np.random.default_rng(7)
    a = rng.integers(-100, 100, (8, 32)).astype(np.int32)           # 2 x 2 blocks of 4 x 16
    out = rng.integers(-100, 100, (6, 40)).astype(np.int32)[:, :24]  # blocks stick out
    expected = out.base.copy()
    expected[:, :24] = reference(out, a[:6, :24])
    atomic_kernel[(2, 2)](out, a, 6, 24, 40, 4, 16, kind)
    np.testing.assert_array_equal(out.base, expected)


@naiad.jit
def gather_kernel(out, a, idx, y, X, Y, BX: tl.constexpr, BY: tl.constexpr):
    desc = tl.make_tensor_descriptor(a, [X, Y], [Y, 1], [1, BY])
    rows = tl.load(idx + tl.arange(0, BX))
    tl.store(out + tl.arange(0, BX)[:, None] * BY + tl.arange(0, BY)[None, :], desc.gather(rows, y))


@naiad.jit
def scatter_kernel(out, a, idx, y, X, Y, BX: tl.constexpr, BY: tl.constexpr):
    desc = tl.make_tensor_descriptor(out, [X, Y], [Y, 1], [1, BY])
    rows = tl.load(idx + tl.arange(0, BX))
    desc.scatter(tl.load(a + tl.arange(0, BX)[:, None] * BY + tl.arange(0, BY)[None, :]), rows, y)


def test_gather_and_scatter_rows():
    a = np.arange(10 * 40, dtype=np.float32).reshape(10, 40)
    idx = np.array([3, 0, 9, 12, -1, 5, 5, 1], np.int32)               # 12 and -1 are outside
    out = np.full((8, 16), 7.0, np.float32)
    gather_kernel[(1,)](out, a, idx, 30, 10, 40, 8, 16)
    expected = np.zeros((8, 16), np.float32)
    for i, r in enumerate(idx):
        if 0 <= r < 10:
            expected[i, :10] = a[r, 30:40]
    np.testing.assert_array_equal(out, expected)

    target = np.zeros((10, 40), np.float32)
    rows = np.array([3, 0, 9, 12, -1, 5, 6, 1], np.int32)
    scatter_kernel[(1,)](target, out, rows, 30, 10, 40, 8, 16)
    reference = np.zeros((10, 40), np.float32)
    for i, r in enumerate(rows):
        if 0 <= r < 10:
            reference[r, 30:40] = out[i, :10]
    np.testing.assert_array_equal(target, reference)


# -- errors -----------------------------------------------------------------------------------
@naiad.jit
def bad_descriptor_kernel(a, M, WHAT: tl.constexpr):
    if WHAT == "rank":
        tl.make_tensor_descriptor(a, [M] * 6, [1] * 6, [16] * 6)
    elif WHAT == "lengths":
        tl.make_tensor_descriptor(a, [M, M], [M], [16, 16])
    elif WHAT == "last_stride":
        tl.make_tensor_descriptor(a, [M, M], [1, 2], [16, 16])
    elif WHAT == "nan_int":
        tl.make_tensor_descriptor(a.to(tl.pointer_type(tl.int32), bitcast=True), [M], [1], [16],
                                  padding_option="nan")
    elif WHAT == "padding":
        tl.make_tensor_descriptor(a, [M], [1], [16], padding_option="inf")
    elif WHAT == "offsets":
        tl.make_tensor_descriptor(a, [M, M], [M, 1], [16, 16]).load([0])
    elif WHAT == "store_shape":
        tl.make_tensor_descriptor(a, [M, M], [M, 1], [16, 16]).store([0, 0], tl.zeros([16], tl.float32))
    elif WHAT == "atomic_type":
        tl.make_tensor_descriptor(a, [M, M], [M, 1], [16, 16]).atomic_max([0, 0], tl.zeros([16, 16], tl.float32))
    elif WHAT == "not_a_descriptor":
        tl.load_tensor_descriptor(a, [0])
    else:
        d = tl.make_tensor_descriptor(a, [M, M], [M, 1], [16, 16])
        if M > 4:
            d = tl.make_tensor_descriptor(a, [M, M], [M, 1], [16, 32])
        d.load([0, 0])


@pytest.mark.parametrize("what, message", [
    ("rank", "tl.make_tensor_descriptor takes 1 to 5 dimensions, got 6"),
    ("lengths", "shape, strides and block_shape must have the same length, got 2, 1 and 2"),
    ("last_stride", "Tensor descriptor last dim must be 1 but got 2"),
    ("nan_int", "Padding option `nan` is not supported for integer blocks"),
    ("padding", "padding_option must be 'zero' or 'nan', not 'inf'"),
    ("offsets", "desc.load needs 2 offsets (one per dimension of tensor_descriptor<fp32[16, 16]>), got 1"),
    ("store_shape", "desc.store: expected a value of shape [16, 16] (the descriptor's block shape), got [16]"),
    ("atomic_type", "desc.atomic_max does not support fp32 elements"),
    ("not_a_descriptor", "tl.load_tensor_descriptor needs a tensor descriptor"),
    ("branches", "'d' has type tensor_descriptor<fp32[16, 32]> in the 'if' branch but "
                 "tensor_descriptor<fp32[16, 16]> in the 'else' branch"),
])
def test_errors_name_the_problem(what, message):
    with pytest.raises(CompilationError) as error:
        bad_descriptor_kernel[(1,)](np.zeros(64, np.float32), 8, what)
    assert message in str(error.value)


def test_host_descriptor_errors():
    ints = np.zeros((8, 16), np.int32)
    with pytest.raises(LaunchError, match="padding='nan' needs floating-point elements, not i32"):
        host_copy_kernel[(1,)](TensorDescriptor.from_tensor(ints, [8, 16], padding="nan"),
                               TensorDescriptor.from_tensor(ints, [8, 16]))
    with pytest.raises(LaunchError, match="a TensorDescriptor's base must be an array, not a list"):
        host_copy_kernel[(1,)](TensorDescriptor([[0] * 16] * 8, [8, 16], [16, 1], [8, 16]),
                               TensorDescriptor.from_tensor(ints, [8, 16]))
