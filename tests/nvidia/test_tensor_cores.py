"""tl.dot on tensor cores (issue 15): wgmma on sm_90, mma.sync on sm_80 on.

On the CI machine (no GPU) every configuration compiles to PTX and the code is checked (the
instruction, its shape, the fences); on the GPU each runs against torch over dtypes, shapes,
transposed operands and accumulators, including the tutorial matmul at sizes that are not
multiples of its blocks and an attention kernel whose second dot takes its A operand from the
first dot's accumulator registers.
"""

from __future__ import annotations

import math
import re
import subprocess

import pytest

import naiad
import naiad.language as tl
from naiad.backends.compiler import GPUTarget
from naiad.compiler.compiler import ASTSource
from naiad.errors import NaiadError

from .conftest import compile_cuda, needs_ptxas

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def dot_tile(a_ptr, b_ptr, c_ptr, out_ptr, stride_am, stride_ak, stride_bk, stride_bn,
             M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, HAS_ACC: tl.constexpr,
             PRECISION: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak)
    b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn)
    if HAS_ACC:
        acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        r = tl.dot(a, b, acc, input_precision=PRECISION)
    else:
        r = tl.dot(a, b, input_precision=PRECISION, out_dtype=out_ptr.dtype.element_ty)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], r)


@naiad.jit
def imprecise_dot(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                  LIMIT: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rn[None, :] * K + rk[:, None])          # B K-major
    acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, acc, max_num_imprecise_acc=LIMIT))


@naiad.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
           stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
           BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first = (pid // group) * GROUP_M
    size_m = min(num_pid_m - first, GROUP_M)
    pid_m = first + ((pid % group) % size_m)
    pid_n = (pid % group) // size_m
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + stride_cm * cm[:, None] + stride_cn * cn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(cm[:, None] < M) & (cn[None, :] < N))


@naiad.jit
def attention(Q, K, V, Out, sm_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    hi = (start_m + 1) * BLOCK_M if CAUSAL else N_CTX
    for start_n in range(0, hi, BLOCK_N):
        k = tl.load(K + base + (start_n + offs_n)[None, :] * HEAD_DIM + offs_d[:, None])
        qk = tl.dot(q, k)
        if CAUSAL:
            qk = tl.where(offs_m[:, None] >= (start_n + offs_n[None, :]), qk, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + base + (start_n + offs_n)[:, None] * HEAD_DIM + offs_d[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(tl.float16))


@naiad.jit
def descriptor_attention(Q, K, V, Out, sm_scale, N_CTX, heads, HEAD_DIM: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """`attention` with its tiles through descriptors of the whole (heads x N_CTX) x HEAD_DIM
    tensors, as tutorial 06 reads them (the rows a product the kernel computes): on sm_90 the
    copy engine brings them, the launch computing that product for the tensor maps."""
    rows = heads * N_CTX
    q_desc = tl.make_tensor_descriptor(Q, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    k_desc = tl.make_tensor_descriptor(K, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    v_desc = tl.make_tensor_descriptor(V, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    o_desc = tl.make_tensor_descriptor(Out, [rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_M, HEAD_DIM])
    first = tl.program_id(1) * N_CTX
    q = q_desc.load([first + tl.program_id(0) * BLOCK_M, 0])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, N_CTX, BLOCK_N):
        qk = tl.dot(q, k_desc.load([first + start_n, 0]).T)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.float16), v_desc.load([first + start_n, 0]), acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
    o_desc.store([first + tl.program_id(0) * BLOCK_M, 0], (acc / l_i[:, None]).to(tl.float16))


@naiad.jit
def tile_read_twice(K, Q, Out, N, D: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr):
    """Tutorial 06's backward in small: each iteration's Q tile (transposed) is read by two
    dots, ``s = k @ qT`` and ``acc += p @ q`` with ``p`` from the first's accumulator."""
    offs_n, offs_d, offs_m = tl.arange(0, BN), tl.arange(0, D), tl.arange(0, BM)
    k = tl.load(K + offs_n[:, None] * D + offs_d[None, :])
    acc = tl.zeros([BN, D], dtype=tl.float32)
    for start in range(0, N, BM):
        q_t = tl.load(Q + (start + offs_m)[None, :] * D + offs_d[:, None])
        p = tl.dot(k, q_t).to(tl.float16)
        acc += tl.dot(p, tl.trans(q_t))
    tl.store(Out + offs_n[:, None] * D + offs_d[None, :], acc)


@naiad.jit
def two_halves(K, Q, Out, N, D: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr):
    """Two loops one after the other, as tutorial 06's backward has them: the second's K tile,
    staged before its loop, lands in the shared memory where the first half's store of its
    accumulator (through the scratch) was read."""
    offs_n, offs_d, offs_m = tl.arange(0, BN), tl.arange(0, D), tl.arange(0, BM)
    for half in tl.static_range(2):
        k = tl.load(K + half * BN * D + offs_n[:, None] * D + offs_d[None, :])
        acc = tl.zeros([BN, D], dtype=tl.float32)
        for start in range(0, N, BM):
            q_t = tl.load(Q + (start + offs_m)[None, :] * D + offs_d[:, None])
            p = tl.dot(k, q_t).to(tl.float16)
            acc += tl.dot(p, tl.trans(q_t))
        tl.store(Out + half * BN * D + offs_n[:, None] * D + offs_d[None, :], acc)


# -- which instruction each dot gets (CI: PTX only) -------------------------------------------------

_TYPES = {"fp16": "*fp16", "bf16": "*bf16", "fp32": "*fp32", "int8": "*i8", "e4m3": "*fp8e4nv",
          "e5m2": "*fp8e5", "fp16acc": "*fp16"}
_OUT = {"fp16": "*fp32", "bf16": "*fp32", "fp32": "*fp32", "int8": "*i32", "e4m3": "*fp32",
        "e5m2": "*fp32", "fp16acc": "*fp16"}        # fp16acc: fp16 operands, out_dtype=fp16


def _compile_tile(dtype, m, n, k, warps, *, precision="tf32", arch=90, has_acc=False):
    signature = {"a_ptr": _TYPES[dtype], "b_ptr": _TYPES[dtype], "c_ptr": _OUT[dtype],
                 "out_ptr": _OUT[dtype], "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32",
                 "stride_bn": "i32", "M": "constexpr", "N": "constexpr", "K": "constexpr",
                 "HAS_ACC": "constexpr", "PRECISION": "constexpr"}
    constexprs = {"M": m, "N": n, "K": k, "HAS_ACC": has_acc, "PRECISION": precision}
    source = ASTSource(dot_tile, signature, constexprs, {})
    return naiad.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})


WGMMA_CASES = [
    ("fp16", 64, 64, 16, 4, "m64n64k16.f32.f16.f16"),
    ("fp16", 128, 128, 32, 4, "m64n128k16.f32.f16.f16"),
    ("fp16", 128, 256, 64, 8, "m64n256k16.f32.f16.f16"),
    ("fp16", 64, 128, 32, 8, "m64n64k16.f32.f16.f16"),       # two warpgroups along N
    ("bf16", 128, 128, 64, 4, "m64n128k16.f32.bf16.bf16"),
    ("fp32", 64, 64, 32, 4, "m64n64k8.f32.tf32.tf32"),
    ("int8", 64, 64, 64, 4, "m64n64k32.s32.s8.s8"),
    ("e4m3", 64, 128, 64, 4, "m64n128k32.f32.e4m3.e4m3"),
    ("e5m2", 64, 64, 32, 4, "m64n64k32.f32.e5m2.e5m2"),
    ("fp16acc", 64, 64, 32, 4, "m64n64k16.f16.f16.f16"),
    ("fp16", 64, 8, 16, 4, "m64n8k16.f32.f16.f16"),           # B's 8 columns too few to swizzle
    ("fp32", 64, 8, 8, 4, "m64n8k8.f32.tf32.tf32"),
]


@pytest.mark.parametrize("dtype, m, n, k, warps, instruction", WGMMA_CASES,
                         ids=[f"{c[0]}-{c[1]}x{c[2]}x{c[3]}-w{c[4]}" for c in WGMMA_CASES])
def test_dots_compile_to_wgmma(dtype, m, n, k, warps, instruction):
    ptx = _compile_tile(dtype, m, n, k, warps).asm["ptx"]
    assert ".target sm_90a" in ptx
    assert f"wgmma.mma_async.sync.aligned.{instruction}" in ptx
    for needed in ("wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                   "wgmma.wait_group.sync.aligned 0", "fence.proxy.async.shared::cta"):
        assert needed in ptx, needed
    assert "mma.sync" not in ptx


MMA_SYNC_CASES = [("fp16", 16, 64, 32, 4, 90, 16, "f32.f16.f16.f32"),
                  ("bf16", 32, 32, 16, 4, 90, 16, "f32.bf16.bf16.f32"),
                  ("fp16", 128, 128, 32, 4, 80, 16, "f32.f16.f16.f32"),
                  ("fp16", 64, 64, 64, 2, 90, 16, "f32.f16.f16.f32"),
                  ("fp16acc", 16, 64, 32, 4, 90, 16, "f16.f16.f16.f16"),
                  ("fp32", 32, 32, 32, 4, 90, 8, "f32.tf32.tf32.f32"),
                  ("fp32", 16, 64, 16, 2, 80, 8, "f32.tf32.tf32.f32"),
                  ("int8", 32, 32, 64, 4, 90, 32, "satfinite.s32.s8.s8.s32"),
                  ("e4m3", 16, 64, 32, 4, 90, 16, "f32.f16.f16.f32"),      # widened to fp16
                  ("e5m2", 32, 32, 32, 4, 80, 16, "f32.f16.f16.f32"),
                  ("fp16", 16, 16, 16, 8, 90, 16, "f32.f16.f16.f32"),       # warps repeat the tiles
                  ("int8", 32, 32, 128, 16, 90, 32, "satfinite.s32.s8.s8.s32"),
                  ("fp16", 2, 4, 32, 1, 90, 16, "f32.f16.f16.f32"),        # under one tile
                  ("e5m2", 1, 2, 32, 1, 90, 16, "f32.f16.f16.f32"),
                  ("fp16", 8, 1, 16, 1, 90, 16, "f32.f16.f16.f32"),
                  ("fp16acc", 4, 16, 16, 1, 90, 16, "f16.f16.f16.f16")]


@pytest.mark.parametrize("dtype, m, n, k, warps, arch, k_instr, types", MMA_SYNC_CASES,
                         ids=[f"{c[0]}-{c[1]}x{c[2]}x{c[3]}-w{c[4]}-sm{c[5]}" for c in MMA_SYNC_CASES])
def test_dots_compile_to_mma_sync(dtype, m, n, k, warps, arch, k_instr, types):
    ptx = _compile_tile(dtype, m, n, k, warps, arch=arch).asm["ptx"]
    count = ptx.count(f"mma.sync.aligned.m16n8k{k_instr}.row.col.{types}")
    tiles = max(1, m // 16) * max(1, n // 8)
    assert count == max(1, tiles // warps) * (k // k_instr)          # a warp's share
    assert "wgmma" not in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx


@pytest.mark.parametrize("bm, bn, bk, warps", [(128, 128, 32, 4), (128, 256, 64, 8)])
def test_the_epilogue_converts_the_accumulator_through_stmatrix(bm, bn, bk, warps):
    """The fp16 result goes from the accumulator's layout to the store's through the padded
    scratch: written with ``stmatrix.x4`` (a thread's values in groups of 8), as Triton's
    epilogue does, where 32-bit ``st.shared`` took four times the instructions; mma.sync
    (sm_80) has no stmatrix and keeps them."""
    ptx = _compile_matmul(bm, bn, bk, warps).asm["ptx"]
    assert ptx.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == bm * bn // (32 * warps) // 8
    assert not re.search(r"st\.shared\.(b|u)32", ptx)
    assert "stmatrix" not in _compile_tile("fp16", 64, 64, 32, 4, arch=80).asm["ptx"]


def test_mma_sync_loads_b_for_two_k_steps_at_once():
    """The skinny matmul (16 x 128 x 128 tiles, 4 warps: each warp 16 x 32, four blocks of 8
    columns, eight K steps): A once per K step (.x4), B once per block of columns and pair of
    K steps (.x4.trans, N-contiguous B) -- 8 + 16 ldmatrix a warp, as Triton's SASS has them
    (before: .x2.trans per step, 32)."""
    ptx = _compile_matmul(16, 128, 128, 4, stages=4).asm["ptx"]
    loads = re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.(x\d(?:\.trans)?)\.shared\.b16", ptx)
    assert sorted(set(loads)) == ["x4", "x4.trans"], loads
    assert loads.count("x4") == 8 and loads.count("x4.trans") == 16, loads


@pytest.mark.parametrize("dtype, precision, m, k", [("fp32", "ieee", 64, 16), ("fp16", "tf32", 16, 8),
                                                    ("fp32", "tf32", 16, 4)])
def test_dots_tensor_cores_cannot_take_stay_on_fma(dtype, precision, m, k):
    """fp32 in "ieee" precision, and a K under one instruction's."""
    ptx = _compile_tile(dtype, m, 16, k, 4, precision=precision).asm["ptx"]
    assert "mma" not in ptx.replace("fma", "")


SPLIT_CASES = [(p, m, w) for p in ("bf16x3", "bf16x6", "tf32x3") for m, w in ((64, 4), (32, 4))]


@pytest.mark.parametrize("precision, m, warps", SPLIT_CASES)
def test_split_precisions_run_on_tensor_cores(precision, m, warps):
    """fp32 dots in bf16x3 / bf16x6 / tf32x3: 3 or 6 bf16 or tf32 tensor-core dots
    (naiad/passes/split_f32_dots.py)."""
    kernel = _compile_tile("fp32", m, 64, 32, warps, precision=precision)
    part = "tf32" if precision == "tf32x3" else "bf16"
    k_instr = 8 if part == "tf32" else 16
    assert kernel.asm["ttgir"].count("tt.dot") == (6 if precision == "bf16x6" else 3)
    opcode = (f"wgmma.mma_async.sync.aligned.m64n64k{k_instr}.f32.{part}.{part}" if m == 64 else
              f"mma.sync.aligned.m16n8k{k_instr}.row.col.f32.{part}.{part}.f32")
    assert opcode in kernel.asm["ptx"]


def _compile_imprecise(limit, dtype="*fp8e5"):
    signature = {"a_ptr": dtype, "b_ptr": dtype, "c_ptr": "*fp32", "out_ptr": "*fp32", "M": "constexpr",
                 "N": "constexpr", "K": "constexpr", "LIMIT": "constexpr"}
    return compile_cuda(imprecise_dot, signature, {"M": 64, "N": 64, "K": 128, "LIMIT": limit})


@pytest.mark.parametrize("limit, groups", [(0, 0), (32, 4), (64, 2), (128, 1)])
def test_max_num_imprecise_acc_adds_each_group_in_fp32(limit, groups):
    """fp8 wgmma adds with fewer bits than fp32: every ``limit`` K the group's sum joins the
    accumulator by an fp32 add -- one per element and group (Triton's test counts them)."""
    ptx = _compile_imprecise(limit).asm["ptx"]
    assert ptx.count("add.f32") == 64 * 64 // 128 * groups
    assert ptx.count("wgmma.commit_group.sync.aligned") == max(groups, 1)


def test_the_mma_layout_is_in_the_ttgir():
    ttgir = _compile_tile("fp16", 128, 128, 32, 4).asm["ttgir"]
    assert 'ttg.mma = "#ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], ' \
           'instrShape = [16, 128, 16]}>"' in ttgir


def test_an_edited_mma_layout_in_a_ttgir_override_changes_the_code(tmp_path, monkeypatch):
    """The lowering reads each dot's ``ttg.mma`` from the TTGIR: an override that turns the
    wgmma layout into an mma.sync one gets mma.sync."""
    from naiad.compiler import cache

    for name in ("CACHE", "DUMP", "OVERRIDE"):
        monkeypatch.setenv(f"NAIAD_{name}_DIR", str(tmp_path / name.lower()))
    cache._managers.clear()
    monkeypatch.setenv("NAIAD_KERNEL_DUMP", "1")
    original = _compile_tile("fp16", 64, 64, 32, 4)
    assert "wgmma.mma_async" in original.asm["ptx"]
    dumped = (tmp_path / "dump" / original.hash / "dot_tile.ttgir").read_text()
    wgmma = "#ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 64, 16]}>"
    mma_sync = "#ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [2, 2], instrShape = [16, 8]}>"
    assert wgmma in dumped
    folder = tmp_path / "override" / original.hash
    folder.mkdir(parents=True)
    (folder / "dot_tile.ttgir").write_text(dumped.replace(wgmma, mma_sync))
    monkeypatch.setenv("NAIAD_KERNEL_OVERRIDE", "1")
    edited = _compile_tile("fp16", 64, 64, 32, 4)
    assert "overrides" in edited.metadata
    ptx = edited.asm["ptx"]
    assert "wgmma" not in ptx
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == (64 // 16) * (64 // 8) * 2 // 4


@needs_ptxas
def test_wgmma_cubin_assembles():
    kernel = _compile_tile("fp16", 128, 128, 32, 4)
    assert kernel.asm["cubin"].startswith(b"\x7fELF")


def _compile_matmul(bm, bn, bk, warps, stages=3, dtype="*fp16", arch=90):
    signature = {"a_ptr": dtype, "b_ptr": dtype, "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
                 "stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32",
                 "stride_bn": "constexpr", "stride_cm": "i32", "stride_cn": "constexpr",
                 "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr",
                 "GROUP_M": "constexpr"}
    constexprs = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": bm, "BLOCK_N": bn,
                  "BLOCK_K": bk, "GROUP_M": 8}
    attrs = {n: [["tt.divisibility", 16]] for n in ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K",
                                                    "stride_am", "stride_bk", "stride_cm")}
    if arch == 90:
        return compile_cuda(matmul, signature, constexprs, attrs, num_warps=warps, num_stages=stages)
    return naiad.compile(ASTSource(matmul, signature, constexprs, attrs), target=GPUTarget("cuda", arch, 32),
                         options={"num_warps": warps, "num_stages": stages})


@pytest.mark.parametrize("bm, bn, bk, warps, stages, shared", [
    (128, 128, 32, 4, 3, 49152), (128, 256, 64, 8, 3, 147456), (64, 128, 128, 4, 3, 147456),
    (128, 128, 64, 4, 4, 131072)])
def test_the_matmul_loop_is_pipelined(bm, bn, bk, warps, stages, shared):
    kernel = _compile_matmul(bm, bn, bk, warps, stages)
    ttgir, ptx = kernel.asm["ttgir"], kernel.asm["ptx"]
    assert ttgir.count("ttg.async_load") == 2 * stages      # A and B: the prologue's and the loop's
    assert f"ttg.pipeline_wait = {2 * (stages - 2)} : i32" in ttgir
    # (LLVM's intrinsic prints a tab after the opcode, which upstream's test_tl_range_num_stages reads)
    assert f"cp.async.wait_group \t{2 * (stages - 2)};" in ptx and "cp.async.cg.shared.global" in ptx
    assert kernel.metadata["shared"] == shared               # the rings, reused after the loop
    # ... once the loop's last copies (zero fills of the slots past the end) have landed
    assert ptx.rindex("cp.async.wait_group \t0;") > ptx.rindex("cp.async.commit_group;")


@pytest.mark.parametrize("bm, bn, bk, warps", [(128, 128, 32, 4), (128, 256, 64, 8)])
def test_each_copy_reads_an_address_made_in_the_iteration(bm, bn, bk, warps):
    """On wgmma the loop carries one 64-bit offset for each pointer tile and every chunk's
    address is made from it and a pointer the loop does not change: no pointer a copy reads
    advances in place (the loop's branch waited for all of them to be read: the 8192^3 matmul
    took 2.42 M cycles that way, 2.24 M this way, Triton 2.24 M), and none is rebuilt from a
    32-bit offset by LLVM's loop strength reduction (off: 7 % of the cycles)."""
    kernel = _compile_matmul(bm, bn, bk, warps)
    assert "i64" in kernel.asm["ttgir"] and not kernel.metadata["strength_reduction"]
    loop = _ptx_loop_with_wgmma(kernel.asm["ptx"])
    pointers = re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[(%rd\d+)(?:\+\d+)?\]", loop)
    assert len(pointers) == (bm + bn) * bk * 2 // (16 * 32 * warps)
    for pointer in pointers:
        assert not re.search(rf"add\.s64\s+{pointer}, {pointer}, ", loop), pointer
        assert not re.search(rf"mad\.wide\.[su]32\s+{pointer},", loop), pointer


def _ptx_loop_with(ptx: str, instruction: str) -> str:
    """The PTX of the shortest loop that holds ``instruction``."""
    loops = []
    for branch in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx):
        label = ptx.find(branch.group(1) + ":")
        if 0 <= label < branch.start() and instruction in ptx[label:branch.start()]:
            loops.append(ptx[label:branch.start()])
    return min(loops, key=len)


def test_an_mma_sync_loops_copies_take_addresses_made_afresh():
    """On mma.sync (M = 16 here) LLVM's loop strength reduction stays on: the copies read
    addresses made in the iteration from one advancing base, not pointers that advance in
    place (whose copies the loop's branch then waits for: the skinny matmul took 1.4x the
    cycles that way)."""
    kernel = _compile_matmul(16, 128, 128, 4, 4)
    assert kernel.metadata["strength_reduction"]
    loop = _ptx_loop_with(kernel.asm["ptx"], "mma.sync")
    pointers = re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[(%rd\d+)\]", loop)
    assert len(pointers) == (16 + 128) * 128 * 2 // (16 * 32 * 4)
    in_place = [p for p in pointers if re.search(rf"add\.s64\s+{p}, {p}, ", loop)]
    assert len(in_place) < len(pointers) // 2, in_place
    assert not _compile_matmul(128, 128, 32, 4).metadata["strength_reduction"]


def test_masked_copies_zero_fill_through_their_predicate():
    """The K tail's mask is each copy's ignore-src predicate, not a source size selected
    between 16 and 0 bytes."""
    import re

    ptx = _compile_matmul(128, 128, 32, 4).asm["ptx"]
    copies = re.findall(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16(, %p\d+)?;", ptx)
    assert copies and all(copies)
    assert not re.search(r"selp\.b32\s+%r\d+, 16, 0,", ptx)


@naiad.jit
def _scalar_loads_in_nested_loops(data, count_ptr):
    """Upstream's test_nested_while: scalar loads in a while loop inside a for loop."""
    for _ in range(10):
        count = tl.load(count_ptr)
        while count > 0:
            tl.store(data, tl.load(data) + 1.0)
            count = count - 2


@pytest.mark.parametrize("stages", [1, 3])
def test_the_pipeliner_passes_over_scalar_loads(stages):
    """Loops of scalar loads have nothing to pipeline (it once asked a scalar for its shape)."""
    kernel = compile_cuda(_scalar_loads_in_nested_loops, {"data": "*fp32", "count_ptr": "*i32"},
                          num_stages=stages)
    assert "cp.async" not in kernel.asm["ptx"] and "ld.global" in kernel.asm["ptx"]


def test_scalar_loads_in_nested_loops_on_the_gpu(gpu):
    torch = gpu
    data, count = torch.zeros(1, device="cuda"), torch.tensor([8], dtype=torch.int32, device="cuda")
    _scalar_loads_in_nested_loops[(1,)](data, count)
    assert data.item() == 40


@pytest.mark.parametrize("dtype, in_flight", [("*fp16", True), ("*fp32", True), ("*fp8e4nv", False)])
def test_a_wgmma_group_runs_past_its_iteration_only_from_rings(dtype, in_flight):
    """fp16 and tf32 tiles both come from cp.async rings: the loop waits for the group before;
    fp8's B, N-contiguous, is stored from registers into one scratch tile (wgmma reads 8-bit
    tiles K-major only, and 1-byte copies do not exist), which the next iteration overwrites:
    that loop must wait for its own group."""
    ptx = _compile_matmul(128, 128, 32, 4, dtype=dtype).asm["ptx"]
    assert ("wgmma.wait_group.sync.aligned 1;" in ptx) == in_flight
    assert "wgmma.wait_group.sync.aligned 0;" in ptx


def test_a_tf32_b_too_large_for_a_ring_goes_through_registers():
    """128x256x64 tf32 tiles three deep would take 288 KiB of rings, more than an H200 block
    has (227 KiB): the N-major B goes through registers into one scratch tile instead, and the
    kernel fits (Triton's pipeliner asks for the 288 KiB and fails to launch)."""
    kernel = _compile_matmul(128, 256, 64, 8, dtype="*fp32")
    ttgir, ptx = kernel.asm["ttgir"], kernel.asm["ptx"]
    assert ttgir.count("ttg.async_load") == 3                 # A's: two in the prologue, one in the loop
    assert "cp.async.ca.shared.global" not in ptx
    assert kernel.metadata["shared"] <= 232448


@pytest.mark.parametrize("arch", [90, 80])
def test_a_tf32_dots_n_major_b_is_copied_element_by_element_into_its_ring(arch):
    """A tf32 dot reads its B K-major (wgmma and mma.sync alike take no transposed 32-bit
    tile): an N-contiguous B goes into its ring by 4-byte copies, each element to its place
    in a K-major row -- the whole tile in the pipeline, none through registers."""
    kernel = _compile_matmul(128, 128, 32, 4, dtype="*fp32", arch=arch)
    ptx = kernel.asm["ptx"]
    per_thread = 32 * 128 // 128                  # B: 32x128 elements, 128 threads
    assert len(re.findall(r"cp\.async\.ca\.shared\.global \[%r\d+\], \[%rd\d+\], 4, %p\d+;", ptx)) == 3 * per_thread
    assert "st.shared" not in ptx[:ptx.rindex("cp.async.wait_group \t0;")]
    assert kernel.metadata["shared"] == 3 * 2 * 128 * 32 * 4   # A and B, three slots each
    # the masked copies' ignore-src predicate is PTX 7.5's: sm_80's PTX is raised to it
    major, minor = re.search(r"^\.version (\d+)\.(\d+)", ptx, re.M).groups()
    assert int(major) * 10 + int(minor) >= 75


def _ptx_loop_with_wgmma(ptx: str) -> str:
    """The PTX of the shortest loop (a label and a later branch back to it) that holds a
    wgmma."""
    loops = []
    for branch in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx):
        label = ptx.find(branch.group(1) + ":")
        if 0 <= label < branch.start() and "wgmma.mma_async" in ptx[label:branch.start()]:
            loops.append(ptx[label:branch.start()])
    return min(loops, key=len)


_ATTENTION_SIG = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "Out": "*fp16", "sm_scale": "fp32",
                  "N_CTX": "i32"}


@pytest.mark.parametrize("head_dim, warps, descriptors, waits", [
    (128, 8, False, 1), (64, 4, False, 1), (128, 4, False, 2), (128, 4, True, 1)])
def test_attentions_second_dot_runs_on_over_the_next_first_dot(head_dim, warps, descriptors, waits):
    """``acc = tl.dot(p, v, acc * alpha)``: the group of ``p @ v`` is left running into the next
    iteration, where the wait of ``q @ k`` waits for both before ``acc`` is read -- one
    wait_group an iteration, and one after the loop.  Where the registers held across ``q @ k``
    would pass 224 a thread, each dot waits for its own: D128 on 4 warps holds 224 for the
    accumulators and P, and 32 more for the chunk addresses of K and V from pointers (none
    from the copy engine).  (The pointers' alignment lets the pipeliner stage K and V in
    rings: only such tiles stay put while a group runs on.)"""
    attrs = {name: [["tt.divisibility", 16]] for name in ("Q", "K", "V", "Out", "N_CTX")}
    signature = {**_ATTENTION_SIG, "heads": "i32"} if descriptors else _ATTENTION_SIG
    kernel = compile_cuda(descriptor_attention if descriptors else attention, signature,
                          {"HEAD_DIM": head_dim, "BLOCK_M": 128, "BLOCK_N": 64,
                           **({} if descriptors else {"CAUSAL": False})}, attrs, num_warps=warps)
    assert ("cp.async.bulk.tensor" in kernel.asm["ptx"]) == descriptors
    loop = _ptx_loop_with_wgmma(kernel.asm["ptx"])
    assert loop.count("wgmma.commit_group") == 2
    assert loop.count("wgmma.wait_group.sync.aligned 0;") == waits
    after = kernel.asm["ptx"].split(loop)[1]
    assert after.count("wgmma.wait_group.sync.aligned 0;") == (1 if waits == 1 else 0)


def _compile_tile_read_twice():
    signature = {"K": "*fp16", "Q": "*fp16", "Out": "*fp32", "N": "i32"}
    attrs = {name: [["tt.divisibility", 16]] for name in signature}
    return compile_cuda(tile_read_twice, signature, {"D": 64, "BN": 128, "BM": 64}, attrs, num_warps=4)


def test_a_tile_two_dots_read_is_waited_for_once_an_iteration():
    """The second dot's tile is the first's, waited for and made visible already: one
    cp.async wait and one barrier an iteration, not two."""
    loop = _ptx_loop_with_wgmma(_compile_tile_read_twice().asm["ptx"])
    assert loop.count("wgmma.commit_group") == 2
    assert loop.count("cp.async.wait_group") == 1 and loop.count("bar.sync") == 1


def test_descriptors_of_a_tile_hoisted_out_of_the_loop_are_built_in_the_loop():
    """The K tile is staged once, before the loop: its descriptors do not change, but built
    before the loop they took two registers each across it (tutorial 06's D128 backward
    spilled them).  Every 64-bit descriptor a wgmma of the loop reads is defined in the loop."""
    loop = _ptx_loop_with_wgmma(_compile_tile_read_twice().asm["ptx"])
    defined = set(re.findall(r"^\s*[\w.:]+\s+(%rd\d+),", loop, re.M))
    read = [d for call in re.findall(r"wgmma\.mma_async[^;]*;", loop)
            for d in re.findall(r"(%rd\d+)", call)]
    assert read and set(read) <= defined, sorted(set(read) - defined)


def _compile_two_halves():
    signature = {"K": "*fp16", "Q": "*fp16", "Out": "*fp32", "N": "i32"}
    attrs = {name: [["tt.divisibility", 16]] for name in signature}
    return compile_cuda(two_halves, signature, {"D": 64, "BN": 128, "BM": 64}, attrs, num_warps=4)


def test_a_rings_first_copies_wait_for_the_memorys_earlier_readers():
    """Between the first half's last read of shared memory (its store's conversion) and the
    second half's first copy into shared memory, every thread passes a barrier."""
    ptx = _compile_two_halves().asm["ptx"]
    copies = [m.start() for m in re.finditer(r"cp\.async\.cg", ptx)]
    reads = [m.start() for m in re.finditer(r"ld\.shared", ptx)]
    second = min(c for c in copies if c > reads[0])       # the second half's first copy
    last_read = max(r for r in reads if r < second)
    assert "bar.sync" in ptx[last_read:second]


def test_two_halves_against_torch(gpu):
    torch = gpu
    n, d, bn = 512, 64, 128
    k = torch.randn(2 * bn, d, device="cuda", dtype=torch.float16)
    q = torch.randn(n, d, device="cuda", dtype=torch.float16) / 4
    out = torch.empty(2 * bn, d, device="cuda", dtype=torch.float32)
    two_halves[(1,)](k, q, out, n, D=d, BN=bn, BM=64, num_warps=4)
    expected = torch.cat([(kk @ q.T).half().float() @ q.float() for kk in (k[:bn], k[bn:])])
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-1)


def test_a_tile_two_dots_read_against_torch(gpu):
    torch = gpu
    n, d, bn = 512, 64, 128
    gen = torch.Generator(device="cuda").manual_seed(7)
    k, q = (torch.randn(shape, device="cuda", generator=gen, dtype=torch.float16) / 4
            for shape in ((bn, d), (n, d)))
    out = torch.full((bn, d), math.nan, device="cuda")
    tile_read_twice[(1,)](k, q, out, n, D=d, BN=bn, BM=64, num_warps=4)
    expected = torch.zeros(bn, d, device="cuda")
    for start in range(0, n, 64):
        block = q[start:start + 64].float()
        expected += (k.float() @ block.T).half().float() @ block
    torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_softmax_rounds_pairs_and_flushes_exp2(causal):
    """P goes to the second dot as fp16 pairs, one `cvt.rn.f16x2.f32` per register (not two
    roundings and the packing), and `tl.exp2` is `ex2.approx.ftz.f32` as in Triton (without
    `.ftz` ptxas adds a compare and two multiplies to each exponential)."""
    sig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "Out": "*fp16", "sm_scale": "fp32", "N_CTX": "i32"}
    attrs = {name: [["tt.divisibility", 16]] for name in ("Q", "K", "V", "Out", "N_CTX")}
    ptx = compile_cuda(attention, sig, {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": causal},
                       attrs).asm["ptx"]
    # 128 x 64 P and 128 x 64 output over 128 threads: 32 pairs each
    assert ptx.count("cvt.rn.f16x2.f32") == 64
    assert "cvt.rn.f16.f32" not in ptx
    # 64 elements of P and 4 rows' alpha per thread
    assert ptx.count("ex2.approx.ftz.f32") == 68
    assert "ex2.approx.f32" not in ptx


@needs_ptxas
@pytest.mark.parametrize("bm, bn, bk, warps", [(128, 128, 32, 4), (128, 256, 64, 8), (64, 128, 128, 4),
                                                (128, 128, 64, 4), (16, 128, 128, 4)])
def test_benchmark_configurations_do_not_spill(bm, bn, bk, warps):
    from naiad.backends.cuda.toolchain import find_ptxas, ptxas_arch

    ptx = _compile_matmul(bm, bn, bk, warps).asm["ptx"]
    report = subprocess.run([find_ptxas(), f"-arch={ptxas_arch(90)}", "-v", "-o", "/dev/null", "-"],
                            input=ptx, capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in report.stderr, report.stderr
    assert "0 bytes stack frame" in report.stderr


def _innermost_loop(sass: str) -> list[str]:
    """The instructions of the shortest backward branch's loop in ``cuobjdump -sass`` text."""
    code = [(int(m.group(1), 16), m.group(2)) for m in
            re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    index = {address: i for i, (address, _) in enumerate(code)}
    loops = [code[index[int(m.group(1), 16)]:i + 1] for i, (address, text) in enumerate(code)
             if (m := re.search(r"\bBRA\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)", text))
             and int(m.group(1), 16) < address and int(m.group(1), 16) in index]
    return [text for _, text in min(loops, key=len)] if loops else []


@pytest.mark.parametrize("bm, bn, bk, warps", [(128, 128, 32, 4), (128, 256, 64, 8)])
def test_each_descriptor_is_a_32_bit_address_word_and_a_constant_high_word(bm, bn, bk, warps):
    """A wgmma descriptor's address field needs no mask (shared memory is below 2^18 bytes) and
    never carries into the fields above it: every descriptor is a zero-extended 32-bit word
    or-ed with a constant that has only high bits -- no 64-bit adds with carries, no masks
    (ptxas then builds each block's descriptor with one uniform add)."""
    ptx = _compile_matmul(bm, bn, bk, warps).asm["ptx"]
    defined = {m.group(1): int(m.group(3)) for m in
               re.finditer(r"or\.b64\s+(%rd\d+), (%rd\d+), (-?\d+);", ptx)}
    wgmmas = re.findall(r"wgmma\.mma_async[^}]*\}, (%rd\d+), (%rd\d+),", ptx)
    assert wgmmas
    for descriptor in {d for pair in wgmmas for d in pair}:
        assert descriptor in defined, descriptor
        assert defined[descriptor] & 0xFFFFFFFF == 0 and defined[descriptor] != 0
    assert "16383" not in ptx


@needs_ptxas
def test_a_second_warpgroup_builds_its_descriptors_in_uniform_registers():
    """The warpgroup's index comes from a shuffle of lane 0's warp, which ptxas knows is
    warp-uniform: the wgmma descriptors of an 8-warp matmul (two warpgroups along M) then stay
    in uniform registers.  From the plain quotient they were built in vector registers and
    moved over by an R2UR before every wgmma of the loop.  A 4-warp kernel has one warpgroup
    and no shuffle."""
    kernel = _compile_matmul(128, 256, 64, 8)
    assert re.search(r"shfl\.sync\.idx\.b32\s+%r\d+, %r\d+, 0, 31, -1;", kernel.asm["ptx"])
    assert "shfl.sync.idx" not in _compile_matmul(128, 128, 32, 4).asm["ptx"]
    try:
        sass = kernel.asm["sass"]
    except NaiadError as e:                  # no cuobjdump here (CI)
        pytest.skip(f"the SASS check needs cuobjdump: {e}")
    loop = _innermost_loop(sass)
    assert sum("HGMMA" in text for text in loop) == 4
    assert not [text for text in loop if "R2UR" in text]


# -- on the GPU: against torch ---------------------------------------------------------------------

def _torch_inputs(torch, dtype, m, n, k, transpose_a, transpose_b):
    gen = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
    if dtype == "int8":
        make = lambda *s: torch.randint(-8, 8, s, device="cuda", generator=gen, dtype=torch.int8)  # noqa: E731
    else:
        tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32,
                  "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "fp16acc": torch.float16}[dtype]
        make = lambda *s: (torch.randn(s, device="cuda", generator=gen) * 0.5).to(tdtype)  # noqa: E731
    a = make(k, m).T if transpose_a else make(m, k)
    b = make(n, k).T if transpose_b else make(k, n)
    return a, b


def _reference(torch, a, b):
    if a.dtype == torch.int8:           # (no integer matmul on CUDA in torch)
        return (a.cpu().to(torch.int64) @ b.cpu().to(torch.int64)).to(torch.int32).cuda()
    return a.to(torch.float64) @ b.to(torch.float64)


GPU_CASES = [(d, m, n, k, w, ta, tb)
             for d, m, n, k, w, _ in WGMMA_CASES for ta, tb in ((False, False), (False, True), (True, False))
             if not (ta and d not in ("fp16", "bf16"))]
GPU_CASES += [(d, m, n, k, w, False, tb) for d, m, n, k, w, arch, *_ in MMA_SYNC_CASES if arch == 90
              for tb in (False, True)]


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype, m, n, k, warps, transpose_a, transpose_b", GPU_CASES,
                         ids=[f"{c[0]}-{c[1]}x{c[2]}x{c[3]}-w{c[4]}{'-At' if c[5] else ''}{'-Bt' if c[6] else ''}"
                              for c in GPU_CASES])
def test_dot_against_torch(gpu, dtype, m, n, k, warps, transpose_a, transpose_b):
    torch = gpu
    a, b = _torch_inputs(torch, dtype, m, n, k, transpose_a, transpose_b)
    out_dtype = {"int8": torch.int32, "fp16acc": torch.float16}.get(dtype, torch.float32)
    out = torch.full((m, n), -7, device="cuda", dtype=out_dtype)
    acc = torch.zeros((m, n), device="cuda", dtype=out_dtype)
    dot_tile[(1,)](a, b, acc, out, a.stride(0), a.stride(1), b.stride(0), b.stride(1), M=m, N=n, K=k,
                   HAS_ACC=False, PRECISION="tf32", num_warps=warps)
    expected = _reference(torch, a, b)
    if dtype == "int8":
        assert torch.equal(out, expected)
        return
    error = (out.double() - expected).norm() / expected.norm()
    # fp8 products are exact in fp32, but Hopper's fp8 wgmma adds them with fewer mantissa bits
    # and fp16 accumulation rounds every partial sum to fp16
    tolerance = {"fp32": 2e-3, "fp16": 2e-3, "bf16": 2e-3, "fp16acc": 1e-2}.get(dtype, 2e-4)
    assert error < tolerance, error.item()


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("limit", [0, 32, 128])
@pytest.mark.parametrize("dtype", ["e5m2", "e4m3"])
def test_max_num_imprecise_acc_against_torch(gpu, dtype, limit):
    torch = gpu
    a, b = _torch_inputs(torch, dtype, 64, 64, 128, False, True)
    acc = torch.randn((64, 64), device="cuda")
    out = torch.full((64, 64), float("nan"), device="cuda")
    kernel = imprecise_dot[(1,)](a, b, acc, out, M=64, N=64, K=128, LIMIT=limit)
    assert "wgmma.mma_async" in kernel.asm["ptx"]
    expected = _reference(torch, a, b) + acc.double()
    assert ((out.double() - expected).norm() / expected.norm()) < 2e-4


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("precision, m, warps", SPLIT_CASES)
def test_split_precisions_against_torch(gpu, precision, m, warps):
    torch = gpu
    a, b = _torch_inputs(torch, "fp32", m, 64, 32, False, False)
    out = torch.full((m, 64), float("nan"), device="cuda")
    acc = torch.zeros((m, 64), device="cuda")
    dot_tile[(1,)](a, b, acc, out, a.stride(0), a.stride(1), b.stride(0), b.stride(1), M=m, N=64, K=32,
                   HAS_ACC=False, PRECISION=precision, num_warps=warps)
    expected = _reference(torch, a, b)
    error = ((out.double() - expected).abs().max() / expected.abs().max()).item()
    assert error < 2e-5, error            # one tf32 dot is ~1e-3 off


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype, m, n, k, warps", [("fp16", 128, 128, 32, 4), ("bf16", 64, 64, 16, 4),
                                                   ("fp16", 16, 64, 32, 4)])
def test_dot_with_an_accumulator(gpu, dtype, m, n, k, warps):
    torch = gpu
    a, b = _torch_inputs(torch, dtype, m, n, k, False, False)
    acc = torch.randn((m, n), device="cuda")
    out = torch.empty((m, n), device="cuda")
    dot_tile[(1,)](a, b, acc, out, a.stride(0), a.stride(1), b.stride(0), b.stride(1), M=m, N=n, K=k,
                   HAS_ACC=True, PRECISION="tf32", num_warps=warps)
    expected = _reference(torch, a, b) + acc.double()
    assert ((out.double() - expected).norm() / expected.norm()) < 2e-3


@naiad.jit
def tiles_in_one_loop(a_ptr, b_ptr, c_ptr, K, N, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr, TILES_N: tl.constexpr):
    """One program computes TILES_N output tiles of a block row in one loop over all their K
    steps, storing and resetting the accumulator inside it (a persistent matmul's shape)."""
    k_tiles = K // BK
    rm, rk = tl.program_id(0) * BM + tl.arange(0, BM), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for i in range(k_tiles * TILES_N):
        ki = i % k_tiles
        rn = (i // k_tiles) * BN + tl.arange(0, BN)
        a = tl.load(a_ptr + rm[:, None] * K + (ki * BK + rk)[None, :])
        b = tl.load(b_ptr + (ki * BK + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
        if ki == k_tiles - 1:
            tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty))
            acc = tl.zeros((BM, BN), dtype=tl.float32)


def _compile_tiles_in_one_loop(bm, bn, bk, warps):
    signature = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "K": "i32", "N": "i32"}
    attrs = {n: [["tt.divisibility", 16]] for n in signature}
    return compile_cuda(tiles_in_one_loop, signature, {"BM": bm, "BN": bn, "BK": bk, "TILES_N": 2},
                        attrs, num_warps=warps)


@pytest.mark.parametrize("bm, bn, bk, warps", [(128, 256, 64, 8), (64, 64, 32, 4)])
def test_an_accumulator_reset_in_an_if_keeps_its_mma_layout(bm, bn, bk, warps):
    """The ``if`` that stores and zeroes the accumulator yields it in the dot's layout: no
    conversion through shared memory in every iteration (for 128x256 fp32, 128 KB of it)."""
    ttgir = _compile_tiles_in_one_loop(bm, bn, bk, warps).asm["ttgir"]
    converting = [line.split()[0] for line in ttgir.splitlines() if "ttg.convert" in line]
    assert converting == ["tt.store"]          # the epilogue's, once per tile


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("bm, bn, bk, warps", [(128, 256, 64, 8), (64, 64, 32, 4), (16, 64, 32, 4)])
def test_tiles_in_one_loop_against_torch(gpu, bm, bn, bk, warps):
    """The accumulator stored and reset inside the K loop (upstream's batched_gemm_2d_tma
    test: converted in every iteration, after the operands, it overwrote them -- NaN)."""
    torch = gpu
    m, n, k = 2 * bm, 2 * bn, 3 * bk
    a = torch.randn((m, k), device="cuda").half()
    b = torch.randn((k, n), device="cuda").half()
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    tiles_in_one_loop[(m // bm,)](a, b, c, k, n, BM=bm, BN=bn, BK=bk, TILES_N=2, num_warps=warps)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=5e-2)


@naiad.jit
def dot_onto_a_column_major_accumulator(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr,
                                        N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.load(c_ptr + rm[:, None] + rn[None, :] * M)      # read along M: another layout
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, acc))


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("m, n, k, warps", [(128, 256, 64, 8), (64, 64, 32, 4), (16, 64, 32, 4)])
def test_an_accumulator_in_another_layout_against_torch(gpu, m, n, k, warps):
    """The accumulator converts into the dot's layout before the operands are stored into
    their tiles: the conversion's scratch is theirs (converted after, it overwrote them)."""
    torch = gpu
    a = torch.randn((m, k), device="cuda").half()
    b = torch.randn((k, n), device="cuda").half()
    acc = torch.randn((n, m), device="cuda")
    out = torch.empty((m, n), device="cuda")
    dot_onto_a_column_major_accumulator[(1,)](a, b, acc, out, M=m, N=n, K=k, num_warps=warps)
    torch.testing.assert_close(out, a.float() @ b.float() + acc.T, rtol=1e-3, atol=1e-2)


MATMUL_CASES = [(300, 200, 130, 64, 64, 32, 4), (512, 512, 512, 128, 128, 32, 4),
                (256, 512, 192, 128, 256, 64, 8), (100, 72, 48, 64, 64, 16, 4), (16, 512, 256, 16, 64, 32, 4)]


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("m, n, k, bm, bn, bk, warps", MATMUL_CASES)
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_tutorial_matmul_against_torch(gpu, dtype, m, n, k, bm, bn, bk, warps):
    _check_matmul(gpu, dtype, m, n, k, bm, bn, bk, warps, transpose_b=False)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype, transpose_b", [("fp16", False), ("fp16", True), ("fp32", False),
                                                ("fp32", True)])
def test_long_matmul_against_torch(gpu, dtype, transpose_b):
    """Many K iterations over many programs: where a tile overwritten while a tensor-core
    group still reads it shows (a race the small cases rarely lose)."""
    _check_matmul(gpu, dtype, 2048, 2048, 4096, 128, 128, 32, 4, transpose_b)


def _check_matmul(torch, dtype, m, n, k, bm, bn, bk, warps, transpose_b):
    a, b = _torch_inputs(torch, dtype, m, n, k, False, transpose_b)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=a.dtype)
    grid = (math.ceil(m / bm) * math.ceil(n / bn),)
    matmul[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                 c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps)
    expected = _reference(torch, a, b)
    assert not torch.isnan(c).any()
    assert ((c.double() - expected).norm() / expected.norm()) < 5e-3
    # every element, not only on the whole: a few wrong ones hide in a norm
    worst = ((c.double() - expected).abs() / (expected.abs() + 0.05 * math.sqrt(k))).max().item()
    assert worst < 2e-2, worst


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("head_dim, causal, block_m, block_n, warps", [(64, False, 128, 64, 4),
                                                                       (64, True, 128, 64, 4),
                                                                       (128, False, 128, 64, 8),
                                                                       (128, True, 128, 64, 8)])
def test_attention_against_torch(gpu, head_dim, causal, block_m, block_n, warps):
    torch = gpu
    z_h, n_ctx = 3, 512
    gen = torch.Generator(device="cuda").manual_seed(head_dim + causal)
    q, k, v = (torch.randn((1, z_h, n_ctx, head_dim), device="cuda", generator=gen, dtype=torch.float16)
               for _ in range(3))
    out = torch.empty_like(q)
    attention[(n_ctx // block_m, z_h)](q, k, v, out, 1 / math.sqrt(head_dim), n_ctx, HEAD_DIM=head_dim,
                                       BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, num_warps=warps)
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                                is_causal=causal)
    assert (out.float() - expected).abs().max() < 2e-2


@pytest.mark.parametrize("head_dim, warps", [(128, 4), (64, 4), (128, 8)])
def test_descriptor_attention_against_torch(gpu, head_dim, warps):
    """Tiles from the copy engine, P @ V waited for by the next iteration's Q @ K."""
    torch = gpu
    z_h, n_ctx = 3, 512
    gen = torch.Generator(device="cuda").manual_seed(head_dim + warps)
    q, k, v = (torch.randn((1, z_h, n_ctx, head_dim), device="cuda", generator=gen, dtype=torch.float16)
               for _ in range(3))
    out = torch.full_like(q, math.nan)
    descriptor_attention[(n_ctx // 128, z_h)](q, k, v, out, 1 / math.sqrt(head_dim), n_ctx, z_h,
                                              HEAD_DIM=head_dim, BLOCK_M=128, BLOCK_N=64, num_warps=warps)
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert (out.float() - expected).abs().max() < 2e-2
