"""Where a CPU matmul's time goes: one ``tile`` x ``tile`` dot kernel taken apart, on one
thread, against its peer on one thread, in one run.

    NAIAD_CPU_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
        python bench/cpu_matmul_parts.py [--tile 32] [--size 1024] [--dtype fp32] [--csv PATH]

``--dtype``: fp32 (the peer: numpy's BLAS), bf16 with fp32 sums (torch's bf16 matmul: oneDNN,
on AMX tiles where the processor has them) or int8 with int32 sums (``torch._int_mm``).
Rows, each a Triton-language kernel of K blocks of 32 (int8: 64):

- ``dot alone``: ``acc = tl.dot(a, b, acc)`` over operands loaded once, before the K loop;
- ``copies from L1``: the operands loaded again every trip, from the same few KB;
- ``masked copies from L1``: the same loads under the gallery kernel's masks (M, N and K
  given at run time);
- ``moving through the matrices``: unmasked tiles walking a ``size`` x ``size`` pair of
  matrices as the gallery's kernel does (``size``^3 work);
- ``gallery kernel``: `naiad.tools.gallery.matmul_kernel` at ``size``^3;
- ``through block pointers`` / ``through tensor descriptors``: the same matmul with its tiles
  read through ``tl.make_block_ptr`` (bounds checked both ways, advanced along K) or
  ``tl.make_tensor_descriptor``.

The first three run 64 programs over a K of 16,384.  Figures are the best of 5 rounds of 3
calls (GFLOP/s; int8: GOP/s); the peer's is its ``a @ b`` at ``size``^3 on the thread count
its library was given.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from typing import Any, Callable

import numpy as np

import naiad
import naiad.language as tl
from naiad.tools.gallery import matmul_kernel

try:
    import torch
except ImportError:
    torch = None

PROGRAMS = 64
LONG_K = 1 << 14
#: K blocks by dtype: an AMX tile row's k in bf16 and int8 (the blocks their kernels pick).
BLOCK_K = {"fp32": 32, "bf16": 32, "int8": 64}


@naiad.jit
def dot_alone(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    acc = tl.zeros((BM, BN), dtype=tl.int32 if a_ptr.dtype.element_ty == tl.int8 else tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + tl.program_id(0) * BM * BN + rm[:, None] * BN + rn[None, :], acc)


@naiad.jit
def copies_in_l1(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 MASKED: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.int32 if a_ptr.dtype.element_ty == tl.int8 else tl.float32)
    for k in range(0, K, BK):
        if MASKED:
            a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :],
                        mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
            b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :],
                        mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        else:
            a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
            b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + tl.program_id(0) * BM * BN + rm[:, None] * BN + rn[None, :], acc)


@naiad.jit
def moving(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Program ``pid`` multiplies row block ``pid % (K / BM)`` by column block ``pid // (K / BM)``
    of two K x K matrices, unmasked."""
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    pid = tl.program_id(0)
    row_blocks = K // BM
    acc = tl.zeros((BM, BN), dtype=tl.int32 if a_ptr.dtype.element_ty == tl.int8 else tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + ((pid % row_blocks) * BM + rm)[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * K + (pid // row_blocks) * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + pid * BM * BN + rm[:, None] * BN + rn[None, :], acc)


@naiad.jit
def block_pointer_matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """``c = a @ b`` (K x K each) through block pointers, one program per BM x BN block."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, (K, K), (K, 1), (pid_m * BM, 0), (BM, BK), (1, 0))
    b_block = tl.make_block_ptr(b_ptr, (K, K), (K, 1), (0, pid_n * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.int32 if a_ptr.dtype.element_ty == tl.int8 else tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(a_block, boundary_check=(0, 1)), tl.load(b_block, boundary_check=(0, 1)), acc)
        a_block = tl.advance(a_block, (0, BK))
        b_block = tl.advance(b_block, (BK, 0))
    c_block = tl.make_block_ptr(c_ptr, (K, K), (K, 1), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    tl.store(c_block, acc, boundary_check=(0, 1))


@naiad.jit
def descriptor_matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """``c = a @ b`` (K x K each) through tensor descriptors."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, K], strides=[K, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[K, K], strides=[K, 1], block_shape=[BM, BN])
    acc = tl.zeros((BM, BN), dtype=tl.int32 if a_ptr.dtype.element_ty == tl.int8 else tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc)


def best_gflops(call: Callable[[], Any], flops: float, rounds: int = 5, calls: int = 3) -> float:
    call()
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = max(best, calls * flops / (time.perf_counter() - start) / 1e9)
    return best


def operands(dtype: str, shape: tuple[int, int], rng: Any) -> Any:
    """Random operands of ``shape``: numpy fp32, or torch bf16 / int8."""
    if dtype == "fp32":
        return rng.standard_normal(shape, dtype=np.float32)
    if dtype == "bf16":
        return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32)).bfloat16()
    return torch.from_numpy(rng.integers(-128, 128, shape).astype(np.int8))


def results(dtype: str, shape: tuple[int, ...]) -> Any:
    """An output of ``shape`` in the dtype the dot sums in."""
    if dtype == "fp32":
        return np.zeros(shape, np.float32)
    return torch.zeros(shape, dtype=torch.float32 if dtype == "bf16" else torch.int32)


def peer(dtype: str, a: Any, b: Any) -> tuple[str, Callable[[], Any]]:
    """The library matmul a row is compared with, and a call of it."""
    if dtype == "fp32":
        return "numpy", lambda: a @ b
    if dtype == "bf16":
        return "torch", lambda: a @ b
    return "torch._int_mm", lambda: torch._int_mm(a, b)


def rows(tile: int, size: int, dtype: str) -> list[tuple[str, float]]:
    rng = np.random.default_rng(0)
    block_k = BLOCK_K[dtype]
    small_a = operands(dtype, (tile, block_k), rng)
    small_b = operands(dtype, (block_k, tile), rng)
    out = results(dtype, (max(PROGRAMS, (size // tile) ** 2), tile, tile))
    a, b = operands(dtype, (size, size), rng), operands(dtype, (size, size), rng)
    c = results(dtype, (size, size))
    long_flops, flops = 2.0 * PROGRAMS * tile * tile * LONG_K, 2.0 * size ** 3
    blocks = (size // tile) ** 2
    small = dict(BM=tile, BN=tile, BK=block_k)
    name, library = peer(dtype, a, b)
    return [
        ("dot alone", best_gflops(lambda: dot_alone[(PROGRAMS,)](small_a, small_b, out, LONG_K, **small),
                                  long_flops)),
        ("copies from L1", best_gflops(lambda: copies_in_l1[(PROGRAMS,)](
            small_a, small_b, out, tile, tile, LONG_K, MASKED=False, **small), long_flops)),
        ("masked copies from L1", best_gflops(lambda: copies_in_l1[(PROGRAMS,)](
            small_a, small_b, out, tile, tile, LONG_K, MASKED=True, **small), long_flops)),
        (f"moving through {size}^3", best_gflops(lambda: moving[(blocks,)](a, b, out, size, **small), flops)),
        (f"gallery kernel {size}^3", best_gflops(lambda: matmul_kernel[(size // tile, size // tile)](
            a, b, c, size, size, size, size, 1, size, 1, size, 1, BLOCK_M=tile, BLOCK_N=tile,
            BLOCK_K=block_k), flops)),
        (f"through block pointers {size}^3", best_gflops(lambda: block_pointer_matmul[(size // tile, size // tile)](
            a, b, c, size, **small), flops)),
        (f"through tensor descriptors {size}^3", best_gflops(lambda: descriptor_matmul[(size // tile, size // tile)](
            a, b, c, size, **small), flops)),
        (f"{name} {size}^3", best_gflops(library, flops)),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tile", type=int, default=32)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--dtype", choices=sorted(BLOCK_K), default="fp32")
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(__file__), "results",
                                                      "cpu-matmul-parts.csv"))
    args = parser.parse_args()
    block_k = BLOCK_K[args.dtype]
    if args.size % args.tile or args.size % block_k:
        sys.exit(f"--size must be a multiple of --tile and of {block_k}")
    if args.dtype != "fp32" and torch is None:
        sys.exit(f"--dtype {args.dtype} needs torch")
    measured = rows(args.tile, args.size, args.dtype)
    peer_rate = measured[-1][1]
    print(f"{args.dtype}, tile {args.tile}, K blocks of {block_k}, threads: NAIAD_CPU_THREADS="
          f"{os.environ.get('NAIAD_CPU_THREADS', '(all)')}")
    print(f"{'kernel':38s} {'GFLOP/s':>8s} {'/ peer':>8s}")
    for name, rate in measured:
        print(f"{name:38s} {rate:8.1f} {rate / peer_rate:8.2f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["kernel", "dtype", "tile", "GFLOP/s", "over the peer"])
        writer.writerows([name, args.dtype, args.tile, f"{rate:.1f}", f"{rate / peer_rate:.3f}"]
                         for name, rate in measured)
    print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
