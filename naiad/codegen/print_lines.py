"""The layout of a ``tl.device_print`` line, which every backend writes the same way.

``pid (x, y, z) idx (i, j)<prefix>(operand n) <value>`` -- one line per element (``idx ()`` for
a scalar; no ``idx`` part for a print without values; the operand part only when the print has
several), each index padded to the digits of its dimension's last index.  The CPU runtime fills
it with Python's formatting as the kernel calls back; a GPU lowering fills it with ``printf``
conversions.  Kept in one place so that both print what Triton's tests read.
"""

from __future__ import annotations

from typing import Sequence


def index_width(dim: int) -> int:
    """Characters of the widest index of a dimension of ``dim`` elements."""
    return len(str(dim - 1))


def print_line(pid: Sequence[str], prefix: str, value: str | None = None,
               index: Sequence[str] = (), operand: int | None = None) -> str:
    """One line, newline included.  ``pid``: the three program ids' text; ``value`` None for a
    print without values; ``operand``: the value's position when the print has several."""
    where = f"pid ({', '.join(pid)})"
    if value is None:
        return f"{where}{prefix}\n"
    operand_text = f"(operand {operand}) " if operand is not None else ""
    return f"{where} idx ({', '.join(index)}){prefix}{operand_text}{value}\n"
