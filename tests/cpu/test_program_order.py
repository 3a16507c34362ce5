"""The order the CPU backend runs a grid's programs in: kernels with ``tl.dot`` take 2-D grids
in groups of y columns (`naiad.backends.cpu.lowering.kernel.DOT_GROUP`), or of x rows where
they keep operand copies across programs (`naiad.backends.cpu.lowering.operand_cache`), and
where a group is whole, in squares of 8 x 8 programs; others x-fastest; in all, every program
of every grid shape runs exactly once with its own ids, over one thread or split across
several."""

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


@naiad.jit
def ids_with_dot_loop(out, counter, a_ptr):
    """A K loop of dots over the same 16 x 16 tile (its copies kept across programs), then the
    ids and the order as `ids_with_dot` records them."""
    x, y, z = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    nx, ny = tl.num_programs(0), tl.num_programs(1)
    r = tl.arange(0, 16)
    acc = tl.zeros((16, 16), dtype=tl.float32)
    for k in range(0, 3):
        tile = tl.load(a_ptr + (k * 16 + r)[:, None] * 16 + r[None, :])
        acc = tl.dot(tile, tile, acc)
    order = tl.atomic_add(counter, 1)
    cell = (z * ny + y) * nx + x
    tl.store(out + 2 * cell, x + 1000 * y + 1000000 * z + tl.sum(tl.sum(acc, axis=1), axis=0).to(tl.int32))
    tl.store(out + 2 * cell + 1, order)


def _identities():
    """Three 16 x 16 identity tiles: `ids_with_dot_loop`'s sums add 0 to its ids."""
    return np.tile(np.eye(16, dtype=np.float32), (3, 1))


def _run(kernel, grid, out, counter, kind):
    if kind == "kept copies":
        kernel[grid](out, counter, _identities())
        out[0::2] -= 48
    else:
        kernel[grid](out, counter, WITH_DOT=kind == "dot")


@pytest.mark.parametrize("kind", ["dot", "no dot", "kept copies"])
@pytest.mark.parametrize("grid", [(5, 13, 3), (1, 9, 1), (7, 1, 2), (3, 8, 1), (17, 16, 1), (2, 25, 1)])
def test_every_program_runs_once_with_its_ids(grid, kind):
    nx, ny, nz = grid
    out = np.full(2 * nx * ny * nz, -1, np.int32)
    counter = np.zeros(1, np.int32)
    _run(ids_with_dot_loop if kind == "kept copies" else ids_with_dot, grid, out, counter, kind)
    values, order = out[0::2], out[1::2]
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    np.testing.assert_array_equal(values, (x + 1000 * y + 1000000 * z).ravel())
    assert sorted(order) == list(range(nx * ny * nz)) and counter[0] == nx * ny * nz


def test_dot_kernels_run_y_columns_in_groups_on_one_thread(monkeypatch):
    """On one thread the order shows: x-fastest without dots, groups of 8 y columns with, and
    groups of 8 x rows with copies kept."""
    from naiad.runtime.jit import JITFunction

    monkeypatch.setenv("NAIAD_CPU_THREADS", "1")
    kernels = {"dot": JITFunction(ids_with_dot.fn), "kept copies": JITFunction(ids_with_dot_loop.fn)}
    runs = {}
    for kind, (nx, ny) in (("no dot", (3, 10)), ("dot", (3, 10)), ("kept copies", (10, 3))):
        out = np.full(2 * nx * ny, -1, np.int32)
        _run(kernels[kind if kind != "no dot" else "dot"], (nx, ny), out, np.zeros(1, np.int32), kind)
        order = out[1::2].reshape(ny, nx)
        runs[kind] = [(x, y) for _, y, x in sorted((order[y, x], y, x)
                                                   for y in range(ny) for x in range(nx))]
    assert runs["no dot"][:4] == [(0, 0), (1, 0), (2, 0), (0, 1)]
    assert runs["dot"][:9] == [(0, y) for y in range(8)] + [(1, 0)]
    assert runs["dot"][24:] == [(0, 8), (0, 9), (1, 8), (1, 9), (2, 8), (2, 9)]
    assert runs["kept copies"][:9] == [(x, 0) for x in range(8)] + [(0, 1)]
    assert runs["kept copies"][24:] == [(8, 0), (9, 0), (8, 1), (9, 1), (8, 2), (9, 2)]


def test_dot_kernels_walk_squares_of_programs_on_one_thread(monkeypatch):
    """Where a group of 8 columns (or rows, with copies kept) is whole, its programs run in
    squares of 8 x 8, each in Z order: any 16 in a row from a multiple of 16 are 4 x 4,
    which a thread's share reads 4 panels of each operand for.  The grid's edges keep the group
    order."""
    from naiad.runtime.jit import JITFunction

    monkeypatch.setenv("NAIAD_CPU_THREADS", "1")
    for kind, kernel in (("dot", ids_with_dot), ("kept copies", ids_with_dot_loop)):
        nx, ny = 19, 10
        out = np.full(2 * nx * ny, -1, np.int32)
        _run(JITFunction(kernel.fn), (nx, ny) if kind == "dot" else (ny, nx), out, np.zeros(1, np.int32), kind)
        order = out[1::2].reshape((ny, nx) if kind == "dot" else (nx, ny))
        if kind == "kept copies":
            order = order.T                 # rows and columns trade places: groups of x rows
        runs = [(x, y) for _, y, x in sorted((order[y, x], y, x) for y in range(ny) for x in range(nx))]
        for start in range(0, 128, 16):          # the two whole squares, x 0-7 and 8-15
            share = runs[start:start + 16]
            assert len({x for x, _ in share}) == 4 and len({y for _, y in share}) == 4, (kind, start, share)
        assert runs[:4] == [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert sorted(runs[64:80]) == [(x, y) for x in range(8, 12) for y in range(4)]
        assert sorted(runs[:64]) == [(x, y) for x in range(8) for y in range(8)]
        assert runs[128:136] == [(16, y) for y in range(8)]           # x 16-18: no whole square
        assert runs[152:] == [(x, y) for x in range(nx) for y in (8, 9)]
