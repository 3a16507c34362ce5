"""Where an array argument's memory lives: its address and the device that owns it, read from
a torch tensor, ``__cuda_array_interface__`` (cupy, numba) or DLPack.

The launcher (`naiad.backends.cuda.launcher`) asks this about every pointer argument but an int,
None or a torch tensor on the launch's device, to pass its address or to refuse it with the
fix.  It is apart from the launcher because knowing each array protocol, DLPack's C structure
included, is a job of its own that the packing of arguments does not need.
"""

from __future__ import annotations

import ctypes
import sys
from typing import TYPE_CHECKING, Any

from naiad.runtime.tensor_wrapper import TensorWrapper

if TYPE_CHECKING:
    from naiad.backends.cuda.driver import CUDADriver

_DLPACK_CUDA = (2, 13)           # kDLCUDA, kDLCUDAManaged
_DLPACK_HOST = (1, 3)            # kDLCPU, kDLCUDAHost (pinned host memory)


def locate(value: Any, driver: CUDADriver) -> tuple[int | None, int | str | None]:
    """(address, owner) of an array argument: owner is a CUDA device ordinal, None when
    unknown, "host" for host memory, or the name of another device; (None, None) when
    ``value`` is no array."""
    if isinstance(value, TensorWrapper):           # tl.reinterpret: the memory of its base
        value = value.base
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.is_cuda:
            return value.data_ptr(), value.get_device()
        return value.data_ptr(), "host" if value.device.type == "cpu" else f"torch device {value.device}"
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is not None:
        address = int(interface["data"][0])
        owner = getattr(getattr(value, "device", None), "id", None)       # cupy
        if not isinstance(owner, int):
            owner = driver.pointer_device(address) if address else None
            if owner is None and address:
                owner = "host"
        return address, owner
    dlpack_device = getattr(value, "__dlpack_device__", None)
    if dlpack_device is not None:
        kind, owner = (int(x) for x in dlpack_device())
        if kind in _DLPACK_CUDA:
            return _dlpack_address(value), owner
        return 0, "host" if kind in _DLPACK_HOST else f"DLPack device type {kind}"
    if hasattr(value, "__array_interface__"):
        return 0, "host"
    return None, None


class _DLTensor(ctypes.Structure):
    """dlpack.h's DLTensor, the head of the DLManagedTensor a "dltensor" capsule points to."""
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes, _capsule_pointer.restype = (ctypes.py_object, ctypes.c_char_p), ctypes.c_void_p


def _dlpack_address(value: Any) -> int:
    """The data address of a DLPack producer.  The capsule is read, not consumed: its
    destructor releases it, while ``value`` (the caller's argument) keeps the memory alive."""
    capsule = value.__dlpack__()
    tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    return (tensor.data or 0) + tensor.byte_offset
