"""The backend's knobs, ``naiad.knobs.opencl`` (declared through the contract's knob_group):
the device choice from the environment or from code, and its error."""

from __future__ import annotations

import pytest

import naiad
from naiad.errors import NaiadError


@pytest.fixture
def fresh():
    yield naiad.knobs.opencl
    naiad.knobs.opencl.reset()


@pytest.mark.usefixtures("opencl")
def test_the_device_is_chosen_by_index_or_name_from_code_or_the_environment(fresh, monkeypatch):
    from naiad_opencl import runtime

    first = runtime.devices()[0].name
    fresh.device = "0"
    assert runtime.chosen_index() == 0
    fresh.device = first.split()[0]
    assert runtime.chosen_index() == 0
    del fresh.device
    monkeypatch.setenv("NAIAD_OPENCL_DEVICE", "0")
    assert runtime.chosen_index() == 0


@pytest.mark.usefixtures("opencl")
def test_a_device_that_is_not_there_is_a_clear_error(fresh):
    from naiad_opencl import runtime

    fresh.device = "no-such-device"
    with pytest.raises(NaiadError) as info:
        runtime.chosen_index()
    assert str(info.value).startswith("NAIAD_OPENCL_DEVICE='no-such-device' names no OpenCL device -- "
                                      "fix: use an index or a part of a name among 0: ")


def test_the_build_time_limit_is_a_knob(fresh, monkeypatch):
    from naiad_opencl import builder

    monkeypatch.setenv("NAIAD_OPENCL_BUILD_TIMEOUT", "12")
    assert builder.build_timeout() == 12
    fresh.build_timeout = "7.5"
    assert builder.build_timeout() == 7.5
