"""The order the CPU backend runs a grid's programs in: kernels with ``tl.dot`` take 2-D grids
in groups of y columns (`naiad.backends.cpu.lowering.kernel.DOT_GROUP`), others x-fastest; in
both, every program of every grid shape runs exactly once with its own ids, over one thread or
split across several."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def ids_with_dot(out, counter, WITH_DOT: tl.constexpr):
    x, y, z = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    nx, ny = tl.num_programs(0), tl.num_programs(1)
    cell = (z * ny + y) * nx + x
    value = x + 1000 * y + 1000000 * z
    if WITH_DOT:
        r = tl.arange(0, 16)
        eye = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
        value = value + tl.sum(tl.sum(tl.dot(eye, eye), axis=1), axis=0).to(tl.int32) - 16
    order = tl.atomic_add(counter, 1)
    tl.store(out + 2 * cell, value)
    tl.store(out + 2 * cell + 1, order)


@pytest.mark.parametrize("with_dot", [True, False])
@pytest.mark.parametrize("grid", [(5, 13, 3), (1, 9, 1), (7, 1, 2), (3, 8, 1), (17, 16, 1), (2, 25, 1)])
def test_every_program_runs_once_with_its_ids(grid, with_dot):
    nx, ny, nz = grid
    out = np.full(2 * nx * ny * nz, -1, np.int32)
    counter = np.zeros(1, np.int32)
    ids_with_dot[grid](out, counter, WITH_DOT=with_dot)
    values, order = out[0::2], out[1::2]
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    np.testing.assert_array_equal(values, (x + 1000 * y + 1000000 * z).ravel())
    assert sorted(order) == list(range(nx * ny * nz)) and counter[0] == nx * ny * nz


def test_dot_kernels_run_y_columns_in_groups_on_one_thread(monkeypatch):
    """On one thread the order shows: x-fastest without dots, groups of 8 y columns with."""
    from naiad.runtime.jit import JITFunction

    monkeypatch.setenv("NAIAD_CPU_THREADS", "1")
    kernel = JITFunction(ids_with_dot.fn)            # loaded anew, with one thread
    nx, ny = 3, 10
    runs = {}
    for with_dot in (False, True):
        out = np.full(2 * nx * ny, -1, np.int32)
        kernel[(nx, ny)](out, np.zeros(1, np.int32), WITH_DOT=with_dot)
        order = out[1::2].reshape(ny, nx)
        runs[with_dot] = [(x, y) for _, y, x in sorted((order[y, x], y, x)
                                                       for y in range(ny) for x in range(nx))]
    assert runs[False][:4] == [(0, 0), (1, 0), (2, 0), (0, 1)]
    assert runs[True][:9] == [(0, y) for y in range(8)] + [(1, 0)]
    assert runs[True][24:] == [(0, 8), (0, 9), (1, 8), (1, 9), (2, 8), (2, 9)]
