"""What the runtime reads off an array argument: its data's address, its dtype's name and its
Triton type string ("fp32"), for numpy arrays, torch tensors, array-interface and DLPack objects
alike.  Launchers (a backend's included) read addresses through `data_pointer`."""

from __future__ import annotations

import sys
from typing import Any

from naiad.errors import LaunchError
from naiad.runtime import numpy_scalars


def _dlpack_view(arg: Any) -> Any:
    """A numpy view of a host array that speaks only DLPack (``__dlpack__``), else None."""
    if not hasattr(arg, "__dlpack__") or hasattr(arg, "data_ptr") or hasattr(arg, "__array_interface__"):
        return None
    import numpy

    try:
        return numpy.from_dlpack(arg)
    except (TypeError, ValueError, RuntimeError, BufferError):
        return None      # not host memory: the device rules will say which backend owns it


def array_dtype_name(arg: Any) -> str | None:
    """The dtype name of a torch tensor, numpy array, array-interface or DLPack object."""
    view = _dlpack_view(arg)
    if view is not None:
        return view.dtype.name
    dtype = getattr(arg, "dtype", None)
    if dtype is None:         # a bare (CUDA) array interface: its typestr ("<f4")
        interface = getattr(arg, "__array_interface__", None) or \
            getattr(arg, "__cuda_array_interface__", None)
        return interface["typestr"] if interface is not None else None
    name = getattr(dtype, "name", None)        # numpy
    if isinstance(name, str):
        return name
    text = str(dtype)                           # torch: "torch.float32"
    return text.rsplit(".", 1)[-1]


def data_pointer(arg: Any) -> int | None:
    """The address of an array argument's data, or None when ``arg`` is not an array (a numpy
    scalar is not, though it carries ``__array_interface__``)."""
    if numpy_scalars.is_numpy_scalar(arg):
        return None
    data_ptr = getattr(arg, "data_ptr", None)
    if callable(data_ptr):
        return int(data_ptr())
    interface = getattr(arg, "__array_interface__", None) or getattr(arg, "__cuda_array_interface__", None)
    if interface is not None:
        return int(interface["data"][0])
    view = _dlpack_view(arg)
    return int(view.ctypes.data) if view is not None else None


_ARRAY_TYPES: dict[Any, str] = {}


def array_type_string(value: Any) -> str:
    """The Triton type string of an array's elements ("fp32"), remembered per dtype object."""
    from naiad.language import dtypes

    dtype = getattr(value, "dtype", None)
    if isinstance(dtype, dtypes.dtype):           # a TensorWrapper: the language dtype it names
        return dtypes.ty_to_str(dtype)
    try:
        cached = _ARRAY_TYPES.get(dtype) if dtype is not None else None
    except TypeError:             # an unhashable dtype object: do not remember it
        dtype, cached = None, None
    if cached is not None:
        return cached
    name = array_dtype_name(value)
    if getattr(dtype, "isnative", True) is False or _foreign_typestr(name):
        raise LaunchError(f"the array's data is in non-native byte order (dtype {dtype if dtype is not None else name}); "
                          f"kernels read the machine's own byte order -- fix: pass "
                          f"array.astype(array.dtype.newbyteorder('=')) (a converted copy)")
    ty = dtypes.from_torch_dtype_name(name) if name else None
    if ty is None:
        raise LaunchError(f"arrays of dtype {name} cannot be passed to kernels")
    if dtype is not None:
        _ARRAY_TYPES[dtype] = ty
    return ty


def _foreign_typestr(typestr: str | None) -> bool:
    """Whether an array interface's typestr ("<f4", ">i4") names the other byte order."""
    return bool(typestr) and typestr[0] in "<>" and typestr[0] != _NATIVE_ORDER


_NATIVE_ORDER = "<" if sys.byteorder == "little" else ">"
