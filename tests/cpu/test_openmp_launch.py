"""Launches split across threads run as one parallel region of the OpenMP runtime the process
has loaded (`naiad.backends.cpu.openmp`; torch brings libgomp): every program runs exactly once,
results match numpy, the driver learns from the calling thread's own share, the knob turns it
off, and Naiad never loads a runtime of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends.cpu import openmp

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.shipped_backends,
    pytest.mark.skipif(not hasattr(os, "RTLD_NOLOAD") or openmp.loaded_team() is None,
                       reason="no OpenMP runtime loaded with torch on this platform"),
]


@naiad.jit
def count_programs(out, BLOCK: tl.constexpr):
    pid = tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))
    tl.atomic_add(out + pid, 1)


@naiad.jit
def scaled_sin(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.sin(x) * alpha, mask=mask)


@pytest.fixture
def region_calls(monkeypatch):
    """The ranges of programs each launch hands to the OpenMP team."""
    calls = []
    run = openmp.OpenMPTeam.run

    def recording(self, function, address, nx, ny, nz, first, end, threads):
        calls.append((first, end, threads))
        return run(self, function, address, nx, ny, nz, first, end, threads)

    monkeypatch.setattr(openmp.OpenMPTeam, "run", recording)
    return calls


def _split_always(kernel):
    kernel.launcher.work.program_s = 1.0            # as if each program took a second


@pytest.mark.parametrize("threads", [2, 3, 5])
@pytest.mark.parametrize("grid", [(2,), (7,), (100,), (13, 9), (3, 4, 5)])
def test_every_program_runs_once_in_the_region(grid, threads, region_calls):
    out = np.zeros(int(np.prod(grid)), np.int32)
    kernel = count_programs[grid](out, BLOCK=1)
    _split_always(kernel)
    kernel.launcher.threads = threads               # more threads than cores is allowed
    count_programs[grid](out, BLOCK=1)
    assert np.array_equal(out, np.full(out.shape, 2))
    assert region_calls and region_calls[-1] == (0, out.size, min(threads, out.size))


@pytest.mark.parametrize("n", [1000, 4097, 65536])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_split_results_match_numpy(n, dtype, region_calls):
    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    out = np.full(n, np.nan, dtype)
    kernel = scaled_sin[(naiad.cdiv(n, 256),)](x, out, n, 1.5, BLOCK=256)
    _split_always(kernel)
    out[:] = np.nan
    scaled_sin[(naiad.cdiv(n, 256),)](x, out, n, 1.5, BLOCK=256)
    assert region_calls
    np.testing.assert_allclose(out, np.sin(x) * 1.5, rtol=1e-5, atol=1e-6)


def test_the_region_reports_the_calling_threads_share_and_its_time():
    out = np.zeros(10, np.int32)
    kernel = count_programs[(10,)](out, BLOCK=1)
    address = out.ctypes.data
    slots = (np.array([address], np.uint64))
    programs, seconds = openmp.loaded_team().run(kernel.function, slots.ctypes.data, 10, 1, 1,
                                                 0, 10, 2)
    assert programs == 5 and 0 < seconds < 1
    assert np.array_equal(out, np.full(10, 2))       # the first launch, then the region's run


def test_a_split_launch_learns_its_estimate_from_the_region(region_calls):
    out = np.zeros(64, np.int32)
    kernel = count_programs[(64,)](out, BLOCK=1)
    _split_always(kernel)
    count_programs[(64,)](out, BLOCK=1)
    assert region_calls
    assert kernel.launcher.work.program_s < 1e-3     # tiny programs: learned from the share
    assert not kernel.launcher.work.parallel(64, 20e-6)


@naiad.jit
def count_programs_here(out, BLOCK: tl.constexpr):
    """`count_programs` for one test alone: the test passed only when an earlier test in the
    same process had launched `count_programs` (its first launch splits from Python, to time a
    slice), and failed in CI when it ran first."""
    tl.atomic_add(out + tl.program_id(0), 1)


def test_warm_split_launches_open_the_region_natively(region_calls, monkeypatch):
    """Once its native entry is built, a launch worth splitting opens the region from native
    code: neither the Python launch path nor `OpenMPTeam.run` runs, every program runs once and
    the estimate is learned from the calling thread's share."""
    from naiad.runtime.jit import JITFunction

    out = np.zeros(300, np.int32)
    launch = count_programs_here[(300,)]
    for _ in range(3):                               # prepared, then its native variant built
        kernel = launch(out, BLOCK=1)
    _split_always(kernel)
    count_programs_here._fast.clear()
    region_calls.clear()          # the first launch, with no estimate yet, split from Python

    def python_path(self, *args, **kwargs):
        raise AssertionError("the launch took the Python path")

    monkeypatch.setattr(JITFunction, "_run_slow", python_path)
    launch(out, BLOCK=1)
    assert np.array_equal(out, np.full(300, 4))
    assert region_calls == [] and kernel.launcher.work.program_s < 1e-3


def test_the_knob_keeps_split_launches_on_naiads_pool(region_calls):
    out = np.zeros(50, np.int32)
    for _ in range(3):                               # native entry built while the knob is on
        kernel = count_programs[(50,)](out, BLOCK=1)
    pools, pool = [], kernel.launcher.pool
    kernel.launcher.pool = lambda: pools.append(1) or pool()
    region_calls.clear()          # a first launch with no estimate yet splits from Python
    naiad.knobs.cpu.openmp = False
    try:
        for _ in range(2):
            _split_always(kernel)
            count_programs[(50,)](out, BLOCK=1)
    finally:
        naiad.knobs.cpu.openmp = True
    assert region_calls == [] and pools             # neither region opened; the pool took them
    assert np.array_equal(out, np.full(50, 5))


def test_naiad_never_loads_an_openmp_runtime_itself(tmp_path):
    script = textwrap.dedent("""
        import numpy as np, naiad, naiad.language as tl
        from naiad.backends.cpu import openmp

        def mapped():
            return any("gomp" in line or "libomp" in line or "iomp5" in line
                       for line in open("/proc/self/maps"))

        @naiad.jit
        def count(out, BLOCK: tl.constexpr):
            tl.atomic_add(out + tl.program_id(0), 1)

        before = mapped()
        naiad.knobs.cpu.threads = 2
        out = np.zeros(40, np.int32)
        kernel = count[(40,)](out, BLOCK=1)
        kernel.launcher.work.program_s = 1.0
        count[(40,)](out, BLOCK=1)
        assert (out == 2).all(), out
        assert mapped() == before, "a runtime was loaded"
        assert (openmp.loaded_team() is None) == (not before)
        print("ok", before)
    """)
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs /proc/self/maps")
    (tmp_path / "no_runtime.py").write_text(script)
    result = subprocess.run([sys.executable, str(tmp_path / "no_runtime.py")], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")
