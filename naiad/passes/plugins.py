"""Pass plugins: passes written in pure Python, outside Naiad, registered by name.

Two ways in, both read the first time a pass is looked up:

* ``NAIAD_PASS_PLUGINS`` — module paths separated by ``;`` (``mypkg.passes;other``).  Each
  module is imported; it registers its passes with `naiad.passes.register_pass` at import.
* the entry-point group ``naiad.passes`` — each entry point's name is a pass name and its value
  (``pkg.module:attr``) a function of the module or an xDSL ``ModulePass``.

A registered pass does nothing until something runs it: a backend's pipeline, or a stages
inspection hook (``naiad.knobs.runtime.add_stages_inspection_hook``) that wraps a stage.  A
plugin that cannot be imported, or registers a name twice, is an error naming the plugin.
"""

from __future__ import annotations

import importlib
import threading
from importlib import metadata

from naiad import entry_points

ENTRY_POINT_GROUP = "naiad.passes"

_lock = threading.Lock()
_loaded: tuple[str, ...] | None = None


def _entry_points() -> list[metadata.EntryPoint]:
    return entry_points.entry_points(ENTRY_POINT_GROUP)


def load_pass_plugins() -> None:
    """Import the configured plugin modules and register entry-point passes (once per value of
    ``NAIAD_PASS_PLUGINS``)."""
    global _loaded
    from naiad import knobs
    from naiad.passes import PassError, register_pass

    modules = tuple(knobs.compilation.pass_plugins)
    with _lock:
        if _loaded == modules:
            return
        _loaded = modules
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as e:  # noqa: BLE001 -- any import failure is the plugin's
                raise PassError(f"pass plugin {name!r} (NAIAD_PASS_PLUGINS) cannot be imported: "
                                f"{type(e).__name__}: {e} -- fix: install it, or remove it from "
                                f"NAIAD_PASS_PLUGINS") from None
        for entry in _entry_points():
            try:
                register_pass(entry.name, entry.load(), replace=True)
            except Exception as e:  # noqa: BLE001
                raise PassError(f"pass plugin entry point {entry.name!r} = {entry.value!r} (group "
                                f"{ENTRY_POINT_GROUP}) cannot be loaded: {type(e).__name__}: {e}") from None
