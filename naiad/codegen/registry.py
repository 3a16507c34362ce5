"""One shape for rule tables -- the GPU lowering's (`gpu.kernel.RULES`), its layout
assignment's and axis information's (`axis_info`): a dict from op class to function, filled by
a decorator."""

from __future__ import annotations

from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


def registrar(table: dict[type, F]) -> Callable[..., Callable[[F], F]]:
    """``rule = registrar(table)``; then ``@rule(OpA, OpB)`` puts the function under both."""
    def rule(*op_classes: type) -> Callable[[F], F]:
        def register(fn: F) -> F:
            for cls in op_classes:
                table[cls] = fn
            return fn
        return register
    return rule
