"""What a launch is checked for before it runs: its grid, and that it writes only writable arrays.

A grid the driver cannot run, or an array that must not be written, would otherwise give a
silent wrong result, change an immutable object (``np.frombuffer(b"...")`` of a ``bytes``) or
crash the process (a read-only ``mmap``).  Each check raises `LaunchError` naming the kernel,
the bad value and what to do.
"""

from __future__ import annotations

import operator
from typing import Any, Sequence

from naiad.errors import LaunchError

_GRID_FORM = "a grid is a tuple of 1 to 3 ints, or a callable taking the launch's arguments " \
             "(a dict) and returning one"
_PAD = {1: (1, 1), 2: (1,), 3: ()}


def grid3(kernel: str, grid: Any, limits: Sequence[int], max_programs: int | None,
          called: bool = False) -> tuple[int, int, int]:
    """``grid`` (already the result of a grid callable when ``called``) as three dimensions,
    each a non-negative int within the driver's ``limits``, their product at most
    ``max_programs`` (None: no limit).  A zero dimension is allowed and runs nothing."""
    if type(grid) is tuple and len(grid) == 1 and type(grid[0]) is int and \
            0 <= grid[0] <= limits[0] and (max_programs is None or grid[0] <= max_programs):
        return (grid[0], 1, 1)                    # the common case, at every warm launch
    what = "the grid callable returned" if called else "the grid is"
    if not isinstance(grid, (tuple, list)):
        example = f", e.g. ({grid},)" if type(grid) is int else ""
        raise LaunchError(f"{kernel}: {what} {grid!r} ({type(grid).__name__}) -- "
                          f"{_GRID_FORM}{example}")
    if not 1 <= len(grid) <= 3:
        raise LaunchError(f"{kernel}: {what} {tuple(grid)!r}, with {len(grid)} dimensions -- "
                          f"{_GRID_FORM}")
    dims = []
    for axis, size in enumerate(grid):
        if isinstance(size, float) or not hasattr(size, "__index__"):
            raise LaunchError(f"{kernel}: grid dimension {axis} is {size!r} "
                              f"({type(size).__name__}), not an int -- {_GRID_FORM} "
                              f"(naiad.cdiv(n, BLOCK) gives the number of blocks)")
        size = operator.index(size)
        if size < 0 or size > limits[axis]:
            raise LaunchError(f"{kernel}: grid dimension {axis} is {size}; this backend runs "
                              f"0 to {limits[axis]} programs along axis {axis} -- fix: use a "
                              f"grid within those limits (a larger block per program, or "
                              f"another axis)")
        dims.append(size)
    grid = (*dims, *_PAD[len(dims)])
    if max_programs is not None and grid[0] * grid[1] * grid[2] > max_programs:
        raise LaunchError(f"{kernel}: the grid {grid} has {grid[0] * grid[1] * grid[2]} programs; "
                          f"this backend runs at most {max_programs} in one launch -- fix: give "
                          f"each program more work, or launch in parts")
    return grid


def is_read_only(array: Any) -> bool:
    """Whether an array argument's memory must not be written: a numpy array that is not
    writeable (``np.frombuffer`` of ``bytes``, a read-only ``mmap``, ``np.broadcast_to``), or an
    array interface (host or CUDA) whose data is marked read-only.  Torch has no read-only
    tensors."""
    if callable(getattr(array, "data_ptr", None)):
        return False         # a torch tensor (its __array_interface__ raises for fp8 dtypes)
    writeable = getattr(getattr(array, "flags", None), "writeable", None)
    if isinstance(writeable, bool):
        return not writeable
    interface = getattr(array, "__array_interface__", None) or \
        getattr(array, "__cuda_array_interface__", None)
    if isinstance(interface, dict):
        data = interface.get("data")
        return isinstance(data, tuple) and len(data) > 1 and bool(data[1])
    return False


def arrays_in(value: Any) -> list[tuple[str, Any]]:
    """(path suffix, array) of every array-like object in an argument: itself, the elements of
    a tuple (at any depth), a tensor descriptor's base."""
    if isinstance(value, tuple):
        return [(f"[{i}]{suffix}", array) for i, item in enumerate(value)
                for suffix, array in arrays_in(item)]
    if hasattr(value, "block_shape") and hasattr(value, "base"):
        return [(f".base{suffix}", array) for suffix, array in arrays_in(value.base)]
    return [("", value)] if value is not None else []


def check_writes(kernel: str, names: Sequence[str], args: Sequence[Any],
                 written: Sequence[int]) -> None:
    """Refuse a launch that would write through a read-only array: ``written`` lists the
    positions (in ``names`` and ``args``) of the parameters the kernel may store to."""
    for position in written:
        for suffix, array in arrays_in(args[position]):
            if is_read_only(array):
                name = names[position] + suffix
                raise LaunchError(
                    f"{kernel}: argument {name!r} is a read-only array, and the kernel stores to "
                    f"it (tl.store or an atomic) -- fix: pass a writable array, e.g. "
                    f"{name}.copy() (numpy arrays made by np.frombuffer on bytes, from a read-only "
                    f"mmap, or by np.broadcast_to are read-only)")
