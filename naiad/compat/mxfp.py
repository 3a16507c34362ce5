"""``triton.tools.mxfp``: host-side helpers for the OCP microscaling (MX) formats, on torch.

- `MXFP4Tensor`: E2M1 4-bit floats, one code per uint8 (bit 3 the sign, bits 2-1 the
  exponent, bit 0 the mantissa), packed two per byte by `MXFP4Tensor.to_packed_tensor`;
- `MXScaleTensor`: E8M0 scale factors, the uint8 biased exponent of a power of two (255 is NaN).

Triton's tests build MX operands with them (``tl.dot_scaled``, tensor descriptors).
"""

from __future__ import annotations

from typing import Any

import torch

#: The magnitudes of the eight E2M1 codes 0b000..0b111 (index = exponent * 2 + mantissa).
_E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
_E8M0_BIAS = 127
_E8M0_NAN = 255


def _size(size: Any) -> tuple:
    return tuple(size) if isinstance(size, (tuple, list, torch.Size)) else (size,)


class MXFP4Tensor:
    """E2M1 data: ``MXFP4Tensor(values)`` encodes a float tensor, ``MXFP4Tensor(size=...,
    device=...).random()`` makes random codes; ``.data`` holds one code per uint8."""

    def __init__(self, data: Any = None, size: Any = None, device: Any = None):
        self.device = device
        if data is not None:
            if not isinstance(data, torch.Tensor):
                raise TypeError("MXFP4Tensor: data must be a torch tensor of floats")
            self.device = data.device
            self.data = self._from_float(data)
        elif size is not None:
            self.size = _size(size)
        else:
            raise ValueError("MXFP4Tensor needs data or a size")

    def random(self) -> "MXFP4Tensor":
        """Every one of the 16 codes (both zeros included) equally likely."""
        self.data = torch.randint(0, 16, self.size, dtype=torch.uint8, device=self.device)
        return self

    def to(self, dtype: Any) -> torch.Tensor:
        """The values as float32 (the only type supported)."""
        if dtype != torch.float32:
            raise ValueError("MXFP4Tensor converts only to torch.float32")
        table = torch.tensor(_E2M1_MAGNITUDES, dtype=torch.float32, device=self.data.device)
        magnitude = table[(self.data & 0x7).long()]
        return torch.where((self.data & 0x8) != 0, -magnitude, magnitude)

    def _from_float(self, values: torch.Tensor) -> torch.Tensor:
        """The nearest E2M1 codes, ties to the even mantissa; magnitudes beyond 6 (infinities
        and NaN too) become 6; the sign is kept (-0.0 is code 0b1000)."""
        values = values.to(torch.float32)
        sign = torch.signbit(values).to(torch.uint8) << 3
        magnitude = values.abs()
        magnitude = torch.where(torch.isfinite(magnitude), magnitude, torch.full_like(magnitude, 6.0))
        table = torch.tensor(_E2M1_MAGNITUDES, dtype=torch.float32, device=values.device)
        distance = (magnitude.reshape(-1, 1) - table).abs()
        nearest = distance == distance.min(dim=1, keepdim=True).values
        codes = torch.arange(len(_E2M1_MAGNITUDES), device=values.device)
        # Among the (at most two, adjacent) nearest codes prefer the even mantissa.
        preference = torch.where(nearest, codes % 2, torch.full_like(codes, 2))
        code = preference.argmin(dim=1).to(torch.uint8).reshape(values.shape)
        return sign | code

    def to_packed_tensor(self, dim: int) -> torch.Tensor:
        """Two codes per byte along ``dim`` (element ``2i`` in the low nibble, ``2i + 1`` in
        the high one); an odd length is padded with a zero code."""
        data = self.data
        assert 0 <= dim < data.ndim, f"cannot pack along dimension {dim} of a {data.ndim}-d tensor"
        if data.shape[dim] % 2:
            pad = torch.zeros((*data.shape[:dim], 1, *data.shape[dim + 1:]), dtype=data.dtype,
                              device=data.device)
            data = torch.cat([data, pad], dim=dim)
        pairs = data.unflatten(dim, (-1, 2))
        return (pairs.select(dim + 1, 1) << 4) | pairs.select(dim + 1, 0)

    def unpack_packed_tensor(self, packed_tensor: torch.Tensor, dim: int,
                             original_shape: Any) -> torch.Tensor:
        """The codes of `to_packed_tensor`'s result, without the padding."""
        pairs = torch.stack([packed_tensor & 0xF, (packed_tensor >> 4) & 0xF], dim=dim + 1)
        data = pairs.flatten(dim, dim + 1)
        return data.narrow(dim, 0, _size(original_shape)[dim]).to(torch.uint8)


class MXScaleTensor:
    """E8M0 scales: ``MXScaleTensor(values)`` encodes positive floats (the power of two at or
    below each), ``MXScaleTensor(size=..., device=...).random(low, high)`` makes random ones."""

    def __init__(self, data: Any = None, size: Any = None, device: Any = None):
        self.device = device
        if data is not None:
            if not isinstance(data, torch.Tensor):
                raise TypeError("MXScaleTensor: data must be a torch tensor of floats")
            self.device = data.device
            self.data = self._from_float(data)
        elif size is not None:
            self.size = _size(size)
        else:
            raise ValueError("MXScaleTensor needs data or a size")

    def random(self, low: float | None = None, high: float | None = None) -> "MXScaleTensor":
        """Uniform biased exponents between those of ``low`` and ``high`` (0 and 254 when not
        given); never the NaN code."""
        def exponent(bound: float | None, default: int) -> int:
            if bound is None:
                return default
            return min(254, max(0, int(torch.log2(torch.tensor(float(bound)))) + _E8M0_BIAS))

        first, last = exponent(low, 0), exponent(high, 254)
        if first > last:
            raise ValueError(f"MXScaleTensor.random: low ({low}) must not exceed high ({high})")
        self.data = torch.randint(first, last + 1, self.size, dtype=torch.uint8, device=self.device)
        return self

    def to(self, dtype: Any) -> torch.Tensor:
        """The scales as float32 (the only type supported); the NaN code becomes NaN."""
        if dtype != torch.float32:
            raise ValueError("MXScaleTensor converts only to torch.float32")
        exponent = self.data.to(torch.float32) - _E8M0_BIAS
        value = torch.exp2(exponent)
        return torch.where(self.data == _E8M0_NAN, torch.full_like(value, float("nan")), value)

    def _from_float(self, values: torch.Tensor) -> torch.Tensor:
        """floor(log2(value)) biased and clamped to 0..254; zero, negatives, infinities and NaN
        become the NaN code."""
        values = values.to(torch.float32)
        valid = torch.isfinite(values) & (values > 0)
        exponent = torch.floor(torch.log2(torch.where(valid, values, torch.ones_like(values))))
        biased = (exponent + _E8M0_BIAS).clamp(0, 254).to(torch.uint8)
        return torch.where(valid, biased, torch.full_like(biased, _E8M0_NAN))
