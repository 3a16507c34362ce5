"""Recording launches and compiles while at least one profile is active.

The profiler's hooks sit in ``knobs.runtime.launch_enter_hook`` / ``launch_exit_hook`` and its
observer in `naiad.compiler.compiler.compile_observers` only while a recording runs.  With
none running nothing is installed, so a launch runs exactly as without the profiler: the warm
path's own launcher, and the native launch entry, which steps aside while a launch hook is set.
Every running recording gets every event, which is what lets profiles nest.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from naiad import knobs
from naiad.compiler import compiler
from naiad.errors import NaiadError
from naiad.knobs import HookChain
from naiad.profiler.events import CompileEvent, LaunchEvent, declared_work


class Recording:
    """The events one profile collected, each list in the order the events ended."""

    def __init__(self) -> None:
        self.launches: list[LaunchEvent] = []
        self.compiles: list[CompileEvent] = []


_lock = threading.Lock()
_active: list[Recording] = []
#: Thread id -> the launches begun there and not ended: (metadata, work, start, events).
_begun: dict[int, list[tuple]] = {}
#: The hook chains the hooks went into: they leave the same ones, even if the knobs were
#: reset meanwhile.
_chains: list[HookChain] = []
#: Backend name -> its device interface's ``Event`` class, or None (`_device_events`).
_event_classes: dict[str, Any] = {}


def start(recording: Recording) -> None:
    """Send every launch and compile from now on to ``recording`` too."""
    with _lock:
        if any(r is recording for r in _active):
            raise NaiadError("this profile is recording already -- fix: leave its `with` block "
                             "before entering it again, or use a new naiad.profiler.profile()")
        if not _active:
            _install()
        _active.append(recording)


def stop(recording: Recording) -> None:
    """Stop sending events to ``recording``; the last one to stop takes the hooks out."""
    with _lock:
        _active[:] = [r for r in _active if r is not recording]
        if not _active:
            _uninstall()


def is_recording(recording: Recording) -> bool:
    return any(r is recording for r in _active)


def _install() -> None:
    chains = []
    for name in ("launch_enter_hook", "launch_exit_hook"):
        chain = getattr(knobs.runtime, name)
        if type(chain) is not HookChain:
            raise NaiadError(f"knobs.runtime.{name} holds a {type(chain).__name__}, not the hook "
                             f"chain the profiler adds its own hook to -- fix: add your hook with "
                             f"knobs.runtime.{name}.add(fn) instead of assigning it")
        chains.append(chain)
    chains[0].add(_enter)
    chains[1].add(_exit)
    _chains[:] = chains
    compiler.compile_observers.append(_compiled)


def _uninstall() -> None:
    for chain, hook in zip(_chains, (_enter, _exit)):
        if hook in chain.calls:
            chain.remove(hook)
    _chains.clear()
    if _compiled in compiler.compile_observers:
        compiler.compile_observers.remove(_compiled)
    _begun.clear()
    _event_classes.clear()          # drivers may be made anew before the next recording


def _enter(metadata: Any) -> None:
    if not isinstance(metadata, dict):      # not a Naiad launch's (a caller's own convention)
        return
    work = declared_work(metadata)
    event_class = _event_class(str(metadata.get("backend")))
    events = None if event_class is None else (event_class(enable_timing=True),
                                               event_class(enable_timing=True))
    start = time.perf_counter()
    if events is not None:
        events[0].record()
    _begun.setdefault(threading.get_ident(), []).append((metadata, work, start, events))


def _exit(metadata: Any) -> None:
    thread = threading.get_ident()
    begun = _begun.get(thread)
    while begun:        # a launch that raised between its hooks left its entry: drop it
        launched, work, start, events = begun.pop()
        if launched is metadata:
            break
    else:
        return           # begun before the first recording started
    if events is not None:
        events[1].record()
    host_time = time.perf_counter() - start
    event = LaunchEvent(metadata, work, thread, start, host_time, events)
    for recording in list(_active):
        recording.launches.append(event)


def _compiled(metadata: dict, began: float, seconds: float, cache_hit: bool) -> None:
    event = CompileEvent(str(metadata.get("name")), str((metadata.get("target") or {}).get("backend")),
                         str(metadata.get("hash")), threading.get_ident(), began, seconds, cache_hit)
    for recording in list(_active):
        recording.compiles.append(event)


def _event_class(backend: str) -> Any:
    try:
        return _event_classes[backend]
    except KeyError:
        found = _event_classes[backend] = _device_events(backend)
        return found


def _device_events(backend: str) -> Any:
    """The ``Event`` class of the backend's device interface (``torch.cuda.Event``'s shape:
    ``record()`` on the current stream, ``synchronize()``, ``elapsed_time(later)`` in ms), so
    that a GPU launch is timed on the device; None for a backend without one, or not found
    under this name: its launches are timed by the host's clock."""
    from naiad.backends.discovery import registry
    from naiad.backends.selection import driver_for

    try:
        driver = driver_for(registry[backend])
    except KeyError:
        return None
    return getattr(driver.get_device_interface(), "Event", None)
