"""Every ``NAIAD_*`` environment variable, in one place, readable and overridable from code.

A knob is a class attribute of a group (``naiad.knobs.backends.plugin_dirs``).  Reading it
returns, in order: a value assigned from code, else the environment variable parsed to the
knob's type, else the default.  The environment is read at each access, so a test or a
process that sets ``os.environ`` later is still obeyed.  Assigning overrides the variable for
this process; ``del`` (or ``group.reset()``) drops the override.  ``scope()`` restores every
override on exit, which is what tests want.

``docs/ENVIRONMENT.md`` lists the same variables for people; ``tests/test_knobs.py`` checks
that the two agree.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator

from naiad.errors import KnobError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parse_bool(env: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise KnobError(
        f"{env}={raw!r} is not a boolean: set it to 1/0, true/false, yes/no or on/off, or unset it"
    )


def _parse_int(env: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise KnobError(f"{env}={raw!r} is not an integer: set it to a whole number, or unset it") from None


def _parse_seconds(env: str, raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise KnobError(f"{env}={raw!r} is not a number of seconds: set it to a number >= 0 "
                        f"(0: no limit), or unset it")
    return value


def _parse_str(env: str, raw: str) -> str:
    return raw


def _parse_list(env: str, raw: str) -> list[str]:
    # Semicolons, as Triton's TRITON_PLUGIN_DIRS: Windows paths contain colons.
    return [part.strip() for part in raw.split(";") if part.strip()]


class _Setting:
    """A descriptor whose value set from code lives in the group's overrides (so ``scope()``
    restores it and ``del`` drops it); subclasses say what it reads when nothing was set."""

    def __init__(self, default: Any, doc: str):
        self.default = default
        self.doc = doc
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __set__(self, group: "KnobGroup", value: Any) -> None:
        group._overrides[self.name] = value

    def __delete__(self, group: "KnobGroup") -> None:
        group._overrides.pop(self.name, None)


class Knob(_Setting):
    """A descriptor binding one environment variable to a typed, overridable value."""

    def __init__(self, env: str, default: Any, parse: Callable[[str, str], Any], doc: str):
        super().__init__(default, doc)
        self.env = env
        self.parse = parse

    def __get__(self, group: "KnobGroup | None", owner: type) -> Any:
        if group is None:
            return self
        if self.name in group._overrides:
            return group._overrides[self.name]
        raw = os.environ.get(self.env)
        if raw is None or raw == "":
            return self.default() if callable(self.default) else self.default
        return self.parse(self.env, raw)


def env_bool(env: str, default: bool, doc: str) -> Any:
    return Knob(env, default, _parse_bool, doc)


def env_int(env: str, default: int | None, doc: str) -> Any:
    return Knob(env, default, _parse_int, doc)


def env_seconds(env: str, default: float, doc: str) -> Any:
    return Knob(env, default, _parse_seconds, doc)


def env_str(env: str, default: str | Callable[[], str] | None, doc: str) -> Any:
    return Knob(env, default, _parse_str, doc)


def env_list(env: str, doc: str) -> Any:
    return Knob(env, list, _parse_list, doc)


class CodeKnob(_Setting):
    """A setting made only from code (a hook, a listener), bound to no environment variable;
    ``default`` is a factory, called once per group for a fresh value (a new `HookChain`)."""

    def __get__(self, group: "KnobGroup | None", owner: type) -> Any:
        if group is None:
            return self
        if self.name not in group._overrides:
            group._overrides[self.name] = self.default()
        return group._overrides[self.name]


class HookChain:
    """Callables run in the order added: ``chain.add(fn)``, ``chain.remove(fn)``, ``chain(*args)``."""

    def __init__(self) -> None:
        self.calls: list[Callable[..., Any]] = []

    def add(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise KnobError(f"a hook must be callable, not {type(fn).__name__}")
        self.calls.append(fn)

    def remove(self, fn: Callable[..., Any]) -> None:
        self.calls.remove(fn)

    def __bool__(self) -> bool:
        return bool(self.calls)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        for fn in list(self.calls):
            fn(*args, **kwargs)


class KnobGroup:
    """A named set of knobs; subclasses declare knobs as class attributes."""

    def __init__(self) -> None:
        self._overrides: dict[str, Any] = {}

    @classmethod
    def knob_descriptors(cls) -> dict[str, Knob]:
        return {name: k for klass in reversed(cls.__mro__) for name, k in vars(klass).items()
                if isinstance(k, Knob)}

    def values(self) -> dict[str, Any]:
        """The current value of every knob in the group."""
        return {name: getattr(self, name) for name in self.knob_descriptors()}

    def reset(self) -> None:
        """Drop every override made from code; the environment rules again."""
        self._overrides.clear()

    @contextlib.contextmanager
    def scope(self) -> Iterator["KnobGroup"]:
        """Restore this group's overrides, as they were, on exit."""
        saved = dict(self._overrides)
        try:
            yield self
        finally:
            self._overrides = saved


class BackendKnobs(KnobGroup):
    """How backends are found and chosen."""

    in_tree = env_bool(
        "NAIAD_BACKENDS_IN_TREE", False,
        "1: skip the entry-point scan and load only the backends shipped inside naiad/backends/.")
    plugin_dirs = env_list(
        "NAIAD_PLUGIN_DIRS",
        "';'-separated directories, each an out-of-tree backend (backend/name.conf, "
        "backend/compiler.py, backend/driver.py, optional language/ and tools/).")
    default = env_str(
        "NAIAD_DEFAULT_BACKEND", None,
        "Name of the backend to use for every launch, whatever the arguments' device.")
    import_timeout = env_seconds(
        "NAIAD_BACKEND_IMPORT_TIMEOUT", 30.0,
        "Seconds a backend's modules may take to import before the backend is reported as "
        "failed ('did not finish importing') and skipped; 0: no limit.")


class CompilationKnobs(KnobGroup):
    """How kernels are compiled."""

    frontend_debug = env_bool(
        "NAIAD_FRONTEND_DEBUG", False,
        "1: let exceptions inside the code generator propagate with Naiad's own frames, instead "
        "of turning them into a CompilationError that shows only the kernel's source line.")
    always_compile = env_bool(
        "NAIAD_ALWAYS_COMPILE", False,
        "1: compile every kernel again instead of reading it from the on-disk cache (the result "
        "is still stored).")
    dump_ir = env_bool(
        "NAIAD_KERNEL_DUMP", False,
        "1: write every stage's output of every kernel compiled or read from the cache to "
        "<dump_dir>/<kernel hash>/<kernel>.<stage>, with <kernel>.json (the metadata).")
    pass_plugins = env_list(
        "NAIAD_PASS_PLUGINS",
        "';'-separated Python modules imported before the first pass runs; each registers passes "
        "with naiad.passes.register_pass (see also the entry-point group naiad.passes).")
    listener = CodeKnob(
        lambda: None,
        "Called after each compilation as listener(src, metadata, times, cache_hit): times maps "
        "'ir' and each stage to seconds (empty on a cache hit).")
    override = env_bool(
        "NAIAD_KERNEL_OVERRIDE", False,
        "1: when <override_dir>/<kernel hash>/<kernel>.<stage> exists, its content replaces that "
        "stage's output and compilation goes on from it; such kernels bypass the on-disk cache.")


class RuntimeKnobs(KnobGroup):
    """Launching kernels."""

    debug = env_bool(
        "NAIAD_DEBUG", False,
        "1: compile every kernel in debug mode (device_assert active, loads and stores "
        "bounds-checked on the CPU), as if launched with debug=True.")
    native_launch = env_bool(
        "NAIAD_NATIVE_LAUNCH", True,
        "0: launch warm kernels through the Python launch entry only, not the native one "
        "compiled per kernel (naiad.runtime.native_entry); results are the same, launches slower.")
    add_stages_inspection_hook = CodeKnob(
        lambda: None,
        "Triton's convention: hook() -> (key, hash) names the change for the cache key; "
        "hook(backend, stages, options, language, capability) edits the stages dict after the "
        "backend filled it.")
    profile = env_bool(
        "NAIAD_PROFILE", False,
        "1: record every launch of the process with naiad.profiler (kernel, backend, grid, device "
        "and host times, compiles and cache hits) and print the summary table at exit; "
        "NAIAD_PROFILE_TRACE names a Chrome trace file to write too.")
    profile_trace = env_str(
        "NAIAD_PROFILE_TRACE", None,
        "With NAIAD_PROFILE=1: the path of a Chrome trace (JSON, for Perfetto or chrome://tracing) "
        "written at exit.")
    launch_enter_hook = CodeKnob(HookChain, "Called as hook(launch_metadata) before each launch.")
    launch_exit_hook = CodeKnob(HookChain, "Called as hook(launch_metadata) after each launch.")
    kernel_load_start_hook = CodeKnob(
        HookChain, "Called as hook(module, function, name, metadata, hash) before a binary loads "
        "(module and function None).")
    kernel_load_end_hook = CodeKnob(
        HookChain, "Called as hook(module, function, name, metadata, hash) after a binary loaded.")

    def launch_hook_guards(self) -> list[tuple] | None:
        """`launch_hooked` being False as native-entry guards (`naiad.runtime.native_entry`'s
        (root, path, check, expected) form); None while a launch hook is set."""
        guards: list[tuple] = []
        for name in ("launch_enter_hook", "launch_exit_hook"):
            hook, path = self._overrides.get(name), (("attr", "_overrides"), ("item", name))
            if hook is None:
                guards.append((self, path, "is", None))
            elif type(hook) is HookChain and not hook.calls:
                guards += [(self, path, "is", hook), (self, path + (("attr", "calls"),), "empty", None)]
            else:
                return None
        return guards

    def launch_hooked(self) -> bool:
        """Whether a launch enter or exit hook is set (cheaper than reading both knobs: the
        warm launch path asks at every launch)."""
        for hook in (self._overrides.get("launch_enter_hook"), self._overrides.get("launch_exit_hook")):
            if hook is not None and (type(hook) is not HookChain or hook.calls):
                return True
        return False


class AutotuningKnobs(KnobGroup):
    """The autotuner (``@naiad.autotune``)."""

    print = env_bool(
        "NAIAD_PRINT_AUTOTUNING", False,
        "1: print each autotuned kernel's chosen config and how long tuning took, with a "
        "progress line on stderr while it tunes when stderr is a terminal.")


class CacheKnobs(KnobGroup):
    """Naiad's files on disk."""

    dir = env_str(
        "NAIAD_CACHE_DIR", lambda: os.path.join(os.path.expanduser("~"), ".naiad", "cache"),
        "Directory of Naiad's on-disk caches: compiled kernels under its kernels/ folder, "
        "autotuning results (cache_results=True) under autotune/.")
    dump_dir = env_str(
        "NAIAD_DUMP_DIR", lambda: os.path.join(cache.dir, "dump"),
        "Where NAIAD_KERNEL_DUMP=1 writes each kernel's stages (default: the dump/ folder of "
        "the cache directory).")
    override_dir = env_str(
        "NAIAD_OVERRIDE_DIR", lambda: os.path.join(cache.dir, "override"),
        "Where NAIAD_KERNEL_OVERRIDE=1 looks for replacement stage files (default: the "
        "override/ folder of the cache directory).")
    remote = env_str(
        "NAIAD_REMOTE_CACHE", None,
        "URL of a compile cache shared by several machines, read and written beside the local "
        "one: redis://[password@]host:port/db (or rediss:// with TLS), file:///shared/dir, or a scheme "
        "a package registers under the 'naiad.remote_cache' entry point group.  Autotuning "
        "results are shared through it too.  Unset: local only.")
    remote_timeout = env_seconds(
        "NAIAD_REMOTE_CACHE_TIMEOUT", 2.0,
        "Seconds the remote cache may take to answer one request before the launch goes on "
        "without it (it is then left alone for 30 s).")
    manager_class = env_str(
        "NAIAD_CACHE_MANAGER", None,
        "'module:Class' of the compiled-kernel cache manager (naiad.compiler.cache.CacheManager's "
        "interface); from code, the class itself may be assigned.  Unset: files under "
        "<cache dir>/kernels/.")


class LanguageKnobs(KnobGroup):
    """Defaults of the language's compile options."""

    default_fp_fusion = env_bool(
        "NAIAD_DEFAULT_FP_FUSION", True,
        "The default of the enable_fp_fusion option: a float multiply whose result is added "
        "becomes one fma (GPU backends; the CPU backend rounds each operation, as numpy).")


class CompatKnobs(KnobGroup):
    """The Triton compatibility layer."""

    triton = env_bool(
        "NAIAD_TRITON_COMPAT", False,
        "1: `import naiad` enables naiad.compat, so that `import triton` resolves to Naiad.")


backends = BackendKnobs()
compilation = CompilationKnobs()
runtime = RuntimeKnobs()
autotuning = AutotuningKnobs()
cache = CacheKnobs()
compat = CompatKnobs()
language = LanguageKnobs()

#: Every group, by the attribute name it has on this module: the core's, then each loaded
#: backend's (`register_backend_group`).
groups: dict[str, KnobGroup] = {"backends": backends, "compilation": compilation,
                                "runtime": runtime, "autotuning": autotuning, "cache": cache,
                                "compat": compat, "language": language}
#: The core's group names, which no backend may take.
CORE_GROUPS = frozenset(groups)


def register_backend_group(backend: str, group: KnobGroup) -> None:
    """Make backend ``backend``'s knob group (`naiad.backends.compiler.BaseBackend.knob_group`)
    ``naiad.knobs.<backend>``; discovery calls this when the backend loads."""
    if backend in CORE_GROUPS:
        raise KnobError(f"backend {backend!r} cannot declare knobs: naiad.knobs.{backend} is the "
                        f"core's -- fix: rename the backend")
    groups[backend] = group


#: Loads backend ``name`` if there is one (which registers its group); set by discovery, which
#: sits above this module (`set_group_loader`).
_group_loader: Callable[[str], None] | None = None


def set_group_loader(loader: Callable[[str], None]) -> None:
    """``loader(name)`` loads backend ``name`` when ``naiad.knobs.<name>`` is first read."""
    global _group_loader
    _group_loader = loader


def __getattr__(name: str) -> KnobGroup:
    """``naiad.knobs.<backend>``: that backend's knob group, the backend loaded on first use
    (reading ``naiad.knobs.cpu.threads`` before any launch loads the cpu backend)."""
    if name in groups:
        return groups[name]
    if name.startswith("__"):
        raise AttributeError(name)
    if _group_loader is not None:
        _group_loader(name)
        if name in groups:
            return groups[name]
    raise AttributeError(f"naiad.knobs has no group {name!r}: the core's are "
                         f"{', '.join(sorted(CORE_GROUPS))}, and a backend's is named after it "
                         f"(naiad.knobs.cpu) once it declares one")


def all_knobs() -> dict[str, Knob]:
    """``"group.name"`` -> descriptor, for every knob Naiad defines."""
    return {f"{g}.{n}": k for g, group in groups.items() for n, k in group.knob_descriptors().items()}


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """Restore every group's overrides on exit: ``with naiad.knobs.scope(): ...``."""
    with contextlib.ExitStack() as stack:
        for group in groups.values():
            stack.enter_context(group.scope())
        yield


def env_value(env: str) -> str | None:
    """The effective text of an environment variable, honouring overrides of the knob bound to it.

    The cache key reads backend-declared variables through this, so a knob assigned from code
    invalidates the cache exactly as the variable would.
    """
    for group in groups.values():
        for name, knob in group.knob_descriptors().items():
            if knob.env == env and name in group._overrides:
                return _as_env_text(group._overrides[name])
    return os.environ.get(env)


def _as_env_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ";".join(map(str, value))
    return str(value)


def raw_guards(*parts: tuple["KnobGroup", tuple[str, ...]]) -> list[tuple] | None:
    """`raw_reader`'s token staying the same, as native-entry guards (`naiad.runtime.native_entry`'s
    (root, path, check, expected) form): each knob's override as it is now, or none and the
    environment string as it is now.  None where os.environ keeps no plain dict to look in."""
    data = getattr(os.environ, "_data", None)
    if type(data) is not dict:
        return None
    guards: list[tuple] = []
    for group, names in parts:
        for name in names:
            path = (("attr", "_overrides"), ("item", name))
            if name in group._overrides:
                guards.append((group, path, "eq", group._overrides[name]))
                continue
            key = os.environ.encodekey(getattr(type(group), name).env)
            raw = data.get(key)
            guards += [(group, path, "missing", None),
                       (data, (("item", key),), "missing" if raw is None else "eq", raw)]
    return guards


def raw_reader(*parts: tuple["KnobGroup", tuple[str, ...]]) -> Callable[[], tuple]:
    """A function returning a cheap token of some environment knobs, given as (group, knob
    names) pairs: their overrides and raw environment strings, unparsed (equal tokens mean
    equal values; a launch's warm path reads it instead of parsing each knob).  Generated for
    the names, as it runs at every launch."""
    data = getattr(os.environ, "_data", None)
    encode = os.environ.encodekey if data is not None else (lambda key: key)
    scope: dict[str, Any] = {"_get": (data if data is not None else os.environ).get}
    reads, slow = [], []
    for g, (group, names) in enumerate(parts):
        scope[f"_group{g}"] = group
        for name in names:
            key = encode(getattr(type(group), name).env)
            scope[f"_key{len(reads)}"] = key
            reads.append(f"_get(_key{len(reads)})")
            slow.append(f"((True, o{g}[{name!r}]) if {name!r} in o{g} else {reads[-1]})")
    overrides = [f"o{g} = _group{g}._overrides" for g in range(len(parts))]  # `scope` swaps them
    source = (f"def token():\n    {'; '.join(overrides)}\n"
              f"    if not ({' or '.join(f'o{g}' for g in range(len(parts)))}):\n"
              f"        return ({', '.join(reads)},)\n"
              f"    return ({', '.join(slow)},)\n")
    exec(compile(source, "<naiad knob token>", "exec"), scope)
    return scope["token"]
