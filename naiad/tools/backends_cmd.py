"""``naiad backends``: the table of discovered backends, and ``--check DIR`` for plugin authors.

Both always exit 0 unless ``--strict`` is given: listing a broken plugin is the point of the
command, not a failure of it.
"""

from __future__ import annotations

import dataclasses
import io
import warnings
from typing import Callable

from naiad.backends import plugin_dirs
from naiad.backends.compiler import GPUTarget, Language
from naiad.backends.discovery import Backend, BackendFailure, BackendSource, load, registry
from naiad.backends.selection import chosen_backend, driver_for, is_active
from naiad.errors import BackendLoadError


@dataclasses.dataclass
class Row:
    name: str
    origin: str
    location: str
    api: str = "-"
    active: str = "-"
    target: str = "-"
    error: str = ""


def _current_target(backend: Backend) -> str:
    try:
        return str(_target_text(driver_for(backend).get_current_target()))
    except Exception as e:
        return f"(get_current_target failed: {type(e).__name__}: {e})"


def _target_text(target: GPUTarget) -> str:
    return f"{target.backend}:{target.arch} (warp {target.warp_size})"


def rows() -> list[Row]:
    """One row per discovered backend (loaded on the way) and per skipped one."""
    result = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every problem is in the table instead
        for name, source in sorted(registry.sources().items()):
            item = registry.get_or_failure(name)
            row = Row(name, source.origin, source.location)
            if isinstance(item, BackendFailure):
                row.active, row.error = "failed", item.reason
            else:
                row.api = str(item.api_version)
                active, why = is_active(item)
                row.active = "yes" if active else "no"
                if active:
                    row.target = _current_target(item)
                else:
                    row.error = why
            result.append(row)
        for failure in registry.skipped():
            result.append(Row(failure.name, failure.origin, failure.location, active="skipped",
                              error=failure.reason))
    return result


def format_table(table: list[Row]) -> str:
    header = ("backend", "origin", "location", "api", "active", "target")
    cells = [header] + [(r.name, r.origin, r.location, r.api, r.active, r.target) for r in table]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    out = io.StringIO()
    for c in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(c, widths)).rstrip() + "\n")
    problems = [r for r in table if r.error]
    if problems:
        out.write("\nProblems:\n")
        for r in problems:
            out.write(f"  {r.name} ({r.origin} {r.location}): {r.error}\n")
    return out.getvalue()


def list_backends(write: Callable[[str], None]) -> int:
    table = rows()
    if not table:
        write("No backend found: install a backend package, or point NAIAD_PLUGIN_DIRS at a plugin "
              "directory (see docs/WRITING_A_BACKEND.md).\n")
        return 0
    write(format_table(table))
    chosen = chosen_backend()
    if chosen:
        write(f"\nChosen explicitly: {chosen}\n")
    return 0


def check_plugin_dir(root: str) -> tuple[list[str], list[tuple[str, str]]]:
    """Validate a plugin directory as discovery would load it: (facts found, (problem, fix) pairs)."""
    facts: list[str] = []
    plugin_dirs.finder.scan()   # the configured directories first, so mounting below sticks
    try:
        plugin = plugin_dirs.read(root)
    except plugin_dirs.PluginDirError as e:
        return facts, e.problems
    facts.append(f"name.conf names the backend {plugin.name!r}")
    mounted = plugin_dirs.finder.mounted(f"naiad.backends.{plugin.name}")
    if mounted is not None and mounted != plugin.package_dir("naiad.backends."):
        return facts, [(f"another plugin directory ({mounted}) already provides {plugin.name!r} in "
                        f"NAIAD_PLUGIN_DIRS", "rename one of them, or check this one in a process "
                        "without NAIAD_PLUGIN_DIRS")]
    plugin_dirs.finder.mount(plugin)
    source = BackendSource(plugin.name, "plugin dir", f"naiad.backends.{plugin.name}", plugin.root)
    try:
        backend = load(source)
    except BackendLoadError as e:
        message, _, fix = str(e).partition(" -- fix: ")
        return facts, [(message, fix or "fix the error above")]
    facts.append(f"compiler class {backend.compiler.__name__}, driver class {backend.driver.__name__}, "
                 f"backend API {backend.api_version}")
    problems = _check_extras(plugin, facts)
    problems += _check_runtime(backend, facts)
    return facts, problems


def _check_extras(plugin: plugin_dirs.PluginDir, facts: list[str]) -> list[tuple[str, str]]:
    problems = []
    for prefix in ("naiad.language.extra.", "naiad.tools.extra."):
        if plugin.package_dir(prefix) is None:
            continue
        module = prefix + plugin.name
        try:
            __import__(module)
            facts.append(f"{module} imports")
        except Exception as e:
            problems.append((f"importing {module} failed: {type(e).__name__}: {e}",
                             f"fix the code in {plugin.package_dir(prefix)}"))
    return problems


def _check_runtime(backend: Backend, facts: list[str]) -> list[tuple[str, str]]:
    """Exercise the contract the way the core will: driver, target, options, stages."""
    active, why = is_active(backend)
    if not active:
        if why.startswith("is_active() raised"):
            return [(why, "is_active must return a bool and never raise")]
        facts.append(f"driver is not active here ({why}); compile-side checks skipped")
        return []
    try:
        target = driver_for(backend).get_current_target()
    except Exception as e:
        return [(f"driver.get_current_target() raised {type(e).__name__}: {e}",
                 "return a naiad.backends.compiler.GPUTarget for the current device")]
    if not isinstance(target, GPUTarget):
        return [(f"driver.get_current_target() returned {target!r}", "return a GPUTarget")]
    facts.append(f"driver is active; current target {_target_text(target)}")
    try:
        compiler = backend.compiler(target)
        options = compiler.parse_options({})
        options.hash()
        stages: dict = {}
        compiler.add_stages(stages, options, Language.TRITON)
    except Exception as e:
        return [(f"the compiler failed on its own target: {type(e).__name__}: {e}",
                 "supports_target(get_current_target()) must be true, parse_options({}) must return "
                 "options with hash(), add_stages must fill the dict")]
    names = list(stages)
    facts.append(f"stages: {' -> '.join(names) or '(none)'}")
    problems = []
    if not names or names[0] != "ttir":
        problems.append((f"the first stage is {names[0] if names else 'missing'}, not 'ttir'",
                         "add a 'ttir' stage first: it receives the frontend's TTIR"))
    if names and names[-1] != backend.compiler.binary_ext:
        problems.append((f"the last stage is {names[-1]!r}, but binary_ext is "
                         f"{backend.compiler.binary_ext!r}",
                         "make binary_ext the name of the last stage (the one producing bytes)"))
    return problems


def check(root: str, write: Callable[[str], None]) -> int:
    facts, problems = check_plugin_dir(root)
    write(f"Checking plugin directory {root}\n")
    for fact in facts:
        write(f"  ok: {fact}\n")
    for problem, fix in problems:
        write(f"  PROBLEM: {problem}\n      fix: {fix}\n")
    write("No problems found.\n" if not problems else f"{len(problems)} problem(s) found.\n")
    return len(problems)
