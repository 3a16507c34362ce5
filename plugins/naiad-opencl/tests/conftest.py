"""A fresh kernel cache per test session; the opencl backend chosen for each test; tests that
need a device skip without one."""

from __future__ import annotations

import pytest

import naiad


@pytest.fixture(autouse=True)
def _cache(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "naiad-cache"))
    monkeypatch.delenv("NAIAD_OPENCL_DEVICE", raising=False)


@pytest.fixture
def opencl():
    """The opencl backend, chosen; skips where no OpenCL device is found."""
    from naiad_opencl import runtime

    if not runtime.devices():
        pytest.skip(f"no OpenCL device: {runtime.why_none()}")
    with naiad.set_backend("opencl"):
        yield
