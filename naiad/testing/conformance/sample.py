"""A smaller run of the suite: at most K cases of each test function.

Why: on a backend whose device compiler is slow (Intel's OpenCL runtime builds each SPIR-V
program for ~0.1-1 s), the whole suite takes minutes that a CI job cannot spare, while most of
its cases are one function over many shapes and dtypes.  A sample keeps every function and
spreads its K cases evenly over the parameter list (the first and the last always in), so the
run still meets every kind of operation and both ends of each sweep.  The same K gives the same
cases every time.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable


def evenly_spread(count: int, k: int) -> list[int]:
    """``k`` indices of ``range(count)``, evenly spread, first and last included (all of them
    when ``k >= count``)."""
    if k >= count:
        return list(range(count))
    if k == 1:
        return [0]
    return sorted({round(i * (count - 1) / (k - 1)) for i in range(k)})


def sample(items: list[Any], k: int, function_of: Callable[[Any], Hashable]) -> tuple[list[Any], list[Any]]:
    """(kept, dropped): at most ``k`` of the ``items`` of each function (``function_of(item)``),
    in their collected order."""
    groups: dict[Hashable, list[int]] = {}
    for index, item in enumerate(items):
        groups.setdefault(function_of(item), []).append(index)
    keep = {group[i] for group in groups.values() for i in evenly_spread(len(group), k)}
    return ([item for i, item in enumerate(items) if i in keep],
            [item for i, item in enumerate(items) if i not in keep])
