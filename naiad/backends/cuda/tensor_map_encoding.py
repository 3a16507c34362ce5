"""The ``CUtensorMap`` of each tensor map a kernel takes, encoded at launch by libcuda's
``cuTensorMapEncodeTiled`` from the argument values (`TensorMap` says which: the pass that gives
a kernel its maps, `naiad.backends.cuda.tensor_maps`, writes one per map), and passed by value as
the kernel's last parameters.  No compiler module is imported here: a launch of a cached kernel
needs none.

A map depends only on the values it is encoded from (the base address, the shape, the strides),
so the 128 bytes are kept by those values: a launch with the same tensor again costs one lookup.
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any, Sequence

from naiad.errors import NaiadError

#: Bytes of an element of each map element type.
ELEMENT_BYTES = {"u8": 1, "u16": 2, "u32": 4, "u64": 8, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}

#: CUtensorMapDataType of each map element type (cuda.h).
_DATA_TYPES = {"u8": 0, "u16": 1, "u32": 2, "u64": 4, "fp16": 6, "fp32": 7, "fp64": 8, "bf16": 9}
#: CUtensorMapFloatOOBfill: zeros, or NaN where the element type is a float.
_FILLS = {"zero": 0, "nan": 1}
#: CUtensorMapSwizzle of each swizzle width.
_SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
_INTERLEAVE_NONE, _L2_PROMOTION_128B = 0, 2
#: A CUtensorMap's size, and the alignment libcuda writes it at.
MAP_BYTES, MAP_ALIGN = 128, 64
#: How many encoded maps a launcher keeps (the oldest go first).
_KEPT = 4096

_U64, _U32 = ctypes.c_uint64, ctypes.c_uint32
_ARGTYPES = (ctypes.c_void_p, ctypes.c_int, _U32, ctypes.c_void_p, ctypes.POINTER(_U64),
             ctypes.POINTER(_U64), ctypes.POINTER(_U32), ctypes.POINTER(_U32), ctypes.c_int,
             ctypes.c_int, ctypes.c_int, ctypes.c_int)


@dataclasses.dataclass(frozen=True)
class TensorMap:
    """What a launch needs to encode one map: the element type, the box (what one copy moves,
    outermost first), the swizzle of the shared-memory side (0, 32, 64 or 128 bytes), the fill of
    elements outside the tensor, and where the base address, the shape and the strides (but
    the last, which is 1) come from -- each ``("arg", i)``, the kernel's ``i``-th parameter (a
    runtime slot), ``("const", value)``, or ``(op, bits, a, b)``: the kernel's ``bits``-wide
    integer ``op`` (`ARITHMETIC`) of two such sources (tutorial 06's ``Z * H * N_CTX`` rows),
    which the launch computes as the kernel would."""

    element: str
    box: tuple[int, ...]
    swizzle: int
    fill: str
    base: int
    shape: tuple[tuple[str, int], ...]
    strides: tuple[tuple[str, int], ...]

    def to_json(self) -> dict:
        return {"element": self.element, "box": list(self.box), "swizzle": self.swizzle,
                "fill": self.fill, "base": self.base, "shape": [_listed(p) for p in self.shape],
                "strides": [_listed(p) for p in self.strides]}

    @staticmethod
    def from_json(data: dict) -> "TensorMap":
        return TensorMap(data["element"], tuple(data["box"]), data["swizzle"], data["fill"], data["base"],
                         tuple(_source(p) for p in data["shape"]),
                         tuple(_source(p) for p in data["strides"]))


#: The integer operations a map's source may be computed by, as Python expressions.
ARITHMETIC = {"add": "+", "sub": "-", "mul": "*"}


def _listed(source: tuple) -> list:
    """A source as JSON holds it (lists all the way down)."""
    return [_listed(p) if isinstance(p, tuple) else p for p in source]


def _source(data: list) -> tuple:
    """A source as JSON read it back (lists) as the tuples `TensorMap` holds."""
    if data[0] in ARITHMETIC:
        return (data[0], data[1], _source(data[2]), _source(data[3]))
    return (data[0], data[1])


def wrapped(value: int, bits: int) -> int:
    """``value`` as a ``bits``-wide signed integer holds it (what the kernel's arithmetic gives)."""
    half = 1 << (bits - 1)
    return (value + half) % (2 * half) - half


class TensorMapEncoder:
    """``encode(j, address, shape, strides)``: the bytes of kernel ``name``'s map ``j`` for
    one launch's values (shape and strides outermost first, strides in elements, the last
    stride -- 1 -- left out)."""

    def __init__(self, lib: Any, name: str, maps: Sequence[TensorMap]):
        self.name = name
        self.maps = list(maps)
        self._encode = getattr(lib, "cuTensorMapEncodeTiled", None)
        if self._encode is not None:
            self._encode.argtypes, self._encode.restype = _ARGTYPES, ctypes.c_int
        self._kept: dict[tuple, bytes] = {}
        self._storage = (ctypes.c_uint8 * (MAP_BYTES + MAP_ALIGN))()

    def encode(self, j: int, address: int, shape: tuple, strides: tuple) -> bytes:
        key = (j, address, shape, strides)
        found = self._kept.get(key)
        if found is None:
            found = self._encoded(self.maps[j], address, shape, strides)
            if len(self._kept) >= _KEPT:
                del self._kept[next(iter(self._kept))]
            self._kept[key] = found
        return found

    def _encoded(self, tmap: TensorMap, address: int, shape: tuple, strides: tuple) -> bytes:
        if self._encode is None:
            raise NaiadError(f"{self.name}: the kernel moves blocks with the tensor memory "
                             f"accelerator, and this NVIDIA driver has no cuTensorMapEncodeTiled "
                             f"-- fix: update the driver to CUDA 12 or newer")
        size = ELEMENT_BYTES[tmap.element]
        rank = len(tmap.box)
        if any(int(d) <= 0 or int(d) > 1 << 32 for d in shape):
            raise NaiadError(f"{self.name}: a tensor descriptor's shape {list(shape)} has an "
                             f"extent the copy engine cannot take (each must be 1 to 2**32)")
        dims = (_U64 * rank)(*[int(d) for d in reversed(shape)])
        pitches = (_U64 * max(1, rank - 1))(*[int(s) * size for s in reversed(strides)])
        box = (_U32 * rank)(*reversed(tmap.box))
        ones = (_U32 * rank)(*[1] * rank)
        start = ctypes.addressof(self._storage)
        aligned = start + (-start % MAP_ALIGN)
        code = self._encode(aligned, _DATA_TYPES[tmap.element], rank, address, dims, pitches, box,
                            ones, _INTERLEAVE_NONE, _SWIZZLES[tmap.swizzle], _L2_PROMOTION_128B,
                            _FILLS[tmap.fill])
        if code:
            raise NaiadError(f"{self.name}: cuTensorMapEncodeTiled refused a tensor descriptor "
                             f"(CUresult {code}): base 0x{address:x}, shape {list(shape)}, strides "
                             f"{[*strides, 1]}, block {list(tmap.box)} of {tmap.element} -- the "
                             f"base must be 16-byte aligned and each stride but the last a "
                             f"multiple of 16 bytes below 2**40")
        return ctypes.string_at(aligned, MAP_BYTES)
