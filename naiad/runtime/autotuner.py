"""Autotuning, as Triton's ``@triton.autotune``, ``triton.Config`` and ``@triton.heuristics``.

``@autotune(configs=[Config({...}), ...], key=["n"])`` above a ``@jit`` kernel times every
config the first time it sees a new value of the ``key`` arguments (or new dtypes of the array
arguments), remembers the fastest, and launches that one from then on.  ``@heuristics`` computes
meta-parameters from the arguments instead of timing.  Both wrap a kernel and answer ``run``,
``kernel[grid](...)`` and ``warmup`` like a `JITFunction`, so they stack in any order (Triton's
usual one is ``@autotune`` over ``@heuristics`` over ``@jit``).

Timing goes through ``naiad.testing.do_bench`` (the active driver's benchmarker), so the same
decorator tunes on the CPU and on a GPU.  A config whose compilation fails (`CompilationError`,
e.g. a ``tl.static_assert`` on the block size) or that needs more than the device has
(`OutOfResources`) is skipped with an infinite time, as in Triton; when every config fails, the
error lists each config with its own error.
"""

from __future__ import annotations

import inspect
import sys
import time
from typing import Any, Callable, Container, Iterable

from naiad import knobs
from naiad.compiler.errors import CompilationError
from naiad.errors import NaiadError, OutOfResources
from naiad.runtime.autotune_progress import TuningProgress
from naiad.runtime.kernel_interface import KernelInterface

#: Errors that disqualify one config rather than the kernel.
_SKIPPED = (CompilationError, OutOfResources)
_INFINITY = float("inf")
_PRUNE_KEYS = ("early_config_prune", "perf_model", "top_k")


class AutotunerError(NaiadError):
    """The autotuner was set up wrongly, or no config of a kernel compiled and ran."""


class Config:
    """One point of a tuning space: meta-parameters and compile options.

    ``kwargs`` go to the launch as in Triton: those naming kernel parameters set them, the rest
    reach the backend's options (those the selected backend does not declare are left out; a
    direct launch refuses them).  Further keywords (``waves_per_eu=2``,
    ``kpack=2`` in configs written for AMD GPUs) belong to one backend: they are kept apart in
    ``backend_options`` and passed only to a backend whose options declare them, so a config
    list written for one device runs unchanged on another.
    """

    def __init__(self, kwargs: dict[str, Any], num_warps: int = 4, num_stages: int = 3, num_ctas: int = 1,
                 maxnreg: int | None = None, pre_hook: Callable[[dict], Any] | None = None,
                 **backend_options: Any):
        if not isinstance(kwargs, dict):
            raise AutotunerError(f"Config takes a dict of meta-parameters first, not "
                                 f"{type(kwargs).__name__} -- fix: Config({{'BLOCK': 128}}, num_warps=4)")
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook
        self.backend_options = backend_options

    def all_kwargs(self) -> dict[str, Any]:
        """Meta-parameters and portable compile options (``maxnreg`` only when set), Triton's
        ``all_kwargs``; backend options are not included (see `launch_kwargs`)."""
        options = {"num_warps": self.num_warps, "num_ctas": self.num_ctas, "num_stages": self.num_stages}
        if self.maxnreg is not None:
            options["maxnreg"] = self.maxnreg
        return {**self.kwargs, **options}

    def launch_kwargs(self, declared: Container[str], parameters: Container[str]) -> dict[str, Any]:
        """`all_kwargs` plus the backend options named in ``declared`` (the selected backend's).
        A meta-parameter that is neither one of the kernel's ``parameters`` nor declared
        (``matrix_instr_nonkdim`` of a config written for AMD GPUs, run on the CPU) is left out,
        as backend options are: a launch refuses keywords it cannot place."""
        extra = {k: v for k, v in self.backend_options.items() if k in declared}
        portable = {k: v for k, v in self.all_kwargs().items()
                    if k in parameters or k in declared or k not in self.kwargs}
        return {**portable, **extra}

    def __str__(self) -> str:
        items = {**self.kwargs, "num_warps": self.num_warps, "num_ctas": self.num_ctas,
                 "num_stages": self.num_stages, "maxnreg": self.maxnreg, **self.backend_options}
        return ", ".join(f"{k}: {v}" for k, v in items.items())

    def __repr__(self) -> str:
        return f"Config({self})"


def _base_function(fn: Any) -> Any:
    """The Python function under any stack of wrappers (`JITFunction`, `Autotuner`, ...)."""
    while not inspect.isfunction(fn) and getattr(fn, "fn", None) is not None:
        fn = fn.fn
    return fn


def _jit_function(fn: Any) -> Any:
    """The innermost wrapper that has a ``cache_key`` (the `JITFunction`), or None."""
    while fn is not None and not hasattr(fn, "cache_key"):
        fn = getattr(fn, "fn", None)
    return fn


def _backend_target(values: Iterable[Any]) -> Any:
    """The target of the backend that a launch with these argument values selects."""
    from naiad.backends import selection

    return selection.driver_for(selection.select(values)).get_current_target()


def _declared_options(values: Iterable[Any]) -> frozenset[str]:
    """Names of the options the backend selected for these arguments declares."""
    from naiad.compiler.compiler import make_backend

    return make_backend(_backend_target(values)).option_names()


class KernelWrapper(KernelInterface):
    """What `Autotuner` and `Heuristics` add to the kernel they wrap (``kernel[grid](...)``,
    `KernelInterface`): its arguments' names and the function under the wrappers."""

    def __init__(self, fn: Any, arg_names: Iterable[str]):
        self.fn = fn
        self.arg_names = list(arg_names)
        self.base_fn = _base_function(fn)

    @property
    def name(self) -> str:
        return getattr(self.base_fn, "__name__", type(self.fn).__name__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.fn!r})"


class Autotuner(KernelWrapper):
    """A kernel launched with the fastest of ``configs`` for each value of the ``key`` arguments.

    ``cache`` maps a tuning key (the ``key`` arguments' values, then the dtypes of the array
    arguments) to the chosen `Config`; ``best_config`` is the config of the latest launch;
    ``configs_timings`` and ``bench_time`` describe the latest tuning.  Arguments are those of
    Triton's ``Autotuner``; two differences: ``pre_hook`` and ``post_hook`` run in addition to
    ``reset_to_zero`` / ``restore_value`` rather than replacing them, and ``use_cuda_graph`` is
    accepted for Triton's code but has no effect (timing is the driver benchmarker's business).
    """

    def __init__(self, fn: Any, arg_names: Iterable[str], configs: Iterable[Config], key: Iterable[str],
                 reset_to_zero: Iterable[str] | None = None, restore_value: Iterable[str] | None = None,
                 pre_hook: Callable[..., Any] | None = None, post_hook: Callable[..., Any] | None = None,
                 prune_configs_by: dict[str, Any] | None = None, warmup: float | None = None,
                 rep: float | None = None, use_cuda_graph: bool = False,
                 do_bench: Callable[..., Any] | None = None, cache_results: bool = False):
        super().__init__(fn, arg_names)
        self.configs = list(configs) or [Config({})]
        for config in self.configs:
            if not isinstance(config, Config):
                raise AutotunerError(f"autotune({self.name}): configs must be Config objects, not "
                                     f"{type(config).__name__} -- fix: configs=[naiad.Config({{...}}), ...]")
        self.keys = self._parameters("key", key)
        self.reset_to_zero = self._parameters("reset_to_zero", reset_to_zero or [])
        self.restore_value = self._parameters("restore_value", restore_value or [])
        self.pre_hook, self.post_hook = pre_hook, post_hook
        # Triton's attribute names, which code written for Triton reads (torch's Inductor refuses
        # user hooks and non-default timing in kernels it traces)
        self.user_defined_pre_hook, self.user_defined_post_hook = pre_hook is not None, post_hook is not None
        self.num_warmups, self.num_reps, self.use_cuda_graph = warmup, rep, use_cuda_graph
        prune = dict(prune_configs_by or {})
        unknown = sorted(set(prune) - set(_PRUNE_KEYS))
        if unknown:
            raise AutotunerError(f"autotune({self.name}): prune_configs_by has unknown entries "
                                 f"{', '.join(map(repr, unknown))} -- fix: use only "
                                 f"{', '.join(map(repr, _PRUNE_KEYS))}")
        self.early_config_prune = prune.get("early_config_prune")
        self.perf_model = prune.get("perf_model")
        self.configs_top_k = prune.get("top_k", 10)
        self.do_bench = do_bench if do_bench is not None else _default_benchmarker(warmup, rep)
        self.cache_results = cache_results
        self.cache: dict[tuple, Config] = {}
        self.best_config: Config | None = None
        self.configs_timings: dict[Config, Any] = {}
        self.bench_time = 0.0

    def _parameters(self, what: str, names: Iterable[str]) -> list[str]:
        if isinstance(names, str):
            raise AutotunerError(f"autotune({self.name}): {what} must be a list of parameter names, "
                                 f"not the string {names!r} -- fix: {what}=[{names!r}]")
        names = list(names)
        missing = [n for n in names if n not in self.arg_names]
        if missing:
            which = "is not a parameter" if len(missing) == 1 else "are not parameters"
            raise AutotunerError(f"autotune({self.name}): {what} names {', '.join(map(repr, missing))}, "
                                 f"which {which} of the kernel (its parameters: "
                                 f"{', '.join(self.arg_names)}) -- fix: list parameter names in {what}=")
        return names

    # -- launching ----------------------------------------------------------------------------
    def run(self, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
        """Launch with the chosen config, tuning first when the key is new."""
        positional = dict(zip(self.arg_names, args))
        arguments = {**positional, **kwargs}
        config = self.configs[0] if len(self.configs) == 1 else \
            self._choose(args, positional, kwargs, grid)
        self.best_config = config
        launch = self._launch_kwargs(config, kwargs, arguments)
        if config.pre_hook is not None:
            config.pre_hook({**arguments, **launch})
        return self.fn.run(*args, grid=grid, warmup=warmup, **kwargs, **launch)

    def warmup(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Compile every config that pruning keeps, without launching; one result per config."""
        positional = dict(zip(self.arg_names, args))
        arguments = {**positional, **kwargs}
        return [self.fn.warmup(*args, **kwargs, **self._launch_kwargs(config, kwargs, arguments))
                for config in self.prune_configs(kwargs, positional)]

    def _launch_kwargs(self, config: Config, kwargs: dict[str, Any], arguments: dict[str, Any]) -> dict:
        foreign = config.backend_options or any(k not in self.arg_names for k in config.kwargs)
        declared = _declared_options(arguments.values()) if foreign else ()
        launch = config.launch_kwargs(declared, self.arg_names)
        clash = sorted(set(kwargs) & set(launch))
        if clash:
            raise AutotunerError(f"{self.name}: {', '.join(map(repr, clash))} passed to the launch but "
                                 f"also set by the autotuner's configs -- fix: do not pass "
                                 f"{'it' if len(clash) == 1 else 'them'}; the autotuner chooses")
        return launch

    # -- choosing -----------------------------------------------------------------------------
    def tuning_key(self, arguments: dict[str, Any]) -> tuple:
        """The ``key`` arguments' values, then the dtype of each kernel argument that has one."""
        values = [arguments[k] for k in self.keys if k in arguments]
        values += [str(v.dtype) for k, v in arguments.items() if k in self.arg_names and hasattr(v, "dtype")]
        return tuple(values)

    def _choose(self, args: tuple, positional: dict, kwargs: dict, grid: Any) -> Config:
        arguments = {**positional, **kwargs}
        key = self.tuning_key(arguments)
        config = self.cache.get(key)
        if config is not None:
            return config
        path = self._cache_path(key, arguments) if self.cache_results else None
        config = self._load(path) if path else None
        if config is None:
            config = self._tune(key, args, positional, kwargs, grid)
            if path:
                from naiad.runtime import autotune_cache

                autotune_cache.store(path, {"kernel": self.name, "key": repr(key), "best": str(config),
                                            "configs": [str(c) for c in self.configs]})
        self.cache[key] = config
        return config

    def prune_configs(self, kwargs: dict[str, Any], nargs: dict[str, Any]) -> list[Config]:
        """``early_config_prune(configs, nargs, **kwargs)``, then the ``top_k`` configs by
        ``perf_model(**nargs, **kwargs, **config.all_kwargs())`` (a float top_k is a fraction)."""
        configs = self.configs
        if self.early_config_prune is not None:
            configs = list(self.early_config_prune(configs, nargs, **kwargs))
            if not configs:
                raise AutotunerError(f"autotuning {self.name}: early_config_prune returned no config -- "
                                     f"fix: make it return at least one of the configs it is given")
        if self.perf_model is not None:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and 0 < top_k <= 1:
                top_k = max(1, int(len(configs) * top_k))
            elif isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
                raise AutotunerError(f"autotuning {self.name}: prune_configs_by['top_k'] is {top_k!r} -- "
                                     f"fix: give a count (int >= 1) or a fraction (float in (0, 1])")
            if len(configs) > top_k:
                estimates = {c: self.perf_model(**nargs, **kwargs, **c.all_kwargs()) for c in configs}
                configs = sorted(configs, key=estimates.__getitem__)[:top_k]
        return configs

    def _tune(self, key: tuple, args: tuple, positional: dict, kwargs: dict, grid: Any) -> Config:
        start = time.perf_counter()
        configs = self.prune_configs(kwargs, positional)
        timings: dict[Config, Any] = {}
        if len(configs) > 1:
            failures: dict[Config, Exception] = {}
            # on a terminal only (TuningProgress): logs and pipes get just the summary below
            progress = TuningProgress(self.name, len(configs), sys.stderr) \
                if knobs.autotuning.print else None
            try:
                for config in configs:
                    timings[config] = self._bench(config, args, positional, kwargs, grid, failures)
                    if progress:
                        progress.timed(config, _score(timings[config]))
            finally:
                if progress:
                    progress.close()
            if len(failures) == len(configs):
                raise AutotunerError(_all_failed(self.name, failures))
            self._zero({**positional, **kwargs})      # the benchmark runs dirtied them
        best = min(configs, key=lambda c: _score(timings[c])) if timings else configs[0]
        self.configs_timings = timings
        self.bench_time = time.perf_counter() - start
        if knobs.autotuning.print:
            print(f"naiad: autotuned kernel {self.name} for key {key} in {self.bench_time:.2f}s "
                  f"({len(configs)} configs); best config: {best}")
        return best

    def _bench(self, config: Config, args: tuple, positional: dict, kwargs: dict, grid: Any,
               failures: dict[Config, Exception]) -> Any:
        arguments = {**positional, **kwargs}
        launch = self._launch_kwargs(config, kwargs, arguments)
        nargs = {**arguments, **launch}

        def kernel_call() -> None:
            if config.pre_hook is not None:
                config.pre_hook(nargs)
            saved = self._before_call(nargs)
            try:
                self.fn.run(*args, grid=grid, warmup=False, **kwargs, **launch)
            except Exception as e:
                self._after_call(nargs, saved, e)
                raise
            self._after_call(nargs, saved, None)

        try:
            return self.do_bench(kernel_call, quantiles=(0.5, 0.2, 0.8))
        except _SKIPPED as e:
            failures[config] = e
            return [_INFINITY] * 3

    # -- hooks around each benchmarked launch -------------------------------------------------
    def _zero(self, nargs: dict[str, Any]) -> None:
        for name in self.reset_to_zero:
            value = _array(self.name, "reset_to_zero", name, nargs.get(name))
            if value is None:
                continue
            if hasattr(value, "zero_"):
                value.zero_()
            else:
                value[...] = 0

    def _before_call(self, nargs: dict[str, Any]) -> dict[str, Any]:
        self._zero(nargs)
        saved = {}
        for name in self.restore_value:
            value = _array(self.name, "restore_value", name, nargs.get(name))
            if value is not None:
                saved[name] = value.clone() if hasattr(value, "clone") else value.copy()
        if self.pre_hook is not None:
            self.pre_hook(nargs)
        return saved

    def _after_call(self, nargs: dict[str, Any], saved: dict[str, Any], exception: Exception | None) -> None:
        for name, copy in saved.items():
            if hasattr(nargs[name], "copy_"):
                nargs[name].copy_(copy)
            else:
                nargs[name][...] = copy
        if self.post_hook is not None:
            self.post_hook(nargs, exception=exception)

    # -- the on-disk cache --------------------------------------------------------------------
    def _cache_path(self, key: tuple, arguments: dict[str, Any]) -> str:
        from naiad.version import __version__
        from naiad.runtime import autotune_cache

        source = getattr(_jit_function(self.fn), "cache_key", self.name)
        return autotune_cache.path_for([__version__, self.name, source, _backend_target(arguments.values()),
                                        repr(key), [str(c) for c in self.configs]])

    def _load(self, path: str) -> Config | None:
        from naiad.runtime import autotune_cache

        record = autotune_cache.load(path)
        best = record.get("best") if record else None
        config = next((c for c in self.configs if str(c) == best), None)
        if config is not None and knobs.autotuning.print:
            print(f"naiad: kernel {self.name} uses the config cached in {path}: {config}")
        return config


def _score(timing: Any) -> float:
    """The time to compare: the first value of a list of quantiles (the median), or the number."""
    return timing[0] if isinstance(timing, (list, tuple)) else timing


def _array(kernel: str, what: str, name: str, value: Any) -> Any:
    if value is None or hasattr(value, "zero_") or hasattr(value, "__setitem__"):
        return value
    raise AutotunerError(f"{kernel}: {what} names {name!r}, which is a {type(value).__name__}, not an "
                         f"array -- fix: list only array arguments in {what}")


def _all_failed(kernel: str, failures: dict[Config, Exception]) -> str:
    lines = [f"autotuning kernel {kernel} failed: none of its {len(failures)} configs compiled and ran"]
    for config, error in failures.items():
        detail = str(error).replace("\n", "\n      ")
        lines.append(f"  config {config}:\n      {type(error).__name__}: {detail}")
    lines.append("-- fix: make at least one config fit the kernel and the device (the errors above "
                 "say what each config hit)")
    return "\n".join(lines)


def _default_benchmarker(warmup: float | None, rep: float | None) -> Callable[..., Any]:
    """``naiad.testing.do_bench`` with the autotuner's ``warmup`` and ``rep`` when given."""
    options = {k: v for k, v in (("warmup", warmup), ("rep", rep)) if v is not None}

    def bench(kernel_call: Callable[[], Any], quantiles: Any) -> Any:
        from naiad.testing import do_bench

        return do_bench(kernel_call, quantiles=quantiles, **options)

    return bench


class Heuristics(KernelWrapper):
    """A kernel whose meta-parameters ``values[name](args)`` computes from the other arguments.

    Each function gets a dict of the launch's arguments by name (positional and keyword,
    including the values computed before it) and returns the value of its parameter.
    """

    def __init__(self, fn: Any, arg_names: Iterable[str], values: dict[str, Callable[[dict], Any]]):
        super().__init__(fn, arg_names)
        if not isinstance(values, dict) or not all(callable(v) for v in values.values()):
            raise AutotunerError(f"heuristics({self.name}) takes a dict of parameter name -> function of "
                                 f"the arguments dict -- fix: heuristics({{'BLOCK': lambda args: ...}})")
        self.values = values

    def _apply(self, args: tuple, kwargs: dict[str, Any]) -> None:
        for name, rule in self.values.items():
            arguments = {**dict(zip(self.arg_names, args)), **kwargs}
            try:
                kwargs[name] = rule(arguments)
            except KeyError as e:
                raise AutotunerError(f"{self.name}: the heuristic for {name!r} reads argument {e}, which "
                                     f"this launch does not pass (it passes: {', '.join(arguments)}) -- "
                                     f"fix: pass it, or read only arguments the launch gives") from None

    def run(self, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
        self._apply(args, kwargs)
        return self.fn.run(*args, grid=grid, warmup=warmup, **kwargs)

    def warmup(self, *args: Any, **kwargs: Any) -> Any:
        self._apply(args, kwargs)
        return self.fn.warmup(*args, **kwargs)


def _check_kernel(decorator: str, fn: Any) -> None:
    if not hasattr(fn, "arg_names") or not callable(getattr(fn, "run", None)):
        raise AutotunerError(f"@{decorator} must decorate a kernel (@naiad.jit, possibly under "
                             f"@autotune or @heuristics), not {type(fn).__name__} "
                             f"{getattr(fn, '__name__', '')} -- fix: put @naiad.jit below @{decorator}")


def autotune(configs: Iterable[Config], key: Iterable[str], prune_configs_by: dict[str, Any] | None = None,
             reset_to_zero: Iterable[str] | None = None, restore_value: Iterable[str] | None = None,
             pre_hook: Callable[..., Any] | None = None, post_hook: Callable[..., Any] | None = None,
             warmup: float | None = None, rep: float | None = None, use_cuda_graph: bool = False,
             do_bench: Callable[..., Any] | None = None,
             cache_results: bool = False) -> Callable[[Any], Autotuner]:
    """Decorator: launch a kernel with the fastest of ``configs`` for each value of ``key``.

    ``prune_configs_by`` may hold ``early_config_prune(configs, nargs, **kwargs)``,
    ``perf_model(**kwargs)`` and ``top_k`` (default 10); ``reset_to_zero`` arguments are zeroed
    before each timed launch and again before the launch that follows tuning, so that only the
    real launch's effect remains; ``restore_value`` arguments are put back
    after each timed launch; ``pre_hook(nargs)`` / ``post_hook(nargs, exception=...)`` run around
    each timed launch; ``do_bench(kernel_call, quantiles)`` replaces the driver's benchmarker;
    ``cache_results`` keeps the choice on disk under ``NAIAD_CACHE_DIR``.
    """
    def decorator(fn: Any) -> Autotuner:
        _check_kernel("autotune", fn)
        return Autotuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value, pre_hook=pre_hook,
                         post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results)

    return decorator


def heuristics(values: dict[str, Callable[[dict], Any]]) -> Callable[[Any], Heuristics]:
    """Decorator: ``@heuristics({"BLOCK": lambda args: naiad.next_power_of_2(args["n"])})``."""
    def decorator(fn: Any) -> Heuristics:
        _check_kernel("heuristics", fn)
        return Heuristics(fn, fn.arg_names, values)

    return decorator
