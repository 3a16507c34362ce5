"""Run code written for Triton on Naiad: ``import triton`` resolves to Naiad's modules.

``naiad.compat.enable()`` (or ``NAIAD_TRITON_COMPAT=1`` before ``import naiad``, or
``python -m naiad.compat script.py``) registers the module names ``triton``,
``triton.language``, ``triton.language.extra.libdevice``, ``triton.runtime``,
``triton.compiler`` and friends as aliases of Naiad's modules, so an unmodified Triton kernel
file imports and runs.  Nothing is installed under the name ``triton``: with compat off, a real
Triton beside Naiad is untouched, and enabling compat after a real Triton was imported is an
error rather than a silent mix of the two.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
from typing import Any

from naiad.errors import NaiadError

#: ``triton`` module name -> the Naiad module that stands for it.
ALIASES = {
    "triton": "naiad.compat.triton",
    "triton.language": "naiad.language",
    "triton.language.core": "naiad.language.core",
    "triton.language.math": "naiad.language.math",
    "triton.language.standard": "naiad.language.standard",
    "triton.language.extra": "naiad.language.extra",
    "triton.language.extra.libdevice": "naiad.language.extra.libdevice",
    "triton.runtime": "naiad.compat.runtime",
    "triton.runtime.jit": "naiad.runtime.jit",
    "triton.runtime.autotuner": "naiad.runtime.autotuner",
    "triton.runtime.errors": "naiad.compat.errors",
    "triton.runtime._allocation": "naiad.runtime.allocation",
    "triton.runtime.cache": "naiad.compat.runtime_cache",
    "triton.runtime.driver": "naiad.compat.runtime_driver",
    "triton.backends": "naiad.compat.backends",
    "triton.backends.compiler": "naiad.compat.backends_compiler",
    "triton.backends.driver": "naiad.compat.backends_driver",
    "triton.compiler": "naiad.compat.compiler",
    "triton.compiler.compiler": "naiad.compat.compiler",
    "triton.compiler.errors": "naiad.compat.errors",
    "triton.errors": "naiad.compat.errors",
    "triton.knobs": "naiad.knobs",
    "triton.testing": "naiad.testing",
    "triton.tools": "naiad.compat.tools",
    "triton.tools.tensor_descriptor": "naiad.runtime.tensor_descriptor",
}

#: Imported only when asked for: they need torch, as the tests that use them do.
LAZY_ALIASES = {
    "triton._internal_testing": "naiad.compat.internal_testing",
    "triton.tools.mxfp": "naiad.compat.mxfp",
}


class CompatError(NaiadError, ImportError):
    """The compatibility layer cannot be enabled, or a ``triton`` module it lacks was imported."""


class _MissingTritonModules(importlib.abc.MetaPathFinder):
    """Turns ``import triton.<something Naiad lacks>`` into an error that says so."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in LAZY_ALIASES:
            return importlib.util.spec_from_loader(fullname, _AliasLoader(LAZY_ALIASES[fullname]))
        if fullname == "triton" or fullname.startswith("triton."):
            raise CompatError(f"Naiad's Triton compatibility layer does not provide {fullname!r} -- "
                              f"fix: import the Naiad equivalent, or run this code with real Triton")
        return None


class _AliasLoader(importlib.abc.Loader):
    """Loads a ``triton`` name as the Naiad module it stands for (the same module object)."""

    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module):
        """Already executed by `create_module`'s import; the import system has just set the
        module's ``__spec__`` to the alias's, so give it back its own."""
        alias = module.__spec__.name
        module.__spec__ = self._own_spec
        _attach(alias, module)


_finder = _MissingTritonModules()


def is_enabled() -> bool:
    return _finder in sys.meta_path


#: Put first on PYTHONPATH of child processes while compat is on (`child_path/triton`).
CHILD_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child_path")


def enable() -> None:
    """Make ``import triton`` (and its submodules listed in `ALIASES`) resolve to Naiad, in this
    process and in the Python processes it starts: `CHILD_PATH` goes first on ``PYTHONPATH`` and
    on ``sys.path`` (torch's Inductor compiles kernels in worker processes that import ``triton``
    only, started with this process's ``sys.path`` as their ``PYTHONPATH``).  Here ``triton`` is
    already in ``sys.modules``, so the folder is never searched for it."""
    if is_enabled():
        return
    existing = sys.modules.get("triton")
    if existing is not None and not getattr(existing, "__naiad_compat__", False):
        raise CompatError("a real Triton is already imported in this process -- fix: call "
                          "naiad.compat.enable() (or set NAIAD_TRITON_COMPAT=1) before importing triton")
    for alias, target in ALIASES.items():
        sys.modules[alias] = importlib.import_module(target)
    for alias in ALIASES:
        _attach(alias, sys.modules[alias])
    sys.meta_path.append(_finder)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if CHILD_PATH not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([CHILD_PATH, *filter(None, paths)])
    if CHILD_PATH not in sys.path:       # for children given this process's sys.path (torch's workers)
        sys.path.insert(0, CHILD_PATH)


def _attach(alias: str, module: Any) -> None:
    """Make ``module`` the attribute its alias names on the alias's parent (``triton.runtime``'s
    ``autotuner``), unless the parent has that name already (``triton.runtime.driver`` is the
    driver object, its module only in ``sys.modules``, as in Triton).

    Why: ``import triton.runtime.autotuner as x`` reads the attribute chain from ``triton``
    down, and Python's fallback to ``sys.modules`` looks under the parent module's own name
    (``naiad.compat.runtime.autotuner``), which no alias has."""
    parent, _, name = alias.rpartition(".")
    if parent in sys.modules and not hasattr(sys.modules[parent], name):
        setattr(sys.modules[parent], name, module)


def disable() -> None:
    """Undo `enable`: the ``triton`` names are free again, here and in the processes started
    from now on (modules already imported keep their references)."""
    if not is_enabled():
        return
    sys.meta_path.remove(_finder)
    for alias in (*ALIASES, *LAZY_ALIASES):
        sys.modules.pop(alias, None)
    while CHILD_PATH in sys.path:
        sys.path.remove(CHILD_PATH)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != CHILD_PATH]
    if paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        os.environ.pop("PYTHONPATH", None)
