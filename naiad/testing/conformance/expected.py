"""Strict expected failures: a backend's list, applied to the collected cases of the suite.

Each entry of a backend's ``conformance_expected_failures`` is an ``fnmatch`` pattern over the
case's id in the suite (``test_dot.py::test_dot[int8-16-16-16]``) and the reason.  A case that a
pattern matches is expected to fail: it becomes ``xfail(strict=True)``, so if it passes, the
run fails ("XPASS(strict)") and the entry must go.  A pattern that matches no case of a module
the run collected is stale: the run stops before any case runs, naming it.
"""

from __future__ import annotations

import fnmatch
from typing import Any, Iterable, Mapping


def case_id(module: str, nodeid: str) -> str:
    """A case's id in the suite: its module's file name and the rest of pytest's node id."""
    return f"{module}::{nodeid.split('::', 1)[1]}" if "::" in nodeid else module


def expectations(patterns: Mapping[str, str], ids: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """(case id -> the reason of the first pattern naming it, the stale patterns: those that
    name no case of ``ids`` although their module part names a module of ``ids``)."""
    ids = list(ids)
    modules = sorted({i.split("::", 1)[0] for i in ids})
    matched: dict[str, str] = {}
    stale = []
    for pattern, reason in patterns.items():
        hits = fnmatch.filter(ids, pattern)
        for hit in hits:
            matched.setdefault(hit, reason)
        if not hits and fnmatch.filter(modules, pattern.split("::", 1)[0]):
            stale.append(pattern)
    return matched, stale


def backend_list(name: str) -> dict[str, str]:
    """The expected failures backend ``name`` declares; a clear error if it cannot be loaded."""
    from naiad.backends.discovery import BackendFailure, registry
    from naiad.errors import NaiadError

    item = registry.get_or_failure(name) if name in registry.sources() else None
    if item is None:
        raise NaiadError(f"no backend named {name!r} -- fix: see `naiad backends`")
    if isinstance(item, BackendFailure):
        raise NaiadError(f"backend {name!r} failed to load: {item.reason}")
    listed = getattr(item.compiler, "conformance_expected_failures", {})
    if not isinstance(listed, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in listed.items()):
        raise NaiadError(f"{item.compiler.__name__}."
                         f"conformance_expected_failures of {name!r} must map test-id patterns "
                         f"to reasons (str -> str)")
    return dict(listed)


def mark(items: list[Any], patterns: Mapping[str, str], xfail: Any) -> list[str]:
    """Mark the pytest ``items`` that ``patterns`` name with ``xfail(reason, strict=True)``;
    return the stale patterns."""
    ids = [case_id(item.path.name, item.nodeid) for item in items]
    matched, stale = expectations(patterns, ids)
    for item, cid in zip(items, ids):
        if cid in matched:
            item.add_marker(xfail(reason=matched[cid], strict=True))
    return stale
