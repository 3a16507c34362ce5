"""Naiad's shared TTIR passes, by name, and the pipeline every backend's make_ttir runs.

Each pass is an xDSL `ModulePass` in its own module and mutates a `ModuleOp` in place.  The
registry maps names ("inline", "canonicalize", ...) to a function of the module, so a backend
or a plugin can run passes by name, add its own with `register_pass`, or build its own
pipeline from `TTIR_PIPELINE`.  Pass plugins (`naiad.passes.plugins`) are loaded on the first
lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from naiad.errors import NaiadError
from naiad.passes.canonicalize import Canonicalize
from naiad.passes.combine import Combine
from naiad.passes.cse import CommonSubexpressionElimination
from naiad.passes.dce import DeadCodeElimination
from naiad.passes.inline import Inline
from naiad.passes.licm import LoopInvariantCodeMotion
from naiad.passes.loop_pointers import LoopCarriedPointers
from naiad.passes.loop_unroll import LoopUnroll
from naiad.passes.reorder_broadcast import ReorderBroadcast
from naiad.passes.symbol_dce import SymbolDCE

PassFn = Callable[[ModuleOp], object]


class PassError(NaiadError, KeyError):
    """An unknown pass name, or a name registered twice."""

    def __str__(self) -> str:
        return str(self.args[0])


def _as_function(pass_: PassFn | ModulePass) -> PassFn:
    """An xDSL pass as a function of the module, with a context made at its first run and kept
    (making one loads every dialect: a few ms per pass and compile)."""
    if not isinstance(pass_, ModulePass):
        return pass_
    context: list[Any] = []

    def run(module: Any) -> Any:
        if not context:
            from naiad.ir import make_context

            context.append(make_context())
        return pass_.apply(context[0], module)
    return run


_REGISTRY: dict[str, PassFn] = {}


def register_pass(name: str, pass_: PassFn | ModulePass, *, replace: bool = False) -> None:
    """Make `pass_` (a function of the module, or an xDSL `ModulePass`) runnable as `name`.
    A name already taken is an error unless `replace` is true."""
    if name in _REGISTRY and not replace:
        raise PassError(f"a pass named {name!r} is already registered; "
                        "pass replace=True to override it")
    _REGISTRY[name] = _as_function(pass_)


def get_pass(name: str) -> PassFn:
    from naiad.passes.plugins import load_pass_plugins

    load_pass_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PassError(f"no pass named {name!r}; known passes: "
                        f"{', '.join(sorted(_REGISTRY))}") from None


def registered_passes() -> list[str]:
    from naiad.passes.plugins import load_pass_plugins

    load_pass_plugins()
    return sorted(_REGISTRY)


for _pass in (Inline(), Canonicalize(), Combine(), ReorderBroadcast(),
              CommonSubexpressionElimination(), LoopInvariantCodeMotion(), SymbolDCE(),
              LoopUnroll(), DeadCodeElimination()):
    register_pass(_pass.name, _pass)
# Not in TTIR_PIPELINE: only a backend that keeps loop-carried tensors in memory wants it.
register_pass(LoopCarriedPointers.name, LoopCarriedPointers())

TTIR_PIPELINE: tuple[str, ...] = (
    "inline", "canonicalize", "combine", "reorder-broadcast", "cse", "licm",
    "symbol-dce", "loop-unroll", "canonicalize", "cse", "dce",
)
"""Triton's make_ttir order (NVIDIA's, with AMD's ``triton_licm`` after CSE): inline,
canonicalize, combine, reorder-broadcast, CSE, LICM, symbol DCE, loop unroll; then, because
unrolling copies bodies with fresh constants and index arithmetic, one more canonicalize, CSE
and DCE."""


def run_passes(module: ModuleOp, names: Iterable[str]) -> ModuleOp:
    """Run the named passes on `module` in order; return it."""
    for name in names:
        get_pass(name)(module)
    return module


def run_ttir_pipeline(module: ModuleOp) -> ModuleOp:
    """Optimize a TTIR module in place with `TTIR_PIPELINE` and verify the result."""
    run_passes(module, TTIR_PIPELINE)
    module.verify()
    return module


__all__ = [
    "TTIR_PIPELINE",
    "PassError",
    "get_pass",
    "register_pass",
    "registered_passes",
    "run_passes",
    "run_ttir_pipeline",
]
