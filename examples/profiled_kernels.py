"""Two kernels that declare their work for naiad.profiler, as Triton kernels do for proton:
``@naiad.jit(launch_metadata=fn)``, ``fn(grid, metadata, args)`` returning FLOPs and bytes.

    naiad profile examples/profiled_kernels.py                 # the summary table
    naiad profile --trace trace.json examples/profiled_kernels.py   # and a Chrome trace
    NAIAD_PROFILE=1 python examples/profiled_kernels.py         # the table at exit, on stderr

Results are checked against numpy.
"""

import numpy as np

import naiad
import naiad.language as tl


def matmul_work(grid, metadata, args):
    m, k = args["a"].shape
    n = args["b"].shape[1]
    return {"name": f"matmul {m}x{n}x{k}", "flops32": 2 * m * n * k,
            "bytes": (m * k + k * n + m * n) * args["a"].itemsize}


@naiad.jit(launch_metadata=matmul_work)
def matmul(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, y, acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def add_work(grid, metadata, args):
    return {"flops32": args["n"], "bytes": 3 * args["n"] * args["x"].itemsize}


@naiad.jit(launch_metadata=add_work)
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256), dtype=np.float32)
    b = rng.standard_normal((256, 256), dtype=np.float32)
    c = np.empty((256, 256), np.float32)
    for _ in range(10):
        matmul[(4, 4)](a, b, c, 256, 256, 256, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
    x = rng.standard_normal(1 << 20, dtype=np.float32)
    out = np.empty_like(x)
    for _ in range(20):
        add[(naiad.cdiv(x.size, 4096),)](x, x, out, x.size, BLOCK=4096)
    np.testing.assert_array_equal(out, x + x)
    print("results match numpy")


if __name__ == "__main__":
    main()
