"""Naiad's entry points (backends, pass plugins), read from the installed distributions once.

Listing one group's entry points reads the metadata of every installed distribution: 10-15 ms
on the 2-core machine, about 40 ms in the H200 host's environment, and a first compile asked
twice (backend discovery, then pass plugins). One reading now serves every group until
``sys.path`` changes; `forget` drops it, for a distribution installed into a directory that is
already on ``sys.path`` while the process runs.
"""

from __future__ import annotations

import sys
from importlib import metadata

_read: tuple[tuple[str, ...], metadata.EntryPoints] | None = None


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The entry points of ``group`` in the distributions installed on ``sys.path``."""
    global _read
    path = tuple(sys.path)
    if _read is None or _read[0] != path:
        _read = (path, metadata.entry_points())
    return list(_read[1].select(group=group))


def forget() -> None:
    """Read the distributions again at the next call."""
    global _read
    _read = None
