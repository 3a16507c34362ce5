"""Reinterpreted arrays: pass an array's memory to a kernel as another element type.

torch has no unsigned 16/32/64-bit tensors (and older releases no fp8), so Triton code wraps a
signed tensor and names the type the kernel should see: ``reinterpret(t, tl.uint32)``.  The
wrapper only carries the pointer, shape, strides and the new dtype; the memory is shared.
"""

from __future__ import annotations

from typing import Any


class TensorWrapper:
    """``base``'s memory seen as elements of the language dtype ``dtype`` (same size)."""

    def __init__(self, base: Any, dtype: Any):
        self.base = base
        self.dtype = dtype
        self.data = getattr(base, "data", None)
        self.device = getattr(base, "device", None)
        self.shape = base.shape

    def data_ptr(self) -> int:
        return self.base.data_ptr()

    def stride(self, *args: Any) -> Any:
        return self.base.stride(*args)

    def element_size(self) -> int:
        return self.base.element_size()

    def numel(self) -> int:
        return self.base.numel()

    def dim(self) -> int:
        return self.base.dim()

    def size(self, *args: Any) -> Any:
        return self.base.size(*args)

    def cpu(self) -> "TensorWrapper":
        return TensorWrapper(self.base.cpu(), self.dtype)

    def to(self, device: Any) -> "TensorWrapper":
        return TensorWrapper(self.base.to(device), self.dtype)

    def clone(self) -> "TensorWrapper":
        return TensorWrapper(self.base.clone(), self.dtype)

    def new_empty(self, sizes: Any) -> "TensorWrapper":
        return TensorWrapper(self.base.new_empty(sizes), self.dtype)

    def copy_(self, other: "TensorWrapper") -> None:
        self.base.copy_(other.base)

    def __str__(self) -> str:
        return f"TensorWrapper[{self.dtype}]({self.base})"

    __repr__ = __str__


def reinterpret(tensor: Any, dtype: Any) -> Any:
    """``tensor`` seen as ``dtype``; unwrapping back to the base's own dtype returns the base."""
    if isinstance(tensor, TensorWrapper):
        if dtype == tensor.base.dtype:
            return tensor.base
        return TensorWrapper(tensor.base, dtype)
    if hasattr(tensor, "data_ptr"):
        return TensorWrapper(tensor, dtype)
    raise TypeError(f"reinterpret needs a tensor with data_ptr() (torch) or a TensorWrapper, "
                    f"not {type(tensor).__name__}")
