"""Helpers of the pass tests: TTIR text in, facts about the module out.

Tests state what a pass must achieve (which ops remain, how many, which constant a value
folds to), never a whole printed module, so they survive harmless changes of op order or
SSA names.
"""

from __future__ import annotations

import contextlib
import textwrap
from typing import Any, Callable, Iterator

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from naiad import knobs
from naiad.ir import parse_module
from naiad.passes.constants import constant_values


def module(args: str, body: str, results: str = "") -> ModuleOp:
    """A module of one public kernel ``@k(args) -> (results)`` whose body is `body` (which
    ends with its own ``tt.return``)."""
    ops = textwrap.indent(textwrap.dedent(body).strip(), " " * 4)
    signature = f"({args})" + (f" -> ({results})" if results else "")
    return parse_module(f"builtin.module {{\n  tt.func public @k{signature} {{\n{ops}\n  }}\n}}")


def ops(mod: Operation, name: str) -> list[Operation]:
    return [op for op in mod.walk() if op.name == name]


def count(mod: Operation, name: str) -> int:
    return len(ops(mod, name))


def op_count(mod: Operation) -> int:
    """Every op but the module itself."""
    return sum(1 for _ in mod.walk()) - 1


def returned(mod: Operation, index: int = 0) -> SSAValue:
    """The `index`-th value the kernel returns."""
    return ops(mod, "tt.return")[0].operands[index]


def returned_constant(mod: Operation, index: int = 0):
    """The constant the kernel returns at `index`: a number for a scalar or a splat, a tuple
    for another dense tensor; None when it is not a constant."""
    values = constant_values(returned(mod, index))
    if values is None:
        return None
    return values[0] if len(values) == 1 else values


@contextlib.contextmanager
def after_ttir_stage(name: str, transform: Callable[[Any], None]) -> Iterator[None]:
    """Inside the block, every kernel compiled goes through ``transform(module)`` right after
    its backend's ttir stage (a stages-inspection hook; ``name`` is its part of the cache key, so
    kernels compiled without it are not reused)."""
    def inspect(*args: Any) -> Any:
        if not args:
            return name, "1"
        stages = args[1]
        ttir = stages["ttir"]

        def ttir_then_transform(module: Any, metadata: Any) -> Any:
            module = ttir(module, metadata)
            transform(module)
            return module
        stages["ttir"] = ttir_then_transform

    with knobs.runtime.scope():
        knobs.runtime.add_stages_inspection_hook = inspect
        yield
