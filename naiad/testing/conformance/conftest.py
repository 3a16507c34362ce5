"""pytest's view of the suite: the backend under test, its strict expected failures, and the
knobs reset after every case (a case may set ``naiad.knobs.cpu.threads``)."""

from __future__ import annotations

import os

import pytest

from naiad import knobs
from naiad.testing.conformance import BACKEND_VARIABLE, SAMPLE_VARIABLE
from naiad.testing.conformance.expected import backend_list, mark
from naiad.testing.conformance.sample import sample
from naiad.testing.conformance.staging import Staged, needs_staging


def _backend() -> str:
    return os.environ.get(BACKEND_VARIABLE) or "cpu"


def pytest_report_header(config: pytest.Config) -> str:
    return f"naiad conformance: backend {_backend()}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    ours = [item for item in items if os.path.dirname(str(item.path)) == here]
    stale = mark(ours, backend_list(_backend()), pytest.mark.xfail)
    if stale:
        raise pytest.UsageError(f"naiad conformance: backend {_backend()!r} lists expected "
                                f"failures that name no case: {', '.join(stale)} -- fix: remove "
                                f"them from its conformance_expected_failures")
    k = int(os.environ.get(SAMPLE_VARIABLE) or 0)
    if k > 0:                   # after the strictness check, which needs every case
        _, dropped = sample(ours, k, lambda item: (item.path.name, item.originalname))
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            dropped_ids = set(map(id, dropped))
            items[:] = [item for item in items if id(item) not in dropped_ids]


@pytest.fixture(autouse=True)
def _staged_launches(monkeypatch):
    """On a backend whose kernels take no host arrays, every ``kernel[grid]`` of the suite
    stages its arrays through the device (`staging`)."""
    from naiad.backends.discovery import registry
    from naiad.backends.selection import driver_for
    from naiad.runtime.jit import JITFunction

    backend = registry[_backend()]
    if not needs_staging(backend.driver):
        yield
        return
    import torch    # noqa: F401  (staging copies through torch; a driver names its torch device once it is loaded)

    device = driver_for(backend).get_active_torch_device()
    launch = JITFunction.__getitem__
    monkeypatch.setattr(JITFunction, "__getitem__", lambda fn, grid: Staged(launch(fn, grid), device))
    yield


@pytest.fixture(autouse=True)
def _fresh_knobs():
    """Every override a case made is dropped, in the groups of backends it loaded too (which
    `naiad.knobs.scope` taken before the case would not know)."""
    yield
    for group in knobs.groups.values():
        group.reset()
