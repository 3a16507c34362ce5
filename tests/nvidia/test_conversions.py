"""Layout conversions of the cuda backend: the remove-redundant-conversions pass
(`naiad.codegen.gpu.conversions`) and the padded shared-memory tiles of a conversion
(`naiad.codegen.gpu.kernel.SharedPadding`).

The compile tests run in CI (PTX, TTGIR and metadata of kernels compiled for sm_90 without a
GPU); the differential tests against torch need a GPU (``gpu`` fixture) and cover the
conversions that go through padded shared memory: transposes, reductions along either
dimension, ``expand_dims``/broadcast mixes, over dtypes, shapes and masks.
"""

import re

import pytest

import naiad
import naiad.language as tl
from naiad.codegen.gpu.kernel import SharedPadding

from .conftest import compile_cuda

try:
    import torch
except ImportError:          # the compile tests need no torch
    torch = None

pytestmark = pytest.mark.shipped_backends


# -- kernels ---------------------------------------------------------------------------------------
@naiad.jit
def range_in_two_layouts(x, y, z, N: tl.constexpr, M: tl.constexpr):
    """``offs`` is wanted 1-D (the loads and stores of ``x``/``y``) and as the rows of a 2-D
    tile: a make_range, computed again in the second layout instead of converted."""
    offs = tl.arange(0, N)
    cols = tl.arange(0, M)
    tl.store(z + offs[:, None] * M + cols[None, :], offs[:, None] * 1000 + cols[None, :])
    tl.store(y + offs, tl.load(x + offs) * 2)


@naiad.jit
def loaded_value_in_two_layouts(x, y, z, N: tl.constexpr, M: tl.constexpr):
    """``v`` (a load: not cheap) is wanted as the rows of a 2-D tile by two ops: one conversion,
    the second op reuses it; its last use (the 1-D store) gives it its own layout."""
    offs = tl.arange(0, N)
    cols = tl.arange(0, M)
    v = tl.load(x + offs)
    a = v + 1.0
    b = v * 3.0
    tl.store(z + offs[:, None] * M + cols[None, :], a[:, None] + b[:, None] * cols[None, :])
    tl.store(y + offs, v)


@naiad.jit
def transpose(x, out, M: tl.constexpr, N: tl.constexpr, m, n):
    """``out[j, i] = x[i, j]`` for the ``m x n`` part of an ``M x N`` tile (masked)."""
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    t = tl.load(x + rows * n + cols, mask=(rows < m) & (cols < n), other=0)
    t = tl.trans(t)
    rows_t = tl.arange(0, N)[:, None]
    cols_t = tl.arange(0, M)[None, :]
    tl.store(out + rows_t * m + cols_t, t, mask=(rows_t < n) & (cols_t < m))


@naiad.jit
def sums_along_both(x, out0, out1, M: tl.constexpr, N: tl.constexpr, m, n):
    """Column sums and row sums of the ``m x n`` part of an ``M x N`` tile (masked)."""
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    t = tl.load(x + rows * n + cols, mask=(rows < m) & (cols < n), other=0)
    tl.store(out0 + tl.arange(0, N), tl.sum(t, axis=0), mask=tl.arange(0, N) < n)
    tl.store(out1 + tl.arange(0, M), tl.sum(t, axis=1), mask=tl.arange(0, M) < m)


@naiad.jit
def outer_mix(x, y, out, M: tl.constexpr, N: tl.constexpr, m, n):
    """``out = x[:, None] * 2 + y[None, :] + max(x)``, with ``x``/``y`` loaded 1-D and also stored
    back 1-D (so each is wanted in two layouts), masked to ``m x n``."""
    i = tl.arange(0, M)
    j = tl.arange(0, N)
    a = tl.load(x + i, mask=i < m, other=0)
    b = tl.load(y + j, mask=j < n, other=0)
    tile = a[:, None] * 2 + b[None, :] + tl.max(a, axis=0)
    tl.store(out + i[:, None] * n + j[None, :], tile, mask=(i[:, None] < m) & (j[None, :] < n))
    tl.store(x + i, a + 1, mask=i < m)
    tl.store(y + j, b + 1, mask=j < n)


# -- compile tests (CI) ----------------------------------------------------------------------------
@naiad.jit
def strided_copy(X, stride_xm, stride_xn, Z, stride_zm, stride_zn, m, n,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Triton's test_permute kernel, masked: which dimension is contiguous comes from the
    strides (a stride of 1 is specialized as a constant)."""
    off_m = tl.arange(0, BLOCK_M)
    off_n = tl.arange(0, BLOCK_N)
    mask = (off_m[:, None] < m) & (off_n[None, :] < n)
    xs = X + off_m[:, None] * stride_xm + off_n[None, :] * stride_xn
    zs = Z + off_m[:, None] * stride_zm + off_n[None, :] * stride_zn
    tl.store(zs, tl.load(xs, mask=mask), mask=mask)


@naiad.jit
def transposed_loads_in_a_loop(X, Z, stride_xn, K, BM: tl.constexpr, BN: tl.constexpr):
    """A load contiguous along dim 0 (its own coalesced layout) carried through a loop whose
    accumulator the store wants along dim 1."""
    om = tl.arange(0, BM)
    on = tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(K):
        acc = acc * 0.5 + tl.load(X + k * BM * BN + om[:, None] + on[None, :] * stride_xn)
    tl.store(Z + om[:, None] * BN + on[None, :], acc)


@naiad.jit
def transposed_load_in_a_branch(X, Z, stride_xn, flag, BM: tl.constexpr, BN: tl.constexpr):
    om = tl.arange(0, BM)
    on = tl.arange(0, BN)
    if flag > 0:
        v = tl.load(X + om[:, None] + on[None, :] * stride_xn)
    else:
        v = tl.zeros((BM, BN), tl.float32)
    tl.store(Z + om[:, None] * BN + on[None, :], tl.sum(v, axis=1)[:, None] + v)


def _count(ptx: str, pattern: str) -> int:
    return len(re.findall(pattern, ptx))


def _compile(fn, signature, constexprs, num_warps=4):
    return compile_cuda(fn, signature, constexprs, num_warps=num_warps)


RANGE_SIG = {"x": "*fp32", "y": "*fp32", "z": "*i32", "N": "constexpr", "M": "constexpr"}


def _without_rematerialization(monkeypatch):
    """Compile as before the pass: no cheap value is computed again (a fresh compile)."""
    from naiad.codegen.gpu import conversions

    monkeypatch.setenv("NAIAD_ALWAYS_COMPILE", "1")
    monkeypatch.setattr(conversions, "_first_cheap_conflict", lambda requests, layouts: None)


def test_a_range_wanted_in_two_layouts_is_computed_again_not_converted(monkeypatch):
    kernel = _compile(range_in_two_layouts, RANGE_SIG, {"N": 64, "M": 32})
    ptx = kernel.asm["ptx"]
    assert _count(ptx, r"bar\.sync") == 0 and _count(ptx, r"st\.shared") == 0, ptx
    assert kernel.metadata["shared"] == 0
    ttgir = str(kernel.asm["ttgir"])
    assert ttgir.count("tt.make_range") == 3 and "ttg.convert" not in ttgir, ttgir
    _without_rematerialization(monkeypatch)
    before = _compile(range_in_two_layouts, RANGE_SIG, {"N": 64, "M": 32})
    assert _count(before.asm["ptx"], r"bar\.sync") >= 2
    assert _count(before.asm["ptx"], r"st\.shared") >= 1
    assert "ttg.convert" in str(before.asm["ttgir"])


def test_a_value_converted_for_two_ops_is_converted_once():
    kernel = _compile(loaded_value_in_two_layouts, RANGE_SIG | {"z": "*fp32"}, {"N": 64, "M": 32})
    ttgir = str(kernel.asm["ttgir"])
    converts = re.findall(r'ttg\.convert = "([^"]*)"', ttgir)
    assert len(converts) == 2 and sum("(reused)" in c for c in converts) == 1, ttgir
    assert _count(kernel.asm["ptx"], r"bar\.sync") == 2, kernel.asm["ptx"]


def test_layouts_that_place_every_element_alike_need_no_conversion():
    """The row slices of two wgmma accumulators that differ only in the instruction's N hold
    each row in the same registers of the same threads: `equivalent`, so converting between
    them moves nothing; other warps along M, or a blocked layout, are not."""
    from naiad.backends.cuda.mma_layouts import NvidiaMma
    from naiad.codegen.gpu import layouts as L

    def rows(n, warps=(8, 1)):
        return L.Slice(1, NvidiaMma(3, warps, (16, n, 16)))

    assert rows(64) != rows(128) and L.equivalent(rows(64), rows(128), (128,))
    assert not L.equivalent(rows(64), rows(64, (4, 2)), (128,))
    assert not L.equivalent(rows(64), L.Slice(1, L.default_blocked((128, 64), 8)), (128,))


def test_attention_scales_its_accumulator_by_the_other_dots_row_maximum_in_registers():
    """Attention's ``alpha`` comes from the first dot's rows (N = 64) and scales the second
    dot's accumulator (N = 128): the same rows in the same registers, so no ``ttg.convert``
    in the loop and no shared memory round trip (before: two barriers an iteration)."""
    from .test_tensor_cores import attention

    sig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "Out": "*fp16", "sm_scale": "fp32", "N_CTX": "i32"}
    kernel = compile_cuda(attention, sig, {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": False},
                          num_warps=8)
    ttgir = str(kernel.asm["ttgir"])
    loop = ttgir[ttgir.index("scf.for"):ttgir.index("scf.yield")]
    assert "instrShape = [16, 64, 16]" in loop and "instrShape = [16, 128, 16]" in loop
    assert "ttg.convert" not in loop, loop


TRANSPOSE_SIG = {"x": "*fp32", "out": "*fp32", "M": "constexpr", "N": "constexpr", "m": "i32",
                 "n": "i32"}


def test_a_transpose_pads_its_shared_tile():
    """As launched with sizes that are multiples of 16 (which a launch specializes on): rows
    are read and written 128 bits a thread, and the tile between them is padded."""
    aligned = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 4, 5)}     # x, out, m, n
    kernel = compile_cuda(transpose, TRANSPOSE_SIG, {"M": 32, "N": 64}, aligned)
    unpadded = 32 * 64 * 4
    padding = SharedPadding.of((32, 64), 4, 4)
    assert kernel.metadata["shared"] == padding.size_bytes(32 * 64) > unpadded
    # a 16-byte pad between rows (31), one more after every 8 rows (3 inside the tile)
    assert kernel.metadata["shared"] == unpadded + (31 + 3) * 16
    ptx = kernel.asm["ptx"]
    assert _count(ptx, r"bar\.sync") == 2
    assert "st.shared.v4.b32" in ptx          # the padding keeps the 128-bit stores


def test_a_one_row_tile_is_not_padded():
    padding = SharedPadding.of((1, 64), 4, 4)
    assert padding.pad == 0 and padding.size_bytes(64) == 256
    assert SharedPadding.of((64,), 2, 8).size_bytes(64) == 128


@pytest.mark.parametrize("element_bytes,vector", [(4, 1), (4, 4), (2, 8), (1, 16), (1, 1), (8, 2)])
@pytest.mark.parametrize("row_stride", [1, 2, 4])
def test_padding_spreads_a_column_over_the_banks(element_bytes, vector, row_stride):
    """32 threads reading one column of a 64x128 tile (thread t: row ``t * row_stride``) hit
    as many banks as the padding's chunk allows: all 32 for 4-byte chunks, one per 16-byte
    chunk (8) for 16-byte vectors -- without padding they all hit one bank."""
    shape = (64 * row_stride, 128)
    padding = SharedPadding.of(shape, element_bytes, vector)
    chunk = padding.pad * element_bytes
    for column in (0, 5):
        words = {(padding.offset((t * row_stride) * shape[1] + column) * element_bytes) // 4 % 32
                 for t in range(32)}
        assert len(words) == min(32, 128 // chunk), (chunk, sorted(words))
    # vectors of the writing side never straddle a pad and stay aligned
    for i in range(0, shape[0] * shape[1], vector):
        start = padding.offset(i)
        assert start * element_bytes % min(16, vector * element_bytes) == 0
        assert padding.offset(i + vector - 1) == start + vector - 1


@pytest.mark.parametrize("fn,signature", [
    (transpose, TRANSPOSE_SIG),
    (sums_along_both, {"x": "*fp16", "out0": "*fp16", "out1": "*fp16", "M": "constexpr",
                       "N": "constexpr", "m": "i32", "n": "i32"}),
    (outer_mix, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "M": "constexpr", "N": "constexpr",
                 "m": "i32", "n": "i32"}),
])
@pytest.mark.parametrize("shape", [(16, 16), (1, 64), (64, 1), (64, 128)])
def test_conversion_kernels_compile(fn, signature, shape):
    kernel = _compile(fn, signature, {"M": shape[0], "N": shape[1]})
    assert kernel.metadata["shared"] % 16 == 0
    assert ".entry" in kernel.asm["ptx"]


_DIV = [["tt.divisibility", 16]]


@pytest.mark.parametrize("dtype", ["*fp32", "*fp16"])
@pytest.mark.parametrize("shape", [(16, 16), (32, 64), (128, 128)])
def test_accesses_run_along_their_contiguous_dimension(dtype, shape):
    """A store whose pointers are consecutive along dim 0 gets a layout along dim 0 (Triton's
    coalescing): both the load (along dim 1) and the store move 128 bits per access, and the
    value changes layout through shared memory in between; a plain copy needs no shared memory."""
    from naiad.compiler.compiler import ASTSource

    import naiad as nd
    from .conftest import TARGET

    def build(transposed):
        signature = {"X": dtype, "stride_xm": "i32", "stride_xn": "constexpr", "Z": dtype,
                     "stride_zm": "constexpr" if transposed else "i32",
                     "stride_zn": "i32" if transposed else "constexpr", "m": "constexpr",
                     "n": "constexpr"}
        constexprs = {"stride_xn": 1, ("stride_zm" if transposed else "stride_zn"): 1,
                      "m": shape[0], "n": shape[1], "BLOCK_M": shape[0], "BLOCK_N": shape[1]}
        attrs = {"X": _DIV, "Z": _DIV, "stride_xm": _DIV, ("stride_zn" if transposed else "stride_zm"): _DIV}
        return nd.compile(ASTSource(strided_copy, signature, constexprs, attrs), target=TARGET,
                          options={"num_warps": 4})

    for transposed in (True, False):
        kernel = build(transposed)
        ptx = kernel.asm["ptx"]
        assert re.search(r"ld\.global\.v[48]", ptx) and re.search(r"st\.global\.v[48]", ptx)
        assert (kernel.metadata["shared"] > 0) == transposed


@pytest.mark.parametrize("fn,last", [(transposed_loads_in_a_loop, "K"),
                                     (transposed_load_in_a_branch, "flag")])
def test_coalesced_loads_under_control_flow_compile(fn, last):
    """The load keeps its own layout (along dim 0) inside a loop or a branch; the loop's
    accumulator and the branch's result convert."""
    from naiad.compiler.compiler import ASTSource

    import naiad as nd
    from .conftest import TARGET

    signature = {"X": "*fp32", "Z": "*fp32", "stride_xn": "i32", last: "i32"}
    kernel = nd.compile(ASTSource(fn, signature, {"BM": 32, "BN": 64},
                                  {"X": _DIV, "Z": _DIV, "stride_xn": _DIV}),
                        target=TARGET, options={"num_warps": 4})
    ptx = kernel.asm["ptx"]
    assert re.search(r"ld\.global\.v4", ptx) and re.search(r"st\.global\.v4", ptx)
    assert kernel.metadata["shared"] > 0


# -- GPU tests against torch -----------------------------------------------------------------------
SHAPES = [(16, 16), (32, 64), (64, 128), (1, 64), (64, 1), (128, 32)]
#: (block shape, the part of it that is real: full, or cut so that the masks matter)
CUTS = [(shape, part) for shape in SHAPES
        for part in {shape, (max(1, shape[0] - 3), max(1, shape[1] - 5))}]


def _data(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape, device="cuda") < 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, device="cuda").to(dtype)
    return torch.randint(-100, 100, shape, device="cuda", dtype=dtype)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "bool"])
@pytest.mark.parametrize("shape,part", CUTS, ids=[f"{s[0]}x{s[1]}-{p[0]}x{p[1]}" for s, p in CUTS])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_transpose_matches_torch(dtype, shape, part, num_warps):
    dtype = getattr(torch, dtype)
    x = _data(part, dtype)
    out = torch.zeros((part[1], part[0]), device="cuda", dtype=dtype)
    transpose[(1,)](x, out, shape[0], shape[1], part[0], part[1], num_warps=num_warps)
    assert torch.equal(out, x.t().contiguous())


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
@pytest.mark.parametrize("shape,part", CUTS, ids=[f"{s[0]}x{s[1]}-{p[0]}x{p[1]}" for s, p in CUTS])
@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_sums_along_both_dims_match_torch(dtype, shape, part, num_warps):
    dtype = getattr(torch, dtype)
    x = _data(part, dtype)
    out0 = torch.zeros(part[1], device="cuda", dtype=dtype)
    out1 = torch.zeros(part[0], device="cuda", dtype=dtype)
    sums_along_both[(1,)](x, out0, out1, shape[0], shape[1], part[0], part[1], num_warps=num_warps)
    want0, want1 = x.to(torch.float64).sum(0), x.to(torch.float64).sum(1)
    if dtype.is_floating_point:
        tol = 1e-2 * max(part) if dtype == torch.float16 else 1e-4 * max(part)
        torch.testing.assert_close(out0.double(), want0, atol=tol, rtol=1e-2)
        torch.testing.assert_close(out1.double(), want1, atol=tol, rtol=1e-2)
    else:
        assert torch.equal(out0, want0.to(dtype)) and torch.equal(out1, want1.to(dtype))


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("shape,part", CUTS, ids=[f"{s[0]}x{s[1]}-{p[0]}x{p[1]}" for s, p in CUTS])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_expand_dims_and_broadcast_mix_matches_torch(shape, part, num_warps):
    x, y = _data(part[0], torch.float32), _data(part[1], torch.float32)
    x0, y0 = x.clone(), y.clone()
    out = torch.zeros(part, device="cuda")
    outer_mix[(1,)](x, y, out, shape[0], shape[1], part[0], part[1], num_warps=num_warps)
    torch.testing.assert_close(out, x0[:, None] * 2 + y0[None, :] + x0.max())
    assert torch.equal(x, x0 + 1) and torch.equal(y, y0 + 1)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("n,m", [(64, 32), (16, 128), (128, 1)])
def test_rematerialized_and_reused_conversions_match_torch(n, m):
    x = _data(n, torch.float32)
    y = torch.zeros(n, device="cuda")
    z = torch.zeros((n, m), device="cuda", dtype=torch.int32)
    range_in_two_layouts[(1,)](x, y, z, n, m)
    rows, cols = torch.arange(n, device="cuda")[:, None], torch.arange(m, device="cuda")[None, :]
    assert torch.equal(y, x * 2) and torch.equal(z, (rows * 1000 + cols).int())
    y2 = torch.zeros(n, device="cuda")
    z2 = torch.zeros((n, m), device="cuda")
    loaded_value_in_two_layouts[(1,)](x, y2, z2, n, m)
    assert torch.equal(y2, x)
    torch.testing.assert_close(z2, (x + 1)[:, None] + (x * 3)[:, None] * cols.float())


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
@pytest.mark.parametrize("shape,part", CUTS, ids=[f"{s[0]}x{s[1]}-{p[0]}x{p[1]}" for s, p in CUTS])
def test_strided_copies_in_both_directions_match_torch(dtype, shape, part):
    """test_permute's two launches: a transposing copy (load along dim 1, store along dim 0)
    and a plain one through transposed strides."""
    x = _data(part, getattr(torch, dtype))
    out = torch.zeros((part[1], part[0]), device="cuda", dtype=x.dtype)
    strided_copy[(1,)](x, x.stride(0), x.stride(1), out, out.stride(1), out.stride(0), part[0],
                       part[1], BLOCK_M=shape[0], BLOCK_N=shape[1])
    assert torch.equal(out, x.t().contiguous())
    back = torch.zeros_like(x)
    strided_copy[(1,)](out, out.stride(1), out.stride(0), back, back.stride(0), back.stride(1),
                       part[0], part[1], BLOCK_M=shape[0], BLOCK_N=shape[1])
    assert torch.equal(back, x)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("k", [0, 1, 3])
def test_a_coalesced_load_carried_through_a_loop_matches_torch(k):
    bm, bn = 32, 64
    x = torch.randn(max(k, 1), bn, bm, device="cuda")        # each step column-major (bm, bn)
    z = torch.full((bm, bn), 7.0, device="cuda")
    transposed_loads_in_a_loop[(1,)](x, z, bm, k, BM=bm, BN=bn)
    want = torch.zeros(bm, bn, device="cuda")
    for i in range(k):
        want = want * 0.5 + x[i].t()
    torch.testing.assert_close(z, want)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("flag", [0, 1])
def test_a_coalesced_load_in_a_branch_matches_torch(flag):
    bm, bn = 32, 64
    x = torch.randn(bn, bm, device="cuda")
    z = torch.empty(bm, bn, device="cuda")
    transposed_load_in_a_branch[(1,)](x, z, bm, flag, BM=bm, BN=bn)
    v = x.t() if flag else torch.zeros(bm, bn, device="cuda")
    torch.testing.assert_close(z, v.sum(1, keepdim=True) + v)

