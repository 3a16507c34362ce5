"""A launch signature's runtime slots: the flat list of values a compiled kernel receives.

A kernel's parameters are what its ``def`` says; its compiled function (TTIR and every stage
after it) takes one argument per *slot*: constexprs are left out, a tuple parameter gives its
elements depth-first, a tensor descriptor gives its base, shape and strides.  Launchers pack a
launch's arguments in this order, and the compile pipeline maps what it learns about the
function's arguments (which ones the kernel writes through) back to parameters with it.
"""

from __future__ import annotations

from typing import Any, Sequence

from naiad.language.tensor_descriptor import host_parts, is_signature


def runtime_slots(signature: Sequence[tuple[str, Any]] | dict[str, Any]) -> list[tuple[str, str, tuple]]:
    """(name, type string, path) of each argument the kernel receives, in order.  The path
    reaches the value from the launch's argument list: ``x[1][0]`` of parameter ``i`` has path
    ``(i, 1, 0)``, a tensor descriptor's ``d.shape[1]`` has path ``(i, "shape", 1)``."""
    slots: list[tuple[str, str, tuple]] = []

    def visit(name: str, ty: Any, path: tuple) -> None:
        if isinstance(ty, tuple):
            for i, element in enumerate(ty):
                visit(f"{name}[{i}]", element, (*path, i))
        elif is_signature(ty):
            for where, part in host_parts(ty):
                suffix = "".join(f".{w}" if isinstance(w, str) else f"[{w}]" for w in where)
                slots.append((name + suffix, part, (*path, *where)))
        elif ty != "constexpr":
            slots.append((name, ty, path))

    items = signature.items() if isinstance(signature, dict) else signature
    for i, (name, ty) in enumerate(items):
        visit(name, ty, (i,))
    return slots


def path_expression(path: tuple, args: str = "args") -> str:
    """The Python expression reading a slot's value from ``args`` (for generated launchers):
    ``(2, "shape", 1)`` -> ``args[2].shape[1]``."""
    return args + "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in path)
