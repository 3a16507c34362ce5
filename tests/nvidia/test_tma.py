"""Tensor descriptors through the tensor memory accelerator (TMA) on sm_90: loads and stores of
blocks whose tensor the launch can describe become ``cp.async.bulk.tensor`` copies through a
``CUtensorMap`` that the launcher encodes and passes by value (`naiad.backends.cuda.tensor_maps`,
`naiad.backends.cuda.tma`, `naiad.backends.cuda.tensor_map_encoding`).

The compile tests run anywhere and check the PTX (and that ptxas takes it) and the cases left to
ordinary loads; the ``gpu`` tests compare every result with torch, with edge blocks that stick
out of the tensor (padding read, nothing written outside), over dtypes and 1 to 5 dimensions.
"""

from __future__ import annotations

import pytest

import naiad
import naiad.language as tl
from naiad.backends.compiler import GPUTarget
from naiad.compiler.compiler import ASTSource
from naiad.errors import NaiadError

from .conftest import compile_cuda, ptxas_path

pytestmark = pytest.mark.shipped_backends

D16 = [["tt.divisibility", 16]]
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"


@naiad.jit
def scale_kernel(src, dst, BM: tl.constexpr, BN: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    dst.store([m, n], src.load([m, n]) * 2)


@naiad.jit
def in_kernel_kernel(out, a, M, N, ld_a, ld_out, BM: tl.constexpr, BN: tl.constexpr,
                     PADDING: tl.constexpr):
    src = tl.make_tensor_descriptor(a, shape=[M, N], strides=[ld_a, 1], block_shape=[BM, BN],
                                    padding_option=PADDING)
    dst = tl.make_tensor_descriptor(out, shape=[M + BM, N + BN], strides=[ld_out, 1],
                                    block_shape=[BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    dst.store([m, n], src.load([m, n]))


@naiad.jit
def loaded_shape_kernel(out, a, sizes, BM: tl.constexpr, BN: tl.constexpr):
    m = tl.load(sizes)
    src = tl.make_tensor_descriptor(a, shape=[m, 64], strides=[64, 1], block_shape=[BM, BN])
    tl.store(out + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], src.load([0, 0]))


@naiad.jit
def rows_sum_kernel(src, dst, K, BM: tl.constexpr, BK: tl.constexpr):
    """A load in a loop (left to the pipelined ordinary loads) and a store after it (TMA)."""
    m = tl.program_id(0) * BM
    acc = tl.zeros([BM, BK], tl.float32)
    for k in range(0, K, BK):
        acc += src.load([m, k]).to(tl.float32)
    dst.store([m, 0], acc.to(dst.dtype))


def _host_signature(element, block, names=("src", "dst")):
    return {name: f"tensordesc<{element}[{', '.join(map(str, block))}]>" for name in names}


def _aligned_parts(*params, rank=2):
    """A launch's divisibility of each descriptor's base, shape and strides (all aligned)."""
    return {(i, part): D16 for i in params for part in range(1 + 2 * rank)}


def _host_kernel(fn, element, block, constexprs, target=None, params=(0, 1), **signature):
    source = ASTSource(fn, {**_host_signature(element, block), **signature}, constexprs,
                       _aligned_parts(*params, rank=len(block)))
    return naiad.compile(source, target=target or GPUTarget("cuda", 90, 32), options={"num_warps": 4})


def _check_binary(kernel):
    if ptxas_path() is not None:
        assert kernel.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.parametrize("element, block, swizzle, box", [
    ("fp16", (64, 64), 128, (64, 64)), ("fp32", (32, 16), 64, (32, 16)), ("i8", (16, 64), 64, (16, 64)),
    ("bf16", (8, 256), 128, (8, 64)), ("fp16", (4, 64), 0, (4, 64)), ("fp32", (16, 4), 0, (16, 4)),
    ("fp32", (1, 1024), 0, (1, 256)), ("fp16", (512, 32), 64, (256, 32)), ("fp32", (512, 4), 0, (256, 4)),
])
def test_host_descriptors_copy_through_the_copy_engine(element, block, swizzle, box):
    """Both accesses are TMA copies through maps passed by value (``__grid_constant__``: a
    parameter-space address, no local copy), completing on an mbarrier.  A block of 8 rows or
    more whose rows fill a swizzle atom lands swizzled (as wgmma reads it), one copy per atom;
    any other lands row-major in one copy, but a single row longer than a box (256), which
    goes in boxes one after another; more than 256 rows take a copy per 256 rows."""
    kernel = _host_kernel(scale_kernel, element, block, {"BM": block[0], "BN": block[1]})
    ptx = kernel.asm["ptx"]
    assert ptx.count(".param .align 64 .b8") == 2 and ptx.count("cvta.param.u64") == 2
    assert TMA_LOAD in ptx and TMA_STORE in ptx and ".local" not in ptx
    assert "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r" in ptx
    assert f"], {block[0] * block[1] * (1 if element == 'i8' else 4 if element == 'fp32' else 2)};" in ptx
    assert "fence.proxy.async.shared::cta" in ptx and "cp.async.bulk.wait_group.read 0" in ptx
    copies = block[1] // box[1] * (block[0] // box[0])
    assert ptx.count(TMA_LOAD) == copies and ptx.count(TMA_STORE) == copies
    maps = kernel.metadata["tensor_maps"]
    assert [(m["box"], m["swizzle"]) for m in maps] == [(list(box), swizzle)] * 2
    assert maps[0]["base"] == 0 and maps[0]["shape"] == [["arg", 1], ["arg", 2]]
    assert maps[0]["strides"] == [["arg", 3]] and maps[1]["base"] == 5
    _check_binary(kernel)


@pytest.mark.parametrize("why, change", [
    ("a base not known to be 16-byte aligned", {"params": ()}),
    ("a row of 8 bytes", {"block": (16, 4)}),
    ("a box wider than 256", {"block": (2, 512)}),
    ("a GPU without the copy engine", {"target": GPUTarget("cuda", 80, 32)}),
])
def test_what_the_copy_engine_cannot_take_stays_ordinary_loads(why, change):
    block = change.get("block", (16, 64))
    kernel = _host_kernel(scale_kernel, "fp16", block, {"BM": block[0], "BN": block[1]},
                          target=change.get("target"), params=change.get("params", (0, 1)))
    assert "cp.async.bulk.tensor" not in kernel.asm["ptx"], why
    assert kernel.metadata["tensor_maps"] == [] and "ld.global" in kernel.asm["ptx"]


def test_stores_whose_rows_may_end_inside_a_16_byte_chunk_stay_ordinary():
    """The copy engine writes whole 16-byte chunks: past a row that ends inside one.  A store
    whose row extent the launch does not know to be a multiple of 16 elements is left to
    ordinary (masked) stores; the load through the same kind of map still takes the engine."""
    attrs = _aligned_parts(0, 1)
    del attrs[(1, 2)]                    # dst.shape[1]: any value
    source = ASTSource(scale_kernel, _host_signature("fp16", (16, 64)), {"BM": 16, "BN": 64}, attrs)
    kernel = naiad.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    ptx = kernel.asm["ptx"]
    assert TMA_LOAD in ptx and TMA_STORE not in ptx and "st.global" in ptx
    assert len(kernel.metadata["tensor_maps"]) == 1


@pytest.mark.parametrize("n_aligned", [False, True])
def test_in_kernel_descriptors_of_arguments_take_maps(n_aligned):
    """``tl.make_tensor_descriptor`` of kernel arguments: the launcher encodes the maps from
    them, and from sums, differences and products of them (the store's ``M + BM``), computed
    as the kernel's 32-bit arithmetic would.  The store's rows (``N + BN``) must be whole
    16-byte chunks for every launch: with N not known to be a multiple of 16 it stays ordinary."""
    signature = {"out": "*fp16", "a": "*fp16", "M": "i32", "N": "i32", "ld_a": "i32", "ld_out": "i32"}
    attrs = {name: D16 for name in ("out", "a", "ld_a", "ld_out") + (("N",) if n_aligned else ())}
    kernel = compile_cuda(in_kernel_kernel, signature,
                          {"BM": 32, "BN": 64, "PADDING": "nan"}, attrs)
    ptx = kernel.asm["ptx"]
    assert TMA_LOAD in ptx and (TMA_STORE in ptx) == n_aligned and ("st.global" in ptx) != n_aligned
    load = {"element": "fp16", "box": [32, 64], "swizzle": 128, "fill": "nan", "base": 1,
            "shape": [["arg", 2], ["arg", 3]], "strides": [["arg", 4]]}
    store = {"element": "fp16", "box": [32, 64], "swizzle": 128, "fill": "zero", "base": 0,
             "shape": [["add", 32, ["arg", 2], ["const", 32]], ["add", 32, ["arg", 3], ["const", 64]]],
             "strides": [["arg", 5]]}
    assert kernel.metadata["tensor_maps"] == ([load, store] if n_aligned else [load])


def test_a_computed_shape_survives_the_kernels_metadata_round_trip():
    """The maps go to the on-disk cache as JSON with the kernel's metadata, and a warm launch
    reads them back: the computed sources come back as the tuples they were."""
    import json

    from naiad.backends.cuda.tensor_map_encoding import TensorMap

    signature = {"out": "*fp16", "a": "*fp16", "M": "i32", "N": "i32", "ld_a": "i32", "ld_out": "i32"}
    attrs = {name: D16 for name in ("out", "a", "ld_a", "ld_out", "N")}
    kernel = compile_cuda(in_kernel_kernel, signature, {"BM": 32, "BN": 64, "PADDING": "zero"}, attrs)
    for data in kernel.metadata["tensor_maps"]:
        tmap = TensorMap.from_json(json.loads(json.dumps(data)))
        assert tmap.to_json() == json.loads(json.dumps(data)) and tmap == TensorMap.from_json(data)
    store = TensorMap.from_json(kernel.metadata["tensor_maps"][1])
    assert store.shape == (("add", 32, ("arg", 2), ("const", 32)), ("add", 32, ("arg", 3), ("const", 64)))


@pytest.mark.parametrize("value, bits, expected", [
    (5 * 7, 32, 35), (2**31, 32, -2**31), (2**32 + 3, 32, 3), (-1, 32, -1), (2**40, 64, 2**40),
    (2**63, 64, -2**63)])
def test_the_launch_computes_a_shape_in_the_kernels_integer_width(value, bits, expected):
    from naiad.backends.cuda.tensor_map_encoding import wrapped

    assert wrapped(value, bits) == expected


def test_shapes_the_launch_cannot_compute_stay_ordinary_loads():
    """A shape from memory (or from the program id) is not the launch's to compute: no map."""
    signature = {"out": "*fp16", "a": "*fp16", "sizes": "*i32"}
    kernel = compile_cuda(loaded_shape_kernel, signature, {"BM": 32, "BN": 64},
                          {name: D16 for name in ("out", "a")})
    assert TMA_LOAD not in kernel.asm["ptx"] and kernel.metadata["tensor_maps"] == []


def test_loads_in_loops_stay_pipelined_and_the_store_after_takes_a_map():
    kernel = _host_kernel(rows_sum_kernel, "fp16", (64, 64), {"BM": 64, "BK": 64}, K="i32")
    ptx = kernel.asm["ptx"]
    assert TMA_STORE in ptx and TMA_LOAD not in ptx
    assert len(kernel.metadata["tensor_maps"]) == 1
    _check_binary(kernel)


def test_the_stage_texts_with_tensor_map_ops_parse_back():
    """ttng.tensor_map_load / _store (with a reduction too) and ttng.async_tensor_map_load print
    and parse as themselves: overrides of the TTIR and TTGIR hold them."""
    from naiad.ir import parse_module, print_module

    texts = [_matmul_kernel("fp16", 128, 128, 64, False).asm["ttgir"],
             _host_kernel(scale_kernel, "fp16", (64, 64), {"BM": 64, "BN": 64}).asm["ttir"],
             _reduce_kernel("bf16", (8, 32), "max").asm["ttir"]]
    assert "ttng.async_tensor_map_load" in texts[0] and 'reduce = "max"' in texts[2]
    for text in texts:
        assert print_module(parse_module(text)) == print_module(parse_module(print_module(parse_module(text))))
        assert print_module(parse_module(text)).count("ttng.") == text.count("ttng.")


def test_a_ttir_override_keeps_its_tensor_maps():
    """The maps are the module's attribute: the TTIR text carries them to later stages."""
    kernel = _host_kernel(scale_kernel, "fp16", (64, 64), {"BM": 64, "BN": 64})
    ttir = kernel.asm["ttir"]
    assert "naiad.tensor_maps" in ttir and ttir.count("ttng.tensor_map_load") == 1
    assert "!tt.ptr<i8, 101>" in ttir


# == on the GPU ====================================================================================
_TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "i8": "int8",
                 "fp8e4nv": "float8_e4m3fn"}


def _random(torch, shape, element):
    dtype = getattr(torch, _TORCH_DTYPES[element])
    raw = torch.randint(-60, 60, shape, device="cuda", dtype=torch.int16)
    return raw.to(torch.float32).to(dtype) if dtype.is_floating_point else raw.to(dtype)


@pytest.mark.parametrize("element", ["fp16", "bf16", "fp32", "i8"])
@pytest.mark.parametrize("shape, ld, block", [((128, 192), 192, (64, 64)), ((100, 70), 80, (32, 32)),
                                              ((9, 300), 304, (8, 128)), ((33, 16), 16, (16, 16)),
                                              ((40, 50), 50, (16, 32)), ((700, 32), 48, (512, 16))])
def test_host_descriptor_copies_on_the_gpu(gpu, element, shape, ld, block):
    """Edge blocks stick out: the loads read zeros there and the stores write nothing outside
    (both tensors are views into wider buffers whose other columns must keep their values).
    A row stride the launch does not know to be a multiple of 16 elements (50) leaves the
    copies to ordinary loads and stores, and so does a row extent for the store (70, 300: the
    copy engine would write the rest of the last 16-byte chunk), with the same results."""
    torch = gpu
    from naiad.runtime.tensor_descriptor import TensorDescriptor

    source = _random(torch, (shape[0], ld), element)
    a = source[:, :shape[1]]
    wide = torch.full((shape[0], ld), -3, device="cuda", dtype=a.dtype)
    out = wide[:, :shape[1]]
    grid = (naiad.cdiv(shape[0], block[0]), naiad.cdiv(shape[1], block[1]))
    kernel = scale_kernel[grid](TensorDescriptor(a, list(a.shape), list(a.stride()), list(block)),
                                TensorDescriptor(out, list(out.shape), list(out.stride()), list(block)),
                                BM=block[0], BN=block[1])
    ptx = kernel.asm["ptx"]
    assert (TMA_LOAD in ptx) == (ld % 16 == 0)
    assert (TMA_STORE in ptx) == (ld % 16 == 0 and shape[1] % 16 == 0)
    torch.testing.assert_close(out, a * 2, rtol=0, atol=0)
    assert (wide[:, shape[1]:] == -3).all()


@pytest.mark.parametrize("padding", ["zero", "nan"])
@pytest.mark.parametrize("n", [72, 80])
def test_in_kernel_descriptor_padding_on_the_gpu(gpu, padding, n):
    """n = 80: the store's map too, of the shape (m + 32, n + 64) the launch computes."""
    torch = gpu
    m, bm, bn = 50, 32, 64
    a = _random(torch, (m, n), "fp16")
    out = torch.full((m + bm, n + bn), 9, device="cuda", dtype=torch.float16)
    kernel = in_kernel_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](out, a, m, n, n, n + bn, BM=bm,
                                                                       BN=bn, PADDING=padding)
    assert (TMA_STORE in kernel.asm["ptx"]) == (n % 16 == 0)
    rows, cols = naiad.cdiv(m, bm) * bm, naiad.cdiv(n, bn) * bn
    expected = torch.full((rows, cols), float("nan") if padding == "nan" else 0.0, device="cuda",
                          dtype=torch.float16)
    expected[:m, :n] = a
    torch.testing.assert_close(out[:rows, :cols], expected, rtol=0, atol=0, equal_nan=True)
    assert (out[rows:] == 9).all() and (out[:, cols:] == 9).all()


@naiad.jit
def nd_copy_kernel(src, dst, RANK: tl.constexpr, B0: tl.constexpr):
    offsets = [tl.program_id(0) * B0] + [0] * (RANK - 1)
    dst.store(offsets, src.load(offsets) + 1)


@pytest.mark.parametrize("shape, block", [((300,), (64,)), ((5, 6, 48), (2, 4, 16)),
                                          ((3, 2, 3, 4, 32), (2, 2, 4, 4, 8))])
def test_one_to_five_dimensions_on_the_gpu(gpu, shape, block):
    torch = gpu
    from naiad.runtime.tensor_descriptor import TensorDescriptor

    a = _random(torch, shape, "fp32")
    out = torch.zeros_like(a)
    kernel = nd_copy_kernel[(naiad.cdiv(shape[0], block[0]),)](
        TensorDescriptor.from_tensor(a, list(block)), TensorDescriptor.from_tensor(out, list(block)),
        RANK=len(shape), B0=block[0])
    assert f"cp.async.bulk.tensor.{len(shape)}d" in kernel.asm["ptx"]
    covered = [slice(None)] + [slice(0, b) for b in block[1:]]
    torch.testing.assert_close(out[tuple(covered)], a[tuple(covered)] + 1, rtol=0, atol=0)
    rest = torch.ones_like(out, dtype=torch.bool)
    rest[tuple(covered)] = False
    assert (out[rest] == 0).all()


def test_loop_loads_and_a_mapped_store_on_the_gpu(gpu):
    torch = gpu
    from naiad.runtime.tensor_descriptor import TensorDescriptor

    m, k = 200, 320
    a = _random(torch, (m, k), "fp16")
    out = torch.zeros(m, 64, device="cuda", dtype=torch.float16)
    rows_sum_kernel[(naiad.cdiv(m, 64),)](TensorDescriptor.from_tensor(a, [64, 64]),
                                          TensorDescriptor.from_tensor(out, [64, 64]), k, BM=64, BK=64)
    expected = a.float().reshape(m, k // 64, 64).sum(1).half()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


def test_new_tensors_get_new_maps(gpu):
    """The launcher keeps encoded maps by the values they describe: launches with other
    tensors of the same kind read those."""
    torch = gpu
    from naiad.runtime.tensor_descriptor import TensorDescriptor

    for rows in (64, 128, 64, 96):
        a = _random(torch, (rows, 64), "fp16")
        out = torch.empty_like(a)
        scale_kernel[(naiad.cdiv(rows, 64), 1)](TensorDescriptor.from_tensor(a, [64, 64]),
                                                TensorDescriptor.from_tensor(out, [64, 64]), BM=64, BN=64)
        torch.testing.assert_close(out, a * 2, rtol=0, atol=0)


# == pipelined: dot operands through rings of the copy engine's copies ==============================
@naiad.jit
def descriptor_matmul_kernel(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                             BK: tl.constexpr, B_TRANSPOSED: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        a = a_desc.load([m, k])
        if B_TRANSPOSED:
            b = b_desc.load([n, k]).T
        else:
            b = b_desc.load([k, n])
        acc = tl.dot(a, b, acc)
    c_desc.store([m, n], acc.to(c_desc.dtype))


def _matmul_kernel(element, bm, bn, bk, transposed, stages=3, warps=4):
    b_block = (bn, bk) if transposed else (bk, bn)
    signature = {"a_desc": f"tensordesc<{element}[{bm}, {bk}]>",
                 "b_desc": f"tensordesc<{element}[{b_block[0]}, {b_block[1]}]>",
                 "c_desc": f"tensordesc<fp16[{bm}, {bn}]>", "K": "i32"}
    attrs = {**_aligned_parts(0, 1, 2), "K": D16}
    source = ASTSource(descriptor_matmul_kernel, signature,
                       {"BM": bm, "BN": bn, "BK": bk, "B_TRANSPOSED": transposed}, attrs)
    return naiad.compile(source, target=GPUTarget("cuda", 90, 32),
                         options={"num_warps": warps, "num_stages": stages})


@pytest.mark.parametrize("element, bm, bn, bk, transposed", [
    ("fp16", 128, 128, 64, False), ("fp16", 128, 128, 64, True), ("bf16", 64, 256, 32, False),
    ("fp8e4nv", 128, 128, 128, True),
])
def test_dot_operands_of_descriptors_are_pipelined_through_the_copy_engine(element, bm, bn, bk, transposed):
    """Each operand's loads become a ring of ``num_stages`` slots that the copy engine fills
    ahead (one thread issues each tile's copies, one per swizzle atom), and the dots wait on
    the slot's mbarrier phase -- no cp.async."""
    kernel = _matmul_kernel(element, bm, bn, bk, transposed)
    ttgir, ptx = kernel.asm["ttgir"], kernel.asm["ptx"]
    assert ttgir.count("ttng.async_tensor_map_load") == 6          # 2 prologue + 1 in the loop, each
    assert "cp.async.cg" not in ptx and "cp.async.wait_group" not in ptx
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx and "wgmma.mma_async" in ptx
    assert "ld.global" not in ptx and ".local" not in ptx
    _check_binary(kernel)


@pytest.mark.parametrize("element, bm, bn, warps", [("fp16", 128, 128, 4), ("fp16", 128, 256, 8),
                                                 ("bf16", 64, 256, 4)])
def test_an_accumulator_reaches_the_tma_stores_tile_through_stmatrix(element, bm, bn, warps):
    """The epilogue's fp16/bf16 tile goes from the accumulator's registers into the swizzled
    scratch with ``stmatrix.x4`` (four 8 x 8 matrices, one 16 x 16 block of a warp's), as
    Triton's does -- a thread's bm x bn / (32 warps) values in groups of 8, no st.shared."""
    kernel = _matmul_kernel(element, bm, bn, 64 if element == "fp16" else 32, False, warps=warps)
    ptx = kernel.asm["ptx"]
    assert ptx.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == bm * bn // (32 * warps) // 8
    assert "st.shared" not in ptx
    _check_binary(kernel)


def test_fp8_operands_summed_along_rows_stay_ordinary():
    """wgmma reads 8-bit operands K-major only: an fp8 B tile whose rows run along N cannot be
    the copy engine's (its geometry is the tensor's) and stays an ordinary load, while A still
    goes through a ring of the engine's copies."""
    kernel = _matmul_kernel("fp8e4nv", 128, 128, 128, False)
    ttgir = kernel.asm["ttgir"]
    assert ttgir.count("ttng.async_tensor_map_load") == 3 and "ttng.tensor_map_load " not in ttgir
    assert "tt.load" in ttgir and len(kernel.metadata["tensor_maps"]) == 2      # A and C
    _check_binary(kernel)


@pytest.mark.parametrize("element", ["fp16", "bf16"])
@pytest.mark.parametrize("m, n, k, transposed, stages", [(256, 256, 512, False, 3), (200, 136, 320, True, 4),
                                                         (128, 128, 64, False, 2), (64, 128, 96, True, 3)])
def test_descriptor_matmuls_on_the_gpu(gpu, element, m, n, k, transposed, stages):
    """Against torch: edge tiles (M, N and K not multiples of the blocks read zeros past the
    end), loops shorter than the pipeline, a transposed B."""
    torch = gpu
    from naiad.runtime.tensor_descriptor import TensorDescriptor

    dtype = getattr(torch, _TORCH_DTYPES[element])
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(n, k, device="cuda").to(dtype) if transposed else torch.randn(k, n, device="cuda").to(dtype)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    bm, bn, bk = 128, 128, 64
    b_block = [bn, bk] if transposed else [bk, bn]
    kernel = descriptor_matmul_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](
        TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, b_block),
        TensorDescriptor.from_tensor(c, [bm, bn]), k, BM=bm, BN=bn, BK=bk, B_TRANSPOSED=transposed,
        num_stages=stages)
    assert "ttng.async_tensor_map_load" in kernel.asm["ttgir"]
    expected = (a.float() @ (b.float().T if transposed else b.float())).half()
    torch.testing.assert_close(c, expected, rtol=2e-2, atol=2e-1)


# == reductions of the copy engine =================================================================
@naiad.jit
def reduce_kernel(out_desc, a_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, KIND: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    rows, cols = m + tl.arange(0, BM)[:, None], n + tl.arange(0, BN)[None, :]
    value = tl.load(a_ptr + rows * N + cols, mask=(rows < M) & (cols < N), other=0)
    if KIND == "min":
        out_desc.atomic_min([m, n], value)
    else:
        out_desc.atomic_max([m, n], value)


def _reduce_kernel(element, block, kind, target=None, aligned=True):
    signature = {"out_desc": f"tensordesc<{element}[{block[0]}, {block[1]}]>", "a_ptr": f"*{element}",
                 "M": "i32", "N": "i32"}
    attrs = {**(_aligned_parts(0) if aligned else {}), "a_ptr": D16}
    source = ASTSource(reduce_kernel, signature, {"BM": block[0], "BN": block[1], "KIND": kind}, attrs)
    return naiad.compile(source, target=target or GPUTarget("cuda", 90, 32), options={"num_warps": 4})


@pytest.mark.parametrize("element", ["fp16", "bf16"])
@pytest.mark.parametrize("kind", ["min", "max"])
@pytest.mark.parametrize("block, copies", [((8, 32), 1), ((1, 1024), 4), ((64, 64), 1), ((512, 32), 2)])
def test_16_bit_float_minima_and_maxima_are_copy_engine_reductions(element, kind, block, copies):
    """fp16 and bf16 ``desc.atomic_min`` / ``atomic_max`` (no element atomic does them) are one
    ``cp.reduce.async.bulk.tensor`` of the block, as Triton does them on sm_90; a row longer
    than a box goes in boxes of 256, and so do more than 256 rows."""
    kernel = _reduce_kernel(element, block, kind)
    ptx = kernel.asm["ptx"]
    opcode = f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{kind}.tile.bulk_group"
    assert ptx.count(opcode) == copies and "atom." not in ptx
    assert "fence.proxy.async.shared::cta" in ptx and "cp.async.bulk.wait_group.read 0" in ptx
    _check_binary(kernel)


def test_reductions_the_copy_engine_cannot_take_are_refused_with_the_reason():
    with pytest.raises(NaiadError, match=r"test_tma.py:\d+: desc.atomic_min of .* reduction of the copy "
                                         r"engine.*16-byte aligned.*fix:"):
        _reduce_kernel("fp16", (8, 32), "min", aligned=False)


def test_other_gpus_refuse_16_bit_float_minima():
    """Without the copy engine the descriptor's atomics are element atomics, which have no fp16
    minimum: a compile error, as Triton gives there."""
    with pytest.raises(NaiadError, match=r"desc.atomic_min does not support fp16"):
        _reduce_kernel("fp16", (8, 32), "min", target=GPUTarget("cuda", 80, 32))


@pytest.mark.parametrize("element", ["fp16", "bf16"])
@pytest.mark.parametrize("kind", ["min", "max"])
@pytest.mark.parametrize("shape, block", [((64, 96), (8, 32)), ((2, 2048), (1, 1024)), ((100, 64), (64, 64)),
                                         ((700, 64), (512, 32))])
def test_copy_engine_reductions_on_the_gpu(gpu, element, kind, shape, block):
    torch = gpu
    from naiad.runtime.tensor_descriptor import TensorDescriptor

    dtype = getattr(torch, _TORCH_DTYPES[element])
    out = torch.randn(shape, device="cuda").to(dtype)
    a = torch.randn(shape, device="cuda").to(dtype)
    expected = torch.minimum(out, a) if kind == "min" else torch.maximum(out, a)
    grid = (naiad.cdiv(shape[0], block[0]), naiad.cdiv(shape[1], block[1]))
    reduce_kernel[grid](TensorDescriptor.from_tensor(out, list(block)), a, shape[0], shape[1],
                        BM=block[0], BN=block[1], KIND=kind)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
