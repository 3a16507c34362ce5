"""Isolation for every test, and factories for fixture backends.

Discovery, selection and the knobs are process-wide state; the autouse fixture `_isolate`
resets all of it before and after each test and removes every module a fixture backend
brought into ``sys.modules``, so tests can reuse backend names freely.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

import naiad
import naiad.backends
import naiad.language.extra
import naiad.tools.extra
from naiad import knobs
from naiad.backends import discovery, selection

import plugin_fixtures
from naiad.compiler import compiler
from naiad.runtime.jit import JITFunction

NAIAD_DIR = os.path.dirname(os.path.realpath(naiad.__file__)) + os.sep
FIXTURE_PREFIXES = ("naiad.backends.", "naiad.language.extra.", "naiad.tools.extra.")
# Packages that fixture modules become attributes of when imported.
PARENT_PACKAGES = (naiad.backends, naiad.language.extra, naiad.tools.extra)


def _module_paths(module) -> list[str]:
    paths = []
    file = getattr(module, "__file__", None)
    if file:
        paths.append(os.path.realpath(file))
    try:
        paths.extend(os.path.realpath(p) for p in getattr(module, "__path__", None) or [])
    except Exception:  # an exotic __path__; treat as no path
        pass
    return paths


def _is_real_naiad_module(module) -> bool:
    paths = _module_paths(module)
    return bool(paths) and all(p.startswith(NAIAD_DIR) for p in paths)


def _remove_fixture_modules(before: set[str], tmp_root: str) -> None:
    for name in list(sys.modules):
        module = sys.modules.get(name)
        if module is None:
            continue
        if name.startswith(FIXTURE_PREFIXES) and not _is_real_naiad_module(module):
            del sys.modules[name]
        elif name not in before and any(p.startswith(tmp_root) for p in _module_paths(module)):
            del sys.modules[name]


def _reset_state() -> None:
    for group in knobs.groups.values():
        group.reset()
    selection._choice = None
    selection._drivers.clear()
    discovery.registry.refresh()
    compiler.make_backend.cache_clear()


_REAL_IN_TREE = os.path.dirname(discovery.__file__)
_real_in_tree_sources = discovery._in_tree_sources
_real_entry_point_sources = discovery._entry_point_sources
#: Backends installed in this environment as distributions (e.g. plugins/naiad-opencl): as
#: foreign to the discovery tests as the shipped ones.
_INSTALLED_ENTRY_POINTS = {(s.name, s.location) for s in _real_entry_point_sources()}


def _without_shipped_backends(monkeypatch) -> None:
    """Hide Naiad's own in-tree backends (cpu, ...) and the backend distributions installed
    here, so discovery tests see only their fixtures."""
    monkeypatch.setattr(discovery, "_in_tree_sources", lambda: [
        s for s in _real_in_tree_sources() if os.path.dirname(s.location) != _REAL_IN_TREE])
    monkeypatch.setattr(discovery, "_entry_point_sources", lambda: [
        s for s in _real_entry_point_sources() if not s.package.startswith("naiad.backends.")
        and (s.name, s.location) not in _INSTALLED_ENTRY_POINTS])


TORCH_COMPILE_SUITE = Path(__file__).resolve().parent / "torch_compile"


def pytest_ignore_collect(collection_path, config):
    """tests/torch_compile runs in a process of its own (its conftest says why), started by
    tests/test_torch_compile.py: it is collected only when named on the command line."""
    if Path(collection_path).resolve() != TORCH_COMPILE_SUITE:
        return None
    named = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    return not any(p == TORCH_COMPILE_SUITE or TORCH_COMPILE_SUITE in p.parents for p in named)


@pytest.fixture(scope="session")
def _session_cache_dir(tmp_path_factory) -> str:
    """One kernel cache for the whole run: tests never write to ~/.naiad."""
    return str(tmp_path_factory.mktemp("naiad-cache"))


@pytest.fixture(autouse=True)
def _isolate(request, monkeypatch, tmp_path_factory, _session_cache_dir):
    if request.node.get_closest_marker("shipped_backends") is None:
        _without_shipped_backends(monkeypatch)
    for var in list(os.environ):
        if var.startswith("NAIAD_"):
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NAIAD_CACHE_DIR", _session_cache_dir)
    for var in ("NAIAD_PLUGIN_DIRS", "NAIAD_BACKENDS_IN_TREE", "NAIAD_DEFAULT_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    # Fixture sources are rewritten under the same names; never let a stale .pyc answer.
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    tmp_root = os.path.realpath(tmp_path_factory.getbasetemp())
    before = set(sys.modules)
    parents = {pkg: dict(vars(pkg)) for pkg in PARENT_PACKAGES}
    _remove_fixture_modules(before, tmp_root)
    _reset_state()
    yield
    _remove_fixture_modules(before, tmp_root)
    # Importing naiad.backends.<name> binds <name> on naiad.backends (and likewise for
    # language/tools): put the packages' namespaces back as they were.
    for pkg, saved in parents.items():
        namespace = vars(pkg)
        for key in [k for k in namespace if k not in saved]:
            value = namespace[key]
            if not (isinstance(value, types.ModuleType) and _is_real_naiad_module(value)):
                delattr(pkg, key)
        for key, value in saved.items():
            if namespace.get(key, object()) is not value:
                setattr(pkg, key, value)
    _reset_state()


class Plugins:
    """Writes plugin directories under ``tmp_path/plugins`` and puts them in NAIAD_PLUGIN_DIRS."""

    def __init__(self, base: Path, monkeypatch):
        self.base = base
        self._monkeypatch = monkeypatch
        self.enabled: list[Path] = []

    def make(self, name: str, *, dirname: str | None = None, **kwargs) -> Path:
        """Write a plugin directory (not enabled); arguments as plugin_fixtures.write_plugin."""
        return plugin_fixtures.write_plugin(self.base / (dirname or name), name, **kwargs)

    def add(self, name: str, *, dirname: str | None = None, **kwargs) -> Path:
        """Write a plugin directory and append it to NAIAD_PLUGIN_DIRS."""
        root = self.make(name, dirname=dirname, **kwargs)
        self.use(*self.enabled, root)
        return root

    def use(self, *roots) -> None:
        """Set NAIAD_PLUGIN_DIRS to exactly these directories, in order."""
        self.enabled = [Path(r) for r in roots]
        self._monkeypatch.setenv("NAIAD_PLUGIN_DIRS", ";".join(str(r) for r in self.enabled))


@pytest.fixture
def plugins(tmp_path, monkeypatch) -> Plugins:
    return Plugins(tmp_path / "plugins", monkeypatch)


@pytest.fixture
def plugin(plugins) -> Path:
    """One good, enabled plugin directory: backend "toy", device "toydev", active."""
    return plugins.add("toy")


class InTree:
    """Writes in-tree backends: sub-packages of a directory added to naiad.backends.__path__."""

    def __init__(self, base: Path, monkeypatch):
        self.base = base
        self._monkeypatch = monkeypatch
        self._patched = False

    def add(self, name: str, **kwargs) -> Path:
        """Write naiad/backends/<name>/ (arguments as plugin_fixtures.write_package_backend)."""
        directory = plugin_fixtures.write_package_backend(self.base, name, **kwargs)
        if not self._patched:
            self._monkeypatch.setattr(naiad.backends, "__path__",
                                      list(naiad.backends.__path__) + [str(self.base)])
            self._patched = True
        return directory


@pytest.fixture
def in_tree(tmp_path, monkeypatch) -> InTree:
    base = tmp_path / "in_tree"
    base.mkdir()
    return InTree(base, monkeypatch)


class Site:
    """A directory on sys.path holding fixture packages and fake distributions."""

    def __init__(self, directory: Path):
        self.dir = directory

    def package(self, package: str, **kwargs) -> Path:
        return plugin_fixtures.write_package_backend(self.dir, package, **kwargs)

    def dist(self, dist_name: str, version: str, entry_points: dict[str, str]) -> Path:
        from naiad import entry_points as installed

        installed.forget()          # the directory is on sys.path already
        return plugin_fixtures.write_dist_info(self.dir, dist_name, version, entry_points)


@pytest.fixture
def site(tmp_path, monkeypatch) -> Site:
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    return Site(directory)


@pytest.fixture
def registry():
    return discovery.registry


@pytest.fixture
def stage_calls(monkeypatch) -> list[str]:
    """The names of the stages `naiad.compile` runs, in order (a cache hit runs none)."""
    calls: list[str] = []
    real = compiler._run_stage

    def counting(stage, name, *rest):
        calls.append(name)
        return real(stage, name, *rest)

    monkeypatch.setattr(compiler, "_run_stage", counting)
    return calls


@pytest.fixture
def slow(monkeypatch):
    """Counts launches that take the full path."""
    calls = []
    original = JITFunction._run_slow

    def counting(self, *args, **kwargs):
        calls.append(self.__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(JITFunction, "_run_slow", counting)
    return calls
