"""``@naiad.jit``: a Python function becomes a kernel that is compiled per specialization.

A `JITFunction` keeps the function's source and parameters.  At each launch its arguments are
*specialized* the way Triton does it (`specialize`): each argument yields a type string
("i32", "*fp32", "constexpr", ...) and a key ("D" when divisible by 16), and the pair list
selects, or creates, a compiled kernel.  The `cache_key` covers the function's source and
everything it depends on: called ``@jit`` functions and the constexpr globals it reads.
"""

from __future__ import annotations

import difflib
import functools
import sys
import types
from typing import Any, Callable

from naiad.compiler.signatures import describe
from naiad.errors import LaunchError, NaiadError
from naiad.language.core import ConstexprFunction  # noqa: F401  (triton.runtime.jit has it)
from naiad.language.kernel_function import KernelFunction, resolve
from naiad.runtime import launch_checks, numpy_scalars
from naiad.runtime.arrays import array_type_string, data_pointer
from naiad.runtime.kernel_interface import KernelInterface
from naiad.runtime.native_variants import NativeEntries
from naiad.runtime.tensor_wrapper import TensorWrapper, reinterpret  # noqa: F401  (triton.runtime.jit has them)

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX = 2**64 - 1


def specialize(value: Any, *, specialize_value: bool = True, align: bool = True) -> tuple[Any, Any]:
    """Triton's per-argument specialization: ``(type string, key)``.

    ints equal to 1 become the constexpr 1; other ints are "i32", "i64" or "u64" by range with
    key "D" when divisible by 16; arrays are "*<dtype>" with key "D" when their address is
    16-byte aligned; floats are "fp32", bools "u1"; constexprs, None, dtypes and ``@jit``
    functions are constexprs; tuples specialize element-wise (a namedtuple's types are held
    in the same namedtuple class); a ``TensorDescriptor`` is its type string
    (``"tensordesc<fp32[16, 32]>"``, `naiad.language.tensor_descriptor`) with a key per
    runtime part (base, shape, strides) as an array's and an int's.
    """
    from naiad.language import core, dtypes

    if value is None:
        return "constexpr", None
    if isinstance(value, core.constexpr):
        return "constexpr", value.value
    try:
        scalar = numpy_scalars.scalar_type(value)
    except TypeError as e:
        raise LaunchError(str(e)) from None
    if scalar is not None:       # before Python's types: np.float64 is a float, and an array too
        integer = scalar[0] in "iu" and scalar != "u1"
        key = ("D" if align and int(value) % 16 == 0 else "") if specialize_value and integer else None
        return scalar, key
    if isinstance(value, bool):
        return "u1", None
    if isinstance(value, int):
        if specialize_value and value == 1:
            return "constexpr", 1
        key = ("D" if align and value % 16 == 0 else "") if specialize_value else None
        if _INT32[0] <= value <= _INT32[1]:
            return "i32", key
        if _INT64[0] <= value <= _INT64[1]:
            return "i64", key
        if 0 <= value <= _UINT64_MAX:
            return "u64", key
        raise LaunchError(f"integer argument {value} does not fit in 64 bits")
    if isinstance(value, float):
        return "fp32", None
    if isinstance(value, (dtypes.dtype, KernelFunction)):
        return "constexpr", value
    if isinstance(value, tuple):
        pairs = [specialize(v, specialize_value=specialize_value, align=align) for v in value]
        types = [t for t, _ in pairs]
        # A namedtuple's types keep its class, so that kernels can read its fields by name.
        return (type(value)(*types) if hasattr(value, "_fields") else tuple(types),
                tuple(k for _, k in pairs))
    pointer = data_pointer(value)
    if pointer is not None:
        ty = array_type_string(value)
        key = ("D" if align and pointer % 16 == 0 else "") if specialize_value else None
        return "*" + ty, key
    from naiad.runtime.tensor_descriptor import TensorDescriptor

    if isinstance(value, TensorDescriptor):
        return value.signature(), value.divisibility() if specialize_value and align else None
    raise LaunchError(f"cannot pass an object of type {type(value).__name__} to a kernel "
                      f"(pass an array, a number, a bool, a dtype, None, a tl.constexpr or a "
                      f"TensorDescriptor)")


class JITFunction(KernelFunction, KernelInterface):
    """A kernel (or a device function called from one) written in Naiad's language.

    ``fn[grid](*args)`` launches it; calling it directly is only legal inside another kernel.
    """

    def __init__(self, fn: Callable, **options: Any):
        super().__init__(fn, **options)
        #: repr of (backend, target, specialization, options) -> compiled kernel, in this process.
        self.cache: dict[str, Any] = {}
        #: Called as ``hook(*args, **kwargs)`` with a launch's arguments before it runs.
        self.pre_run_hooks: list[Callable[..., Any]] = []
        #: Warm launches: a cheap per-call key (`_make_entry`) -> `_Prepared`; any miss takes
        #: the full path (`_run_slow`), which fills it.
        self._fast: dict[tuple, _Prepared] = {}
        self._entry: Callable[..., Any] | None = None
        #: The launch entry without the redirect to the native one: what that one falls back to.
        self._plain_entry: Callable[..., Any] | None = None
        #: Warm launches as machine code (`naiad.runtime.native_variants`).
        self._native = NativeEntries()

    def __getstate__(self) -> dict:
        """Pickled without this process's launch state (torch's Inductor sends kernels back from
        its compile workers with their JIT function): the warm-launch entries and their machine
        code, which the process that unpickles it builds again on its first launch."""
        state = dict(self.__dict__)
        state.update(_fast={}, _entry=None, _plain_entry=None, _native=None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._native = NativeEntries()

    def _unsafe_update_src(self, new_src: str) -> None:
        """Replace the source; drops compiled kernels."""
        super()._unsafe_update_src(new_src)
        self.cache.clear()
        self._fast.clear()
        self._native = NativeEntries()
        self._entry = self._plain_entry = None

    # -- binding and specialization ------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict) -> tuple[dict[str, Any], dict[str, Any]]:
        """Match a launch's arguments to parameters: (bound arguments in order, other keywords).

        Keywords that are not parameters (num_warps, ...) are returned separately for the
        backend's options.  (A direct loop: ``inspect.Signature.bind`` costs tens of
        microseconds per launch.)
        """
        if len(args) > len(self.params):
            raise LaunchError(f"{self.__name__} takes {len(self.params)} arguments but "
                              f"{len(args)} were given -- fix: pass one value per parameter")
        bound = dict(zip(self.arg_names, args))
        options = {}
        for name, value in kwargs.items():
            if name not in self.param_index:
                options[name] = value
            elif name in bound:
                raise LaunchError(f"{self.__name__} got two values for parameter {name!r}")
            else:
                bound[name] = value
        if len(bound) < len(self.params):
            for p in self.params[len(args):]:
                if p.name in bound:
                    continue
                if not p.has_default:
                    raise LaunchError(f"{self.__name__}: missing a value for parameter {p.name!r} -- "
                                      f"fix: pass every parameter without a default, positionally "
                                      f"or by name")
                bound[p.name] = p.default
            bound = {name: bound[name] for name in self.arg_names}
        return bound, options

    def specialization(self, bound: dict[str, Any]) -> list[tuple[Any, Any]]:
        """(type string, key) for each parameter, in order.

        A parameter annotated with a scalar type (``n: tl.int64``) takes that type and is never
        turned into a constexpr, as in Triton; ints keep their divisibility key.
        """
        from naiad.language import core

        result = []
        for p in self.params:
            value = bound[p.name]
            if p.is_constexpr:
                value = value.value if isinstance(value, core.constexpr) else value
                result.append(("constexpr", numpy_scalars.plain_value(value)))
                continue
            typed = bool(p.annotation) and not p.annotation.startswith("*")
            try:
                ty, key = specialize(value, specialize_value=not p.do_not_specialize and not typed,
                                     align=not p.do_not_specialize_on_alignment)
                if typed:
                    ty = p.annotation
                    if isinstance(value, int) and not isinstance(value, bool) and \
                            not p.do_not_specialize:
                        key = "D" if value % 16 == 0 and not p.do_not_specialize_on_alignment else ""
            except LaunchError as e:
                raise LaunchError(f"{self.__name__}: argument {p.name!r}: {e}") from None
            result.append((ty, key))
        return result

    # -- launching ----------------------------------------------------------------------------
    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        """``kernel[grid](*args, **kwargs)``: ``grid`` is a tuple of up to 3 ints, or a callable
        taking the bound arguments (a dict, meta-parameters included) and returning one."""
        if self.pre_run_hooks:
            return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)
        return functools.partial(self._native.entry or self._entry or self._make_entry(), grid, False)

    def warmup(self, *args: Any, grid: Any = (1,), **kwargs: Any) -> Any:
        """Compile for these arguments without launching; returns the compiled kernel."""
        return self.run(*args, grid=grid, warmup=True, **kwargs)

    def add_pre_run_hook(self, hook: Callable[..., Any]) -> None:
        """Run ``hook(*args, **kwargs)`` before every launch (e.g. to zero an output)."""
        if not callable(hook):
            raise NaiadError(f"{self.__name__}.add_pre_run_hook: the hook must be callable, "
                             f"not {type(hook).__name__}")
        self.pre_run_hooks.append(hook)

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        if not warmup:
            for hook in self.pre_run_hooks:
                hook(*args, **kwargs)
            return (self._entry or self._make_entry())(grid, True, *args, **kwargs)
        bound, options = self.bind(args, kwargs)
        return self._run_slow(bound, options, grid, warmup, None)

    def _make_entry(self) -> Callable[..., Any]:
        self._plain_entry = _make_entry(self, redirect=False)
        self._entry = _make_entry(self, redirect=True)
        self._native.start(self, self._plain_entry, _MISSING)
        return self._native.entry or self._entry

    def _run_slow(self, bound: dict[str, Any], options: dict[str, Any], grid: Any, warmup: bool,
                  fast_key: tuple | None) -> Any:
        """Select, specialize, compile when needed and launch; remembers the launch under
        ``fast_key`` (when not None) for `run`'s warm path."""
        from naiad import knobs
        from naiad.backends import selection
        from naiad.compiler.cache import env_part
        from naiad.compiler.compiler import ASTSource, compile

        given = options
        options = dict(options)
        if self.debug is not None:
            options.setdefault("debug", self.debug)
        backend = selection.select(bound.values())
        driver = selection.driver_for(backend)
        target = driver.get_current_target()
        specialization = self.specialization(bound)
        snapshot = _dependency_snapshot(self) if fast_key is not None else None
        key = repr((backend.name, target, self.cache_key, specialization, sorted(options.items()),
                    "debug" in options or knobs.runtime.debug,
                    env_part(backend.compiler)))     # a str: its hash is kept
        kernel = self.cache.get(key)
        if kernel is None:
            self._check_options(options, backend.name, target)
            signature, constexprs, attrs = describe(self, specialization)
            kernel = compile(ASTSource(self, signature, constexprs, attrs), target=target, options=options)
            self.cache[key] = kernel
        if warmup:
            return kernel
        called = callable(grid)
        if called:
            grid = grid(dict(bound, **options))
        grid = launch_checks.grid3(self.__name__, grid, driver.max_grid, driver.max_programs, called)
        args = list(bound.values())
        launch_checks.check_writes(self.__name__, self.arg_names, args, kernel.written_args)
        kernel.launch(driver, grid, numpy_scalars.plain(args))
        if fast_key is not None:
            if len(self._fast) >= _FAST_ENTRIES:
                self._fast.clear()
            prepared = self._fast[fast_key] = _Prepared(kernel, driver, target, key, snapshot)
            self._native.offer(prepared, bound, given, _native_state_guards)
        return kernel

    def _check_options(self, options: dict[str, Any], backend: str, target: Any) -> None:
        """Refuse a keyword that is neither a parameter nor an option of the backend (a
        misspelled constexpr would otherwise run with its default), naming the closest name."""
        from naiad.compiler.compiler import make_backend

        known = make_backend(target).option_names()
        unknown = [name for name in options if name not in known]
        if not unknown:
            return
        name = unknown[0]
        close = difflib.get_close_matches(name, self.arg_names, n=1) or \
            difflib.get_close_matches(name, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise LaunchError(f"{self.__name__}: unknown keyword argument {name!r}: it is neither a "
                          f"parameter of the kernel ({', '.join(self.arg_names)}) nor an option "
                          f"of the {backend} backend -- fix: {hint}pass parameters by their "
                          f"names; the backend's options are {', '.join(sorted(known))}")

_FAST_ENTRIES = 256


class _Prepared:
    """A warm launch: the compiled kernel and driver that a fast key maps to, valid while the
    kernel is still in the JITFunction's cache, the driver's target is the same and the globals
    the kernel depends on are the same objects."""

    __slots__ = ("kernel", "driver", "target", "key", "snapshot", "addresses", "direct",
                 "max_grid", "max_programs", "variant", "unbuilt")

    def __init__(self, kernel: Any, driver: Any, target: Any, key: str, snapshot: tuple):
        self.kernel, self.driver, self.target, self.key, self.snapshot = \
            kernel, driver, target, key, snapshot
        self.max_grid, self.max_programs = driver.max_grid, driver.max_programs
        #: Its native variant (`naiad.runtime.native_variants`), if it has one, and whether the
        #: native entry's body lacks it (the Python entry then has it built in again).
        self.variant, self.unbuilt = None, False
        launcher = kernel.launcher
        #: Whether the launcher takes numpy arrays' addresses (ints) in their place.
        self.addresses = bool(getattr(launcher, "accepts_addresses", False))
        #: The launcher's own hook-less launch, ``direct(grid, args)``, if it has one (an
        #: optional part of the launcher contract: `CPULauncher.direct`).
        make_direct = getattr(launcher, "direct", None)
        self.direct = make_direct(kernel.module, kernel.function) if make_direct else None

    def valid(self, fn: "JITFunction") -> bool:
        target = self.driver.get_current_target()
        if fn.cache.get(self.key) is not self.kernel or (target is not self.target and
                                                         target != self.target):
            return False
        src, debug, noinline, version, values, nested = self.snapshot
        if fn.src is not src or fn.debug is not debug or fn.noinline is not noinline or \
                fn.version is not version:
            return False
        return not (values or nested) or _dependencies_unchanged(fn, self.snapshot)


def _dependency_snapshot(fn: "JITFunction") -> tuple:
    """What `dependencies` reads, as objects: the source, every referenced global's value and
    parameter default, and the same of each ``@jit`` function among them (recursively)."""
    values = tuple(resolve(fn, chain) for chain in fn.referenced_globals())
    defaults = tuple(p.default for p in fn.params if p.has_default)
    nested = tuple(_dependency_snapshot(v) for v in values + defaults
                   if isinstance(v, KernelFunction) and v is not fn)
    return (fn.src, fn.debug, fn.noinline, fn.version, values, nested)


def _dependencies_unchanged(fn: "JITFunction", snapshot: tuple) -> bool:
    src, debug, noinline, version, values, nested = snapshot
    if fn.src is not src or fn.debug is not debug or fn.noinline is not noinline or \
            fn.version is not version:
        return False
    references = fn.referenced_globals()
    if len(references) != len(values):
        return False
    for chain, value in zip(references, values):
        if resolve(fn, chain) is not value:
            return False
    if nested:
        jits = [v for v in values + tuple(p.default for p in fn.params if p.has_default)
                if isinstance(v, KernelFunction) and v is not fn]
        return all(_dependencies_unchanged(v, snap) for v, snap in zip(jits, nested))
    return True


def _constexpr_token(value: Any) -> tuple:
    inner = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
    return (type(value), type(inner), inner)


def _make_entry(fn: "JITFunction", redirect: bool) -> Callable[..., Any]:
    """``fn``'s launch entry, generated once from its parameters (as Triton's binder is):
    ``entry(grid, hooks_done, *args, **kwargs)`` launches a prepared kernel when the arguments
    map to one, else takes the full path (`JITFunction._run_slow`), which prepares it.
    ``hooks_done`` (from `run`) says the pre-run hooks ran; otherwise they run here, with the
    arguments as bound.  With ``redirect``, a launch without hooks goes to the native entry once
    there is one (`naiad.runtime.native_variants`; ``fn[grid]`` made before it was built still
    holds this entry), an absent positional argument passed on as the `_MISSING` it stands for;
    the native entry falls back to the entry made without ``redirect``.

    The parameters are positional-only, so that Python's own binding never fails: keywords
    arrive with the options and are moved to their parameters here; a missing, extra or
    doubled argument goes to `JITFunction.bind`, which says what is wrong.  The key is at least
    as fine as everything the full path derives from a launch -- each argument's `_token` (what
    `specialize` and backend selection read from it; a constexpr parameter's value), the
    options, the backend selection state and the debug knob.  A numpy array's or torch
    tensor's address is read once, for key and launcher; a CUDA tensor's key holds its device
    index, so a launcher given addresses knows the tensors are where the first launch found
    them.  The generated code's own names start with ``_naiad_``; a kernel
    with such a parameter name always takes the full path.
    """
    if _state is None:
        _load_state()
    if any(p.name.startswith("_naiad_") for p in fn.params):
        def full(grid: Any, hooks_done: bool, *args: Any, **kwargs: Any) -> Any:
            if not hooks_done:
                for hook in fn.pre_run_hooks:
                    hook(*args, **kwargs)
            bound, options = fn.bind(args, kwargs)
            return fn._run_slow(bound, options, grid, False, None)
        return full
    from naiad import knobs
    from naiad.backends.driver import StaleLaunch
    from naiad.runtime.torch_modes import mode_switches

    modes_on, modes_off = mode_switches()

    scope: dict[str, Any] = {
        "_naiad_ndarray": _ndarray, "_naiad_address": _numpy_address, "_naiad_token": _token,
        "_naiad_NO_TOKEN": _NO_TOKEN, "_naiad_constexpr_token": _constexpr_token,
        "_naiad_state": _state, "_naiad_fast": fn._fast, "_naiad_fn": fn, "_naiad_name": fn.__name__,
        "_naiad_grid3": launch_checks.grid3, "_naiad_NumpyScalar": _NumpyScalarToken,
        "_naiad_plain_value": numpy_scalars.plain_value, "_naiad_plain": numpy_scalars.plain,
        "_naiad_hooked": knobs.runtime.launch_hooked, "_naiad_M": _MISSING,
        "_naiad_misfit": _misfit, "_naiad_NO_KEYWORDS": types.MappingProxyType({}),
        # builtins under names no parameter can shadow (a parameter may be called `type`)
        "_naiad_type": type, "_naiad_tuple": tuple,
        "_naiad_callable": callable, "_naiad_dict": dict, "_naiad_Tensor": _torch_tensor_type(),
        "_naiad_modes_on": modes_on, "_naiad_modes_off": modes_off,
        "_naiad_StaleLaunch": StaleLaunch}
    names = [p.name for p in fn.params]
    objects = ", ".join(names)
    arguments = "".join(f"{n}, " for n in names)          # a tuple's or a call's items, maybe none
    bound = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
    lines = []
    if redirect:
        lines += ["    if _naiad_hooks_done is False and _naiad_fn._native.entry is not None:",
                  f"        return _naiad_fn._native.entry(_naiad_grid, False, {arguments}*_naiad_extra, "
                  f"**_naiad_options)"]
    lines += ["    _naiad_kw = _naiad_NO_KEYWORDS",
             "    if _naiad_options:                     # keywords: to their parameters",
             "        _naiad_kw = {}"]
    for n in names:
        lines += [f"        if {n!r} in _naiad_options:",
                  f"            _naiad_kw[{n!r}] = _naiad_options.pop({n!r})",
                  f"            if {n} is not _naiad_M:",
                  f"                return _naiad_misfit(_naiad_fn, ({arguments}), _naiad_extra, _naiad_kw, "
                  f"{n!r})",
                  f"            {n} = _naiad_kw[{n!r}]"]
    required = [p.name for p in fn.params if not p.has_default]
    missing = " or ".join([f"{n} is _naiad_M" for n in required] + ["_naiad_extra"])
    lines += [f"    if {missing}:",
              f"        return _naiad_misfit(_naiad_fn, ({arguments}), _naiad_extra, _naiad_kw)"]
    for p in fn.params:
        if p.has_default:
            scope[f"_naiad_default{p.num}"] = p.default
            lines += [f"    if {p.name} is _naiad_M:", f"        {p.name} = _naiad_default{p.num}"]
    lines += ["    if _naiad_fn.pre_run_hooks and not _naiad_hooks_done:",
              "        for _naiad_hook in _naiad_fn.pre_run_hooks:",
              f"            _naiad_hook({arguments}**_naiad_options)"]
    for p in fn.params:
        name, token, value = p.name, f"_naiad_t{p.num}", f"_naiad_v{p.num}"
        if p.is_constexpr:       # an int's token is shorter than `_constexpr_token`'s: no clash
            lines += [f"    {token} = (int, {name}) if _naiad_type({name}) is int else "
                      f"_naiad_constexpr_token({name})", f"    {value} = {name}"]
            continue
        lines += [f"    if _naiad_type({name}) is _naiad_ndarray:",
                  f"        {value} = _naiad_address({name})",
                  f"        {token} = ({name}.dtype, {value} % 16 == 0, {name}.flags.writeable)",
                  f"    elif _naiad_type({name}) is _naiad_Tensor:     # torch: address, device by index",
                  "        if _naiad_modes_on():                  # read outside them (`torch_modes`)",
                  "            with _naiad_modes_off():",
                  *[f"    {line}" for line in _tensor_reads(name, value, token)],
                  "        else:",
                  *_tensor_reads(name, value, token),
                  f"    elif _naiad_type({name}) is int and 1 < {name} <= {_INT32[1]}:     # `_token`'s rule",
                  f"        {value} = {name}",
                  f"        {token} = (32, {name} % 16 == 0)",
                  "    else:",
                  f"        {value} = {name}",
                  f"        {token} = _naiad_token({name})",
                  f"        if {token} is _naiad_NO_TOKEN:",
                  f"            return _naiad_fn._run_slow({bound}, _naiad_options, _naiad_grid, "
                  f"False, None)",
                  f"        if _naiad_type({token}) is _naiad_NumpyScalar:     # launched as its value",
                  f"            {value} = _naiad_plain_value({name})"]
    tokens = "".join(f"_naiad_t{p.num}, " for p in fn.params)
    values = ", ".join(f"_naiad_v{p.num}" for p in fn.params)
    lines += [
        f"    key = (({tokens}), _naiad_tuple(_naiad_options.items()) if _naiad_options else (), "
        f"_naiad_state())",
        "    try:",
        "        prepared = _naiad_fast.get(key)",
        "    except TypeError:                      # an unhashable value (a dtype, a constexpr)",
        "        key = prepared = None",
        "    if prepared is None or not prepared.valid(_naiad_fn):",
        f"        return _naiad_fn._run_slow({bound}, _naiad_options, _naiad_grid, False, key)",
        "    if prepared.unbuilt:",
        "        _naiad_fn._native.adopt(prepared)",
        "    if _naiad_callable(_naiad_grid):",
        f"        _naiad_grid = _naiad_grid3(_naiad_name, _naiad_grid(_naiad_dict({bound}, "
        f"**_naiad_options)), prepared.max_grid, prepared.max_programs, True)",
        "    else:",
        "        _naiad_grid = _naiad_grid3(_naiad_name, _naiad_grid, prepared.max_grid, "
        "prepared.max_programs)",
        "    if prepared.direct is not None and not _naiad_hooked():",
        "        try:",
        f"            prepared.direct(_naiad_grid, [{values}])",
        "        except _naiad_StaleLaunch:            # e.g. another device is current now",
        f"            return _naiad_fn._run_slow({bound}, _naiad_options, _naiad_grid, False, key)",
        # A launcher gets the arrays' addresses in their place only with no launch hook set
        # (with `direct`, such a launch took the branch above): a hook's launch metadata --
        # a kernel's launch_metadata function -- reads the arrays themselves.
        "    elif prepared.addresses and prepared.direct is None and not _naiad_hooked():",
        f"        prepared.kernel.launch(prepared.driver, _naiad_grid, [{values}])",
        "    else:",
        f"        prepared.kernel.launch(prepared.driver, _naiad_grid, _naiad_plain([{objects}]))",
        "    return prepared.kernel"]
    params = ", ".join(["_naiad_grid", "_naiad_hooks_done"] + [f"{n}=_naiad_M" for n in names]
                       + ["/", "*_naiad_extra", "**_naiad_options"])
    source = f"def {fn.__name__}({params}):\n" + "\n".join(lines) + "\n"
    exec(compile(source, f"<naiad launch {fn.__name__}>", "exec"), scope)
    return scope[fn.__name__]


def _tensor_reads(name: str, value: str, token: str) -> list[str]:
    """A launch entry's lines that read torch tensor ``name``'s address and token."""
    return [f"            {value} = {name}.data_ptr()",
            f"            {token} = ({name}.dtype, {name}.get_device() if {name}.is_cuda else "
            f"{name}.device.type, {value} % 16 == 0)"]


_MISSING = object()

class _NoTensor:
    """Stands for torch.Tensor in a launch entry made before torch was imported."""


def _torch_tensor_type() -> type:
    """torch.Tensor when torch is imported (a launch entry reads a tensor's address, dtype and
    device index inline, and hands the address to the launcher), else a class nothing is."""
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", _NoTensor) if torch is not None else _NoTensor


def _misfit(fn: "JITFunction", values: tuple, extra: tuple, keywords: Any,
            doubled: str | None = None) -> None:
    """Arguments that do not fit ``fn``'s parameters (``doubled``: one given positionally and
    by keyword): `JITFunction.bind` says how."""
    positional = [v for n, v in zip(fn.arg_names, values)
                  if v is not _MISSING and (n not in keywords or n == doubled)]
    fn.bind(tuple(positional) + tuple(extra), keywords)
    raise LaunchError(f"{fn.__name__}: the arguments do not fit its parameters "
                      f"({', '.join(fn.arg_names)})")        # pragma: no cover  (bind raised)


_state: Callable[[], tuple] | None = None
#: The knobs a launch's key reads besides the backend selection's (`_load_state`).
_STATE_KNOBS: tuple = ()


def _native_state_guards() -> list[tuple] | None:
    """Guards holding while the key's state token and the launch hooks stay as they are now;
    None when they cannot be written as guards (launch hooks set, an unusual os.environ)."""
    from naiad import knobs
    from naiad.backends import selection

    state, hooks = selection.state_guards(*_STATE_KNOBS), knobs.runtime.launch_hook_guards()
    return None if state is None or hooks is None else state + hooks


def _load_state() -> None:
    global _state, _ndarray, _numpy_address, _STATE_KNOBS
    from naiad import knobs
    from naiad.backends import selection
    from naiad.runtime.array_address import numpy_address as _numpy_address

    try:
        from numpy import ndarray as _ndarray
    except ImportError:        # pragma: no cover
        _ndarray = None
    else:
        _ARRAY_KINDS[_ndarray] = _numpy_token

    _STATE_KNOBS = ((knobs.runtime, ("debug", "native_launch")), (knobs.language, ("default_fp_fusion",)))
    _state = selection.state_reader(*_STATE_KNOBS)


_NO_TOKEN = object()


def _token(value: Any) -> Any:
    """What specialization and backend selection can see in one argument, hashable (a dtype or
    constexpr value that is not hashable fails the lookup, which then takes the full path)."""
    kind = type(value)
    if kind is int:
        if value == 1:
            return 1
        if _INT32[0] <= value <= _INT32[1]:
            return (32, value % 16 == 0)
        return (64, value % 16 == 0) if _INT64[0] <= value <= _INT64[1] else (kind, value)
    if kind is float or kind is bool or value is None:
        return kind
    array = _ARRAY_KINDS.get(kind)
    if array is not None:
        return array(value)
    if numpy_scalars.is_numpy_scalar(value):       # before the float and array rules below
        _ARRAY_KINDS[kind] = _numpy_scalar_token
        return _numpy_scalar_token(value)
    from naiad.language import core, dtypes

    if isinstance(value, core.constexpr):
        return (core.constexpr, type(value.value), value.value)
    if kind is tuple or (isinstance(value, tuple) and hasattr(value, "_fields")):
        tokens = tuple(_token(v) for v in value)
        if _NO_TOKEN in tokens:
            return _NO_TOKEN
        held = any(type(t) is _NumpyScalarToken for t in tokens)
        return _NumpyScalarToken((kind, tokens)) if held else (kind, tokens)
    if isinstance(value, (dtypes.dtype, KernelFunction)):
        return (kind, value)
    if isinstance(value, (int, float)):          # int and float subclasses: by value
        return (kind, value)
    if kind.__name__ == "Tensor" and kind.__module__ == "torch":
        _ARRAY_KINDS[kind] = _torch_token          # the next ones take the short way
        return _torch_token(value)
    if hasattr(value, "data_ptr") or hasattr(value, "__array_interface__"):
        from naiad.backends.selection import device_type_of

        pointer = data_pointer(value)
        if pointer is None:
            return _NO_TOKEN
        return (kind, getattr(value, "dtype", None), device_type_of(value), pointer % 16 == 0,
                launch_checks.is_read_only(value))
    return _NO_TOKEN                  # tensor descriptors, DLPack-only arrays, unknown objects


class _NumpyScalarToken(tuple):
    """The token of a numpy scalar (or a tuple holding one): its specialization, marked so
    that the launch entry hands launchers the Python value it holds."""


def _numpy_scalar_token(value: Any) -> Any:
    try:
        return _NumpyScalarToken(specialize(value))
    except LaunchError:            # a dtype no kernel takes: the full path says so
        return _NO_TOKEN


def _torch_token(value: Any) -> Any:
    """A torch tensor's `_token` (what the general rule reads from it), without its lookups."""
    return (type(value), value.dtype, value.device.type, value.data_ptr() % 16 == 0)


def _numpy_token(value: Any) -> Any:
    return (value.dtype, _numpy_address(value) % 16 == 0)


_ARRAY_KINDS: dict[type, Callable[[Any], Any]] = {}
_ndarray: Any = None          # numpy.ndarray, set by `_load_state` (``import naiad`` loads no numpy)
_numpy_address: Callable[[Any], int] | None = None      # set by `_load_state`, as _ndarray


def jit(fn: Callable | None = None, **options: Any) -> Any:
    """Decorator: ``@naiad.jit`` or ``@naiad.jit(do_not_specialize=[...], noinline=True, debug=True)``."""
    if fn is not None:
        return JITFunction(fn, **options)
    return lambda f: JITFunction(f, **options)
