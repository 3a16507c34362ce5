"""Dot operands kept across the programs a thread runs (`naiad.backends.cpu.lowering.operand_cache`).

Matmuls whose programs share rows of A and columns of B are checked against numpy in fp32,
bf16 and int8: over tile sizes, masked edges, K loops longer than the copies kept, a launch
after its operands changed in place, a loop run twice by an outer one that writes what it
reads, programs that write what they then read, and tiles at one address read with two row
strides.  Which kernels keep copies at all is checked in their LLVM IR (the copies live in
memory ``naiad_grid`` allocates)."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.tools.gallery import matmul_kernel

pytestmark = pytest.mark.shipped_backends

torch = pytest.importorskip("torch")


def _operand(dtype, rng, *shape):
    if dtype == "int8":
        return torch.from_numpy(rng.integers(-128, 128, shape).astype(np.int8))
    values = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    return values.bfloat16() if dtype == "bf16" else values


def _result(dtype, *shape):
    return torch.zeros(shape, dtype=torch.int32) if dtype == "int8" else torch.full(shape, float("nan"))


def _check(dtype, c, a, b):
    """``c`` against the products of ``a`` and ``b`` summed in float64 (int8: exactly)."""
    want = a.double().numpy() @ b.double().numpy()
    if dtype == "int8":
        np.testing.assert_array_equal(c.numpy(), want.astype(np.int64))
    else:
        np.testing.assert_allclose(c.numpy(), want, rtol=1e-4, atol=1e-3 * np.sqrt(a.shape[1]))


def _gallery(a, b, c, bm, bn, bk, kernel=matmul_kernel):
    m, k = a.shape
    n = b.shape[1]
    kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "int8"])
@pytest.mark.parametrize("m, n, k, bm, bn", [
    (256, 256, 512, 64, 64),             # 16 programs: rows and columns each read by four
    (128, 256, 10240, 64, 128),          # more trips than the copies kept (`OPERAND_BYTES`)
    (200, 130, 320, 32, 32),             # masked edges: edge tiles copied every trip
    (96, 384, 256, 32, 64),
    (512, 64, 1024, 16, 64)])
def test_programs_sharing_operands_match_numpy(dtype, m, n, k, bm, bn):
    rng = np.random.default_rng(m + n + k)
    a, b = _operand(dtype, rng, m, k), _operand(dtype, rng, k, n)
    c = _result(dtype, m, n)
    _gallery(a, b, c, bm, bn, 64 if dtype == "int8" else 32)
    _check(dtype, c, a, b)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_k_not_a_multiple_of_the_block(dtype):
    """The last trip's tile is masked along K: copied, never taken from what was kept."""
    rng = np.random.default_rng(8)
    a, b = _operand(dtype, rng, 128, 1000), _operand(dtype, rng, 1000, 128)
    c = _result(dtype, 128, 128)
    _gallery(a, b, c, 32, 32, 32)
    _check(dtype, c, a, b)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_launch_after_the_operands_changed_reads_them_anew(dtype, monkeypatch):
    """Copies are kept for one launch: the second sees the new A and B, at the same addresses
    (on one thread, whose second launch may be given the same memory as its first)."""
    rng = np.random.default_rng(5)
    a, b = _operand(dtype, rng, 256, 512), _operand(dtype, rng, 512, 256)
    c = _result(dtype, 256, 256)
    kernel = _on_one_thread(matmul_kernel, monkeypatch)
    for _ in range(3):
        _gallery(a, b, c, 64, 64, 32, kernel)
    a.copy_(_operand(dtype, rng, 256, 512))
    b[100:300].copy_(_operand(dtype, rng, 200, 256))
    _gallery(a, b, c, 64, 64, 32, kernel)
    _check(dtype, c, a, b)


def _on_one_thread(kernel, monkeypatch):
    """``kernel`` loaded anew to run its programs on one thread, one after another: each
    program after the first finds what the one before it kept."""
    from naiad.runtime.jit import JITFunction

    monkeypatch.setenv("NAIAD_CPU_THREADS", "1")
    return JITFunction(kernel.fn)


@naiad.jit
def squared_twice(w_ptr, x_ptr, N: tl.constexpr, BK: tl.constexpr):
    """``x = w @ x`` twice, in place: the K loop runs in an outer loop that writes, between its
    runs, the very tiles it reads."""
    rn, rk = tl.arange(0, N), tl.arange(0, BK)
    for _ in range(2):
        acc = tl.zeros((N, N), dtype=tl.float32)
        for k in range(0, N, BK):
            w = tl.load(w_ptr + rn[:, None] * N + (k + rk)[None, :])
            x = tl.load(x_ptr + (k + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(w, x, acc)
        tl.debug_barrier()
        tl.store(x_ptr + rn[:, None] * N + rn[None, :], acc)


def test_a_loop_run_again_after_its_tiles_were_written_reads_them_anew():
    rng = np.random.default_rng(9)
    w, x = _operand("fp32", rng, 64, 64) * 0.125, _operand("fp32", rng, 64, 64)
    want = w.double().numpy() @ (w.double().numpy() @ x.double().numpy())
    squared_twice[(1,)](w, x, N=64, BK=32)
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-4, atol=1e-4)


@naiad.jit
def staged(a_ptr, b_ptr, stage_ptr, c_ptr, K, N: tl.constexpr, BK: tl.constexpr):
    """Each program copies its own B (``pid``'s block of rows of ``b``) to one staging area
    every program reads it back from: the same addresses, other values in each program."""
    pid = tl.program_id(0)
    rn, rk = tl.arange(0, N), tl.arange(0, BK)
    for k in range(0, K, BK):
        rows = (k + rk)[:, None] * N + rn[None, :]
        tl.store(stage_ptr + rows, tl.load(b_ptr + pid * K * N + rows))
    tl.debug_barrier()
    acc = tl.zeros((N, N), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rn[:, None] * K + (k + rk)[None, :])
        b = tl.load(stage_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + pid * N * N + rn[:, None] * N + rn[None, :], acc)


def test_programs_that_write_what_they_read_on_one_thread(monkeypatch):
    """Programs on one thread run one after another: each reads the B it staged, not the
    previous program's (a kernel that writes before its loop keeps no copies)."""
    rng = np.random.default_rng(3)
    programs, k = 4, 256
    a, b = _operand("fp32", rng, 32, k), _operand("fp32", rng, programs * k, 32)
    stage = torch.zeros(k, 32)
    c = _result("fp32", programs, 32, 32)
    _on_one_thread(staged, monkeypatch)[(programs,)](a, b, stage, c, k, N=32, BK=32)
    for p in range(programs):
        _check("fp32", c[p], a, b[p * k:(p + 1) * k])


@naiad.jit
def strided_rows(a_ptr, b_ptr, c_ptr, K, N: tl.constexpr, BK: tl.constexpr):
    """Program ``pid`` multiplies A by every ``pid + 1``-th row of B from its first: the same
    first address in every program, another row stride."""
    pid = tl.program_id(0)
    rn, rk = tl.arange(0, N), tl.arange(0, BK)
    acc = tl.zeros((N, N), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rn[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * ((pid + 1) * N) + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + pid * N * N + rn[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_tile_at_the_same_address_with_another_row_stride_is_copied_again(dtype, monkeypatch):
    rng = np.random.default_rng(4)
    programs, k = 3, 128
    a, b = _operand(dtype, rng, 32, k), _operand(dtype, rng, programs * k, 32)
    c = _result(dtype, programs, 32, 32)
    _on_one_thread(strided_rows, monkeypatch)[(programs,)](a, b, c, k, N=32, BK=32)
    for p in range(programs):
        _check(dtype, c[p], a, b[::p + 1][:k])


def _keeps_copies(compiled):
    """Whether the kernel's ``naiad_grid`` allocates memory for copies kept across programs."""
    return "@malloc" in compiled.asm["llir"]


def test_which_kernels_keep_copies():
    a, c = torch.zeros(256, 256), torch.zeros(256, 256)
    for tile in (32, 64, 128):
        assert _keeps_copies(matmul_kernel.warmup(a, a, c, 256, 256, 256, 256, 1, 256, 1, 256, 1,
                                                  BLOCK_M=tile, BLOCK_N=tile, BLOCK_K=32, grid=(1, 1)))
    assert _keeps_copies(strided_rows.warmup(a, a, c, 256, N=32, BK=32, grid=(4,)))
    assert not _keeps_copies(squared_twice.warmup(a, a, N=64, BK=32, grid=(1,)))
    assert not _keeps_copies(staged.warmup(a, a, a, c, 256, N=32, BK=32, grid=(4,)))


@naiad.jit
def unique_then_shared(a_ptr, b_ptr, c_ptr, K, FIRST: tl.constexpr, N: tl.constexpr, BK: tl.constexpr):
    """Programs below ``FIRST`` read a B of their own, the rest all read the one after them."""
    pid = tl.program_id(0)
    rn, rk = tl.arange(0, N), tl.arange(0, BK)
    b_base = b_ptr + tl.minimum(pid, FIRST) * K * N
    acc = tl.zeros((N, N), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + pid * N * K + rn[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_base + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + pid * N * N + rn[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_programs_that_stop_keeping_copies_and_those_after(dtype, monkeypatch):
    """On one thread the first programs find nothing kept (each its own B, and A always its
    own), so the thread stops keeping copies (`operand_cache.IDLE_PROGRAMS`); every result is
    still right, before and after."""
    from naiad.backends.cpu.lowering.operand_cache import IDLE_PROGRAMS

    rng = np.random.default_rng(6)
    first = IDLE_PROGRAMS + 2
    programs, k = first + 6, 192
    a, b = _operand(dtype, rng, programs * 32, k), _operand(dtype, rng, (first + 1) * k, 32)
    c = _result(dtype, programs, 32, 32)
    _on_one_thread(unique_then_shared, monkeypatch)[(programs,)](a, b, c, k, FIRST=first, N=32, BK=32)
    for p in range(programs):
        q = min(p, first)
        _check(dtype, c[p], a[p * 32:(p + 1) * 32], b[q * k:(q + 1) * k])


def test_a_matmul_on_amx_tiles_keeps_copies():
    """Compiled for a processor with AMX (on any x86-64 host): the panels keep copies too."""
    import platform

    from .test_dot_amx import _assembly_for_amx_processor

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("not an x86-64 host")
    a, c = torch.zeros(256, 256).bfloat16(), torch.zeros(256, 256)
    for tile in (32, 64, 128):
        compiled = matmul_kernel.warmup(a, a, c, 256, 256, 256, 256, 1, 256, 1, 256, 1,
                                        BLOCK_M=tile, BLOCK_N=tile, BLOCK_K=32, grid=(1, 1))
        tiles, assembly = _assembly_for_amx_processor(compiled)
        assert tiles and "malloc" in assembly


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "int8"])
@pytest.mark.parametrize("m, n, k, tile", [
    (24 * 32, 5 * 32, 160, 32),          # three column groups of 8 rows: A found in its way
    (10 * 32, 7 * 32, 96, 32),           # a last column group of 2 rows
    (40 * 16, 3 * 16, 64, 16),           # five groups: the ways filled again and again
    (16 * 16, 17 * 16, 64, 16)])         # whole squares of 8 x 8 programs, then an edge column
def test_rows_of_a_kept_in_ways_on_one_thread(dtype, m, n, k, tile, monkeypatch):
    """On one thread, where a group of 8 rows of programs is narrower than a square (the grid's
    edges), the grid runs it column after column: a program finds its rows of A in the way the
    program 8 before it filled (`operand_cache.WAYS`) and B in the way of the program just
    before; each way is filled again by the next group.  In a whole square of 8 x 8 programs
    (`kernel._in_squares`) its 8 rows of A and 8 columns of B fill the 8 ways of each."""
    rng = np.random.default_rng(m + n)
    a, b = _operand(dtype, rng, m, k), _operand(dtype, rng, k, n)
    c = _result(dtype, m, n)
    _gallery(a, b, c, tile, tile, 64 if dtype == "int8" else 32, _on_one_thread(matmul_kernel, monkeypatch))
    _check(dtype, c, a, b)
