import os, sys
if os.environ.get("NAIAD_TREE"): sys.path.insert(0, os.environ["NAIAD_TREE"])
import time, statistics, sys, torch
import naiad, naiad.language as tl
from naiad.tools import gallery

@naiad.jit
def attention_kt(Q, K, V, Out, sm_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
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
    for start_n in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start_n + offs_n)[:, None] * HEAD_DIM + offs_d[None, :])
        qk = tl.dot(q, k.T)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + base + (start_n + offs_n)[:, None] * HEAD_DIM + offs_d[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc)
        l_i = l_i * alpha + l_ij
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(Out.dtype.element_ty))

n_ctx = int(sys.argv[1]); dt = getattr(torch, sys.argv[2])
q, k, v = (torch.randn(1, 8, n_ctx, 64).to(dt) for _ in range(3))
out = torch.empty_like(q); out2 = torch.empty_like(q)
f1 = lambda: gallery.attention(q, k, v, out)
f2 = lambda: attention_kt[(n_ctx // 64, 8)](q, k, v, out2, 64 ** -0.5, n_ctx, HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64)
sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)
f1(); f2(); want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
print("err", float((out.float() - want).abs().max()), float((out2.float() - want).abs().max()))
r = {"sdpa": [], "gallery": [], "k.T": []}
for _ in range(5):
    for key, f in (("sdpa", sdpa), ("gallery", f1), ("k.T", f2)):
        time.sleep(0.1); f(); s = time.perf_counter(); f(); r[key].append(time.perf_counter() - s)
m = {kk: statistics.median(v) for kk, v in r.items()}
print(n_ctx, sys.argv[2], {kk: f"{m['sdpa'] / v:.2f}x" for kk, v in m.items()})
