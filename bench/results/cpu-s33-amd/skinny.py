import time, statistics, numpy as np, torch, sys
import naiad
from naiad.tools.gallery import linear_kernel, matmul_kernel
m, n, k = (int(v) for v in sys.argv[1].split(",")); bm, bn = int(sys.argv[2]), int(sys.argv[3]); dt = sys.argv[4]
x = torch.randn(m, k); w = torch.randn(n, k)
if dt == "bf16": x, w = x.bfloat16(), w.bfloat16()
y = torch.zeros(m, n)
f = lambda: linear_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](x, w, y, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32)
g = lambda: matmul_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](x, w.T, y, m, n, k, k, 1, 1, k, n, 1, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32)
f(); e1 = float((y - (x.float() @ w.float().T)).abs().max()); g(); e2 = float((y - (x.float() @ w.float().T)).abs().max())
fl = 2.0 * m * n * k; r = {"torch": [], "trans": [], "strides": []}
xn, wn = x.float().numpy(), w.float().numpy()
for _ in range(7):
    for key, h in (("torch", lambda: torch.nn.functional.linear(x, w)), ("trans", f), ("strides", g)):
        s = time.perf_counter(); h(); r[key].append(fl / (time.perf_counter() - s) / 1e9)
med = {kk: statistics.median(v) for kk, v in r.items()}
print(dt, m, n, k, bm, bn, "err", e1, e2, {kk: round(v, 1) for kk, v in med.items()}, "ratio trans", round(med["trans"] / med["torch"], 2), "strides", round(med["strides"] / med["torch"], 2))
