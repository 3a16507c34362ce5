"""``naiad.compile``: a source (a ``@jit`` function's specialization, or an IR file) through the
backend's stages to a `CompiledKernel`.

The core knows no stage by name except the source's own extension: the backend lists its stages
(`BaseBackend.add_stages`), each ``fn(ir, metadata) -> next_ir``, and says how each stage's
output is stored (`BaseBackend.stage_codec`).  Every stage's output is kept in
``kernel.asm[stage]``; the metadata is JSON-safe.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import json
import os
import sys
import threading
import time
import warnings
from typing import Any, Callable

from naiad import knobs as _knobs
from naiad.backends.compiler import BaseBackend, GPUTarget, Language
from naiad.backends.discovery import registry
from naiad.compiler import cache, dump
from naiad.errors import BackendSelectionError, NaiadError, NaiadWarning
from naiad.language.kernel_function import KernelFunction


class ASTSource:
    """One specialization of a ``@jit`` function (Triton's shape: signature, constexprs, attrs)."""

    language = Language.TRITON
    ext = "ttir"

    def __init__(self, fn: KernelFunction, signature: dict, constexprs: dict | None = None,
                 attrs: dict | None = None):
        self.fn = fn
        self.name = fn.__name__
        self.signature = dict(signature)
        self.constexprs = dict(constexprs or {})
        self.attrs = dict(attrs or {})

    @property
    def constants(self) -> dict[tuple, Any]:
        """The constexprs keyed by parameter path -- ``(index,)``, longer inside a tuple
        parameter -- as Triton's ``ASTSource.constants``: a client that launches the binary
        itself (torch's static CUDA launcher) leaves these parameters out by it."""
        return {(self.fn.arg_names.index(key),) if isinstance(key, str) else
                tuple(key) if isinstance(key, tuple) else (key,): value
                for key, value in self.constexprs.items()}

    def hash(self) -> str:
        parts = [self.fn.cache_key, repr(sorted((str(k), str(v)) for k, v in self.signature.items())),
                 repr(sorted((str(k), _key_of(v)) for k, v in self.constexprs.items())),
                 repr(sorted((str(k), str(v)) for k, v in self.attrs.items()))]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    def make_ir(self, options: Any, codegen_fns: dict, module_map: dict) -> Any:
        from naiad.compiler.frontend import make_ttir

        return make_ttir(self.fn, self.signature, self.constexprs, self.attrs, options, module_map,
                         codegen_fns)

    def parse_options(self) -> dict:
        return {}

    def launch_signature(self, module: Any) -> list[tuple[str, str]]:
        return [(name, self.signature.get(name, "constexpr")) for name in self.fn.arg_names]


def _type_string(mlir_type: Any) -> str:
    """Triton's type string of an IR argument type ("*fp32", "i32", "fp16")."""
    from naiad.ir.types import TRITON_SCALAR_TYPES, PointerType
    from naiad.language import dtypes

    if isinstance(mlir_type, PointerType):
        return "*" + _type_string(mlir_type.pointee_type)
    name = next(n for n, t in TRITON_SCALAR_TYPES.items() if t == mlir_type and not n.startswith("uint"))
    return dtypes.ty_to_str(dtypes.dtype(name))


def _key_of(value: Any) -> str:
    return value.cache_key if isinstance(value, KernelFunction) else repr(value)


class IRSource:
    """An IR file (``.ttir`` or any stage a backend declares) compiled from that stage on."""

    language = Language.TRITON

    def __init__(self, path: str):
        self.path = path
        self.ext = os.path.splitext(path)[1].lstrip(".")
        with open(path, encoding="utf-8") as f:
            self.text = f.read()
        self.name = os.path.splitext(os.path.basename(path))[0]

    def hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def make_ir(self, options: Any, codegen_fns: dict, module_map: dict) -> Any:
        from naiad.ir import parse_module
        from naiad.ir.tt import public_functions

        module = parse_module(self.text, name=self.path)
        kernels = public_functions(module)
        if len(kernels) != 1:
            raise NaiadError(f"{self.path}: expected exactly one public tt.func (the kernel), "
                             f"found {len(kernels)}")
        self.kernel = kernels[0]
        self.name = self.kernel.sym_name.data
        return module

    def parse_options(self) -> dict:
        return {}

    def launch_signature(self, module: Any) -> list[tuple[str, str]]:
        """IR files know only signless integers: they are launched as signed."""
        return [(f"arg{i}", _type_string(t)) for i, t in enumerate(self.kernel.function_type.inputs.data)]


@functools.lru_cache(maxsize=None)
def make_backend(target: GPUTarget) -> BaseBackend:
    """The compiler of the one backend that supports ``target``: the backend the target names
    (``target.backend``), when it does -- without importing the others (a CPU backend's driver
    costs a cold GPU compile a fifth of a second) -- else the only one that does."""
    sources = registry.sources()
    if target.backend in sources:
        named = registry.get_or_failure(target.backend)
        if hasattr(named, "compiler") and named.compiler.supports_target(target):
            return named.compiler(target)
    matches = [b for name in sources for b in [registry.get_or_failure(name)]
               if hasattr(b, "compiler") and b.compiler.supports_target(target)]
    if len(matches) != 1:
        names = ", ".join(b.name for b in matches) or "none"
        raise BackendSelectionError(f"{len(matches)} backends compile for {target} ({names}) -- fix: "
                                    f"exactly one must; check `naiad backends`")
    return matches[0].compiler(target)


_runtime_knobs = _knobs.runtime
#: Held while a kernel's binary is loaded: two threads launching a kernel for the first time at
#: once both loaded it, the second load replaced the first, and the first thread's launch ran
#: in machine code already freed (the process crashed).  Reentrant: a load hook may launch.
_load_lock = threading.RLock()


class KernelMetadata(dict):
    """The kernel's JSON metadata, readable as attributes too (``kernel.metadata.shared``), as
    Triton code expects; still a plain dict for JSON."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"kernel metadata has no field {name!r} (fields: "
                                 f"{', '.join(sorted(self))})") from None


class AsmDict(dict):
    """A compiled kernel's stage outputs, by stage name; a name no stage wrote is asked of the
    backend on first use (`BaseBackend.derived_asm`: ``asm["sass"]`` on cuda), as Triton's."""

    def __init__(self, outputs: dict[str, Any], backend: BaseBackend):
        super().__init__(outputs)
        self._backend = backend

    def __missing__(self, name: str) -> Any:
        value = self._backend.derived_asm(name, self)
        if value is None:
            raise KeyError(name)
        self[name] = value
        return value


class LoadedHandles:
    """What loading a compiled kernel made in this process: per device, the driver's module,
    function and register counts; the launcher; the device they are current for.

    Pickled, it is empty: handles belong to the process that loaded them, and a kernel sent to
    another one (torch's Inductor sends kernels back from its compile workers, pickling the
    kernel's ``__dict__``) loads again there on its first launch or ``_init_handles()``."""

    def __init__(self) -> None:
        self.per_device: dict[int, tuple] = {}     # device -> (module, function, n_regs, n_spills)
        self.current: tuple = (None, None, 0, 0)
        self.device: int | None = None
        self.launcher: Any = None

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()


def _as_metadata(metadata: Any) -> KernelMetadata:
    """The metadata as `KernelMetadata`, also from the namedtuple torch's Inductor rebuilds it
    into when it unpickles a kernel."""
    if isinstance(metadata, KernelMetadata):
        return metadata
    return KernelMetadata(metadata._asdict() if hasattr(metadata, "_asdict") else metadata)


@dataclasses.dataclass
class CompiledKernel:
    """Every stage's output (``asm``), the JSON metadata, and the backend that made them; ``src``
    is what it was compiled from (Triton's ``kernel.src``: an `ASTSource`, whose ``fn`` is the
    kernel function), None for a kernel read back from the compile cache alone.

    `launch` loads the binary through the driver on the current device the first time it runs
    there (``module``, ``function``, ``n_regs``, ``n_spills`` and ``run`` are then that
    device's) and runs the grid.  ``run`` is the launcher with Triton's calling convention,
    ``run(grid_0, grid_1, grid_2, stream, function, packed_metadata, launch_metadata,
    enter_hook, exit_hook, *args)``, every parameter in ``args`` (constexprs included).
    """

    name: str
    asm: dict[str, Any]
    metadata: dict[str, Any]
    backend: BaseBackend
    signature: list[tuple[str, str]]
    src: Any = None

    def __post_init__(self) -> None:
        self.metadata = KernelMetadata(self.metadata)
        self.asm = AsmDict(self.asm, self.backend)
        self.packed_metadata = self.backend.pack_metadata(self.metadata)
        self._handles = LoadedHandles()

    @property
    def module(self) -> Any:
        return self._handles.current[0]

    @property
    def function(self) -> Any:
        return self._handles.current[1]

    @property
    def n_regs(self) -> int:
        return self._handles.current[2]

    @property
    def n_spills(self) -> int:
        return self._handles.current[3]

    @property
    def launcher(self) -> Any:
        return self._handles.launcher

    @property
    def run(self) -> Any:
        """The launcher (Triton's ``CompiledKernel.run``), once the kernel is loaded."""
        return self._handles.launcher

    @property
    def binary(self) -> bytes:
        return self.asm[self.backend.binary_ext]

    @property
    def written_args(self) -> list[int]:
        """The positions of the parameters whose arrays the kernel may write through (all of
        them for a kernel whose metadata does not say)."""
        written = self.metadata.get("written_args")
        return list(range(len(self.signature))) if written is None else written

    @property
    def hash(self) -> str:
        """The kernel's cache key: the name of its cache entry and of its dump and override
        folders (``<NAIAD_DUMP_DIR>/<hash>/``)."""
        return getattr(self.metadata, "hash", "")

    def load(self, driver: Any) -> None:
        """Make the current device's module and function this kernel's, loading them there
        the first time."""
        self.metadata = _as_metadata(self.metadata)
        handles = self._handles
        device = driver.get_current_device()
        loaded = handles.per_device.get(device)
        if loaded is None:
            with _load_lock:
                loaded = handles.per_device.get(device) or self._load_binary(driver, device)
        handles.current, handles.device = loaded, device
        if handles.launcher is None:
            handles.launcher = driver.make_launcher(self.signature, self.metadata)
            self.packed_metadata = self.backend.pack_metadata(self.metadata)

    def _load_binary(self, driver: Any, device: int) -> tuple:
        """Load the binary on ``device`` (under `_load_lock`), with the load hooks around."""
        from naiad import knobs

        start_hook, end_hook = knobs.runtime.kernel_load_start_hook, knobs.runtime.kernel_load_end_hook
        if start_hook:
            start_hook(None, None, self.name, self.metadata, self.hash)
        module, function, n_regs, n_spills, _ = driver.load_binary(self.name, self.binary,
                                                                   self.metadata, device)
        loaded = self._handles.per_device[device] = (module, function, n_regs, n_spills)
        if end_hook:
            end_hook(module, function, self.name, self.metadata, self.hash)
        return loaded

    def _driver(self) -> Any:
        """The driver of the backend that compiled this kernel."""
        from naiad.backends.selection import driver_for

        named = registry.get_or_failure(self.backend.target.backend) \
            if self.backend.target.backend in registry.sources() else None
        if getattr(named, "compiler", None) is not type(self.backend):    # not under its own name
            named = next(b for name in registry.sources() for b in [registry.get_or_failure(name)]
                         if getattr(b, "compiler", None) is type(self.backend))
        return driver_for(named)

    def _init_handles(self) -> None:
        """Load the binary on the backend's driver now (Triton code calls this to read
        ``n_regs`` / ``n_spills`` before the first launch, and to get ``run``)."""
        self.load(self._driver())

    def launch_metadata(self, grid: tuple, stream: Any, *args: Any) -> dict[str, Any]:
        """What the launch hooks get about one launch (Triton's ``CompiledKernel.launch_metadata``,
        which torch's Inductor calls when a launch-enter hook is set): the kernel's name, grid,
        stream, hash and backend, updated with what the kernel's own ``launch_metadata``
        function (``@jit(launch_metadata=fn)``) returns for ``args`` -- every parameter, in
        order -- as Triton's: ``fn(grid, kernel metadata, {parameter name: argument})`` -> a
        dict that may rename the launch ("name") and count its work ("flops", "bytes")."""
        metadata = {"name": self.name, "grid": tuple(grid), "stream": stream, "hash": self.hash,
                    "backend": self.backend.target.backend}
        fn = getattr(self.src, "fn", None)
        describe = getattr(fn, "launch_metadata", None)
        if describe is not None:
            declared = describe(tuple(grid), self.metadata, dict(zip(fn.arg_names, args)))
            if not isinstance(declared, dict):
                raise NaiadError(f"{self.name}: its launch_metadata function returned "
                                 f"{type(declared).__name__}, not a dict -- fix: return a dict such "
                                 f"as {{'flops': ..., 'bytes': ...}}")
            metadata.update(declared)
        return metadata

    def __getitem__(self, grid: Any) -> Any:
        """``kernel[grid](*args)``: launch this compiled kernel directly, every parameter
        (constexprs included) passed positionally, as with Triton's compiled kernels."""
        from naiad.runtime import launch_checks, numpy_scalars

        def runner(*args: Any, stream: Any = None) -> None:
            if len(args) != len(self.signature):
                raise NaiadError(f"{self.name}: a compiled kernel takes all {len(self.signature)} "
                                 f"parameters positionally, constexprs included; {len(args)} given")
            driver = self._driver()
            grid3 = launch_checks.grid3(self.name, grid, driver.max_grid, driver.max_programs)
            launch_checks.check_writes(self.name, [n for n, _ in self.signature], args, self.written_args)
            self.launch(driver, grid3, numpy_scalars.plain(list(args)))
        return runner

    def launch(self, driver: Any, grid: tuple[int, int, int], args: list[Any]) -> None:
        if self._handles.device != driver.get_current_device():
            self.load(driver)
        stream = driver.get_current_stream()
        enter, leave = _runtime_knobs.launch_enter_hook, _runtime_knobs.launch_exit_hook
        launch_metadata = self.launch_metadata(grid, stream, *args) if enter or leave else None
        self.launcher(grid[0], grid[1], grid[2], stream, self.function, self.packed_metadata,
                      launch_metadata, enter or None, leave or None, *args)


def compile(src: Any, target: GPUTarget | None = None, options: dict | None = None) -> CompiledKernel:
    """Run ``src`` through the stages of the backend that compiles for ``target``.

    ``src`` is an `ASTSource`, an `IRSource` or the path of an IR file.  Without ``target``,
    the current target of the selected backend's driver is used.  The result comes from the
    on-disk cache when an entry for the same key exists (`naiad.compiler.cache`); stage outputs
    are dumped and overridden as `naiad.compiler.dump` describes.  Python's collector runs
    rarely meanwhile, and not over the objects that were there before (`_rare_collections`).
    """
    with _rare_collections():
        return _compile(src, target, options)


#: The collector's first threshold while a compile runs (Python's default is 700).
_COMPILE_GC_THRESHOLD = 100_000
_gc_lock = threading.Lock()
_gc_state: dict[str, Any] = {"depth": 0, "saved": None, "froze": False, "modules": 0}


@contextlib.contextmanager
def _rare_collections():
    """For the length of the outermost compile (of any thread): the objects that existed
    before it are frozen (``gc.freeze``: collections skip them) and the collector's first
    threshold is `_COMPILE_GC_THRESHOLD`; both are undone after it.

    Why: a compile's IR (xDSL ops, llvmlite instructions, the modules it imports: some 10^5
    objects) promotes enough objects to the oldest generation that Python then collects all
    of it -- with torch imported ~200,000 objects, 100-150 ms per full collection, one inside
    every cold matmul compile even with young collections made rare.  Frozen, the heap that was
    there before is not looked at, and the compile's temporaries die young.  A collector that
    is disabled is left alone, and so are objects a program froze itself (it unfreezes them
    when it chooses: a compile then freezes nothing), and a threshold already higher.
    `_freeze_new_imports` freezes again what the compile's own imports made."""
    with _gc_lock:
        if _gc_state["depth"] == 0 and gc.isenabled():
            threshold = gc.get_threshold()
            if 0 < threshold[0] < _COMPILE_GC_THRESHOLD:
                _gc_state["saved"] = threshold
                gc.set_threshold(_COMPILE_GC_THRESHOLD, *threshold[1:])
            if gc.get_freeze_count() == 0:
                gc.freeze()
                _gc_state["froze"] = True
                _gc_state["modules"] = len(sys.modules)
        _gc_state["depth"] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_state["depth"] -= 1
            if _gc_state["depth"] == 0:
                if _gc_state["saved"] is not None:
                    gc.set_threshold(*_gc_state["saved"])
                    _gc_state["saved"] = None
                if _gc_state["froze"]:
                    gc.unfreeze()
                    _gc_state["froze"] = False


def _freeze_new_imports() -> None:
    """Freeze the heap again if modules were imported since it was last frozen.

    Why: the first compile of a process imports the compile path (xDSL's dialects, the
    lowering, the backend's stages: ~10^5 objects that live as long as the process), and a
    young collection in the middle of it looks at all of them -- ~40 ms of a cold matmul
    compile.  Frozen at a stage boundary, they are not looked at again.  Compiles that
    import nothing (every later one) freeze nothing, so their garbage is collected as usual;
    the first one's few young leftovers wait for a full collection after it."""
    with _gc_lock:
        if _gc_state["froze"] and len(sys.modules) != _gc_state["modules"]:
            gc.freeze()
            _gc_state["modules"] = len(sys.modules)


def _compile(src: Any, target: GPUTarget | None, options: dict | None) -> CompiledKernel:
    from naiad import knobs

    began = time.perf_counter()
    if isinstance(src, str):
        src = IRSource(src)
    if target is None:
        from naiad.backends.selection import active_driver

        target = active_driver().get_current_target()
    backend = make_backend(target)
    opts = backend.parse_options(dict(options or {}, **src.parse_options()))
    stages: dict = {}
    backend.add_stages(stages, opts, src.language)
    inspect_stages = knobs.runtime.add_stages_inspection_hook
    if inspect_stages is not None:
        inspect_stages(backend, stages, opts, src.language, target.arch)
    names = list(stages)
    if src.ext not in names:
        raise NaiadError(f"backend for {target} has no stage {src.ext!r} (its stages: "
                         f"{', '.join(names)}) -- fix: give a file of one of those stages")
    if "json" in names:
        raise NaiadError(f"backend for {target} has a stage named 'json', the name of the kernel "
                         f"metadata file -- fix: rename that stage")
    first = names.index(src.ext) + (0 if isinstance(src, ASTSource) else 1)
    key = cache.compile_key(src, backend, opts, target)
    name = cache.file_name(src.name)
    overrides = dump.overrides(key, name, names[first:]) if knobs.compilation.override else {}
    if not overrides and not knobs.compilation.always_compile:
        hit = cache.load(key, name, backend)
        if hit is not None:
            entry, files = hit
            if knobs.compilation.dump_ir:
                dump.dump(key, files)
            _notify(src, entry.metadata, {}, True, began)
            return _compiled(entry, backend, src)

    start = time.perf_counter()
    module = src.make_ir(opts, backend.get_codegen_implementation(opts), backend.get_module_map())
    times = {"ir": time.perf_counter() - start}
    metadata: dict[str, Any] = {"name": src.name, "target": target.to_json(), "hash": key,
                                **_json_safe(vars(opts)),
                                "written_args": _written_parameters(module, src.launch_signature(module))}
    # A kernel's own TTIR is printed after its ttir stage (which runs first); an IR file's text
    # is the output of the stage it was written at.
    asm: dict[str, Any] = {} if isinstance(src, ASTSource) else {src.ext: _stage_text(module)}
    for stage in names[first:]:
        _freeze_new_imports()
        start = time.perf_counter()
        module = _run_stage(stages[stage], stage, module, metadata, target)
        times[stage] = time.perf_counter() - start
        if stage in overrides:
            module = dump.read_override(overrides[stage], stage, module, backend)
            metadata.setdefault("overrides", {})[stage] = overrides[stage]
        asm[stage] = bytes(module) if backend.stage_codec(stage).binary else _stage_text(module)
    entry = cache.Entry(metadata.get("name", src.name), asm, metadata, src.launch_signature(module))
    try:
        files = cache.pack(key, name, entry, backend)
    except (TypeError, ValueError) as e:
        warnings.warn(f"kernel '{entry.name}' is not cached: its metadata is not JSON ({e}) -- "
                      f"fix: the {target.backend} backend's stages must put only JSON values in "
                      f"the metadata", NaiadWarning, stacklevel=2)
        _notify(src, entry.metadata, times, False, began)
        return _compiled(entry, backend, src)
    if not overrides:
        cache.store(key, files)
    if knobs.compilation.dump_ir:
        dump.dump(key, files)
    # Built from the stored files, so a kernel compiled now and one read from the cache later
    # are the same object graph (JSON metadata, tuple signatures).
    _notify(src, entry.metadata, times, False, began)
    return _compiled(cache.unpack(files, key, name, backend), backend, src)


def _written_parameters(module: Any, signature: list[tuple[str, Any]]) -> list[int]:
    """The positions of the parameters (constexprs included) whose arrays the kernel may write
    through (`naiad.passes.written_arguments`); every pointer parameter when the IR cannot
    say.  Launches refuse read-only arrays there (`naiad.runtime.launch_checks`)."""
    from naiad.passes.written_arguments import written_arguments
    from naiad.runtime.slots import runtime_slots

    slots = runtime_slots(signature)
    written = written_arguments(module)
    if written is None or any(i >= len(slots) for i in written):
        written = [i for i, (_, ty, _) in enumerate(slots) if ty.startswith("*")]
    return sorted({slots[i][2][0] for i in written})


#: Called as ``observer(metadata, began, seconds, cache_hit)`` after each compilation and each
#: kernel read from the cache: ``began`` is `time.perf_counter`'s value when `compile` started,
#: ``seconds`` how long it took (a cache hit's lookup included).  Empty unless something watches
#: compiles (`naiad.profiler`): a list of its own beside ``knobs.compilation.listener``, which
#: is the user's one callable and stays theirs.
compile_observers: list[Callable[[dict, float, float, bool], None]] = []


def _notify(src: Any, metadata: dict, times: dict, cache_hit: bool, began: float) -> None:
    """Tell ``knobs.compilation.listener``, if set, and the `compile_observers` about one
    compilation."""
    from naiad import knobs

    listener = knobs.compilation.listener
    if listener is not None:
        listener(src, metadata, times, cache_hit)
    if compile_observers:
        seconds = time.perf_counter() - began
        for observer in list(compile_observers):
            observer(metadata, began, seconds, cache_hit)


def _compiled(entry: "cache.Entry", backend: BaseBackend, src: Any) -> CompiledKernel:
    return CompiledKernel(entry.name, entry.asm, entry.metadata, backend, entry.signature, src)


def _run_stage(stage: Any, name: str, module: Any, metadata: dict, target: GPUTarget) -> Any:
    """Run one stage; anything but a Naiad error is an internal error, reported as such with the
    kernel, the stage and the backend rather than as a traceback from deep inside a compiler."""
    from naiad import knobs

    try:
        return stage(module, metadata)
    except NaiadError:
        raise
    except NotImplementedError as e:        # a known gap of the backend, said as such
        if knobs.compilation.frontend_debug:
            raise
        raise UnsupportedByBackend(
            f"kernel '{metadata.get('name') or _kernel_name(module)}' cannot be compiled by the "
            f"{target.backend} backend yet (stage '{name}'): {e} -- fix: run it on another backend "
            f"(naiad.set_backend or the arguments' device) or write it without that feature") from None
    except Exception as e:
        if knobs.compilation.frontend_debug:
            raise
        raise InternalCompilerError(
            f"internal error in stage '{name}' of the {target.backend} backend while compiling "
            f"kernel '{metadata.get('name', '?')}': {type(e).__name__}: {e} -- this is a bug in "
            f"Naiad or the backend; NAIAD_FRONTEND_DEBUG=1 shows the compiler's traceback") from None


class InternalCompilerError(NaiadError):
    """A compiler stage failed on input it should have handled (a bug, not a user error)."""


class UnsupportedByBackend(NaiadError):
    """A kernel uses a feature the backend does not implement yet (a stage raised
    ``NotImplementedError``): a known gap, not a bug."""


def _kernel_name(module: Any) -> str:
    """The public function's name of an IR module, or '?'."""
    from naiad.ir.tt import public_functions

    kernels = public_functions(module)
    return kernels[0].sym_name.data if kernels else "?"


def _stage_text(ir: Any) -> Any:
    """xDSL IR objects are stored as their MLIR text; strings and bytes as they are; any other
    object (a backend's own IR) as its ``str``."""
    if isinstance(ir, (str, bytes, bytearray)):
        return ir
    from xdsl.ir import Operation

    if not isinstance(ir, Operation):
        return str(ir)
    from naiad.ir import print_module

    return print_module(ir)


def _json_safe(values: dict) -> dict:
    return json.loads(json.dumps(values, default=str))
