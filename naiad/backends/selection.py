"""Choosing the backend for a launch.

In order:

1. a name given to `set_backend` (plain call, or ``with naiad.set_backend(name):``);
2. ``NAIAD_DEFAULT_BACKEND`` (``naiad.knobs.backends.default``);
3. the device of the kernel's array arguments: the active backend whose driver lists that
   device type in ``device_types`` (torch CUDA tensors -> "cuda", numpy arrays -> "cpu");
4. with no array arguments, host memory ("cpu"): the active backend that runs on the host.

Anything that does not lead to exactly one active backend is a `BackendSelectionError` that
lists every discovered backend, whether it is active, and why not.  The core never tests a
backend's name: device types are the only link between arguments and backends.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable

from naiad import knobs
from naiad.backends.discovery import Backend, BackendFailure, registry
from naiad.backends.driver import DriverBase
from naiad.errors import BackendSelectionError
from naiad.runtime import numpy_scalars

HOST = "cpu"

# DLPack's device codes (dlpack.h, DLDeviceType) -> torch-style device type names.
_DLPACK_DEVICES = {1: "cpu", 2: "cuda", 3: "cpu", 4: "opencl", 7: "vulkan", 8: "mps",
                   10: "hip", 11: "cpu", 13: "cuda", 14: "xpu"}

_choice: str | None = None
_choice_lock = threading.Lock()


def device_type_of(arg: Any) -> str | None:
    """The device type of an array-like argument, or None for scalars and other objects.

    Checked without importing torch or numpy: torch tensors by ``.device.type``, CUDA arrays by
    ``__cuda_array_interface__``, DLPack producers by ``__dlpack_device__``, host arrays by
    ``__array_interface__``; a tensor descriptor (``base`` and ``block_shape``) by its base.
    A numpy scalar is a scalar, though it carries ``__array_interface__``.
    """
    if numpy_scalars.is_numpy_scalar(arg):
        return None
    if hasattr(arg, "block_shape") and hasattr(arg, "base"):
        return device_type_of(arg.base)
    device = getattr(arg, "device", None)
    if device is not None and hasattr(arg, "data_ptr"):
        kind = getattr(device, "type", None)
        if isinstance(kind, str):
            return kind
    if hasattr(arg, "__cuda_array_interface__"):
        return "cuda"
    dlpack_device = getattr(arg, "__dlpack_device__", None)
    if dlpack_device is not None:
        try:
            code = int(dlpack_device()[0])
        except Exception:
            return None
        return _DLPACK_DEVICES.get(code, f"dlpack:{code}")
    if hasattr(arg, "__array_interface__"):
        return HOST
    return None


class _Choice:
    """Returned by `set_backend`; as a context manager it restores the previous choice on exit."""

    def __init__(self, previous: str | None):
        self._previous = previous

    def __enter__(self) -> "_Choice":
        return self

    def __exit__(self, *exc: Any) -> None:
        global _choice
        with _choice_lock:
            _choice = self._previous


def set_backend(name: str | None) -> _Choice:
    """Use backend ``name`` for every launch in this process (None: back to automatic choice).

    ``with naiad.set_backend("cpu"): ...`` limits the choice to the block.  The name is checked
    now, so a typo fails here rather than at the first launch.
    """
    global _choice
    if name is not None:
        _require(name, f"naiad.set_backend({name!r})")
    with _choice_lock:
        previous, _choice = _choice, name
    return _Choice(previous)


def chosen_backend() -> str | None:
    """The explicitly chosen backend name (set_backend, else NAIAD_DEFAULT_BACKEND), if any."""
    return _choice if _choice is not None else knobs.backends.default


def is_active(backend: Backend) -> tuple[bool, str]:
    """Whether the backend's driver can run here, and if not, why (never raises)."""
    try:
        if backend.driver.is_active():
            return True, ""
    except Exception as e:
        return False, f"is_active() raised {type(e).__name__}: {e}"
    try:
        return False, backend.driver.why_inactive()
    except Exception as e:
        return False, f"inactive (why_inactive() raised {type(e).__name__}: {e})"


def describe_backends() -> list[str]:
    """One line per discovered backend: name, origin, active or not and why."""
    lines = []
    for name in sorted(registry.sources()):
        item = registry.get_or_failure(name)
        if isinstance(item, BackendFailure):
            lines.append(f"  {name}: failed to load: {item.reason}")
            continue
        active, why = is_active(item)
        state = f"active, runs on {', '.join(item.driver.device_types)}" if active else f"inactive: {why}"
        lines.append(f"  {name} ({item.source.describe()}): {state}")
    for failure in registry.skipped():
        lines.append(f"  {failure.name}: skipped: {failure.reason}")
    return lines or ["  (none found: install a backend package or set NAIAD_PLUGIN_DIRS)"]


def _error(message: str) -> BackendSelectionError:
    return BackendSelectionError(message + "\nBackends:\n" + "\n".join(describe_backends()))


def _require(name: str, how: str) -> Backend:
    item = registry.get_or_failure(name) if name in registry.sources() else None
    if item is None:
        raise _error(f"{how}: no backend named {name!r} -- fix: use one of the names below")
    if isinstance(item, BackendFailure):
        raise _error(f"{how}: backend {name!r} failed to load -- fix: see its error below")
    active, why = is_active(item)
    if not active:
        raise _error(f"{how}: backend {name!r} cannot run on this machine ({why}) -- "
                     f"fix: choose an active backend below")
    return item


def _active_for(device: str) -> list[Backend]:
    """The active backends that run on ``device``; a backend whose driver declares other
    device types is not imported to ask (`Registry.device_types`)."""
    found = []
    for name in sorted(registry.sources()):
        declared = registry.device_types(name)
        if declared is not None and device not in declared:
            continue
        item = registry.get_or_failure(name)
        if isinstance(item, Backend) and device in item.driver.device_types and is_active(item)[0]:
            found.append(item)
    return found


_selected: dict[tuple, Backend] = {}


def select(args: Iterable[Any] = ()) -> Backend:
    """The backend to launch a kernel with these arguments on (rules in the module docstring).

    Remembered per (explicit choice, device types, discovery state), so that launches after the
    first cost a dictionary lookup.
    """
    devices = tuple(sorted({d for d in map(device_type_of, args) if d is not None}))
    key = (_choice, knobs.backends.default, devices, registry.generation, knobs.backends.in_tree,
           tuple(knobs.backends.plugin_dirs))
    backend = _selected.get(key)
    if backend is None:
        backend = _selected[key] = _select(devices)
    return backend


def state_reader(*more: tuple[knobs.KnobGroup, tuple[str, ...]]) -> Callable[[], tuple]:
    """A function returning everything `select` reads besides the arguments' device types
    (equal tokens and equal device types select the same backend), with the raw values of the
    ``more`` knobs ((group, names) pairs) appended: a launch reads it all in one call."""
    knob_token = knobs.raw_reader((knobs.backends, ("default", "in_tree", "plugin_dirs")), *more)

    def state_token() -> tuple:
        return (_choice, registry.generation, knob_token())
    return state_token


def state_guards(*more: tuple[knobs.KnobGroup, tuple[str, ...]]) -> list[tuple] | None:
    """`state_reader`'s token staying the same, as native-entry guards (`knobs.raw_guards`);
    None where the knobs cannot be guarded."""
    knob_guards = knobs.raw_guards((knobs.backends, ("default", "in_tree", "plugin_dirs")), *more)
    if knob_guards is None:
        return None
    return [(globals(), (("item", "_choice"),), "is", _choice),
            (registry, (("attr", "generation"),), "eq", registry.generation), *knob_guards]


def _select(devices: tuple[str, ...]) -> Backend:
    if _choice is not None:
        return _reaches(_require(_choice, f"the backend chosen with naiad.set_backend({_choice!r})"),
                        devices)
    default = knobs.backends.default
    if default:
        return _reaches(_require(default, f"NAIAD_DEFAULT_BACKEND={default}"), devices)
    if len(devices) > 1:
        raise _error(f"the kernel's arguments live on different devices ({', '.join(devices)}) -- "
                     f"fix: move them to one device")
    device = devices[0] if devices else HOST
    candidates = _active_for(device)
    if len(candidates) == 1:
        return candidates[0]
    names = ", ".join(b.name for b in candidates)
    if candidates:
        raise _error(f"{len(candidates)} active backends run on {device} memory ({names}) -- "
                     f"fix: pick one with naiad.set_backend(name) or NAIAD_DEFAULT_BACKEND")
    raise _error(f"no active backend runs on {device} memory -- fix: install or enable one, "
                 f"or move the arguments to a device listed below")


def _reaches(backend: Backend, devices: tuple[str, ...]) -> Backend:
    """``backend`` when it runs on the memory of every array argument: a backend chosen by name
    must not be handed another device's addresses (the kernel would fault or crash)."""
    reached = backend.driver.device_types + backend.driver.guest_device_types
    foreign = [d for d in devices if d not in reached]
    if foreign:
        raise _error(f"backend {backend.name!r} was chosen, but the kernel's arguments live in "
                     f"{', '.join(foreign)} memory and it runs on "
                     f"{', '.join(reached)} -- fix: move the arguments "
                     f"there, or choose a backend that runs on {', '.join(foreign)}")
    return backend


_drivers: dict[str, DriverBase] = {}
_drivers_lock = threading.Lock()


def driver_for(backend: Backend) -> DriverBase:
    """The process-wide driver instance of a backend, created on first use."""
    with _drivers_lock:
        driver = _drivers.get(backend.name)
        if driver is None or type(driver) is not backend.driver:
            driver = _drivers[backend.name] = backend.driver()
        return driver


def active_driver(args: Iterable[Any] = ()) -> DriverBase:
    """The driver of `select` (args): Triton's ``driver.active`` for these arguments."""
    return driver_for(select(args))
