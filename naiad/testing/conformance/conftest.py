"""pytest's view of the suite: the backend under test, its strict expected failures, and the
knobs reset after every case (a case may set ``naiad.knobs.cpu.threads``)."""

from __future__ import annotations

import os

import pytest

from naiad import knobs
from naiad.testing.conformance import BACKEND_VARIABLE
from naiad.testing.conformance.expected import backend_list, mark


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


@pytest.fixture(autouse=True)
def _fresh_knobs():
    yield
    for group in knobs.groups.values():
        group.reset()
