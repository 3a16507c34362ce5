"""How the CPU driver spreads a grid over threads: small work stays on the calling thread (a
pool hand-off costs more than it), large work is split; every program runs exactly once
either way, the first launch's timed slice included."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends.cpu.work_estimate import PARALLEL_WORK_S, WorkEstimate

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def count_programs(out, BLOCK: tl.constexpr):
    pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)
    tl.atomic_add(out + pid, 1)


@naiad.jit
def busy(out, n, BLOCK: tl.constexpr):
    """Enough arithmetic per program that a grid of them is worth several threads."""
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(n):
        acc = acc * 0.999 + tl.sin(acc + i)
    tl.store(out + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), acc)


def test_the_estimate_decides_from_the_work_of_a_launch():
    work = WorkEstimate()
    assert not work.parallel(10**9)                 # nothing known: no split yet
    work.observe(100, 100 * 1e-7)                   # 0.1 us a program
    assert work.program_s == pytest.approx(1e-7)
    assert not work.parallel(100) and work.parallel(int(PARALLEL_WORK_S / 1e-7) + 1)
    work.observe(10, 4e-3)                          # one slow launch (preempted?): a quarter
    assert work.program_s == pytest.approx(1e-7 + (4e-4 - 1e-7) / 4)
    for _ in range(30):                             # slow every time: it is the work
        work.observe(10, 4e-3)
    assert work.program_s == pytest.approx(4e-4, rel=1e-3) and work.parallel(1)
    work.observe(10, 1e-6)                          # a faster launch counts at once
    assert work.program_s == pytest.approx(1e-7)


def test_a_split_launch_learns_from_its_own_share_not_from_the_hand_off():
    """Timed by its wall time, a split launch of tiny programs looked slow (the pool hand-off
    is tens of microseconds) and stayed split at every launch after: torch.compile's small
    kernels on the CPU paid ~200 us a call for it."""
    naiad.knobs.cpu.threads = 2
    out = np.zeros(64, np.int32)
    kernel = count_programs[(64,)](out, BLOCK=1)
    kernel.launcher.work.program_s = 1.0            # as if programs were slow: the next launch splits
    count_programs[(64,)](out, BLOCK=1)
    assert not kernel.launcher.work.parallel(64)
    count_programs[(64,)](out, BLOCK=1)
    assert np.array_equal(out, np.full(64, 3))


@pytest.mark.parametrize("grid", [(1,), (2,), (7,), (100,), (13, 9)])
def test_every_program_runs_once(grid):
    naiad.knobs.cpu.threads = 2
    out = np.zeros(int(np.prod(grid)), np.int32)
    for _ in range(3):                              # the first launch's slice, then as estimated
        count_programs[grid](out, BLOCK=1)
    assert np.array_equal(out, np.full(out.shape, 3))


def test_tiny_programs_stay_on_the_calling_thread_and_heavy_ones_are_split():
    naiad.knobs.cpu.threads = 2
    out = np.zeros(64, np.int32)
    small = count_programs[(64,)](out, BLOCK=1)
    small = count_programs[(64,)](out, BLOCK=1)
    assert small.launcher.work.program_s is not None and not small.launcher.work.parallel(64)
    result = np.zeros(16 * 64, np.float32)
    heavy = busy[(16,)](result, 20000, BLOCK=64)
    assert heavy.launcher.work.parallel(16)         # ~ms a program
    acc = np.zeros(64, np.float32)
    for i in range(20000):
        acc = acc * np.float32(0.999) + np.sin(acc + np.float32(i), dtype=np.float32)
    np.testing.assert_allclose(result.reshape(16, 64), np.broadcast_to(acc, (16, 64)), rtol=1e-3, atol=1e-3)
