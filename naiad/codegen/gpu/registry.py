"""One shape for the rule tables of the GPU lowering (`kernel.RULES`), layout assignment and
axis information: a dict from op class to function, filled by a decorator."""

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
