"""Launches through Triton's launcher convention (``CompiledKernel.run(grid_x, grid_y, grid_z,
stream, function, packed_metadata, launch_metadata, enter_hook, exit_hook, *args)``), the way
torch's Inductor launches every kernel: a launch that stays on the calling thread goes through
the module's one-argument ``naiad_launch`` (`CPULauncher._build_run`), any other through the
general path; both must give numpy's results, call the hooks, and raise device assertions."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from jit_helpers import scaled_add
from naiad.backends.cpu.runtime import DeviceAssertionError

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def rows_times_column(x_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    """A 2-D grid: program (i, j) scales block i of row j by j."""
    row = tl.program_id(1)
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask)
    tl.store(out_ptr + row * cols + offsets, x * row.to(tl.float32), mask=mask)


@naiad.jit
def asserting(x_ptr, BLOCK: tl.constexpr):
    values = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.device_assert(values < 3, "values must stay below 3")


def _watch_launches(kernel, monkeypatch):
    """The headers passed to the grid function's one-argument launch entry (the path for
    launches on this thread); the grid function itself stays the real one (an OpenMP region
    needs its address)."""
    headers = []
    real_launch = kernel.function.launch

    def launch(header):
        headers.append(header)
        real_launch(header)

    monkeypatch.setattr(kernel.function, "launch", launch)
    return headers


def _compiled(n, dtype, block=128):
    x = (np.arange(n) % 7).astype(dtype)
    y = (np.arange(n) % 5).astype(dtype)
    out = np.zeros(n, dtype)
    kernel = scaled_add.warmup(x, y, out, n, 3, BLOCK=block, grid=(1,))
    kernel.load(naiad.backends.selection.active_driver())
    return kernel, x, y, out


def _run(kernel, grid, function, *args, enter=None, leave=None, metadata=None):
    kernel.run(*grid, 0, function, kernel.packed_metadata, metadata, enter, leave, *args)


@pytest.mark.parametrize("n", [1, 127, 128, 1000, 4099])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_launch_on_this_thread_matches_numpy(n, dtype, monkeypatch):
    kernel, x, y, out = _compiled(n, dtype)
    grid = (naiad.cdiv(n, 128), 1, 1)
    kernel.launcher.work.program_s = 1e-9          # known to be small: stays on this thread
    launches = _watch_launches(kernel, monkeypatch)
    _run(kernel, grid, kernel.function, x, y, out, n, 3, 128)
    assert len(launches) == 1
    expected = x.astype(np.float64) * 3 + y
    np.testing.assert_allclose(out.astype(np.float64), expected)


def test_two_dimensional_grid_on_this_thread(monkeypatch):
    rows, cols = 5, 300
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros_like(x)
    kernel = rows_times_column.warmup(x, out, rows, cols, BLOCK=128, grid=(1,))
    kernel.load(naiad.backends.selection.active_driver())
    kernel.launcher.work.program_s = 1e-9
    launches = _watch_launches(kernel, monkeypatch)
    _run(kernel, (3, rows, 1), kernel.function, x, out, rows, cols, 128)
    assert len(launches) == 1
    np.testing.assert_allclose(out, x * np.arange(rows, dtype=np.float32)[:, None])


def test_a_launch_worth_splitting_takes_the_general_path(monkeypatch):
    n = 4096
    kernel, x, y, out = _compiled(n, np.float32)
    if kernel.launcher.threads < 2:
        pytest.skip("one thread: every launch stays on it")
    kernel.launcher.work.program_s = 1.0           # as if each program took a second
    launches = _watch_launches(kernel, monkeypatch)
    _run(kernel, (32, 1, 1), kernel.function, x, y, out, n, 3, 128)
    assert launches == []
    np.testing.assert_allclose(out, x * 3 + y)


def test_a_first_launch_learns_the_work_then_stays_on_this_thread(monkeypatch):
    n = 1024
    kernel, x, y, out = _compiled(n, np.float32)
    kernel.launcher.work.program_s = None
    launches = _watch_launches(kernel, monkeypatch)
    _run(kernel, (8, 1, 1), kernel.function, x, y, out, n, 3, 128)
    assert kernel.launcher.work.program_s is not None
    out[:] = 0
    for _ in range(20):       # eight small programs: not worth splitting, once the caches are warm
        _run(kernel, (8, 1, 1), kernel.function, x, y, out, n, 3, 128)
    assert len(launches) >= 10
    np.testing.assert_allclose(out, x * 3 + y)


def test_a_function_without_a_launch_entry_takes_the_general_path(monkeypatch):
    """Object code made before ``naiad_launch`` existed (an override) has only the grid."""
    n = 500
    kernel, x, y, out = _compiled(n, np.float32)
    kernel.launcher.work.program_s = 1e-9
    monkeypatch.setattr(kernel.function, "launch", None)
    _run(kernel, (4, 1, 1), kernel.function, x, y, out, n, -2, 128)
    np.testing.assert_allclose(out, x * -2 + y)


@pytest.mark.parametrize("program_s", [1e-9, 1.0])
def test_hooks_run_once_around_each_launch(program_s):
    n = 1000
    kernel, x, y, out = _compiled(n, np.float32)
    kernel.launcher.work.program_s = program_s
    calls = []
    _run(kernel, (8, 1, 1), kernel.function, x, y, out, n, 3, 128,
         enter=lambda meta: calls.append(("enter", meta, out[0] + 0)),
         leave=lambda meta: calls.append(("exit", meta, out[0] + 0)), metadata="meta")
    assert calls == [("enter", "meta", 0.0), ("exit", "meta", 3 * x[0] + y[0])]


def test_empty_hook_chains_are_not_called():
    """Inductor passes Naiad's knob values through; an empty chain means no hook."""
    n = 100
    kernel, x, y, out = _compiled(n, np.float32)
    _run(kernel, (1, 1, 1), kernel.function, x, y, out, n, 3, 128,
         enter=naiad.knobs.runtime.launch_enter_hook, leave=naiad.knobs.runtime.launch_exit_hook)
    np.testing.assert_allclose(out, x * 3 + y)


@pytest.mark.parametrize("grid", [(0, 1, 1), (4, 0, 1), (4, 1, 0)])
def test_an_empty_grid_runs_nothing(grid):
    kernel, x, y, out = _compiled(512, np.float32)
    calls = []
    _run(kernel, grid, kernel.function, x, y, out, 512, 3, 128, enter=calls.append)
    assert calls == [] and not out.any()


def test_device_assertions_raise_on_this_thread(monkeypatch):
    x = np.arange(4, dtype=np.float32)
    kernel = asserting.warmup(x, BLOCK=4, grid=(1,), debug=True)
    kernel.load(naiad.backends.selection.active_driver())
    kernel.launcher.work.program_s = 1e-9
    launches = _watch_launches(kernel, monkeypatch)
    with pytest.raises(DeviceAssertionError, match="device assertion failed in kernel 'asserting'"):
        _run(kernel, (1, 1, 1), kernel.function, x, 4)
    assert len(launches) == 1
    _run(kernel, (1, 1, 1), kernel.function, np.zeros(4, np.float32), 4)       # passes: no error
