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
