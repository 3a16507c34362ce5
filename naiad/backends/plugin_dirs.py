"""Out-of-tree backends from directories (``NAIAD_PLUGIN_DIRS``), loaded without a build step.

A plugin directory holds::

    backend/name.conf     the backend's name ([a-z][a-z0-9_]*, not a Python keyword)
    backend/compiler.py   one concrete BaseBackend subclass
    backend/driver.py     one concrete DriverBase subclass
    language/             optional: becomes naiad.language.extra.<name>
    tools/                optional: becomes naiad.tools.extra.<name>

Triton copies or symlinks these into its own package at build time.  Here an import hook
(`PluginFinder`, installed by ``import naiad``) maps the three package names onto the
directories at run time, so relative imports inside the plugin work and nothing is copied.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import importlib.util
import keyword
import os
import re
import sys
import threading

from naiad import knobs

#: Package prefix -> sub-directory of a plugin directory that backs it.
PACKAGE_DIRS = {
    "naiad.backends.": "backend",
    "naiad.language.extra.": "language",
    "naiad.tools.extra.": "tools",
}


_NAIAD = os.path.dirname(os.path.dirname(__file__))
#: Naiad's own modules in the three packages plugins are mounted into (the backend contract,
#: the generic libdevice): no plugin may take their names.
_OWN_MODULES = frozenset(
    entry[:-3]
    for folder in ("backends", os.path.join("language", "extra"), os.path.join("tools", "extra"))
    for entry in os.listdir(os.path.join(_NAIAD, folder)) if entry.endswith(".py"))


def reserved_names() -> frozenset[str]:
    """Names a plugin cannot take: Naiad's own modules and what ``naiad.backends`` exports."""
    package = sys.modules.get("naiad.backends")
    return _OWN_MODULES | frozenset(getattr(package, "__all__", ()))


@dataclasses.dataclass(frozen=True)
class PluginDir:
    """A plugin directory whose layout is valid (its Python code is not imported yet)."""

    name: str
    root: str

    def package_dir(self, prefix: str) -> str | None:
        path = os.path.join(self.root, PACKAGE_DIRS[prefix])
        return path if os.path.isdir(path) else None


class PluginDirError(Exception):
    """The layout of a plugin directory is wrong; ``problems`` lists (problem, fix) pairs."""

    def __init__(self, root: str, name: str | None, problems: list[tuple[str, str]]):
        self.root = root
        self.name = name
        self.problems = problems
        super().__init__("; ".join(f"{p} ({fix})" for p, fix in problems))


def read_name(root: str) -> tuple[str | None, list[tuple[str, str]]]:
    """The backend name in ``root/backend/name.conf`` and any problems with it."""
    conf = os.path.join(root, "backend", "name.conf")
    if not os.path.isfile(conf):
        return None, [(f"{conf} is missing",
                       "create it containing the backend's name, e.g. 'mybackend'")]
    try:
        with open(conf, encoding="utf-8") as f:
            name = f.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        return None, [(f"{conf} cannot be read: {e}", "make it a readable UTF-8 text file")]
    if not name:
        return None, [(f"{conf} is empty", "write the backend's name into it, e.g. 'mybackend'")]
    if name in reserved_names():
        return None, [(f"{conf} names {name!r}, which is the name of one of Naiad's own modules",
                       "choose another name")]
    problem = name_problem(name)
    if problem is not None:
        return None, [(f"{conf} names {name!r}, {problem}", NAME_FIX)]
    return name, []


_NAME = re.compile(r"[a-z][a-z0-9_]*")
NAME_FIX = ("use lowercase ASCII letters, digits and underscores, starting with a letter, and "
            "not a Python keyword (e.g. 'mybackend')")


def name_problem(name: str) -> str | None:
    """What is wrong with a backend name, or None: names are ``[a-z][a-z0-9_]*`` and not Python
    keywords, since each becomes the module ``naiad.backends.<name>`` and an option prefix."""
    if not _NAME.fullmatch(name):
        return "which is not a valid backend name"
    if keyword.iskeyword(name):
        return "which is a Python keyword and cannot be a backend name"
    return None


def read(root: str) -> PluginDir:
    """Check the layout of one plugin directory; raise `PluginDirError` listing every problem."""
    root = os.path.abspath(root)
    if not os.path.isdir(root):
        raise PluginDirError(root, None, [(f"{root} is not a directory",
                                           "fix the path in NAIAD_PLUGIN_DIRS")])
    name, problems = read_name(root)
    for module in ("compiler", "driver"):
        path = os.path.join(root, "backend", f"{module}.py")
        if not os.path.isfile(path):
            what = "BaseBackend" if module == "compiler" else "DriverBase"
            problems.append((f"{path} is missing",
                             f"create it with one concrete subclass of naiad.backends.{module}.{what}"))
    for sub in ("language", "tools"):
        path = os.path.join(root, sub)
        if os.path.exists(path) and not os.path.isdir(path):
            problems.append((f"{path} is not a directory", f"make {sub}/ a directory of Python modules or remove it"))
    if problems:
        raise PluginDirError(root, name, problems)
    assert name is not None
    return PluginDir(name, root)


def configured_dirs() -> list[str]:
    return [os.path.abspath(os.path.expanduser(d)) for d in knobs.backends.plugin_dirs]


class _PackageLoader(importlib.abc.Loader):
    """Creates an empty package for a plugin sub-directory that has no ``__init__.py``."""

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        pass


class PluginFinder(importlib.abc.MetaPathFinder):
    """Resolves ``naiad.backends.<name>`` (and language/tools) onto plugin directories.

    The directories are re-read whenever ``NAIAD_PLUGIN_DIRS`` (or its knob) changes.  The
    first valid directory of each name is mounted; discovery reports later ones as shadowed.
    """

    def __init__(self) -> None:
        self._key: tuple[str, ...] | None = None
        self._scan: list[PluginDir | PluginDirError] = []
        self._mounts: dict[str, str] = {}
        self._lock = threading.RLock()

    def scan(self) -> list[PluginDir | PluginDirError]:
        """Every configured plugin directory, in order, read (not imported)."""
        key = tuple(configured_dirs())
        with self._lock:
            if key != self._key:
                previous = self._mounts
                self._scan, self._mounts = [], {}
                for root in key:
                    try:
                        plugin = read(root)
                    except PluginDirError as e:
                        self._scan.append(e)
                        continue
                    self._scan.append(plugin)
                    self.mount(plugin)
                self._key = key
                _forget_modules(p for p, d in previous.items() if self._mounts.get(p) != d)
            return list(self._scan)

    def mount(self, plugin: PluginDir) -> None:
        """Map the plugin's packages, unless a directory of the same name is mounted already."""
        with self._lock:
            for prefix in PACKAGE_DIRS:
                directory = plugin.package_dir(prefix)
                if directory is not None:
                    self._mounts.setdefault(prefix + plugin.name, directory)

    def mounted(self, package: str) -> str | None:
        return self._mounts.get(package)

    def reset(self) -> None:
        """Re-read the directories at the next scan; packages whose directory changed are dropped then."""
        with self._lock:
            self._key, self._scan = None, []

    def find_spec(self, fullname, path=None, target=None):
        if not any(fullname.startswith(prefix) and "." not in fullname[len(prefix):]
                   for prefix in PACKAGE_DIRS):
            return None
        self.scan()
        directory = self._mounts.get(fullname)
        if directory is None:
            return None
        init = os.path.join(directory, "__init__.py")
        if os.path.isfile(init):
            return importlib.util.spec_from_file_location(
                fullname, init, submodule_search_locations=[directory])
        spec = importlib.machinery.ModuleSpec(fullname, _PackageLoader(), is_package=True)
        spec.submodule_search_locations = [directory]
        return spec


def _forget_modules(packages) -> None:
    """Drop imported plugin packages whose directory is no longer mounted, so the new one loads."""
    for package in list(packages):
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]
        parent, _, child = package.rpartition(".")
        if parent in sys.modules and getattr(sys.modules[parent], child, None) is not None:
            delattr(sys.modules[parent], child)


finder = PluginFinder()


def install_finder() -> None:
    """Put the finder first on ``sys.meta_path`` (once), ahead of the normal path finder."""
    if finder not in sys.meta_path:
        sys.meta_path.insert(0, finder)
