"""Writers of fixture backends for the tests (test fixtures, not product code).

Every writer produces real files that Naiad's discovery reads and imports exactly as it would a
third-party backend:

* `write_plugin` -- a plugin directory (``backend/name.conf``, ``backend/compiler.py``,
  ``backend/driver.py``, optional ``language/`` and ``tools/``), for ``NAIAD_PLUGIN_DIRS``;
* `write_package_backend` -- an ordinary importable package (``__init__.py``, ``compiler.py``,
  ``driver.py``), for entry points (put its directory on ``sys.path``) and for in-tree backends
  (put its directory on ``naiad.backends.__path__``);
* `write_dist_info` -- the ``.dist-info`` of a fake distribution whose entry points of group
  ``naiad.backends`` ``importlib.metadata`` then reports.

The generated sources are built from small named pieces so that a test can break exactly one
thing: ``compiler_methods={"hash": None}`` drops a method, ``{"hash": "def hash(self): ..."}``
replaces it, ``compiler_extra`` appends module-level code, ``compiler="..."`` replaces the
whole file and ``compiler=False`` leaves it out (the same for the driver).
"""

from __future__ import annotations

import importlib
import os
import textwrap
from pathlib import Path
from typing import Mapping

DEFAULT_STAGES = ("ttir", "toyasm", "toybin")
DEFAULT_BINARY_EXT = "toybin"
DEFAULT_ARCH = "v1"

def class_prefix(name: str) -> str:
    """The prefix of the fixture's class names: "my_toy" -> "MyToy" (ToyBackend, ToyDriver...)."""
    parts = [p for p in name.replace("-", "_").split("_") if p]
    prefix = "".join(p[:1].upper() + p[1:] for p in parts)
    return prefix if prefix.isidentifier() else "Fixture"


def compiler_class_name(name: str) -> str:
    return f"{class_prefix(name)}Backend"


def driver_class_name(name: str) -> str:
    return f"{class_prefix(name)}Driver"


def _indent(source: str, by: str = "    ") -> str:
    return textwrap.indent(textwrap.dedent(source).strip("\n"), by)


def _class_body(pieces: Mapping[str, str | None]) -> str:
    body = [_indent(src) for src in pieces.values() if src is not None]
    return "\n\n".join(body) if body else "    pass"


def _merge(defaults: dict[str, str], overrides: Mapping[str, str | None] | None) -> dict[str, str | None]:
    merged: dict[str, str | None] = dict(defaults)
    merged.update(overrides or {})
    return merged


def compiler_pieces(name: str, *, api_version="BACKEND_API_VERSION", binary_ext=DEFAULT_BINARY_EXT,
                    stages=DEFAULT_STAGES) -> dict[str, str]:
    """The class attributes and methods of the fixture compiler, by name (None leaves one out)."""
    prefix = class_prefix(name)
    pieces: dict[str, str] = {}
    if api_version is not None:
        pieces["api_version"] = f"api_version = {api_version}"
    if binary_ext is not None:
        pieces["binary_ext"] = f"binary_ext = {binary_ext!r}"
    pieces["STAGES"] = f"STAGES = {tuple(stages)!r}"
    pieces["supports_target"] = """
        @staticmethod
        def supports_target(target):
            return target.backend == NAME
    """
    pieces["hash"] = """
        def hash(self):
            return f"{NAME}-toolchain-1-{self.target.arch}"
    """
    pieces["parse_options"] = f"""
        def parse_options(self, options):
            known = {{f.name for f in dataclasses.fields({prefix}Options)}}
            return {prefix}Options(**{{k: v for k, v in options.items() if k in known}})
    """
    pieces["add_stages"] = """
        def add_stages(self, stages, options, language):
            for i, stage in enumerate(self.STAGES):
                last = i == len(self.STAGES) - 1

                def run(ir, metadata, stage=stage, last=last):
                    metadata.setdefault("name", "kernel")
                    metadata.setdefault("shared", 0)
                    text = f"{stage}({ir})"
                    return text.encode() if last else text

                stages[stage] = run
    """
    pieces["load_dialects"] = """
        def load_dialects(self, context):
            pass
    """
    pieces["get_module_map"] = """
        def get_module_map(self):
            return {}
    """
    pieces["get_codegen_implementation"] = """
        def get_codegen_implementation(self, options):
            return {"min_dot_size": lambda lhs, rhs: (1, 1, 1)}
    """
    pieces["pack_metadata"] = """
        def pack_metadata(self, metadata):
            return (metadata,)
    """
    pieces["get_target_name"] = """
        def get_target_name(self, options):
            return f"{NAME}:{self.target.arch}"
    """
    return pieces


def compiler_source(name: str, *, api_version="BACKEND_API_VERSION", binary_ext=DEFAULT_BINARY_EXT,
                    stages=DEFAULT_STAGES,
                    methods: Mapping[str, str | None] | None = None, extra: str = "") -> str:
    """The text of a fixture ``compiler.py`` for backend ``name``."""
    prefix = class_prefix(name)
    pieces = _merge(compiler_pieces(name, api_version=api_version, binary_ext=binary_ext,
                                    stages=stages), methods)
    return (
        f'"""Fixture compiler of backend {name!r} (written by tests/plugin_fixtures.py)."""\n'
        "import dataclasses\n\n"
        "from naiad.backends.compiler import (BACKEND_API_VERSION, BackendOptions, BaseBackend,\n"
        "                                     GPUTarget, Language)\n\n"
        f"NAME = {name!r}\n\n\n"
        "@dataclasses.dataclass(frozen=True)\n"
        f"class {prefix}Options(BackendOptions):\n"
        "    num_warps: int = 4\n"
        "    num_stages: int = 2\n"
        "    debug: bool = False\n\n\n"
        f"class {prefix}Backend(BaseBackend):\n"
        f"{_class_body(pieces)}\n\n\n"
        f"{textwrap.dedent(extra).strip()}\n"
    )


def driver_pieces(name: str, *, device="toydev", active=True) -> dict[str, str]:
    """The class attributes and methods of the fixture driver, by name (device None: no device_types)."""
    pieces: dict[str, str] = {}
    if device is not None:
        devices = (device,) if isinstance(device, str) else tuple(device)
        pieces["device_types"] = f"device_types = {devices!r}"
    pieces["is_active"] = f"""
        @classmethod
        def is_active(cls):
            return {bool(active)!r}
    """
    pieces["get_current_target"] = f"""
        def get_current_target(self):
            return GPUTarget(NAME, {DEFAULT_ARCH!r}, 1)
    """
    pieces["get_current_device"] = """
        def get_current_device(self):
            return 0
    """
    pieces["set_current_device"] = """
        def set_current_device(self, device):
            if device != 0:
                raise ValueError(f"{NAME} has one device, not {device}")
    """
    pieces["get_current_stream"] = """
        def get_current_stream(self, device=None):
            return 0
    """
    pieces["map_python_to_cpp_type"] = """
        def map_python_to_cpp_type(self, ty):
            return {"i32": "int32_t", "fp32": "float"}.get(ty, "void*")
    """
    pieces["get_benchmarker"] = """
        def get_benchmarker(self):
            def bench(kernel_call, *, quantiles, **kwargs):
                kernel_call()
                return [0.0 for _ in quantiles]
            return bench
    """
    pieces["load_binary"] = """
        def load_binary(self, name, binary, metadata, device):
            return (binary, name, 0, 0, 1)
    """
    pieces["unload_module"] = """
        def unload_module(self, module):
            pass
    """
    pieces["make_launcher"] = """
        def make_launcher(self, signature, metadata):
            def launch(*args):
                return None
            return launch
    """
    pieces["get_device_properties"] = """
        def get_device_properties(self, device):
            return {"max_shared_mem": 0, "multiprocessor_count": 1}
    """
    return pieces


def driver_source(name: str, *, device="toydev", active=True,
                  methods: Mapping[str, str | None] | None = None, extra: str = "") -> str:
    """The text of a fixture ``driver.py`` for backend ``name``."""
    pieces = _merge(driver_pieces(name, device=device, active=active), methods)
    return (
        f'"""Fixture driver of backend {name!r} (written by tests/plugin_fixtures.py)."""\n'
        "from naiad.backends.compiler import GPUTarget\n"
        "from naiad.backends.driver import DriverBase\n\n"
        f"NAME = {name!r}\n\n\n"
        f"class {driver_class_name(name)}(DriverBase):\n"
        f"{_class_body(pieces)}\n\n\n"
        f"{textwrap.dedent(extra).strip()}\n"
    )


def default_language_source(name: str) -> str:
    return (f'"""Fixture language library of backend {name!r}."""\n'
            f"NAME = {name!r}\n\n\n"
            "def answer():\n"
            "    return 42\n")


def default_libdevice_source(name: str) -> str:
    return (f'"""Fixture libdevice of backend {name!r}."""\n'
            "from . import answer\n\n\n"
            "def fast_answer():\n"
            "    return answer() + 1\n")


def default_tools_source(name: str) -> str:
    return (f'"""Fixture tools of backend {name!r}."""\n'
            f"NAME = {name!r}\n\n\n"
            "def main():\n"
            f"    return {name + ' tool'!r}\n")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _write_backend_modules(directory: Path, name: str, *, api_version, device, active, binary_ext,
                           stages, compiler, driver, compiler_methods, driver_methods,
                           compiler_extra, driver_extra) -> None:
    if compiler is not False:
        if compiler is None:
            compiler = compiler_source(name, api_version=api_version, binary_ext=binary_ext,
                                       stages=stages, methods=compiler_methods, extra=compiler_extra)
        _write(directory / "compiler.py", textwrap.dedent(compiler))
    if driver is not False:
        if driver is None:
            driver = driver_source(name, device=device, active=active, methods=driver_methods,
                                   extra=driver_extra)
        _write(directory / "driver.py", textwrap.dedent(driver))


def write_plugin(root, name: str, *, api_version="BACKEND_API_VERSION", device="toydev", active=True,
                 binary_ext=DEFAULT_BINARY_EXT, stages=DEFAULT_STAGES, compiler_extra: str = "",
                 driver_extra: str = "", compiler_methods=None, driver_methods=None,
                 compiler: str | bool | None = None, driver: str | bool | None = None,
                 language: bool | str = True, tools: bool | str = True, conf=None,
                 files: Mapping[str, str] | None = None) -> Path:
    """Write a plugin directory at ``root`` for backend ``name``; return ``root`` as a Path.

    ``api_version``: the expression assigned to the class attribute ("BACKEND_API_VERSION + 1",
    0, ...), None to leave the attribute out.  ``device``: a device type or a tuple of them for
    ``device_types``, None to leave it out.  ``active``: what ``is_active()`` returns.
    ``binary_ext``/``stages``: the final stage's name and the stages ``add_stages`` fills.
    ``compiler``/``driver``: False leaves the file out, a string replaces its text.
    ``compiler_methods``/``driver_methods``: name -> source (None drops that piece).
    ``language``/``tools``: False leaves the directory out, a string replaces ``__init__.py``.
    ``conf``: None writes ``name`` into name.conf, a string is written verbatim, False leaves
    name.conf out.  ``files``: extra files, path relative to ``root`` -> text.
    """
    root = Path(root)
    backend = root / "backend"
    backend.mkdir(parents=True, exist_ok=True)
    if conf is not False:
        _write(backend / "name.conf", f"{name}\n" if conf is None else conf)
    _write_backend_modules(backend, name, api_version=api_version, device=device, active=active,
                           binary_ext=binary_ext, stages=stages, compiler=compiler, driver=driver,
                           compiler_methods=compiler_methods, driver_methods=driver_methods,
                           compiler_extra=compiler_extra, driver_extra=driver_extra)
    if language is not False:
        _write(root / "language" / "__init__.py",
               default_language_source(name) if language is True else textwrap.dedent(language))
        _write(root / "language" / "libdevice.py", default_libdevice_source(name))
    if tools is not False:
        _write(root / "tools" / "__init__.py",
               default_tools_source(name) if tools is True else textwrap.dedent(tools))
    for relative, text in (files or {}).items():
        _write(root / relative, textwrap.dedent(text))
    importlib.invalidate_caches()
    return root


def write_package_backend(site_dir, package: str, *, name: str | None = None,
                          api_version="BACKEND_API_VERSION", device="toydev", active=True,
                          binary_ext=DEFAULT_BINARY_EXT, stages=DEFAULT_STAGES,
                          compiler_extra: str = "", driver_extra: str = "", compiler_methods=None,
                          driver_methods=None, compiler: str | bool | None = None,
                          driver: str | bool | None = None, init: str | None = "",
                          files: Mapping[str, str] | None = None) -> Path:
    """Write an importable package ``site_dir/package`` holding a backend; return its directory.

    ``name`` is the backend name its compiler claims targets for (default: ``package``).
    ``init``: the text of ``__init__.py`` (None leaves it out).  Other arguments as `write_plugin`.
    """
    directory = Path(site_dir) / package
    directory.mkdir(parents=True, exist_ok=True)
    if init is not None:
        _write(directory / "__init__.py", textwrap.dedent(init))
    _write_backend_modules(directory, name or package, api_version=api_version, device=device,
                           active=active, binary_ext=binary_ext, stages=stages, compiler=compiler,
                           driver=driver, compiler_methods=compiler_methods,
                           driver_methods=driver_methods, compiler_extra=compiler_extra,
                           driver_extra=driver_extra)
    for relative, text in (files or {}).items():
        _write(directory / relative, textwrap.dedent(text))
    importlib.invalidate_caches()
    return directory


def write_dist_info(site_dir, dist_name: str, version: str, entry_points: Mapping[str, str],
                    group: str = "naiad.backends") -> Path:
    """Write ``<dist>-<version>.dist-info`` with METADATA and entry_points.txt; return its path.

    Once ``site_dir`` is on ``sys.path``, ``importlib.metadata.entry_points(group=group)``
    reports every ``name = value`` of ``entry_points`` as coming from this distribution.
    """
    info = Path(site_dir) / f"{dist_name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    _write(info / "METADATA", f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: {version}\n")
    lines = [f"[{group}]"] + [f"{ep_name} = {value}" for ep_name, value in entry_points.items()]
    _write(info / "entry_points.txt", "\n".join(lines) + "\n")
    importlib.invalidate_caches()
    return info


def subprocess_env(**naiad_vars: str) -> dict[str, str]:
    """``os.environ`` without any NAIAD_* variable but the test cache dir, plus the given ones
    (for subprocess tests)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAIAD_") or k == "NAIAD_CACHE_DIR"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(naiad_vars)
    return env
