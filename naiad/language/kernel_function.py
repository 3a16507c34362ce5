"""The kernel function: what the compiler reads of a function written in Naiad's language.

A `KernelFunction` keeps the function's source (found once per file, `_source_lines`) and its
parameters (`KernelParam`), and its `cache_key` covers the source and everything it depends on:
the functions it calls and the constexpr globals it reads (`dependencies`).  The launcher
(`naiad.runtime.jit.JITFunction`) builds on it; the language's library functions (`library`)
are defined with it, below the runtime and the compiler, which both read them.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import linecache
import re
import textwrap
from typing import Any, Callable, Iterable

from naiad.errors import KernelDefinitionError, NaiadError

_DEF = re.compile(r"^def\s+\w+\s*\(", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class KernelParam:
    """One parameter of a kernel, as written in its ``def``."""

    num: int
    name: str
    annotation: str          # "" or a normalized type string ("constexpr", "fp32", "*fp16", ...)
    default: Any             # inspect.Parameter.empty when there is none
    do_not_specialize: bool
    do_not_specialize_on_alignment: bool

    @property
    def is_constexpr(self) -> bool:
        return "constexpr" in self.annotation

    @property
    def has_default(self) -> bool:
        return self.default is not inspect.Parameter.empty


def _annotation_text(annotation: Any) -> str:
    """Normalize ``tl.constexpr``, ``tl.float32``, ``"*fp32"`` and friends to a type string.

    String annotations (``from __future__ import annotations``) are read by name; Python's own
    types (``int``, ``float``, ``bool``) say nothing Triton uses and count as no annotation.
    """
    from naiad.language import dtypes

    if annotation is inspect.Parameter.empty or annotation in (int, float, bool):
        return ""
    if isinstance(annotation, str):
        text = annotation.strip().strip("'\"")
        if "constexpr" in text:
            return "constexpr"
        name = text.rsplit(".", 1)[-1]
        if name in ("int", "float", "bool", ""):
            return ""
        if hasattr(dtypes, name) and isinstance(getattr(dtypes, name), dtypes.dtype):
            return dtypes.ty_to_str(getattr(dtypes, name))
        return _type_string_or_nothing(text)
    if getattr(annotation, "__name__", None) == "constexpr" or type(annotation).__name__ == "constexpr":
        return "constexpr"
    if isinstance(annotation, dtypes.dtype):
        return dtypes.ty_to_str(annotation)
    return _type_string_or_nothing(str(annotation))


def _type_string_or_nothing(text: str) -> str:
    """``text`` if it is a type string ("i64", "*fp16"); "" for other annotations (a
    namedtuple class, ``torch.Tensor``), which Triton ignores."""
    from naiad.language import dtypes

    try:
        dtypes.str_to_ty(text)
    except ValueError:
        return ""
    return text


def _refuse_variadic(fn: "KernelFunction", signature: inspect.Signature) -> None:
    """Kernels take named parameters only: a launch binds each to one value, and the compiled
    kernel has one argument (or one tuple) per parameter."""
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            stars = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise KernelDefinitionError(
                f"kernel '{fn.__name__}' at {fn.filename}:{fn.def_line}: parameter "
                f"'{stars}{p.name}' -- kernels and the functions they call take no *args or "
                f"**kwargs -- fix: name each parameter (pass several values as one tuple "
                f"parameter)")


class KernelFunction:
    """A function written in Naiad's language, as the compiler reads it: its source, its
    parameters and the key of everything it compiles from.  `naiad.runtime.jit.JITFunction`
    adds launching; the language's own library functions are this alone (`library`)."""

    def __init__(self, fn: Callable, *, version: Any = None,
                 do_not_specialize: Iterable[int | str] | None = None,
                 do_not_specialize_on_alignment: Iterable[int | str] | None = None,
                 debug: bool | None = None, noinline: bool | None = None,
                 repr: Callable | None = None, launch_metadata: Callable | None = None):
        if not inspect.isfunction(inspect.unwrap(fn)):
            raise KernelDefinitionError(
                f"naiad.jit decorates a Python function, not {type(fn).__name__} {fn!r} -- fix: "
                f"write @naiad.jit (or @naiad.jit(...options)) on the line above a def")
        self.fn = fn
        self.module = fn.__module__
        self.version = version
        self.debug = debug
        self.noinline = bool(noinline)
        self._repr = repr
        #: Triton's record of the global values its compiles read, which its clients save and
        #: restore around pickling a kernel (torch's Inductor); Naiad keys a kernel by those
        #: values instead (`cache_key`), so nothing is recorded here.
        self.used_global_vals: dict = {}
        if launch_metadata is not None and not callable(launch_metadata):
            raise KernelDefinitionError(
                f"kernel '{fn.__name__}': launch_metadata must be a function fn(grid, metadata, "
                f"args) returning a dict (e.g. {{'flops': ..., 'bytes': ...}}), not "
                f"{type(launch_metadata).__name__}")
        #: Triton's ``launch_metadata``: what launch hooks and the profiler learn of a launch
        #: beyond its name and grid (`naiad.compiler.compiler.CompiledKernel.launch_metadata`).
        self.launch_metadata = launch_metadata
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__globals__ = fn.__globals__
        try:
            lines, self.starting_line_number = _source_lines(fn)
            self._src = textwrap.dedent("".join(lines))
        except (OSError, TypeError):
            raise NaiadError(f"@naiad.jit needs the source code of {fn.__qualname__}, and Python "
                             f"cannot find it -- fix: define kernels in a .py file (not in `python -c` "
                             f"or the interactive prompt)") from None
        start = _DEF.search(self._src)
        before = self._src[:start.start()] if start else ""
        self._src = self._src[start.start():] if start else self._src
        #: `starting_line_number` is the first line of the decorators, as Triton reports it;
        #: `def_line` is the ``def``.
        self.def_line = self.starting_line_number + before.count("\n")
        self.filename = inspect.getsourcefile(fn) or "<unknown>"
        signature = inspect.signature(fn)
        self.signature = signature
        _refuse_variadic(self, signature)
        no_spec = set(do_not_specialize or ())
        no_align = set(do_not_specialize_on_alignment or ())
        self.params = [
            KernelParam(i, p.name, _annotation_text(p.annotation), p.default,
                        i in no_spec or p.name in no_spec, i in no_align or p.name in no_align)
            for i, p in enumerate(signature.parameters.values())]
        self.arg_names = [p.name for p in self.params]
        self.param_index = {name: i for i, name in enumerate(self.arg_names)}
        self.constexpr_indices = [p.num for p in self.params if p.is_constexpr]
        self._cache_key: tuple | None = None
        self._references: list[tuple[str, ...]] | None = None

    # -- source ---------------------------------------------------------------------------
    @property
    def src(self) -> str:
        return self._src

    def _unsafe_update_src(self, new_src: str) -> None:
        """Replace the source (Triton's test suite edits kernels this way)."""
        self._src = new_src
        self._cache_key = None
        self._references = None

    def parse(self) -> ast.Module:
        tree = ast.parse(self._src)
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
            raise NaiadError(f"the source of {self.__name__} must be a single function definition")
        return tree

    # -- cache key --------------------------------------------------------------------------
    @property
    def cache_key(self) -> str:
        """sha256 of the source, the def line, and every dependency's key or value.

        Dependencies (called ``@jit`` functions, constexpr globals) are looked up again on each
        access, so rebinding a global or editing a called function's source gives a new key.
        """
        parts = tuple(dependencies(self))
        if self._cache_key is None or self._cache_key[0] != parts:
            h = hashlib.sha256(self._src.encode())
            h.update(str(self.def_line).encode())
            h.update(repr((self.noinline, self.debug, self.version)).encode())
            for name, part in parts:
                h.update(f"|{name}={part}".encode())
            self._cache_key = (parts, h.hexdigest())
        return self._cache_key[1]

    def referenced_globals(self) -> list[tuple[str, ...]]:
        """Global names and attribute chains (``mod.helper``) the source mentions that can change
        what it compiles to (parsed once).  Chains into Naiad's own modules (``tl.sum``) are left
        out: they are covered by Naiad's version, and skipping them keeps launches cheap."""
        if self._references is None:
            tree = self.parse()
            local = set(self.arg_names) | {n.id for n in ast.walk(tree)
                                           if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            chains = set()
            for node in ast.walk(tree):
                chain = _attribute_chain(node)
                if chain is not None and chain[0] not in local and \
                        not _is_naiad_module(self.__globals__.get(chain[0])):
                    chains.add(chain)
            self._references = sorted(chains)
        return self._references

    # -- calling ------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NaiadError(f"{self.__name__} is a kernel: launch it with {self.__name__}[grid](...), "
                         f"or call it from inside another @naiad.jit function")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.module}:{self.__qualname__})"

    def repr(self, specialization: Any = None) -> str:
        """The kernel's name in profiles and hooks: the ``repr=`` callable given to ``@jit``
        (called with the specialization, as Triton does), else the function's name.  Triton's
        clients call ``fn.repr(...)`` and may replace it on the instance."""
        return self._repr(specialization) if self._repr is not None else self.__name__



#: filename -> (its lines as linecache holds them, {first line of a def (decorators
#: included): last line}), from one parse of the file.
_DEFINITIONS: dict[str, tuple[list[str], dict[int, int]]] = {}


def _source_lines(fn: Callable[..., Any]) -> tuple[list[str], int]:
    """``inspect.getsourcelines(fn)``, from one parse of ``fn``'s file for all the functions
    in it: inspect tokenizes the file again for each, most of the time of importing a module of
    kernels (naiad.language's 49 functions: ~55 ms of ~80)."""
    fn = inspect.unwrap(fn)
    code = fn.__code__
    lines = linecache.getlines(code.co_filename, fn.__globals__)
    known = _DEFINITIONS.get(code.co_filename)
    if known is None or known[0] is not lines:
        spans: dict[int, int] = {}
        try:
            tree = ast.parse("".join(lines)) if lines else None
        except (SyntaxError, ValueError):
            tree = None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                spans[first] = node.end_lineno or node.lineno
        known = _DEFINITIONS[code.co_filename] = (lines, spans)
    last = known[1].get(code.co_firstlineno)
    if last is None:                       # not a def of this file as it stands: ask inspect
        return inspect.getsourcelines(fn)
    return lines[code.co_firstlineno - 1:last], code.co_firstlineno


def _attribute_chain(node: ast.AST) -> tuple[str, ...] | None:
    """``a`` -> ("a",), ``a.b.c`` -> ("a", "b", "c"); None for anything else."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return (node.id, *reversed(names))


def _is_naiad_module(value: Any) -> bool:
    return type(value).__name__ == "module" and (value.__name__ == "naiad" or
                                                 value.__name__.startswith("naiad."))


def resolve(fn: KernelFunction, chain: tuple[str, ...]) -> Any:
    """The value a name or attribute chain of ``fn``'s source stands for now (None if unbound)."""
    value = fn.__globals__.get(chain[0])
    for name in chain[1:]:
        if value is None or type(value).__name__ != "module":
            return value
        value = getattr(value, name, None)
    return value


def dependencies(fn: KernelFunction) -> list[tuple[str, str]]:
    """(name, key) for every ``@jit`` function and constexpr global the source refers to,
    directly or through a module attribute (``helpers.combine``), and ``@jit`` defaults.

    Naiad's own language functions are covered by Naiad's version; plain Python values are not
    allowed inside kernels unless constexpr, so they need no key.
    """
    from naiad.language import core     # (here: the language's modules import this one)

    found: dict[str, str] = {}
    candidates = [(".".join(chain), resolve(fn, chain)) for chain in fn.referenced_globals()]
    candidates += [(f"default:{p.name}", p.default) for p in fn.params if p.has_default]
    for name, value in candidates:
        if isinstance(value, KernelFunction) and value is not fn:
            if not value.module.startswith("naiad.language"):
                found[name] = value.cache_key
        elif isinstance(value, core.constexpr):
            found[name] = repr(value.value)
        elif isinstance(value, core.ConstexprFunction) and not value.fn.__module__.startswith("naiad."):
            found[name] = _source_key(value)
    return sorted(found.items())


def _source_key(function: Any) -> str:
    """sha256 of a constexpr function's source (its name where the source cannot be read: a
    function defined in a REPL)."""
    try:
        text = function.src
    except (OSError, TypeError):
        text = function.fn.__qualname__
    return hashlib.sha256(text.encode()).hexdigest()


def library(fn: Callable) -> KernelFunction:
    """Decorator of the language's own functions written in the language (``tl.max``,
    ``tl.rand``, ...): kernels call them; nothing launches them."""
    return KernelFunction(fn)
