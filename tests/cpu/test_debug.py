"""Debugging on the CPU: with bounds checks (``bounds_check=True`` or ``NAIAD_DEBUG=1``)
out-of-bounds accesses become errors naming kernel, line, argument and offset; device_print
prints in order; with ``debug=True`` (Triton's meaning: assertions on) device_assert raises with
the kernel and line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends.cpu.runtime import DeviceAssertionError, OutOfBoundsError

pytestmark = pytest.mark.shipped_backends


def _line_of(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


@naiad.jit
def copy_unmasked(src, dst, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(src + offs)  # LOAD
    tl.store(dst + offs, values)  # STORE


@naiad.jit
def copy_masked(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@naiad.jit
def scalar_write(dst, index):
    tl.store(dst + index, 1.0)  # SCALAR


@naiad.jit
def atomic_past_end(counter, BLOCK: tl.constexpr):
    tl.atomic_add(counter + tl.arange(0, BLOCK), 1)  # ATOMIC


def test_out_of_bounds_read_names_kernel_line_argument_and_offset():
    src, dst = np.arange(10, dtype=np.float32), np.zeros(16, np.float32)
    with pytest.raises(OutOfBoundsError) as info:
        copy_unmasked[(1,)](src, dst, BLOCK=16, bounds_check=True)
    text = str(info.value)
    assert "out-of-bounds load in kernel 'copy_unmasked'" in text
    assert f"test_debug.py:{_line_of(copy_unmasked, '# LOAD')}" in text
    assert "pointer argument 'src' at element offset 10, outside its buffer of 10 elements" in text
    assert "fix: mask the load" in text
    assert np.array_equal(dst[:10], src)          # in-bounds lanes still ran


def test_out_of_bounds_write_is_caught_before_it_corrupts_memory():
    backing = np.zeros(32, np.float32)
    src, dst = np.ones(16, np.float32), backing[:8]
    with pytest.raises(OutOfBoundsError, match=r"out-of-bounds store .* pointer argument 'dst' at "
                                               r"element offset 8, outside its buffer of 8 elements"):
        copy_unmasked[(1,)](src, dst, BLOCK=16, bounds_check=True)
    assert np.array_equal(backing[:8], np.ones(8)) and not backing[8:].any()


def test_scalar_and_atomic_accesses_are_checked():
    dst = np.zeros(4, np.float32)
    with pytest.raises(OutOfBoundsError, match=rf"store in kernel 'scalar_write' at .*:"
                                               rf"{_line_of(scalar_write, '# SCALAR')}.* offset -1"):
        scalar_write[(1,)](dst, -1, bounds_check=True)
    counter = np.zeros(4, np.int32)
    with pytest.raises(OutOfBoundsError, match="atomic in kernel 'atomic_past_end'"):
        atomic_past_end[(1,)](counter, BLOCK=8, bounds_check=True)
    assert np.array_equal(counter, np.ones(4))


def test_masked_accesses_pass_bounds_checks_with_a_parallel_grid():
    naiad.knobs.cpu.threads = 2
    src = np.random.rand(1000).astype(np.float32)
    dst = np.zeros_like(src)
    copy_masked[(naiad.cdiv(1000, 64),)](src, dst, 1000, BLOCK=64, bounds_check=True)
    assert np.array_equal(dst, src)


def test_debug_environment_variable(monkeypatch):
    monkeypatch.setenv("NAIAD_DEBUG", "1")
    with pytest.raises(OutOfBoundsError):
        copy_unmasked[(1,)](np.zeros(3, np.float32), np.zeros(16, np.float32), BLOCK=16)


def test_bounds_checks_are_compiled_only_when_asked_for():
    arrays = np.zeros(8, np.float32), np.zeros(8, np.float32)
    assert "naiad_out_of_bounds" not in copy_masked.warmup(*arrays, 8, BLOCK=8).asm["llir"]
    checked = copy_masked.warmup(*arrays, 8, BLOCK=8, bounds_check=True)
    assert "naiad_out_of_bounds" in checked.asm["llir"] and checked.metadata["bounds_check"]


def test_debug_means_assertions_only_as_in_triton():
    """``debug=True`` (which torch's Inductor passes for every kernel) compiles device_assert in
    and leaves accesses unchecked: no bounds checks, the launch keeps its fast path."""
    x = np.arange(4, dtype=np.float32)
    kernel = asserting.warmup(x, BLOCK=4, debug=True)
    assert "naiad_out_of_bounds" not in kernel.asm["llir"] and not kernel.metadata["bounds_check"]
    assert kernel.metadata["debug"]
    kernel.load(naiad.backends.selection.active_driver())
    assert kernel.launcher.accepts_addresses          # the fast packer: nothing checked


@naiad.jit
def printer(x_ptr, BLOCK: tl.constexpr):
    values = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.device_print("v", values)
    tl.device_print("first", tl.load(x_ptr))


@naiad.jit
def asserting(x_ptr, BLOCK: tl.constexpr):
    values = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.device_assert(values < 3, "values must stay below 3")  # ASSERT


def test_device_print_prints_every_element_in_order(capsys):
    printer[(1,)](np.array([1.5, -2.0, 3.25, 0.0], np.float32), BLOCK=4)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5
    values = [float(line.rsplit(" ", 1)[1]) for line in lines[:4]]
    assert values == [1.5, -2.0, 3.25, 0.0]
    assert all(line.startswith("pid (0, 0, 0) idx (") for line in lines[:4])
    assert "first" in lines[4] and lines[4].endswith("1.500000")


def test_device_assert_raises_with_kernel_and_line():
    x = np.arange(4, dtype=np.float32)
    asserting[(1,)](x, BLOCK=4)                      # off without debug, as in Triton
    with pytest.raises(DeviceAssertionError) as info:
        asserting[(1,)](x, BLOCK=4, debug=True)
    text = str(info.value)
    assert "device assertion failed in kernel 'asserting'" in text
    assert f"test_debug.py:{_line_of(asserting, '# ASSERT')}" in text
    assert "values must stay below 3" in text
    asserting[(1,)](np.zeros(4, np.float32), BLOCK=4, debug=True)    # passes: no error


@naiad.jit
def embedding_mean(out_ptr, ids_ptr, table_ptr, n_vocab, WIDTH: tl.constexpr, TOKENS: tl.constexpr,
                   XBLOCK: tl.constexpr):
    """Inductor's embedding-then-mean kernel: each id loaded once per row of the block, checked
    by an assertion and used for the gather (runs along the block's first axis)."""
    x = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    r = tl.arange(0, TOKENS)[None, :]
    ids = tl.load(ids_ptr + (r + TOKENS * (x // WIDTH)))
    tl.device_assert((0 <= ids) & (ids < n_vocab), "index out of bounds")  # GATHER ASSERT
    rows = tl.load(table_ptr + ((x % WIDTH) + WIDTH * ids))
    tl.store(out_ptr + x, tl.sum(rows, 1)[:, None] / TOKENS)


@pytest.mark.parametrize("xblock", [8, 32, 64])
def test_asserted_gather_matches_numpy(xblock):
    """The assertion is checked a chunk at a time and leaves the kernel's layout and its
    once-per-row index loads as they are without it: same results as numpy."""
    rng = np.random.default_rng(xblock)
    width, tokens, batch, vocab = 32, 16, 12, 50
    table = rng.standard_normal((vocab, width)).astype(np.float32)
    ids = rng.integers(0, vocab, (batch, tokens)).astype(np.int64)
    want = table[ids].mean(axis=1).reshape(-1)
    for debug in (False, True):
        out = np.full(batch * width, np.nan, np.float32)
        embedding_mean[(batch * width // xblock,)](out, ids, table, vocab, WIDTH=width, TOKENS=tokens,
                                                    XBLOCK=xblock, debug=debug)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    compiled = embedding_mean.warmup(out, ids, table, vocab, WIDTH=width, TOKENS=tokens,
                                     XBLOCK=xblock, debug=True)
    assert "x i64], align" not in compiled.asm["llir"]     # the ids are not held in a buffer for it


@pytest.mark.parametrize("where", [(0, 0), (5, 15), (11, 7)])
def test_asserted_gather_reports_a_bad_index_in_any_lane(where):
    rng = np.random.default_rng(1)
    width, tokens, batch, vocab = 32, 16, 12, 50
    table = rng.standard_normal((vocab, width)).astype(np.float32)
    ids = rng.integers(0, vocab, (batch, tokens)).astype(np.int64)
    ids[where] = vocab
    out = np.empty(batch * width, np.float32)
    with pytest.raises(DeviceAssertionError) as info:
        embedding_mean[(batch * width // 32,)](out, ids, table, vocab, WIDTH=width, TOKENS=tokens,
                                                XBLOCK=32, debug=True)
    assert "index out of bounds" in str(info.value)
    assert f"test_debug.py:{_line_of(embedding_mean, '# GATHER ASSERT')}" in str(info.value)


@naiad.jit
def reread_after_store(ids_ptr, out_ptr, XBLOCK: tl.constexpr):
    """An index loaded once per row, used before and after a store over it: the use after the
    store sees the value loaded before it (loads happen in program order)."""
    row = tl.arange(0, XBLOCK)[:, None] + tl.zeros([1, 8], tl.int32)
    place = 8 * row + tl.arange(0, 8)[None, :]
    ids = tl.load(ids_ptr + row)
    tl.device_assert(ids >= 0, "negative id")
    tl.store(out_ptr + place, ids + 1)
    tl.store(ids_ptr + row, ids * 0 - 5)
    tl.store(out_ptr + 8 * XBLOCK + place, ids)


def test_index_reused_after_a_store_keeps_its_loaded_value():
    ids = np.arange(4, dtype=np.int64) * 3
    out = np.zeros(2 * 4 * 8, np.int64)
    reread_after_store[(1,)](ids, out, XBLOCK=4, debug=True)
    want = np.repeat(np.arange(4) * 3, 8)
    np.testing.assert_array_equal(out[:32], want + 1)
    np.testing.assert_array_equal(out[32:], want)
    np.testing.assert_array_equal(ids, -5)
