"""x @ w.T three ways (gallery matmul over w.T's strides, a tl.trans kernel, a block pointer over w.T) under $NAIAD_TREE: GFLOP/s and ratio to numpy (fp32) / torch (bf16)."""
import os, sys, time, statistics
sys.path.insert(0, os.environ["NAIAD_TREE"])
import numpy as np, torch
import naiad, naiad.language as tl
assert naiad.__file__.startswith(os.environ["NAIAD_TREE"]), naiad.__file__
from naiad.tools.gallery import matmul_kernel

@naiad.jit
def trans_kernel(x_ptr, w_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(x_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[:, None] * K + (k + rk)[None, :], mask=(rn[:, None] < N) & ((k + rk)[None, :] < K), other=0.0)
        acc = tl.dot(x, tl.trans(w), acc)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

@naiad.jit
def block_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, (M, K), (sam, sak), (pid_m * BM, 0), (BM, BK), (1, 0))
    b_block = tl.make_block_ptr(b_ptr, (K, N), (sbk, sbn), (0, pid_n * BN), (BK, BN), (0, 1))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(a_block, boundary_check=(0, 1)), tl.load(b_block, boundary_check=(0, 1)), acc)
        a_block = tl.advance(a_block, (0, BK))
        b_block = tl.advance(b_block, (BK, 0))
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

m, n, k = (int(v) for v in sys.argv[1].split(",")); tile = int(sys.argv[2]); dt = sys.argv[3]
x, w = torch.randn(m, k), torch.randn(n, k)
if dt == "bf16": x, w = x.bfloat16(), w.bfloat16()
y = torch.zeros(m, n)
bm = min(tile, 16 if m <= 16 else tile)
grid = (naiad.cdiv(m, bm), naiad.cdiv(n, tile))
wt = w.T
wc = w.T.contiguous()
ways = {
    "plain": lambda: matmul_kernel[grid](x, wc, y, m, n, k, k, 1, n, 1, n, 1, BLOCK_M=bm, BLOCK_N=tile, BLOCK_K=32),
    "strides": lambda: matmul_kernel[grid](x, wt, y, m, n, k, k, 1, 1, k, n, 1, BLOCK_M=bm, BLOCK_N=tile, BLOCK_K=32),
    "trans": lambda: trans_kernel[grid](x, w, y, m, n, k, BM=bm, BN=tile, BK=32),
    "blockptr": lambda: block_kernel[grid](x, wt, y, m, n, k, k, 1, 1, k, BM=bm, BN=tile, BK=32),
}
want = (x.double() @ w.double().T).float()
for name, f in ways.items():
    f(); err = float((y - want).abs().max() / want.abs().max()); assert err < 1e-3, (name, err)
xn, wn = x.float().numpy(), w.float().numpy()
peer = (lambda: xn @ wn.T) if dt == "fp32" else (lambda: torch.nn.functional.linear(x, w))
calls = {"peer": peer, **ways}
fl = 2.0 * m * n * k; r = {kk: [] for kk in calls}
for f in calls.values(): f()
for _ in range(5):
    for kk, f in calls.items():
        best = 0
        for _ in range(2):
            s = time.perf_counter(); f(); best = max(best, fl / (time.perf_counter() - s) / 1e9)
        r[kk].append(best)
med = {kk: statistics.median(v) for kk, v in r.items()}
print(f"{os.path.basename(os.environ['NAIAD_TREE'])} {dt} {m}x{n}x{k} t{tile}: peer {med['peer']:.0f} " + " ".join(f"{kk} {med[kk]:.0f} ({med[kk]/med['peer']:.2f})" for kk in ways), flush=True)
