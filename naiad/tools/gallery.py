"""The example kernels `naiad demo` runs (and the benchmarks reuse): Triton-style kernels, each
with a launcher taking numpy arrays and a numpy reference."""

from __future__ import annotations

import naiad
import naiad.language as tl


@naiad.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@naiad.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    tl.store(out_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=mask)


@naiad.jit
def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(centered * centered, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, centered * rstd * w + b, mask=mask)


@naiad.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc_type = tl.int32 if a_ptr.dtype.element_ty == tl.int8 else tl.float32    # exact int8 sums
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_type)
    for k in range(0, K, BLOCK_K):
        a_mask = (rm[:, None] < M) & ((k + rk)[None, :] < K)
        b_mask = ((k + rk)[:, None] < K) & (rn[None, :] < N)
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak, mask=a_mask, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn, mask=b_mask, other=0.0)
        acc = tl.dot(a, b, acc)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc, mask=c_mask)


@naiad.jit
def linear_kernel(x_ptr, w_ptr, y_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    """``y = x @ wᵀ``, a linear layer: ``w`` stored ``[N, K]`` (torch's ``Linear.weight``),
    each block loaded as rows of ``w`` and turned over by ``tl.trans`` for the dot."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc_type = tl.int32 if x_ptr.dtype.element_ty == tl.int8 else tl.float32
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_type)
    for k in range(0, K, BLOCK_K):
        x = tl.load(x_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[:, None] * K + (k + rk)[None, :],
                    mask=(rn[:, None] < N) & ((k + rk)[None, :] < K), other=0.0)
        acc = tl.dot(x, tl.trans(w), acc)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@naiad.jit
def matmul_tutorial_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                           stride_bn, stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr,
                           BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                           GROUP_SIZE_M: tl.constexpr):
    """Triton's tutorial 03 matmul: programs swizzled in groups of GROUP_SIZE_M rows of blocks
    (for cache reuse), pointer tensors advanced through the K loop."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, accumulator, mask=c_mask)


@naiad.jit
def grouped_matmul_kernel(a_addresses, b_addresses, c_addresses, shapes, group_count,
                          NUM_PROGRAMS: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Triton's tutorial 08: many independent matmuls ``c[g] = a[g] @ b[g]`` of different
    shapes in one launch.  The problems' addresses (int64) and ``(M, N, K)`` rows are in device
    arrays; a fixed number of programs walks all the problems' output tiles, each taking every
    ``NUM_PROGRAMS``-th tile, so that one launch keeps every core busy whatever the shapes.
    Row-major, contiguous fp16 operands, accumulated in fp32, C in fp16."""
    tile = tl.program_id(0)
    seen = 0
    for g in range(0, group_count):
        m = tl.load(shapes + 3 * g)
        n = tl.load(shapes + 3 * g + 1)
        k = tl.load(shapes + 3 * g + 2)
        tiles_n = tl.cdiv(n, BLOCK_N)
        count = tl.cdiv(m, BLOCK_M) * tiles_n
        a_ptr = tl.load(a_addresses + g).to(tl.pointer_type(tl.float16))
        b_ptr = tl.load(b_addresses + g).to(tl.pointer_type(tl.float16))
        c_ptr = tl.load(c_addresses + g).to(tl.pointer_type(tl.float16))
        while tile >= seen and tile < seen + count:
            rm = (tile - seen) // tiles_n * BLOCK_M + tl.arange(0, BLOCK_M)
            rn = (tile - seen) % tiles_n * BLOCK_N + tl.arange(0, BLOCK_N)
            rk = tl.arange(0, BLOCK_K)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for kk in range(0, k, BLOCK_K):
                a = tl.load(a_ptr + rm[:, None] * k + (kk + rk)[None, :],
                            mask=(rm[:, None] < m) & ((kk + rk)[None, :] < k), other=0.0)
                b = tl.load(b_ptr + (kk + rk)[:, None] * n + rn[None, :],
                            mask=((kk + rk)[:, None] < k) & (rn[None, :] < n), other=0.0)
                acc = tl.dot(a, b, acc)
            tl.store(c_ptr + rm[:, None] * n + rn[None, :], acc.to(tl.float16),
                     mask=(rm[:, None] < m) & (rn[None, :] < n))
            tile += NUM_PROGRAMS
        seen += count


@naiad.jit
def attention_kernel(Q, K, V, Out, sm_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    """Triton's tutorial 06 forward: a block of queries against every block of keys, the softmax
    kept online (running maximum and sum) in fp32, P cast to V's dtype for the second dot.  K is
    read as Kᵀ, down its columns."""
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
        k = tl.load(K + base + (start_n + offs_n)[None, :] * HEAD_DIM + offs_d[:, None])
        qk = tl.dot(q, k)
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


@naiad.jit
def dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    keep = tl.rand(seed, offsets) > p
    tl.store(out_ptr + offsets, tl.where(keep, x / (1 - p), 0.0), mask=mask)


def add(x, y):
    import numpy as np

    out = np.empty_like(x)
    add_kernel[(naiad.cdiv(x.size, 1024),)](x, y, out, x.size, BLOCK=1024)
    return out


def softmax(x):
    import numpy as np

    out = np.empty_like(x)
    rows, cols = x.shape
    softmax_kernel[(rows,)](out, x, x.strides[0] // x.itemsize, cols,
                            BLOCK=naiad.next_power_of_2(cols))
    return out


def layernorm(x, w, b, eps=1e-5):
    import numpy as np

    out = np.empty_like(x)
    rows, cols = x.shape
    layernorm_kernel[(rows,)](x, out, w, b, x.strides[0] // x.itemsize, cols, eps,
                              BLOCK=naiad.next_power_of_2(cols))
    return out


def matmul(a, b, block_m=64, block_n=64, block_k=32):
    import numpy as np

    m, k = a.shape
    n = b.shape[1]
    c = np.empty((m, n), dtype=np.float32)
    grid = (naiad.cdiv(m, block_m), naiad.cdiv(n, block_n))
    matmul_kernel[grid](a, b, c, m, n, k, k, 1, n, 1, n, 1,
                        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c


def linear(x, w, block_m=64, block_n=64, block_k=32):
    """``x @ w.T`` (``w`` a ``[N, K]`` weight) with `linear_kernel`, into a new fp32 array."""
    import numpy as np

    m, k = x.shape
    n = w.shape[0]
    y = np.empty((m, n), dtype=np.float32)
    linear_kernel[(naiad.cdiv(m, block_m), naiad.cdiv(n, block_n))](x, w, y, m, n, k, BLOCK_M=block_m,
                                                                    BLOCK_N=block_n, BLOCK_K=block_k)
    return y


def matmul_tutorial(a, b, block_m=128, block_n=128, block_k=32, group_m=8):
    """``a @ b`` with `matmul_tutorial_kernel`.  128x128 tiles by default: each element loaded
    feeds twice the multiply-adds of a 64x64 tile (on 2 cores, 1024^3 fp32 runs about 20%
    faster)."""
    import numpy as np

    m, k = a.shape
    n = b.shape[1]
    c = np.empty((m, n), dtype=np.float32)
    grid = (naiad.cdiv(m, block_m) * naiad.cdiv(n, block_n),)
    matmul_tutorial_kernel[grid](a, b, c, m, n, k, a.strides[0] // a.itemsize,
                                 a.strides[1] // a.itemsize, b.strides[0] // b.itemsize,
                                 b.strides[1] // b.itemsize, n, 1, BLOCK_SIZE_M=block_m,
                                 BLOCK_SIZE_N=block_n, BLOCK_SIZE_K=block_k, GROUP_SIZE_M=group_m)
    return c


def grouped_matmul(a_list, b_list, programs=16, block=32):
    """``[a @ b for a, b in zip(a_list, b_list)]`` (fp16 numpy arrays, any shapes that
    multiply) in one launch of `grouped_matmul_kernel` with ``programs`` programs."""
    import numpy as np

    a_list = [np.ascontiguousarray(a, dtype=np.float16) for a in a_list]
    b_list = [np.ascontiguousarray(b, dtype=np.float16) for b in b_list]
    c_list = [np.empty((a.shape[0], b.shape[1]), dtype=np.float16) for a, b in zip(a_list, b_list)]
    shapes = np.array([(a.shape[0], b.shape[1], a.shape[1]) for a, b in zip(a_list, b_list)],
                      dtype=np.int32).ravel()

    def addresses(arrays):
        return np.array([x.ctypes.data for x in arrays], dtype=np.int64)

    grouped_matmul_kernel[(programs,)](addresses(a_list), addresses(b_list), addresses(c_list), shapes,
                                       len(a_list), NUM_PROGRAMS=programs, BLOCK_M=block, BLOCK_N=block,
                                       BLOCK_K=block)
    return c_list


def attention(q, k, v, out, block=64):
    """``softmax(q kᵀ / sqrt(d)) v`` into ``out`` with `attention_kernel`: contiguous
    ``(batch, heads, n, d)`` arrays (numpy, or torch for bf16), ``n`` a multiple of ``block``."""
    batch, heads, n_ctx, head_dim = q.shape
    attention_kernel[(n_ctx // block, batch * heads)](q, k, v, out, head_dim ** -0.5, n_ctx,
                                                      HEAD_DIM=head_dim, BLOCK_M=block, BLOCK_N=block)
    return out


def dropout(x, p, seed):
    import numpy as np

    out = np.empty_like(x)
    dropout_kernel[(naiad.cdiv(x.size, 1024),)](x, out, x.size, p, seed, BLOCK=1024)
    return out


# -- numpy references -------------------------------------------------------------------------
def softmax_reference(x):
    z = x - x.max(axis=1, keepdims=True)
    num = __import__("numpy").exp(z)
    return num / num.sum(axis=1, keepdims=True)


def layernorm_reference(x, w, b, eps=1e-5):
    np = __import__("numpy")
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b
