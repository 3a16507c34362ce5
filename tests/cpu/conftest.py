"""Fixtures of the CPU backend's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def tested_tiles(monkeypatch, tmp_path):
    """What `affine_tiles.affine_tile` gave each operand copy of the kernels the test compiles
    (afresh: the cache is an empty folder), in order: None where the load does not separate
    into row and column terms, else whether it is tested down its columns."""
    from naiad.backends.cpu.lowering import affine_tiles, column_blocks, dot_operands

    found = []

    def recording(kernel, load):
        tile = affine_tiles.affine_tile(kernel, load)
        found.append(None if tile is None else tile.down)
        return tile

    for module in (dot_operands, column_blocks):
        monkeypatch.setattr(module, "affine_tile", recording)
    monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path))
    return found
