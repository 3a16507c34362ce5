"""bf16 ``tl.dot`` on Intel AMX tiles (`naiad.backends.cpu.lowering.amx_matmul`).

On a processor with AMX (Intel Xeon from Sapphire Rapids) the dots run on tiles and are
checked against numpy over tile shapes, masked edges, K loops, a carried accumulator, batched
dots and the knob that turns tiles off.  On every x86-64 machine the lowering is compiled for
such a processor and its instructions are checked; and the error a kernel compiled for tiles
gives where Linux refuses them is checked everywhere."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends.cpu import amx
from naiad.backends.cpu.target import host_features
from naiad.errors import NaiadError
from naiad.tools.gallery import matmul_kernel

from .test_dot_bf16_pairs import _bf16, batched

pytestmark = pytest.mark.shipped_backends

torch = pytest.importorskip("torch")

FEATURES = host_features().split(",")
TILES = amx.tiles_usable(FEATURES, "bf16", True)
needs_tiles = pytest.mark.skipif(not TILES, reason="no AMX tiles that multiply bf16 here")


@pytest.fixture(autouse=True)
def tiles_on(monkeypatch):
    """The tests' conftest clears every NAIAD_ variable: turn tiles on for each test here."""
    monkeypatch.setenv("NAIAD_CPU_AMX", "1")


@naiad.jit
def scaled_plus(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """``c = 0.5 * c + a @ bᵀ``: the accumulator read from memory, B read down its columns."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rn[None, :] * K + rk[:, None])
    c = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, c * 0.5))


def _exact(a, b):
    """The products of the bf16 inputs summed in float64: what fp32 sums are compared with."""
    return a.float().numpy().astype(np.float64) @ b.float().numpy().astype(np.float64)


def _run_matmul(m, n, k, bm, bn, bk, seed):
    rng = np.random.default_rng(seed)
    a, b = _bf16(rng, m, k), _bf16(rng, k, n)
    c = torch.full((m, n), float("nan"))
    compiled = matmul_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](
        a, b, c, m, n, k, k, 1, n, 1, n, 1, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return compiled, c.numpy(), _exact(a, b)


@needs_tiles
@pytest.mark.parametrize("m, n, k, bm, bn, bk", [
    (64, 64, 64, 64, 64, 32), (128, 128, 128, 128, 128, 64), (256, 192, 320, 64, 64, 32),
    (16, 16, 32, 16, 16, 32),                   # one tile of each
    (48, 80, 96, 16, 16, 32),                   # one strip each way
    (96, 96, 64, 32, 16, 64), (96, 96, 64, 16, 32, 64),
    (100, 70, 50, 32, 32, 32),                  # masked edges both ways and along K
    (129, 65, 97, 64, 32, 64), (300, 260, 1000, 128, 64, 128)])
def test_bf16_matmul_on_tiles_matches_numpy(m, n, k, bm, bn, bk):
    compiled, c, expected = _run_matmul(m, n, k, bm, bn, bk, m * n + k)
    assert "llvm.x86.tdpbf16ps" in compiled.asm["llir"]
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)


@needs_tiles
def test_dots_not_of_whole_tiles_run_without_them():
    """A K block of 16 is half a tile row: the AVX-512 micro-kernel takes it, with the same values."""
    compiled, c, expected = _run_matmul(64, 64, 48, 32, 32, 16, 5)
    assert "llvm.x86.tdpbf16ps" not in compiled.asm["llir"]
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)


@needs_tiles
@pytest.mark.parametrize("count, m, n, k", [(1, 32, 32, 64), (2, 32, 64, 64), (4, 16, 32, 32)])
def test_batched_dot_on_tiles_matches_numpy(count, m, n, k):
    rng = np.random.default_rng(count * m + n)
    a, b = _bf16(rng, count, m, k), _bf16(rng, count, k, n)
    c = torch.full((count, m, n), float("nan"))
    compiled = batched[(1,)](a, b, c, B=count, M=m, N=n, K=k)
    assert "llvm.x86.tdpbf16ps" in compiled.asm["llir"]
    np.testing.assert_allclose(c.numpy(), np.stack([_exact(a[i], b[i]) for i in range(count)]),
                               rtol=1e-5, atol=1e-4)


@needs_tiles
def test_accumulator_and_transposed_operand_on_tiles():
    rng = np.random.default_rng(11)
    a, b = _bf16(rng, 64, 128), _bf16(rng, 32, 128)
    start = rng.standard_normal((64, 32)).astype(np.float32)
    c = torch.from_numpy(start.copy())
    compiled = scaled_plus[(1,)](a, b, c, M=64, N=32, K=128)
    assert "llvm.x86.tdpbf16ps" in compiled.asm["llir"]
    np.testing.assert_allclose(c.numpy(), 0.5 * start + _exact(a, b.T), rtol=1e-5, atol=1e-4)


@naiad.jit
def one_block(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """A kernel of the knob tests' own (a warm launch reuses what it compiled earlier in the
    process; the knob is part of the compile's keys, in memory and on disk)."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


def test_the_knob_is_part_of_the_jit_s_key(monkeypatch):
    """On any processor: a compile under another NAIAD_CPU_AMX is another kernel, and the first
    is found again when the knob is set back."""
    a, b, c = torch.zeros(16, 32).bfloat16(), torch.zeros(32, 16).bfloat16(), torch.zeros(16, 16)
    compiled = {}
    for value in ("0", "1", "0"):
        monkeypatch.setenv("NAIAD_CPU_AMX", value)
        compiled.setdefault(value, []).append(one_block.warmup(a, b, c, M=16, N=16, K=32, grid=(1,)))
    assert compiled["0"][0] is compiled["0"][1]
    assert compiled["1"][0] is not compiled["0"][0]


@needs_tiles
def test_knob_off_compiles_without_tiles(monkeypatch):
    monkeypatch.setenv("NAIAD_CPU_AMX", "0")
    rng = np.random.default_rng(3)
    a, b = _bf16(rng, 64, 64), _bf16(rng, 64, 64)
    c = torch.full((64, 64), float("nan"))
    compiled = one_block[(1,)](a, b, c, M=64, N=64, K=64)
    assert "llvm.x86.tdpbf16ps" not in compiled.asm["llir"]
    assert not compiled.metadata.get("amx")
    np.testing.assert_allclose(c.numpy(), _exact(a, b), rtol=1e-5, atol=1e-4)


INT8_TILES = amx.tiles_usable(FEATURES, "int8", True)


@pytest.mark.skipif(not INT8_TILES, reason="no AMX tiles that multiply int8 here")
@pytest.mark.parametrize("m, n, k, bm, bn, bk", [
    (128, 128, 256, 64, 64, 64), (16, 16, 64, 16, 16, 64), (48, 80, 192, 16, 16, 64),
    (100, 70, 130, 32, 32, 64),                 # masked edges both ways and along K
    (300, 260, 1000, 128, 64, 128)])
def test_int8_matmul_on_tiles_matches_numpy(m, n, k, bm, bn, bk):
    rng = np.random.default_rng(m + n * k)
    a = torch.from_numpy(rng.integers(-128, 128, (m, k)).astype(np.int8))
    b = torch.from_numpy(rng.integers(-128, 128, (k, n)).astype(np.int8))
    c = torch.full((m, n), -1, dtype=torch.int32)
    compiled = matmul_kernel[(naiad.cdiv(m, bm), naiad.cdiv(n, bn))](
        a, b, c, m, n, k, k, 1, n, 1, n, 1, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    assert "llvm.x86.tdpbssd" in compiled.asm["llir"]
    np.testing.assert_array_equal(c.numpy(), a.numpy().astype(np.int64) @ b.numpy().astype(np.int64))


@naiad.jit
def one_block_int8(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


def _assembly_for_amx_processor(compiled):
    """A kernel's TTGIR lowered with tiles on and compiled for Sapphire Rapids: whether it uses
    tiles, and the assembly."""
    import llvmlite.binding as llvm

    from naiad.backends.cpu.hooks import CPUHooks
    from naiad.backends.cpu.lowering.amx_matmul import uses_tiles
    from naiad.backends.cpu.lowering.kernel import KernelLowering
    from naiad.ir.context import parse_module

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    triple = llvm.get_process_triple()
    machine = llvm.Target.from_triple(triple).create_target_machine(
        cpu="sapphirerapids", features="", opt=3, reloc="pic", codemodel="jitdefault")
    hooks = CPUHooks(bf16_pairs=True, int8_quads=True, amx_bf16=True, amx_int8=True)
    lowering = KernelLowering(parse_module(compiled.asm["ttgir"]), hooks, 16, triple,
                              str(machine.target_data), False)
    module = lowering.lower()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    return uses_tiles(module), machine.emit_assembly(parsed)


def _bf16_matmul(bm, bn, bk):
    a, c = torch.zeros(128, 128).bfloat16(), torch.zeros(128, 128)
    return matmul_kernel.warmup(a, a, c, 128, 128, 128, 128, 1, 128, 1, 128, 1,
                                BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, grid=(1, 1))


def _tile_instructions(assembly):
    return [line.split()[0] for line in assembly.splitlines() if line.strip() and line.split()[0]
            in ("ldtilecfg", "tileloadd", "tdpbf16ps", "tdpbssd", "tilestored", "tilerelease")]


X86 = "+sse2" in FEATURES


@pytest.mark.skipif(not X86, reason="not an x86-64 host")
@pytest.mark.parametrize("bm, bn, bk, products, sites", [
    (64, 64, 32, 16, 2), (16, 16, 32, 1, 2), (32, 16, 64, 4, 2), (16, 32, 32, 2, 2),
    (32, 32, 128, 16, 1)])
def test_lowering_for_an_amx_processor_emits_tile_instructions(bm, bn, bk, products, sites):
    """The K loop's dot gathers its K blocks into panels of 128 k (`k_panels`): the tiles
    multiply in two places, when a trip fills the panel and after the loop, each between a
    configuration and a release; a K block of 128 is a panel already and multiplies in one.
    Inside a launch the tiles are configured once a thread's share and released at its end
    (one more release, after the grid loop).
    (bm/16)(bn/16)(bk/32) tile products a K block, some of them in loops, between loads and
    stores of tiles."""
    tiled, assembly = _assembly_for_amx_processor(_bf16_matmul(bm, bn, bk))
    lines = _tile_instructions(assembly)
    assert tiled
    assert lines.count("ldtilecfg") == sites and lines.count("tilerelease") == sites + 1, lines
    unrolled = lines.count("tdpbf16ps")
    assert unrolled > 0 and products * sites % unrolled == 0, lines
    assert lines.count("tileloadd") > lines.count("tilestored") > 0, lines


@pytest.mark.skipif(not X86, reason="not an x86-64 host")
def test_an_accumulator_read_in_the_loop_multiplies_each_trip():
    """``acc * 0.5`` reads the accumulator between trips: no panel, one place that multiplies."""
    a, c = torch.zeros(32, 128).bfloat16(), torch.zeros(32, 32)
    compiled = decaying.warmup(a, torch.zeros(128, 32).bfloat16(), c, 128, M=32, N=32, BK=32, grid=(1,))
    tiled, assembly = _assembly_for_amx_processor(compiled)
    assert tiled and _tile_instructions(assembly).count("ldtilecfg") == 1


@pytest.mark.skipif(not X86, reason="not an x86-64 host")
@pytest.mark.parametrize("m, n, k, tiled", [(32, 32, 64, True), (16, 64, 128, True), (32, 32, 32, False)])
def test_lowering_of_int8_for_an_amx_processor(m, n, k, tiled):
    """int8 tiles take 64 k a row: a K of 32 goes to ``vpdpbusd`` instead."""
    a, c = np.zeros((m, k), np.int8), np.zeros((m, n), np.int32)
    compiled = one_block_int8.warmup(a, np.zeros((k, n), np.int8), c, M=m, N=n, K=k, grid=(1,))
    uses, assembly = _assembly_for_amx_processor(compiled)
    lines = _tile_instructions(assembly)
    assert uses == tiled and ("tdpbssd" in lines) == tiled and ("vpdpbusd" in assembly) != tiled, lines


@pytest.mark.skipif(not X86, reason="not an x86-64 host")
def test_lowering_without_whole_tiles_emits_none():
    tiled, assembly = _assembly_for_amx_processor(_bf16_matmul(32, 32, 16))
    assert not tiled and "tdpbf16ps" not in assembly and "vdpbf16ps" in assembly


def test_kernel_compiled_for_tiles_where_linux_refuses_them(monkeypatch):
    from naiad.backends.cpu.driver import CPUDriver

    monkeypatch.setattr(amx, "tiles_permitted", lambda: False)
    with pytest.raises(NaiadError, match=r"kernel 'matmul_kernel' was compiled to use AMX tiles.*"
                                         r"fix: set NAIAD_CPU_AMX=0"):
        CPUDriver().load_binary("matmul_kernel", b"", {"amx": True}, 0)


@naiad.jit
def decaying(a_ptr, b_ptr, c_ptr, K, M: tl.constexpr, N: tl.constexpr, BK: tl.constexpr):
    """``c = sum over K blocks i of 0.5^(blocks - 1 - i) a_i @ b_i``: the accumulator is read
    (halved) on every trip."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, BK)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc * 0.5)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@naiad.jit
def two_sums_from(a_ptr, b_ptr, d_ptr, c_ptr, e_ptr, start, K, M: tl.constexpr, N: tl.constexpr,
                  BK: tl.constexpr, HALVES: tl.constexpr):
    """From column ``start`` of A on (``range(start, K, BK)``: a loop that does not start at
    0), ``c = a @ b`` and ``e = a @ d`` (two accumulators sharing A), each K range walked in
    ``HALVES`` inner loops of an outer one that carries the accumulators."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, BK)
    acc = tl.zeros((M, N), dtype=tl.float32)
    other = tl.zeros((M, N), dtype=tl.float32)
    span = tl.cdiv(tl.cdiv(K - start, BK), HALVES) * BK
    for h in range(HALVES):
        first = start + h * span
        for k in range(first, tl.minimum(first + span, K), BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
            d = tl.load(d_ptr + (k + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(a, b, acc)
            other = tl.dot(a, d, other)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)
    tl.store(e_ptr + rm[:, None] * N + rn[None, :], other)


@needs_tiles
@pytest.mark.parametrize("k", [0, 32, 96, 128, 160, 256, 288, 544])
def test_panels_of_every_fill_match_numpy(k):
    """K loops of 0-17 trips of 32: no panel, panels part full, full, full and part full."""
    compiled, c, expected = _run_matmul(48, 32, k, 16, 32, 32, k + 1)
    assert "llvm.x86.tdpbf16ps" in compiled.asm["llir"]
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)


@needs_tiles
def test_accumulator_read_in_the_loop_on_tiles():
    rng = np.random.default_rng(21)
    a, b = _bf16(rng, 32, 160), _bf16(rng, 160, 32)
    c = torch.full((32, 32), float("nan"))
    decaying[(1,)](a, b, c, 160, M=32, N=32, BK=32)
    expected = np.zeros((32, 32))
    for i in range(5):
        expected = 0.5 * expected + _exact(a[:, 32 * i:32 * i + 32], b[32 * i:32 * i + 32])
    np.testing.assert_allclose(c.numpy(), expected, rtol=1e-5, atol=1e-4)


@needs_tiles
@pytest.mark.parametrize("start, k, halves", [(0, 224, 1), (64, 352, 1), (32, 320, 2), (96, 96, 2), (0, 512, 3)])
def test_panels_of_loops_not_from_zero_nested_and_sharing_a(start, k, halves):
    rng = np.random.default_rng(start + k + halves)
    a, b, d = _bf16(rng, 32, k), _bf16(rng, k, 32), _bf16(rng, k, 32)
    c, e = torch.full((32, 32), float("nan")), torch.full((32, 32), float("nan"))
    compiled = two_sums_from[(1,)](a, b, d, c, e, start, k, M=32, N=32, BK=32, HALVES=halves)
    assert "llvm.x86.tdpbf16ps" in compiled.asm["llir"]
    np.testing.assert_allclose(c.numpy(), _exact(a[:, start:], b[start:]), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(e.numpy(), _exact(a[:, start:], d[start:]), rtol=1e-5, atol=1e-4)


@naiad.jit
def consuming(a_ptr, b_ptr, c_ptr, K, M: tl.constexpr, N: tl.constexpr, BK: tl.constexpr):
    """``c = a @ b``, each block of A zeroed in memory once it is loaded."""
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, BK)
    acc = tl.zeros((M, N), dtype=tl.float32)
    for k in range(0, K, BK):
        a_ptrs = a_ptr + rm[:, None] * K + (k + rk)[None, :]
        a = tl.load(a_ptrs)
        tl.store(a_ptrs, tl.zeros((M, BK), dtype=tl.bfloat16))
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@pytest.mark.parametrize("k", [32, 160, 544])
def test_a_zeroed_as_it_is_read(k):
    """Each K block of A is zeroed right after its load: the sums are those of A as loaded
    (a panel multiplies trips later, from the copies it gathered, not from A)."""
    rng = np.random.default_rng(k)
    a, b = _bf16(rng, 32, k), _bf16(rng, k, 32)
    want = _exact(a, b)
    c = torch.full((32, 32), float("nan"))
    consuming[(1,)](a, b, c, k, M=32, N=32, BK=32)
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-4)
    assert not a.float().abs().sum()
