"""``triton.tools.tensor_descriptor.TensorDescriptor``: a host-side description of a tiled view
of an array (base, shape, strides, block shape, padding).

Naiad's language does not lower tensor descriptors yet; kernels that take one fail to compile
with a message saying so.  The class exists so that code (and Triton's tests) importing it
load, and its checks give the same answers as Triton's for bad descriptors.
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
        return TensorDescriptor(tensor, list(tensor.shape), list(tensor.stride()), list(block_shape),
                                padding, round_f32_to_tf32)
