"""GPU benchmarks: Naiad's NVIDIA backend (cuda) against Triton and torch, in one run.

    python bench/gpu.py [--quick] [--only NAME,...] [--csv PATH]
    python bench/gpu.py --plot bench/results/gpu.csv     # the plot, from a CSV, on any machine

Each kernel is written once, as Triton-language source text (`KERNELS`), and imported twice
from a temporary directory: once under ``import naiad as triton`` (Naiad's ``@jit``) and once
under the real ``import triton``; the same launch code then runs either module.  Measures:

* bandwidth (add, softmax, layernorm, rowsum, cumsum, reverse_cumsum, embedding): GB/s of
  Naiad, Triton and torch for vector add, fused softmax (Triton tutorial 02), layernorm forward
  (tutorial 05), row sum, row cumsum (forward and reverse) and an embedding gather.  Bytes = each input read once + each output
  written once.  Every Naiad and Triton result is checked against torch before it is timed;
  then the median over repeats of the time between two torch.cuda.Events around one call
  (after warmup calls; no L2 flush, the sizes are far larger than L2), and of that the median
  over 4 rounds that time torch, Naiad and Triton in turn (the order reversing each round).
* compute (matmul_*, attention_*): TFLOP/s of the tutorial-03 matmul kernel (fp16, bf16, fp8,
  tf32, int8; square and skinny decode-time shapes, each with the config Triton's tutorial
  uses for it) and of an online-softmax attention forward kernel (D 64 and 128, causal or
  not), against torch's matmul (cuBLAS; ``_scaled_mm`` for fp8) and SDPA.  Flops = 2 M N K
  (attention: 4 B H N^2 D, halved when causal); every result is checked against torch first.
* launch: host time of one warm launch of a 64-element kernel with grid (1,): time.perf_counter
  over N back-to-back launches followed by torch.cuda.synchronize, divided by N; median of
  repeats, the frameworks timed in turn in each repeat.
* compile: cold start of the softmax kernel and of the fp16 matmul (512^3, tensor cores) in a new process whose NAIAD_CACHE_DIR and
  TRITON_CACHE_DIR are fresh empty directories: the import of the kernel module (which imports
  the package) and the first launch (compile + load + run, synchronized); median of 5 processes
  each, started in turn (1 with --quick).  torch and the CUDA context are set up before the clock starts, and so is
  Triton's driver helper, which Triton builds with a C compiler once per cache directory, not
  per kernel; what either does lazily at its first launch counts.

--quick shrinks the bandwidth inputs 8x (the embedding's 8x fewer indices, same table) and
the repeats, for a smoke run of about a minute.

Prints a table (ratio = Naiad / Triton: GB/s for bandwidth, time for launch and compile; a goal
column where the project has one) and writes it as CSV (bench/results/gpu.csv by default) and,
with matplotlib, its plot beside it (`plots`: bars of Naiad, Triton and torch, a panel per
unit; the GPU machine need not have matplotlib: ``--plot CSV`` draws it later).  A
kernel that fails to compile or gives a wrong answer makes a FAIL entry in its row (the
exception's first line) and the run goes on.  Needs a CUDA device and torch; without Triton the
Triton column stays empty.
"""

from __future__ import annotations

import argparse
import csv
import functools
import importlib
import math
import operator
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

# The Triton column must be the real Triton, compiled for the GPU: not Naiad's compatibility
# layer (which makes `import triton` resolve to Naiad) nor Triton's CPU interpreter.
os.environ["NAIAD_TRITON_COMPAT"] = "0"
os.environ.pop("TRITON_INTERPRET", None)

import naiad  # noqa: E402
import plots  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

FRAMEWORKS = ("naiad", "triton")

HEADERS = {
    "naiad": "import naiad as triton\nimport naiad.language as tl\n"
             "from naiad.runtime.tensor_descriptor import TensorDescriptor\n",
    "triton": "import triton\nimport triton.language as tl\n"
              "from triton.tools.tensor_descriptor import TensorDescriptor\n",
}

KERNELS = '''

@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    row = tl.load(input_ptr + row_idx * input_row_stride + col_offsets, mask=mask,
                  other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    tl.store(output_ptr + row_idx * output_row_stride + col_offsets, numerator / denominator,
             mask=mask)


@triton.jit
def layer_norm_fwd_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr, REVERSE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride + cols, tl.cumsum(x, axis=0, reverse=REVERSE), mask=mask)


@triton.jit
def embedding_kernel(indices_ptr, table_ptr, out_ptr, dim, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < dim
    index = tl.load(indices_ptr + row)
    values = tl.load(table_ptr + index * dim + cols, mask=mask)
    tl.store(out_ptr + row.to(tl.int64) * dim + cols, values, mask=mask)


@triton.jit
def grouped_tile(M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                 GROUP_SIZE_M: tl.constexpr):
    """The (row, column) block this program computes: tutorial 03's order, programs grouped
    GROUP_SIZE_M block rows at a time so that the blocks they read stay in the L2 cache."""
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, ACC_TYPE: tl.constexpr):
    pid_m, pid_n = grouped_tile(M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=ACC_TYPE)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def descriptor_matmul_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                             BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                             GROUP_SIZE_M: tl.constexpr):
    pid_m, pid_n = grouped_tile(M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_SIZE_K):
        a = a_desc.load([pid_m * BLOCK_SIZE_M, k])
        b = b_desc.load([k, pid_n * BLOCK_SIZE_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N], acc.to(c_desc.dtype))


@triton.jit
def attention_kernel(Q, K, V, Out, sm_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
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
'''


# -- kernel modules ---------------------------------------------------------------------------
def module_name(framework: str, stem: str = "gpu_bench") -> str:
    return f"{framework}_{stem}_kernels"


def write_kernel_modules(directory: str, source: str = KERNELS, stem: str = "gpu_bench") -> None:
    """One module per framework, ``source`` under that framework's imports (the JITs read the
    kernels' source from the file, so it must be a real one)."""
    for framework, header in HEADERS.items():
        with open(os.path.join(directory, module_name(framework, stem) + ".py"), "w") as f:
            f.write(header + source)


def first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def load_kernels(directory: str, stem: str = "gpu_bench") -> dict[str, Any]:
    """framework -> its kernel module; Triton missing is reported and left out."""
    sys.path.insert(0, directory)
    kernels = {"naiad": importlib.import_module(module_name("naiad", stem))}
    try:
        kernels["triton"] = importlib.import_module(module_name("triton", stem))
    except Exception as e:  # noqa: BLE001 -- not installed or broken: Naiad and torch still run
        print(f"triton is not importable ({first_line(e)}; pip install triton==3.6.0): the Triton "
              f"column stays empty, Naiad and torch still run", file=sys.stderr)
    return kernels


# -- launches (the same code for both frameworks' kernel modules) ---------------------------
def row_warps(block: int) -> int:
    """num_warps for a one-row-per-program kernel, as Triton's tutorial 02 (softmax) picks it."""
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def launch_add(k, x, y, out):
    n = x.numel()
    k.add_kernel[(naiad.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)


def launch_softmax(k, x, out):
    rows, cols = x.shape
    block = naiad.next_power_of_2(cols)
    k.softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK_SIZE=block,
                              num_warps=row_warps(block))


def launch_layernorm(k, x, w, b, eps, mean, rstd, out):
    """Tutorial 05's launch: BLOCK_SIZE up to 64 KB of a row, num_warps from it."""
    rows, cols = x.shape
    block = min(65536 // x.element_size(), naiad.next_power_of_2(cols))
    k.layer_norm_fwd_kernel[(rows,)](x, out, w, b, mean, rstd, x.stride(0), cols, eps,
                                     BLOCK_SIZE=block, num_warps=min(max(block // 256, 1), 8))


def launch_row_sum(k, x, out):
    rows, cols = x.shape
    block = naiad.next_power_of_2(cols)
    k.row_sum_kernel[(rows,)](x, out, x.stride(0), cols, BLOCK_SIZE=block,
                              num_warps=row_warps(block))


def launch_cumsum(k, x, out, reverse=False):
    rows, cols = x.shape
    block = naiad.next_power_of_2(cols)
    k.cumsum_kernel[(rows,)](x, out, x.stride(0), cols, BLOCK_SIZE=block, REVERSE=reverse,
                             num_warps=row_warps(block))


def launch_embedding(k, indices, table, out):
    dim = table.shape[1]
    block = naiad.next_power_of_2(dim)
    k.embedding_kernel[(indices.numel(),)](indices, table, out, dim, BLOCK_SIZE=block,
                                           num_warps=row_warps(block))


def launch_matmul(k, a, b, config, out):
    """Tutorial 03's launch with one config: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)."""
    (m, kk), n = a.shape, b.shape[1]
    bm, bn, bk, warps, stages = config
    acc = k.tl.int32 if a.dtype == torch.int8 else k.tl.float32
    k.matmul_kernel[(naiad.cdiv(m, bm) * naiad.cdiv(n, bn),)](
        a, b, out, m, n, kk, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0),
        out.stride(1), BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
        ACC_TYPE=acc, num_warps=warps, num_stages=stages)


def launch_descriptor_matmul(k, a, b, config, out):
    """The same matmul through host tensor descriptors (each framework's ``TensorDescriptor``)."""
    (m, kk), n = a.shape, b.shape[1]
    bm, bn, bk, warps, stages = config
    descriptor = k.TensorDescriptor.from_tensor
    k.descriptor_matmul_kernel[(naiad.cdiv(m, bm) * naiad.cdiv(n, bn),)](
        descriptor(a, [bm, bk]), descriptor(b, [bk, bn]), descriptor(out, [bm, bn]), m, n, kk,
        BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, num_warps=warps,
        num_stages=stages)


def launch_attention(k, q, kk, v, config, out):
    """The online-softmax forward kernel: (BLOCK_M, BLOCK_N, num_warps, num_stages, causal)."""
    z, h, n_ctx, d = q.shape
    bm, bn, warps, stages, causal = config
    k.attention_kernel[(n_ctx // bm, z * h)](q, kk, v, out, 1 / math.sqrt(d), n_ctx, HEAD_DIM=d,
                                             BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                                             num_warps=warps, num_stages=stages)


# -- workloads --------------------------------------------------------------------------------
@dataclass
class Workload:
    title: str
    bytes: int                      # inputs read once + outputs written once
    args: tuple                     # inputs (and extra outputs), shared by every framework
    out: Any                        # the output the kernels write and the check reads
    launch: Callable                # launch(kernel_module, *args, out)
    reference: Callable             # torch's version: reference(*args) -> expected out
    rtol: float = 0.0
    atol: float = 0.0
    goal: tuple[str, float] | None = None    # on the ratio Naiad / Triton (GB/s)
    flops: int = 0                  # when set, the row is TFLOP/s of these, not GB/s


SOFTMAX_COLS = 4096


def randn(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.float32)


def empty(*shape):
    return torch.empty(*shape, device="cuda", dtype=torch.float32)


def make_add(quick: bool) -> Workload:
    n = 1 << (25 if quick else 28)
    x, y = randn(n), randn(n)
    return Workload(f"vector add 2^{n.bit_length() - 1} fp32", 3 * 4 * n, (x, y),
                    torch.empty_like(x), launch_add, torch.add, goal=(">=", 0.97))


def make_softmax(quick: bool) -> Workload:
    rows, cols = (4096 if quick else 32768), SOFTMAX_COLS
    x = randn(rows, cols)
    return Workload(f"softmax {rows}x{cols} fp32", 2 * 4 * rows * cols, (x,),
                    torch.empty_like(x), launch_softmax, lambda x: torch.softmax(x, dim=1),
                    rtol=1e-4, atol=1e-6)


def make_layernorm(quick: bool) -> Workload:
    rows, cols = (4096 if quick else 32768), 4096
    x = -2.3 + 0.5 * randn(rows, cols)
    w, b = torch.rand(cols, device="cuda"), torch.rand(cols, device="cuda")
    mean, rstd = empty(rows), empty(rows)
    eps = 1e-5
    return Workload(f"layernorm fwd {rows}x{cols} fp32",
                    4 * (2 * rows * cols + 2 * cols + 2 * rows), (x, w, b, eps, mean, rstd),
                    torch.empty_like(x), launch_layernorm,
                    lambda x, w, b, eps, *_: torch.nn.functional.layer_norm(
                        x, (cols,), w, b, eps),
                    rtol=1e-4, atol=1e-4)


def make_row_sum(quick: bool) -> Workload:
    rows, cols = (4096 if quick else 32768), 4096
    x = randn(rows, cols)
    return Workload(f"row sum {rows}x{cols} -> {rows} fp32", 4 * (rows * cols + rows), (x,),
                    empty(rows), launch_row_sum, lambda x: torch.sum(x, dim=1),
                    rtol=1e-4, atol=1e-3)


def make_cumsum(quick: bool, reverse: bool = False) -> Workload:
    rows, cols = (4096 if quick else 32768), 1024
    x = randn(rows, cols)
    if reverse:
        return Workload(f"reverse cumsum rows {rows}x{cols} fp32", 2 * 4 * rows * cols, (x,),
                        torch.empty_like(x), functools.partial(launch_cumsum, reverse=True),
                        lambda x: torch.cumsum(x.flip(1), dim=1).flip(1), rtol=1e-4, atol=1e-3)
    return Workload(f"cumsum rows {rows}x{cols} fp32", 2 * 4 * rows * cols, (x,),
                    torch.empty_like(x), launch_cumsum, lambda x: torch.cumsum(x, dim=1),
                    rtol=1e-4, atol=1e-3)


def make_embedding(quick: bool) -> Workload:
    count, vocab, dim = (1 << 17 if quick else 1 << 20), 100_000, 512
    indices = torch.randint(0, vocab, (count,), device="cuda", dtype=torch.int64)
    table = randn(vocab, dim)
    return Workload(f"embedding {count} of {vocab}x{dim} fp32", 8 * count + 2 * 4 * count * dim,
                    (indices, table), empty(count, dim), launch_embedding,
                    torch.nn.functional.embedding)


MATMUL_CONFIGS = {    # (M, N, K, dtype, B transposed, (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages))
    "matmul_fp16_4096": (4096, 4096, 4096, "float16", False, (128, 128, 32, 4, 3)),
    "matmul_fp16_8192": (8192, 8192, 8192, "float16", False, (128, 256, 64, 8, 3)),
    "matmul_bf16_8192": (8192, 8192, 8192, "bfloat16", False, (128, 256, 64, 8, 3)),
    "matmul_fp8_8192": (8192, 8192, 8192, "float8_e4m3fn", True, (128, 256, 128, 8, 3)),
    "matmul_tf32_4096": (4096, 4096, 4096, "float32", False, (128, 128, 32, 4, 3)),
    "matmul_int8_8192": (8192, 8192, 8192, "int8", True, (128, 256, 128, 8, 3)),
    "matmul_m16": (16, 8192, 8192, "float16", False, (16, 128, 128, 4, 4)),
    "matmul_m64": (64, 8192, 8192, "float16", False, (64, 128, 128, 4, 4)),
    "matmul_m128": (128, 8192, 8192, "float16", False, (128, 128, 64, 4, 4)),
    # the same, through host tensor descriptors (TMA on sm_90)
    "matmul_desc_fp16_4096": (4096, 4096, 4096, "float16", False, (128, 128, 64, 4, 3)),
    "matmul_desc_fp16_8192": (8192, 8192, 8192, "float16", False, (128, 256, 64, 8, 3)),
}


def make_matmul(name: str, quick: bool) -> Workload:
    m, n, kk, dtype, transposed, config = MATMUL_CONFIGS[name]
    if quick:
        m, n, kk = (max(16, m // 2), n // 2, kk // 2) if m > 128 else (m, n // 2, kk // 2)
    kind = getattr(torch, dtype)
    if kind == torch.int8:
        a = torch.randint(-8, 8, (m, kk), device="cuda", dtype=kind)
        b = torch.randint(-8, 8, (n, kk) if transposed else (kk, n), device="cuda", dtype=kind)
    else:
        a = randn(m, kk).to(kind)
        b = (randn(n, kk) if transposed else randn(kk, n)).to(kind)
    b = b.T if transposed else b
    out = torch.empty(m, n, device="cuda", dtype=torch.int32 if kind == torch.int8 else torch.float16)

    def reference(a, b, config):
        if a.dtype == torch.float32:       # the kernels' dots round to tf32: so does cuBLAS here
            torch.backends.cuda.matmul.allow_tf32 = True
        if a.dtype == torch.int8:          # no int8 matmul in torch on CUDA: through floats
            return (a.float() @ b.float()).to(torch.int32)
        if a.dtype.itemsize == 1:          # fp8: torch's scaled matmul (cuBLAS), unit scales
            one = torch.ones((), device="cuda")
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float16)
        return (a @ b).to(torch.float16)

    descriptors = name.startswith("matmul_desc")
    title = (f"matmul{' (descriptors)' if descriptors else ''} {dtype} {m}x{n}x{kk}"
             f"{' (B K-major)' if transposed else ''} "
             f"{config[0]}x{config[1]}x{config[2]} w{config[3]} s{config[4]}")
    tolerance = 0.0 if kind == torch.int8 else 3e-2
    launch = launch_descriptor_matmul if descriptors else launch_matmul
    return Workload(title, 0, (a, b, config), out, launch, reference, rtol=tolerance,
                    atol=tolerance * math.sqrt(kk), goal=(">=", 1.0), flops=2 * m * n * kk)


def make_attention(head_dim: int, causal: bool, quick: bool) -> Workload:
    z, h, n_ctx = (2, 16, 2048) if quick else (4, 32, 4096)
    q, k, v = (randn(z, h, n_ctx, head_dim).to(torch.float16) for _ in range(3))
    config = (128, 64, 4 if head_dim == 64 else 8, 3, causal)
    title = f"attention fwd B{z} H{h} N{n_ctx} D{head_dim}{' causal' if causal else ''}"
    return Workload(title, 0, (q, k, v, config), torch.empty_like(q), launch_attention,
                    lambda q, k, v, config: torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, is_causal=causal), rtol=1e-2, atol=1e-2, goal=(">=", 1.0),
                    flops=4 * z * h * n_ctx * n_ctx * head_dim // (2 if causal else 1))


COMPUTE = {**{name: functools.partial(make_matmul, name) for name in MATMUL_CONFIGS},
           **{f"attention_d{d}{'_causal' if c else ''}": functools.partial(make_attention, d, c)
              for d in (64, 128) for c in (False, True)}}


BANDWIDTH = {"add": make_add, "softmax": make_softmax, "layernorm": make_layernorm,
             "rowsum": make_row_sum, "cumsum": make_cumsum,
             "reverse_cumsum": functools.partial(make_cumsum, reverse=True),
             "embedding": make_embedding}


# -- measuring --------------------------------------------------------------------------------
@dataclass
class Settings:
    quick: bool
    warmup: int
    repeats: int
    launches: int
    launch_repeats: int
    cold_runs: int
    rounds: int             # of timing every column of a row in turn (the order alternating)

    @classmethod
    def of(cls, quick: bool) -> Settings:
        return cls(True, 5, 20, 2000, 3, 1, 1) if quick else cls(False, 10, 50, 10000, 9, 5, 4)


@dataclass
class Row:
    benchmark: str
    unit: str
    values: dict[str, float]        # framework ("naiad", "triton", "torch") -> value
    failures: list[str]
    goal: tuple[str, float] | None = None

    @property
    def ratio(self) -> float:
        return self.values.get("naiad", math.nan) / self.values.get("triton", math.nan)

    def goal_text(self) -> str:
        if self.goal is None:
            return ""
        op, bound = self.goal
        if math.isnan(self.ratio):
            return f"{op} {bound}"
        met = {">=": operator.ge, "<=": operator.le}[op](self.ratio, bound)
        return f"{op} {bound} {'met' if met else 'MISSED'}"


def check(got, want, rtol: float, atol: float) -> None:
    """Raise unless |got - want| <= atol + rtol * |want| everywhere (a NaN fails)."""
    if got.shape != want.shape:
        raise AssertionError(f"wrong shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    error = (got.double() - want.double()).abs()
    bad = ~(error <= atol + rtol * want.double().abs())
    if bad.any():
        raise AssertionError(f"wrong result: {int(bad.sum())} of {want.numel()} elements off, "
                             f"max |error| {error.max().item():.3g}")


def gpu_median_ms(fn: Callable[[], Any], s: Settings) -> float:
    """Median time of one call of ``fn`` on the GPU (torch.cuda.Events on the current stream)."""
    for _ in range(s.warmup):
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(s.repeats)]
    torch.cuda.synchronize()
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events)


def poison(out) -> None:
    """Fill ``out`` with what no kernel writes by accident (NaN; -1 for integers), so that a
    kernel which skips elements fails the check."""
    out.fill_(math.nan if out.dtype.is_floating_point else -1)


def bandwidth_rows(make: Callable[[bool], Workload], kernels: dict, s: Settings) -> list[Row]:
    """GB/s (or TFLOP/s, for a workload of ``flops``) of torch and each framework's kernel."""
    w = make(s.quick)
    amount, unit = (w.flops / 1e3, "TFLOP/s") if w.flops else (w.bytes, "GB/s")
    row = Row(w.title, unit, {}, [], w.goal)
    try:
        expected = w.reference(*w.args)
    except Exception as e:      # noqa: BLE001 -- a row reports its failure, the run goes on
        row.failures.append(f"torch FAIL: {first_line(e)}")
        return [row]
    runs = {"torch": lambda: w.reference(*w.args)}
    for framework, k in kernels.items():
        run = functools.partial(w.launch, k, *w.args, w.out)
        try:
            poison(w.out)
            run()
            check(w.out, expected, w.rtol, w.atol)
            runs[framework] = run
        except Exception as e:  # noqa: BLE001
            row.failures.append(f"{framework} FAIL: {first_line(e)}")
    for name, ms in interleaved_medians_ms(runs, s).items():
        row.values[name] = amount / ms / 1e6
    return [row]


def interleaved_medians_ms(runs: dict[str, Callable[[], Any]], s: Settings) -> dict[str, float]:
    """Per column, the median over ``s.rounds`` rounds of `gpu_median_ms`; each round times
    every column once, in an order that reverses from round to round, so that the GPU's clock
    and temperature drifts fall on all columns alike (timed one after the other, the 8192^3
    matmul's ratio moved by 5 % between runs)."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(s.rounds):
        for name in (list(runs) if r % 2 == 0 else list(reversed(runs))):
            samples[name].append(gpu_median_ms(runs[name], s))
    return {name: statistics.median(values) for name, values in samples.items()}


def host_medians_us(calls: dict[str, Callable[[], Any]], s: Settings) -> dict[str, float]:
    """Host time per call of each of ``calls`` over ``s.launches`` back-to-back calls and a final
    synchronize; median of ``s.launch_repeats`` rounds, each round timing every call once (in
    turn, so that a machine's slow moments fall on all of them alike)."""
    for call in calls.values():
        for _ in range(100):
            call()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(s.launch_repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(s.launches):
                call()
            torch.cuda.synchronize()
            samples[name].append((time.perf_counter() - start) / s.launches * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def launch_rows(kernels: dict, s: Settings) -> list[Row]:
    x, y = randn(64), randn(64)
    out = torch.empty_like(x)
    row = Row("warm launch, add of 64 fp32, grid (1,)", "us/launch", {}, [], ("<=", 0.5))
    calls = {"torch": lambda: torch.add(x, y, out=out)}
    for framework, k in kernels.items():
        try:
            launch = k.add_kernel[(1,)]
            out.fill_(math.nan)
            launch(x, y, out, 64, BLOCK_SIZE=64)
            check(out, x + y, 0.0, 0.0)
            calls[framework] = functools.partial(launch, x, y, out, 64, BLOCK_SIZE=64)
        except Exception as e:  # noqa: BLE001
            row.failures.append(f"{framework} FAIL: {first_line(e)}")
    row.values.update(host_medians_us(calls, s))
    # The same launch written as users write it inline: the kernel indexed at every call.
    inline = Row("warm launch, kernel[(1,)](...) at each call", "us/launch", {}, [],
                 ("<=", 0.5))
    inline_calls = {"torch": calls["torch"]}
    for framework, k in kernels.items():
        if framework in calls:
            inline_calls[framework] = functools.partial(
                lambda kernel: kernel[(1,)](x, y, out, 64, BLOCK_SIZE=64), k.add_kernel)
    inline.values.update(host_medians_us(inline_calls, s))
    return [row, inline]


COLD_ROWS = 4      # few rows, the columns (and so the specialization) of the softmax row

DRIVER_SETUP = {       # done before the clock starts: once per machine, not per kernel
    "naiad": "",
    "triton": "import triton; triton.runtime.driver.active.get_current_device()",
}

#: cold workload -> (inputs made before the clock starts, the first launch); both in bench/gpu.py's
#: terms (``launch_*`` functions of this module, ``kernels`` the framework's kernel module).
COLD_WORKLOADS = {
    "softmax": (f"x = torch.randn({COLD_ROWS}, {SOFTMAX_COLS}, device='cuda'); out = torch.empty_like(x)",
                "bench.launch_softmax(kernels, x, out)"),
    "matmul": ("a = torch.randn(512, 512, device='cuda', dtype=torch.float16); b = torch.randn_like(a); "
               "out = torch.empty_like(a)",
               "bench.launch_matmul(kernels, a, b, bench.MATMUL_CONFIGS['matmul_fp16_4096'][-1], out)"),
}

COLD_COMPILE = """
import sys, time
import torch
sys.path[:0] = [{kernel_dir!r}, {bench_dir!r}]
{setup}
torch.cuda.synchronize()
t0 = time.perf_counter()
import {module} as kernels
t1 = time.perf_counter()
{driver_setup}
import {bench_module} as bench
t2 = time.perf_counter()
{launch}
torch.cuda.synchronize()
t3 = time.perf_counter()
print(t1 - t0, t3 - t2)
"""


def cold_start_ms(framework: str, kernel_dir: str, workload: str) -> tuple[float, float]:
    """(import of the kernel module, first launch of ``workload``) in a new process with
    empty caches, ms."""
    setup, launch = COLD_WORKLOADS[workload]
    code = COLD_COMPILE.format(
        kernel_dir=kernel_dir, bench_dir=os.path.dirname(os.path.abspath(__file__)),
        bench_module=os.path.splitext(os.path.basename(__file__))[0], setup=setup, launch=launch,
        module=module_name(framework), driver_setup=DRIVER_SETUP[framework])
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NAIAD_CACHE_DIR=os.path.join(cache, "naiad"),
                   TRITON_CACHE_DIR=os.path.join(cache, "triton"))
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=600)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit status {done.returncode}")
    import_s, launch_s = map(float, done.stdout.split()[-2:])
    return import_s * 1000, launch_s * 1000


def compile_rows(kernels: dict, s: Settings) -> list[Row]:
    kernel_dir = os.path.dirname(kernels["naiad"].__file__)
    imports = Row("cold start: import of the kernel module", "ms", {}, [])
    launches = {"softmax": Row(f"cold compile: first softmax launch (BLOCK {SOFTMAX_COLS})", "ms",
                               {}, [], ("<=", 0.7)),
                "matmul": Row("cold compile: first fp16 matmul launch (128x128x32 w4 s3, tensor cores)",
                              "ms", {}, [], ("<=", 0.7))}
    runs = {(f, w): [] for f in kernels for w in launches}
    for _ in range(s.cold_runs):             # the frameworks in turn, round after round
        for key in list(runs):
            try:
                runs[key].append(cold_start_ms(*key[:1], kernel_dir, key[1]))
            except Exception as e:  # noqa: BLE001
                launches[key[1]].failures.append(f"{key[0]} FAIL: {first_line(e)}")
                del runs[key]
    for (framework, workload), samples in runs.items():
        if workload == "softmax":
            imports.values[framework] = statistics.median(r[0] for r in samples)
        launches[workload].values[framework] = statistics.median(r[1] for r in samples)
    return [imports, *launches.values()]


BENCHMARKS: dict[str, Callable[[dict, Settings], list[Row]]] = {
    **{name: functools.partial(bandwidth_rows, make) for name, make in BANDWIDTH.items()},
    **{name: functools.partial(bandwidth_rows, make) for name, make in COMPUTE.items()},
    "launch": launch_rows, "compile": compile_rows}
NAMES = list(BENCHMARKS)


# -- output -----------------------------------------------------------------------------------
COLUMNS = ("benchmark", "unit", "naiad", "triton", "torch", "naiad/triton", "goal", "status")


def cells(row: Row, digits: int, missing: str) -> list[str]:
    """The row's columns as text: values with ``digits`` significant digits, ``missing`` for
    none."""
    def number(v: float) -> str:
        return missing if math.isnan(v) else f"{v:.{digits}g}"

    values = [number(row.values.get(f, math.nan)) for f in (*FRAMEWORKS, "torch")]
    return [row.benchmark, row.unit, *values, number(row.ratio), row.goal_text(),
            "; ".join(row.failures) or "ok"]


def print_table(rows: list[Row]) -> None:
    table = [list(COLUMNS)] + [cells(r, 4, "-") for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS) - 1)]
    for line in table:
        print("  ".join(c.ljust(wd) for c, wd in zip(line, widths)) + "  " + line[-1])


def write_csv(path: str, rows: list[Row]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows(cells(r, 6, "") for r in rows)


def plot(csv_path: str) -> str | None:
    """Each row's speed relative to Triton's, Naiad's and torch's (the ratio of rates, or the
    inverse ratio of times: above 1 is faster), as bars in a PNG beside the CSV; returns its
    path, or None without matplotlib."""
    rows = plots.read_rows(csv_path, *COLUMNS[:5])
    rows = [r for r in rows if r["unit"]]            # a benchmark that failed as a whole has none

    def speed(row: dict[str, str], framework: str) -> float:
        ratio = plots.number(row[framework]) / plots.number(row["triton"])
        return ratio if row["unit"].endswith("/s") else 1 / ratio

    panel = plots.Bars("speed relative to Triton (rates: GB/s, TFLOP/s; times: launch, compile)",
                       "speed / Triton's (above 1: faster than Triton)",
                       [f"{r['benchmark']} [{r['unit']}]" for r in rows],
                       {name: [speed(r, column) for r in rows] for name, column in
                        (("Naiad", "naiad"), ("torch", "torch"))}, reference=1.0)
    return plots.write_png(csv_path, [panel], "GPU: Naiad and torch against Triton", columns=1,
                           panel_width=11)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="benchmarks: " + ", ".join(NAMES))
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes and fewer repeats (a smoke run of about a minute)")
    parser.add_argument("--only", type=lambda v: [n.strip() for n in v.split(",") if n.strip()],
                        default=NAMES, metavar="NAME,...", help="run only these benchmarks")
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(__file__), "results",
                                                      "gpu.csv"),
                        help="where to write the table (default: bench/results/gpu.csv)")
    parser.add_argument("--plot", metavar="CSV", help="only draw the plot of an earlier run's CSV")
    args = parser.parse_args()
    unknown = [n for n in args.only if n not in NAMES]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)} (known: {', '.join(NAMES)})")
    return args


def main() -> int:
    args = parse_args()
    if args.plot:
        plot(args.plot)
        return 0
    if torch is None:
        sys.exit("bench/gpu.py needs torch (with CUDA): pip install torch")
    if not torch.cuda.is_available():
        sys.exit("bench/gpu.py needs a CUDA device: torch.cuda.is_available() is False "
                 "(run it on a machine with an NVIDIA GPU)")
    settings = Settings.of(args.quick)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as kernel_dir:
        write_kernel_modules(kernel_dir)
        kernels = load_kernels(kernel_dir)
        versions = ", ".join(f"{name} {sys.modules[name].__version__}"
                             for name in ("naiad", "triton", "torch") if name in sys.modules)
        print(f"{torch.cuda.get_device_name()}: {versions}{' (quick)' if args.quick else ''}")
        rows = []
        for name in args.only:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            try:
                rows.extend(BENCHMARKS[name](kernels, settings))
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001 -- e.g. a kernel's fault broke the CUDA context
                rows.append(Row(name, "", {}, [f"FAIL: {first_line(e)}"]))
    print_table(rows)
    write_csv(args.csv, rows)
    print(f"wrote {args.csv}")
    plot(args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
