"""numpy scalars (``np.float32(2.5)``, ``np.int64(7)``) as kernel arguments.

A numpy scalar carries ``__array_interface__`` (numpy describes it as a 0-d array), so every
rule that knows arrays by that attribute -- specialization, backend selection, the launchers --
must ask here first, or a scalar is passed as the address of a temporary copy.  A numpy scalar
is a scalar of its dtype's type (np.float32 -> "fp32", np.int64 -> "i64", np.bool_ -> "u1"),
and launchers receive the Python value it holds (`plain`).  The one exception is np.float64:
it is a Python float (a subclass), and Triton passes it as Python floats are passed, as fp32;
kernels written for Triton (``sm_scale = 1 / np.sqrt(d)``) rely on that.  numpy is never imported here: a
value can only be a numpy scalar when numpy is loaded already.
"""

from __future__ import annotations

import sys
from typing import Any

#: numpy dtype name -> the Triton type string of a scalar argument of that dtype.
SCALAR_TYPES = {
    "bool": "u1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "float32": "fp32",
    "float64": "fp32",          # a Python float: passed as one (see above)
}


def is_numpy_scalar(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.generic)


def scalar_type(value: Any) -> str | None:
    """The type string of a numpy scalar argument; None when ``value`` is not a numpy scalar.
    Raises TypeError for numpy scalars no kernel parameter can hold (complex, str, datetime)."""
    if not is_numpy_scalar(value):
        return None
    ty = SCALAR_TYPES.get(value.dtype.name)
    if ty is None:
        raise TypeError(f"numpy scalars of dtype {value.dtype.name} cannot be passed to kernels "
                        f"(numpy scalars of {', '.join(SCALAR_TYPES)} can)")
    return ty


def holds_numpy_scalar(value: Any) -> bool:
    """Whether ``value`` is a numpy scalar or a tuple holding one (at any depth)."""
    if isinstance(value, tuple):
        return any(holds_numpy_scalar(v) for v in value)
    return is_numpy_scalar(value)


def plain_value(value: Any) -> Any:
    """``value`` with every numpy scalar in it (tuples included) replaced by its Python value."""
    if isinstance(value, tuple):
        items = [plain_value(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value.item() if is_numpy_scalar(value) else value


def plain(values: list[Any]) -> list[Any]:
    """A launch's arguments as launchers take them: numpy scalars as Python values."""
    if not any(holds_numpy_scalar(v) for v in values):
        return values
    return [plain_value(v) for v in values]
