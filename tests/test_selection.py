"""Selection: explicit choice, NAIAD_DEFAULT_BACKEND, and the device rules, with their errors."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
from naiad import knobs
from naiad.backends import selection
from naiad.errors import BackendSelectionError, NaiadError

WHY_CUDA_OFF = "libtoycuda.so.1 not found"


def _why(text):
    return {"why_inactive": f"""
        @classmethod
        def why_inactive(cls):
            return {text!r}
    """}


@pytest.fixture
def host(plugins):
    """An active backend on host memory."""
    return plugins.add("hostbe", device="cpu")


@pytest.fixture
def cuda(plugins):
    """An active backend on CUDA memory."""
    return plugins.add("cudabe", device="cuda")


@pytest.fixture
def xyz(plugins):
    """An active backend on a made-up device type."""
    return plugins.add("xyzbe", device="xyz")


class CudaArray:
    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 3}


class DLPackArray:
    def __init__(self, code):
        self.code = code

    def __dlpack_device__(self):
        return (self.code, 0)


class TorchLike:
    """Looks like a torch tensor: ``.device.type`` and ``data_ptr``."""

    class _Device:
        def __init__(self, type_):
            self.type = type_

    def __init__(self, device_type):
        self.device = self._Device(device_type)

    def data_ptr(self):
        return 0


# --------------------------------------------------------------------------------------------
# Explicit choice
# --------------------------------------------------------------------------------------------

def test_set_backend_picks_it(registry, plugins):
    plugins.add("first", device="cpu")
    plugins.add("second", device="cpu")
    naiad.set_backend("second")
    assert selection.chosen_backend() == "second"
    assert selection.select() is registry["second"]
    naiad.set_backend("first")
    assert selection.select() is registry["first"]


def test_set_backend_wins_over_the_device_rules(registry, plugins):
    plugins.add("first", device="cpu")
    plugins.add("second", device="cpu")
    naiad.set_backend("second")
    assert selection.select([np.zeros(3)]) is registry["second"]


def test_a_chosen_backend_is_not_handed_another_devices_memory(registry, host, cuda):
    naiad.set_backend("hostbe")
    with pytest.raises(BackendSelectionError, match=r"backend 'hostbe' was chosen, but the kernel's "
                       r"arguments live in cuda memory and it runs on cpu -- fix: move"):
        selection.select([CudaArray()])
    assert selection.select([np.zeros(3)]) is registry["hostbe"]


def test_a_guest_device_type_is_reached_when_chosen_but_never_claimed(registry, host, plugins):
    """An OpenCL-like driver takes host arrays (guest_device_types) once chosen by name; numpy
    arrays still go to the host backend when nothing is chosen."""
    plugins.add("guestbe", device="toyocl", driver_methods={"guest_device_types": 'guest_device_types = ("cpu",)'})
    assert selection.select([np.zeros(3)]) is registry["hostbe"]
    naiad.set_backend("guestbe")
    assert selection.select([np.zeros(3)]) is registry["guestbe"]
    with pytest.raises(BackendSelectionError, match=r"backend 'guestbe' was chosen, but the kernel's "
                       r"arguments live in cuda memory and it runs on toyocl, cpu -- fix"):
        selection.select([CudaArray()])


def test_a_tensor_descriptor_lives_where_its_base_does(registry, host, cuda):
    from naiad.runtime.tensor_descriptor import TensorDescriptor

    class Descriptor:          # duck-typed like TensorDescriptor: base and block_shape
        base, block_shape = CudaArray(), [4]
    assert selection.device_type_of(Descriptor()) == "cuda"
    assert selection.select([Descriptor()]) is registry["cudabe"]
    host_descriptor = TensorDescriptor.from_tensor(np.zeros((4, 8), np.float32), [2, 8])
    assert selection.select([host_descriptor]) is registry["hostbe"]


def test_set_backend_as_context_manager_restores_the_previous_choice(registry, plugins):
    plugins.add("first", device="cpu")
    plugins.add("second", device="cpu")
    naiad.set_backend("first")
    with naiad.set_backend("second"):
        assert selection.select() is registry["second"]
        with naiad.set_backend("first"):
            assert selection.select() is registry["first"]
        assert selection.select() is registry["second"]
    assert selection.select() is registry["first"]
    assert selection.chosen_backend() == "first"


def test_context_manager_restores_on_error(registry, plugins):
    plugins.add("first", device="cpu")
    with pytest.raises(ZeroDivisionError):
        with naiad.set_backend("first"):
            1 / 0
    assert selection.chosen_backend() is None


def test_set_backend_none_returns_to_automatic_choice(registry, host, cuda):
    naiad.set_backend("cudabe")
    naiad.set_backend(None)
    assert selection.chosen_backend() is None
    assert selection.select() is registry["hostbe"]


def test_unknown_name_lists_every_discovered_backend(registry, plugins):
    plugins.add("hostbe", device="cpu")
    plugins.add("offbe", device="cuda", active=False, driver_methods=_why(WHY_CUDA_OFF))
    plugins.add("brokenbe", compiler_extra="import naiad_missing_dependency_xyz\n")
    with pytest.warns(naiad.errors.NaiadWarning):
        with pytest.raises(BackendSelectionError) as info:
            naiad.set_backend("hostbee")
    message = str(info.value)
    assert "naiad.set_backend('hostbee'): no backend named 'hostbee'" in message
    assert "fix: use one of the names below" in message
    lines = message.splitlines()
    assert any(l.strip().startswith("hostbe (plugin dir") and "active, runs on cpu" in l for l in lines)
    assert any(l.strip().startswith("offbe") and f"inactive: {WHY_CUDA_OFF}" in l for l in lines)
    assert any(l.strip().startswith("brokenbe") and "failed to load" in l
               and "naiad_missing_dependency_xyz" in l for l in lines)
    # Nothing was chosen.
    assert selection.chosen_backend() is None


def test_unknown_name_with_no_backend_at_all_says_how_to_get_one():
    with pytest.raises(BackendSelectionError, match=r"(?s)no backend named 'x'.*none found: "
                                                    r"install a backend package or set NAIAD_PLUGIN_DIRS"):
        naiad.set_backend("x")


def test_selection_error_is_a_runtime_error_and_a_naiad_error(plugins):
    with pytest.raises(RuntimeError):
        naiad.set_backend("nosuch")
    with pytest.raises(NaiadError):
        naiad.set_backend("nosuch")


def test_choosing_an_inactive_backend_says_it_cannot_run_and_why(registry, host, plugins):
    plugins.add("offbe", device="cuda", active=False, driver_methods=_why(WHY_CUDA_OFF))
    naiad.set_backend("hostbe")
    with pytest.raises(BackendSelectionError) as info:
        naiad.set_backend("offbe")
    message = str(info.value)
    assert f"backend 'offbe' cannot run on this machine ({WHY_CUDA_OFF})" in message
    assert "fix: choose an active backend below" in message
    assert "hostbe" in message
    # The failed call changed nothing.
    assert selection.chosen_backend() == "hostbe"
    assert selection.select() is registry["hostbe"]


def test_choosing_a_backend_whose_is_active_raises(plugins):
    plugins.add("raisebe", device="cpu", driver_methods={"is_active": """
        @classmethod
        def is_active(cls):
            raise RuntimeError("driver library crashed")
    """})
    with pytest.raises(BackendSelectionError,
                       match=r"cannot run on this machine \(is_active\(\) raised RuntimeError: "
                             r"driver library crashed\)"):
        naiad.set_backend("raisebe")


def test_choosing_a_backend_that_failed_to_load(plugins):
    plugins.add("brokenbe", compiler_extra="raise RuntimeError('toy compiler exploded')\n")
    with pytest.warns(naiad.errors.NaiadWarning):
        with pytest.raises(BackendSelectionError) as info:
            naiad.set_backend("brokenbe")
    message = str(info.value)
    assert "backend 'brokenbe' failed to load -- fix: see its error below" in message
    assert "toy compiler exploded" in message


# --------------------------------------------------------------------------------------------
# NAIAD_DEFAULT_BACKEND
# --------------------------------------------------------------------------------------------

def test_default_backend_env_picks(registry, host, cuda, monkeypatch):
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "cudabe")
    assert selection.chosen_backend() == "cudabe"
    # Even with no array arguments (which would mean the host backend).
    assert selection.select() is registry["cudabe"]


def test_default_backend_knob_picks(registry, host, cuda, monkeypatch):
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "hostbe")
    knobs.backends.default = "cudabe"
    assert selection.select() is registry["cudabe"]
    del knobs.backends.default
    assert selection.select() is registry["hostbe"]


def test_set_backend_wins_over_default_backend(registry, host, cuda, monkeypatch):
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "cudabe")
    naiad.set_backend("hostbe")
    assert selection.chosen_backend() == "hostbe"
    assert selection.select() is registry["hostbe"]
    naiad.set_backend(None)
    assert selection.select() is registry["cudabe"]


def test_unknown_default_backend_is_an_error_naming_the_variable(host, monkeypatch):
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "hostbee")
    with pytest.raises(BackendSelectionError) as info:
        selection.select()
    message = str(info.value)
    assert "NAIAD_DEFAULT_BACKEND=hostbee: no backend named 'hostbee'" in message
    assert "fix: use one of the names below" in message
    assert "hostbe (plugin dir" in message


# --------------------------------------------------------------------------------------------
# Device rules
# --------------------------------------------------------------------------------------------

def test_numpy_array_selects_the_cpu_backend(registry, host, cuda, xyz):
    import numpy as np

    assert selection.device_type_of(np.zeros(3)) == "cpu"
    assert selection.select([np.zeros(3), 2, 1.5]) is registry["hostbe"]


def test_cuda_array_interface_selects_the_cuda_backend(registry, host, cuda, xyz):
    assert selection.device_type_of(CudaArray()) == "cuda"
    assert selection.select([CudaArray(), 4]) is registry["cudabe"]


@pytest.mark.parametrize("code, device, backend", [(2, "cuda", "cudabe"), (1, "cpu", "hostbe")])
def test_dlpack_device_selects_by_device_code(registry, host, cuda, xyz, code, device, backend):
    assert selection.device_type_of(DLPackArray(code)) == device
    assert selection.select([DLPackArray(code)]) is registry[backend]


def test_torch_like_tensor_selects_by_device_type(registry, host, cuda, xyz):
    assert selection.device_type_of(TorchLike("xyz")) == "xyz"
    assert selection.select([TorchLike("xyz"), 3]) is registry["xyzbe"]
    assert selection.select([TorchLike("cuda")]) is registry["cudabe"]


def test_object_with_device_but_no_data_ptr_is_not_a_tensor():
    class NotATensor:
        device = TorchLike._Device("xyz")

    assert selection.device_type_of(NotATensor()) is None


def test_dlpack_device_that_raises_is_not_an_array():
    class Broken:
        def __dlpack_device__(self):
            raise RuntimeError("no device")

    assert selection.device_type_of(Broken()) is None


def test_no_array_arguments_select_the_host_backend(registry, host, cuda, xyz):
    assert selection.select() is registry["hostbe"]
    assert selection.select([1, 2.0, "s", None, (3, 4)]) is registry["hostbe"]


@pytest.mark.parametrize("value", [0, 7, 2.5, True, None, "text", b"bytes", 3 + 4j, [1, 2], (1,)])
def test_device_type_of_scalars_is_none(value):
    assert selection.device_type_of(value) is None


def test_arguments_on_two_devices_is_an_error_naming_both(host, cuda):
    with pytest.raises(BackendSelectionError) as info:
        selection.select([TorchLike("cpu"), CudaArray()])
    message = str(info.value)
    assert "the kernel's arguments live on different devices (cpu, cuda)" in message
    assert "fix: move them to one device" in message


def test_two_active_backends_for_one_device(host, plugins):
    plugins.add("otherhost", device=("cpu", "xyz"))
    with pytest.raises(BackendSelectionError) as info:
        selection.select()
    message = str(info.value)
    assert "2 active backends run on cpu memory (hostbe, otherhost)" in message
    assert "fix: pick one with naiad.set_backend(name) or NAIAD_DEFAULT_BACKEND" in message


def test_inactive_backend_does_not_make_an_ambiguity(registry, host, plugins):
    plugins.add("offhost", device="cpu", active=False)
    assert selection.select() is registry["hostbe"]


def test_broken_backend_does_not_stop_selection(registry, host, plugins):
    plugins.add("brokenbe", device="cpu", compiler_extra="raise RuntimeError('boom')\n")
    with pytest.warns(naiad.errors.NaiadWarning):
        assert selection.select() is registry["hostbe"]


def test_no_backend_for_the_device_lists_backends_with_why_inactive(host, plugins):
    plugins.add("offbe", device="cuda", active=False, driver_methods=_why(WHY_CUDA_OFF))
    with pytest.raises(BackendSelectionError) as info:
        selection.select([CudaArray()])
    message = str(info.value)
    assert "no active backend runs on cuda memory" in message
    assert "fix: install or enable one, or move the arguments to a device listed below" in message
    lines = message.splitlines()
    assert any(l.strip().startswith("offbe") and f"inactive: {WHY_CUDA_OFF}" in l for l in lines)
    assert any(l.strip().startswith("hostbe") and "active, runs on cpu" in l for l in lines)


def test_no_backend_at_all():
    with pytest.raises(BackendSelectionError) as info:
        selection.select()
    message = str(info.value)
    assert "no active backend runs on cpu memory" in message
    assert "install a backend package or set NAIAD_PLUGIN_DIRS" in message


# --------------------------------------------------------------------------------------------
# Drivers
# --------------------------------------------------------------------------------------------

def test_active_driver_is_one_instance_per_process(registry, host, cuda):
    first = selection.active_driver()
    second = selection.active_driver([1, 2])
    assert first is second
    assert type(first) is registry["hostbe"].driver
    cuda_driver = selection.active_driver([CudaArray()])
    assert type(cuda_driver) is registry["cudabe"].driver
    assert selection.active_driver([CudaArray()]) is cuda_driver
    assert cuda_driver is not first


def test_active_driver_reports_the_backend_target(host):
    target = selection.active_driver().get_current_target()
    assert target.backend == "hostbe"
