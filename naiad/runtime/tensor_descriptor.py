"""The host-side ``TensorDescriptor`` (``triton.tools.tensor_descriptor`` under the compatibility
layer): a description of a tiled view of an array (base, shape, strides, block shape, padding),
passed to kernels as an argument.

Inside the kernel the argument is a `naiad.language.tensor_descriptor.tensor_descriptor`, the
same value ``tl.make_tensor_descriptor`` makes: ``desc.load``, ``desc.store``, ``desc.shape``...
A launch specializes it by element type, block shape and padding (`signature`) and passes its
base array, shape and strides as the kernel's parameters (`naiad.language.tensor_descriptor.host_parts`).
The checks below give the same answers as Triton's for bad descriptors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class TensorDescriptor:
    base: Any
    shape: list[int]
    strides: list[int]
    block_shape: list[int]
    padding: str = "zero"
    round_f32_to_tf32: bool = False

    def __post_init__(self) -> None:
        rank = len(self.shape)
        if not 0 < rank <= 5 or len(self.strides) != rank or len(self.block_shape) != rank:
            raise ValueError(f"TensorDescriptor: shape, strides and block_shape need the same rank "
                             f"(1 to 5): {list(self.shape)}, {list(self.strides)}, {list(self.block_shape)}")
        if any(b <= 0 or b & (b - 1) for b in self.block_shape):
            raise ValueError(f"TensorDescriptor: block_shape entries must be powers of 2: {self.block_shape}")
        if self.strides[-1] != 1:
            raise ValueError("TensorDescriptor: the last dimension must be contiguous (stride 1)")
        if any(d <= 0 for d in self.shape):
            raise ValueError(f"TensorDescriptor: shape entries must be positive: {list(self.shape)}")
        if self.padding not in ("zero", "nan"):
            raise ValueError(f"TensorDescriptor: padding must be 'zero' or 'nan', not {self.padding!r}")

    @staticmethod
    def from_tensor(tensor: Any, block_shape: list[int], padding: str = "zero",
                    round_f32_to_tf32: bool = False) -> "TensorDescriptor":
        """The descriptor of a whole torch tensor or numpy array (whose strides numpy gives in
        bytes)."""
        strides = tensor.stride() if callable(getattr(tensor, "stride", None)) else \
            [s // tensor.itemsize for s in tensor.strides]
        return TensorDescriptor(tensor, list(tensor.shape), list(strides), list(block_shape),
                                padding, round_f32_to_tf32)

    def divisibility(self) -> tuple[str, ...]:
        """The launch's key of each runtime part (base, shape, strides), as for arrays and
        ints: "D" where the base is 16-byte aligned or the number divisible by 16 -- so that
        the kernel's loads through the descriptor know their rows are aligned and vectorize."""
        from naiad.runtime.arrays import data_pointer

        pointer = data_pointer(self.base)
        numbers = [*self.shape, *self.strides]
        return ("D" if pointer is not None and pointer % 16 == 0 else "",
                *("D" if int(n) % 16 == 0 else "" for n in numbers))

    def signature(self) -> str:
        """The kernel signature string of this argument, e.g. ``"tensordesc<fp32[16, 32]>"``:
        what a launch specializes on (the element type, block shape and padding)."""
        from naiad.language import dtypes
        from naiad.language.tensor_descriptor import tensor_descriptor_type
        from naiad.errors import LaunchError
        from naiad.runtime.arrays import array_type_string, data_pointer

        if data_pointer(self.base) is None:
            raise LaunchError(f"a TensorDescriptor's base must be an array, not a "
                              f"{type(self.base).__name__}")
        element = array_type_string(self.base)
        if self.padding == "nan" and not dtypes.str_to_ty(element).is_floating():
            raise LaunchError(f"a TensorDescriptor with padding='nan' needs floating-point "
                              f"elements, not {element} -- fix: use padding='zero'")
        ty = tensor_descriptor_type(dtypes.pointer_type(dtypes.str_to_ty(element)),
                                    list(self.block_shape), self.padding)
        return ty.signature
