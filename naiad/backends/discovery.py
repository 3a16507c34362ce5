"""Finding backends, loading them lazily, and keeping broken ones from breaking anything else.

Three sources, in order of precedence (the one rule for name clashes):

1. ``NAIAD_PLUGIN_DIRS``, left to right: an explicit choice made for this process;
2. in-tree backends, the sub-packages of ``naiad.backends`` (they are also registered as entry
   points of the ``naiad`` distribution; those entries are the same backend, not a clash);
3. entry points of group ``naiad.backends`` from other distributions, in order of distribution
   name then entry-point name (skipped when ``NAIAD_BACKENDS_IN_TREE=1``).

A name claimed by an earlier source shadows later claims: each shadowed backend is reported by
``naiad backends`` and a `naiad.errors.NaiadWarning` is issued.

Listing the names (`Registry.sources`) reads directories and package metadata only.  A
backend's modules are imported the first time it is asked for (``registry[name]``).  Every
failure -- an unreadable plugin directory, an ImportError, zero or two concrete classes, a wrong
API version -- is recorded with its reason and fix (`Registry.failures`) and the backend is
skipped; the others keep working.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.machinery
import inspect
import os
import re
import sys
import threading
import traceback
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Iterator

from naiad import knobs
from naiad.backends import plugin_dirs
from naiad.backends.compiler import BACKEND_API_VERSION, OLDEST_BACKEND_API_VERSION, BaseBackend
from naiad.backends.driver import DriverBase
from naiad.errors import BackendAPIVersionError, BackendLoadError, KnobError, NaiadWarning

ENTRY_POINT_GROUP = "naiad.backends"


@dataclasses.dataclass(frozen=True)
class BackendSource:
    """Where a backend comes from, known before any of its code is imported."""

    name: str
    origin: str     # "plugin dir", "in-tree" or "entry point"
    package: str    # the importable package holding ``compiler`` and ``driver``
    location: str   # a directory, or "<distribution> <version>"

    def describe(self) -> str:
        return f"{self.origin} {self.location}"


@dataclasses.dataclass(frozen=True)
class Backend:
    """A loaded backend: its compiler and driver classes (not instances)."""

    name: str
    compiler: type[BaseBackend]
    driver: type[DriverBase]
    source: BackendSource

    @property
    def api_version(self) -> int:
        return self.compiler.api_version


@dataclasses.dataclass(frozen=True)
class BackendFailure:
    """A backend that was skipped, and why."""

    name: str          # the backend's name, or the plugin directory when no name could be read
    origin: str
    location: str
    reason: str        # what is wrong and what to do

    def __str__(self) -> str:
        return f"{self.name} ({self.origin} {self.location}): {self.reason}"


def _in_tree_sources() -> list[BackendSource]:
    import naiad.backends as package

    found = []
    for directory in package.__path__:
        for entry in sorted(os.listdir(directory)):
            path = os.path.join(directory, entry)
            if entry.startswith(("_", ".")) or not os.path.isdir(path):
                continue
            if not any(os.path.isfile(os.path.join(path, f"{m}.py")) for m in ("compiler", "driver")):
                continue
            found.append(BackendSource(entry, "in-tree", f"naiad.backends.{entry}", path))
    return found


def _entry_point_sources() -> list[BackendSource]:
    from naiad.entry_points import entry_points

    found = []
    for ep in entry_points(ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        where = f"{dist.name} {dist.version}" if dist is not None else "unknown distribution"
        found.append(BackendSource(ep.name, "entry point", ep.value, where))
    return sorted(found, key=lambda s: (s.location, s.name))


def _plugin_sources() -> tuple[list[BackendSource], list[BackendFailure]]:
    sources, failures = [], []
    for item in plugin_dirs.finder.scan():
        if isinstance(item, plugin_dirs.PluginDirError):
            fixes = "; ".join(f"{problem} -- fix: {fix}" for problem, fix in item.problems)
            failures.append(BackendFailure(item.name or item.root, "plugin dir", item.root, fixes))
        else:
            sources.append(BackendSource(item.name, "plugin dir", f"naiad.backends.{item.name}", item.root))
    return sources, failures


_DEVICE_TYPES = re.compile(r"^[ \t]+device_types\s*(?::[^=\n]*)?=\s*(\([^\n]*?\))\s*(?:#.*)?$", re.M)


def declared_device_types(source: BackendSource) -> tuple[str, ...] | None:
    """The ``device_types`` a backend's driver class declares, read from the text of its
    ``driver.py`` without importing anything (selection then imports only the backends that
    run on the arguments' device); None when the text does not say it plainly (one
    ``device_types = (...)`` line holding a tuple of strings): the backend is imported to ask."""
    path = _driver_file(source)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            found = set(_DEVICE_TYPES.findall(f.read()))
        value = ast.literal_eval(found.pop()) if len(found) == 1 else None
    except (OSError, UnicodeDecodeError, ValueError, SyntaxError):
        return None
    if isinstance(value, tuple) and all(isinstance(d, str) for d in value):
        return value
    return None


def _driver_file(source: BackendSource) -> str | None:
    if source.origin == "plugin dir":
        directories = [os.path.join(source.location, "backend")]
    elif source.origin == "in-tree":
        directories = [source.location]
    else:
        directories = _package_directories(source.package)
    paths = [os.path.join(d, "driver.py") for d in directories]
    return next((p for p in paths if os.path.isfile(p)), None)


def _package_directories(package: str) -> list[str]:
    """Where an importable package lives, found as the import system finds it, without running
    any of its code or its parents' (an ``__init__`` that hangs must not hang discovery)."""
    paths: list[str] | None = None
    parts = package.split(".")
    for i in range(len(parts)):
        name = ".".join(parts[:i + 1])
        module = sys.modules.get(name)
        if module is not None:
            paths = list(getattr(module, "__path__", None) or [])
            continue
        try:
            spec = importlib.machinery.PathFinder.find_spec(name, paths)
        except (ImportError, ValueError):
            return []
        if spec is None or not spec.submodule_search_locations:
            return []
        paths = list(spec.submodule_search_locations)
    return paths or []


def _concrete_class(module: ModuleType, base: type, package: str, what: str) -> type:
    """The one concrete subclass of ``base`` defined inside the backend's own package.

    Triton counts every concrete subclass visible in the module, so importing another backend's
    class breaks discovery; counting only classes defined in the backend's package avoids that.
    """
    own = list({id(obj): obj for obj in vars(module).values()
                if inspect.isclass(obj) and issubclass(obj, base) and obj is not base
                and (obj.__module__ == package or obj.__module__.startswith(package + "."))}.values())
    concrete = [c for c in own if not inspect.isabstract(c)]
    if len(concrete) == 1:
        return concrete[0]
    if not concrete:
        detail = "".join(
            f"; {c.__name__} leaves abstract: {', '.join(sorted(c.__abstractmethods__))}"
            for c in own)
        raise BackendLoadError(
            f"{module.__name__} defines no concrete subclass of {base.__module__}.{base.__name__}"
            f"{detail} -- fix: define exactly one class deriving from {base.__name__} that "
            f"implements every abstract method ({what})")
    names = ", ".join(sorted(c.__name__ for c in concrete))
    raise BackendLoadError(
        f"{module.__name__} defines {len(concrete)} concrete subclasses of {base.__name__} "
        f"({names}) -- fix: keep exactly one; make helpers abstract or move them out of the package")


def _import(module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise BackendLoadError(
                f"module {module_name} not found -- fix: the package must contain "
                f"compiler.py and driver.py (is the distribution installed and the entry point right?)"
            ) from None
        raise BackendLoadError(f"importing {module_name} failed: {_last_line(e)}") from e
    except (Exception, SystemExit) as e:
        raise BackendLoadError(f"importing {module_name} failed: {_last_line(e)}") from e


def _last_line(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(e).__name__}: {e}{where}"


def check_api_version(name: str, compiler: type) -> None:
    version = getattr(compiler, "api_version", None)
    if not isinstance(version, int) or isinstance(version, bool):
        raise BackendAPIVersionError(
            f"{compiler.__name__} does not declare api_version -- fix: add the class attribute "
            f"'api_version = {BACKEND_API_VERSION}' (the naiad.backends.compiler.BACKEND_API_VERSION "
            f"it was written for)")
    if version > BACKEND_API_VERSION:
        raise BackendAPIVersionError(
            f"backend {name!r} was written for backend API {version}, but this Naiad speaks "
            f"{OLDEST_BACKEND_API_VERSION}..{BACKEND_API_VERSION} -- fix: upgrade naiad")
    if version < OLDEST_BACKEND_API_VERSION:
        raise BackendAPIVersionError(
            f"backend {name!r} was written for backend API {version}, but this Naiad speaks "
            f"{OLDEST_BACKEND_API_VERSION}..{BACKEND_API_VERSION} -- fix: upgrade the backend "
            f"(docs/WRITING_A_BACKEND.md lists what changed) or use an older naiad")


def _check_declarations(compiler: type, driver: type) -> None:
    binary_ext = getattr(compiler, "binary_ext", None)
    if not isinstance(binary_ext, str) or not binary_ext:
        raise BackendLoadError(
            f"{compiler.__name__} does not declare binary_ext -- fix: add the class attribute "
            f"'binary_ext = \"<name of the final stage>\"' (e.g. \"obj\", \"cubin\")")
    device_types = getattr(driver, "device_types", None)
    if not isinstance(device_types, tuple) or not all(isinstance(d, str) for d in device_types):
        raise BackendLoadError(
            f"{driver.__name__} does not declare device_types -- fix: add the class attribute "
            f"'device_types = (\"cpu\",)' naming the memory its kernels run on (torch's device type names)")


def load(source: BackendSource) -> Backend:
    """Import and validate one backend; raise `BackendLoadError` saying what to fix.

    The import runs in a thread of its own and may take ``knobs.backends.import_timeout``
    seconds: a backend whose import loops or waits forever is reported, and the process goes
    on (its thread is left behind).  A load asked for while this thread is itself importing a
    module runs here, without the limit: the import thread might need that module's lock."""
    seconds = knobs.backends.import_timeout
    if not seconds or _inside_an_import():
        return _load(source)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["backend"] = _load(source)
        except BaseException as e:           # handed to the caller, whatever it is
            outcome["error"] = e

    thread = threading.Thread(target=run, name=f"naiad-import-{source.name}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise BackendLoadError(
            f"importing backend {source.name!r} ({source.package}) did not finish within "
            f"{seconds:g} s: its compiler or driver module loops or waits at import -- fix: find "
            f"what it does there (python -X importtime -c 'import {source.package}.driver'), "
            f"or raise NAIAD_BACKEND_IMPORT_TIMEOUT if it is only slow")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["backend"]


def _inside_an_import() -> bool:
    """Whether the calling thread is executing a module's import (importlib's frames)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _load(source: BackendSource) -> Backend:
    compiler_module = _import(f"{source.package}.compiler")
    driver_module = _import(f"{source.package}.driver")
    compiler = _concrete_class(compiler_module, BaseBackend, source.package,
                               "naiad.backends.compiler.BaseBackend")
    driver = _concrete_class(driver_module, DriverBase, source.package,
                             "naiad.backends.driver.DriverBase")
    check_api_version(source.name, compiler)
    _check_declarations(compiler, driver)
    _register_knobs(source.name, compiler)
    return Backend(source.name, compiler, driver, source)


def _register_knobs(name: str, compiler: type) -> None:
    """The backend's knob group (``BaseBackend.knob_group``) as ``naiad.knobs.<name>``."""
    group = getattr(compiler, "knob_group", None)
    if group is None:
        return
    if not isinstance(group, knobs.KnobGroup):
        raise BackendLoadError(
            f"{compiler.__name__}.knob_group is {type(group).__name__}, not a naiad.knobs.KnobGroup "
            f"-- fix: set it to an instance of a KnobGroup subclass whose knobs are env_* attributes")
    try:
        knobs.register_backend_group(name, group)
    except KnobError as e:
        raise BackendLoadError(str(e)) from None


class Registry(Mapping):
    """``name -> Backend`` for every backend that loads; filled lazily, safe across threads.

    Iterating or taking ``len`` loads every backend; ``registry[name]`` loads only that one.
    `sources` lists names without importing anything.  `refresh` forgets everything (after the
    environment changed).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.refresh()

    def refresh(self) -> None:
        with self._lock:
            #: Bumped whenever what is known about backends is forgotten (selection caches on it).
            self.generation = getattr(self, "generation", 0) + 1
            self._sources: dict[str, BackendSource] | None = None
            self._listing_failures: list[BackendFailure] = []
            self._loaded: dict[str, Backend] = {}
            self._load_failures: dict[str, BackendFailure] = {}
            self._declared: dict[str, tuple[str, ...] | None] = {}
            self._key: tuple | None = None
            plugin_dirs.finder.reset()

    def sources(self) -> dict[str, BackendSource]:
        """Every winning backend name and where it comes from; imports no backend code."""
        key = (knobs.backends.in_tree, tuple(plugin_dirs.configured_dirs()))
        with self._lock:
            if self._sources is None or key != self._key:
                if self._key is not None:
                    self.refresh()
                self._key = key
                self._list()
            assert self._sources is not None
            return dict(self._sources)

    def _list(self) -> None:
        plugins, failures = _plugin_sources()
        candidates = plugins + _in_tree_sources()
        in_tree_packages = {s.package for s in candidates if s.origin == "in-tree"}
        if not knobs.backends.in_tree:
            candidates += [s for s in _entry_point_sources() if s.package not in in_tree_packages]
        winners: dict[str, BackendSource] = {}
        for source in candidates:
            problem = plugin_dirs.name_problem(source.name)
            if problem is not None:          # plugin dirs' names were checked when read
                failures.append(BackendFailure(
                    source.name, source.origin, source.location,
                    f"the backend name {source.name!r} ({source.describe()}), {problem} -- "
                    f"fix: {plugin_dirs.NAME_FIX}"))
                continue
            first = winners.setdefault(source.name, source)
            if first is source:
                continue
            message = (f"backend {source.name!r} from {source.describe()} is shadowed by the one from "
                       f"{first.describe()} (precedence: plugin dirs, then in-tree, then entry points) "
                       f"-- fix: rename one of them, or remove the one you do not want")
            failures.append(BackendFailure(source.name, source.origin, source.location, message))
            warnings.warn(message, NaiadWarning, stacklevel=4)
        self._sources, self._listing_failures = winners, failures

    def __getitem__(self, name: str) -> Backend:
        sources = self.sources()
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            if name in self._load_failures:
                raise KeyError(str(self._load_failures[name]))
            if name not in sources:
                raise KeyError(f"no backend named {name!r}; discovered: {', '.join(sorted(sources)) or 'none'}")
            source = sources[name]
            try:
                backend = load(source)
            except BackendLoadError as e:
                failure = BackendFailure(name, source.origin, source.location, str(e))
                self._load_failures[name] = failure
                warnings.warn(f"backend skipped: {failure}", NaiadWarning, stacklevel=3)
                raise KeyError(str(failure)) from None
            self._loaded[name] = backend
            return backend

    def device_types(self, name: str) -> tuple[str, ...] | None:
        """The device types backend ``name`` runs on: its driver's, when it is loaded, else
        what its ``driver.py`` declares (`declared_device_types`), read without importing it;
        None when that cannot be known without importing it."""
        sources = self.sources()
        with self._lock:
            if name in self._loaded:
                return self._loaded[name].driver.device_types
            if name not in self._declared:
                self._declared[name] = declared_device_types(sources[name]) if name in sources else None
            return self._declared[name]

    def get_or_failure(self, name: str) -> Backend | BackendFailure:
        try:
            return self[name]
        except KeyError:
            return self._load_failures[name]

    def __iter__(self) -> Iterator[str]:
        return iter([name for name in self.sources() if isinstance(self.get_or_failure(name), Backend)])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.sources() and \
            isinstance(self.get_or_failure(name), Backend)

    def skipped(self) -> list[BackendFailure]:
        """Backends dropped while listing: unreadable plugin directories and shadowed names."""
        self.sources()
        with self._lock:
            return list(self._listing_failures)

    def failures(self) -> list[BackendFailure]:
        """Every backend skipped so far: `skipped` ones and those whose import failed."""
        skipped = self.skipped()
        with self._lock:
            return skipped + list(self._load_failures.values())


registry = Registry()


def _load_for_knobs(name: str) -> None:
    """``naiad.knobs.<name>``'s loader: load backend ``name``, which registers its group."""
    if name in registry.sources():
        registry.get_or_failure(name)


knobs.set_group_loader(_load_for_knobs)
