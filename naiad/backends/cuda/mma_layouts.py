"""The layouts of NVIDIA's tensor cores, as TTGIR writes them: ``#ttg.nvidia_mma``.

An mma layout says which thread holds which element of a dot's accumulator:

- version 2 (``mma.sync.m16n8k16``, sm_80 on): each warp computes 16x8 tiles; a thread holds,
  per tile, rows ``lane / 4`` and ``lane / 4 + 8`` at columns ``2 * (lane % 4)`` and the next;
  the ``warps_per_cta`` warps tile the tensor, then the tiles repeat.
- version 3 (``wgmma.mma_async.m64nNk16``, sm_90): a warpgroup of 4 consecutive warps computes
  64 rows by ``instr_shape[1]`` columns, each warp 16 of the rows, each thread in each 8-column
  chunk the elements of version 2's 16x8 tile; ``warps_per_cta`` counts warps (a multiple of 4
  along the rows).

Both are `naiad.codegen.gpu.layouts.Linear` layouts for a given shape (`NvidiaMma.linear`), so
element-wise ops, loads and stores, conversions and reductions work in them as in any other.
Registers are ordered as the instructions produce them: per (row repetition, column
repetition), per 8-column chunk, the two rows, the two columns.
"""

from __future__ import annotations

import dataclasses
import re

from naiad.codegen.gpu import layouts as L

#: A thread's lane bits: columns 2 and 4, then rows 1, 2, 4 (``lane % 4`` picks the column
#: pair, ``lane / 4`` the row).
_LANES = ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))


@dataclasses.dataclass(frozen=True)
class NvidiaMma:
    version: int
    warps_per_cta: tuple[int, int]
    instr_shape: tuple[int, ...]       # (16, 8) for version 2; (16, n, k) for version 3

    @property
    def n(self) -> int:
        """Columns of one instruction's accumulator per warp."""
        return self.instr_shape[1]

    def tile(self) -> tuple[int, int]:
        """Rows and columns one pass of all warps covers."""
        return 16 * self.warps_per_cta[0], self.n * self.warps_per_cta[1]

    def repetitions(self, shape: tuple[int, ...]) -> tuple[int, int]:
        rows, cols = self.tile()
        return max(1, shape[0] // rows), max(1, shape[1] // cols)

    def linear(self, shape: tuple[int, ...]) -> L.Linear:
        if len(shape) != 2:
            raise ValueError(f"{self} describes 2-D tensors, not {shape}")
        rows, cols = self.tile()
        reps_m, reps_n = self.repetitions(shape)
        registers = [(0, 1), (8, 0)]
        registers += [(0, 8 << i) for i in range((self.n // 8).bit_length() - 1)]
        registers += [(0, cols << i) for i in range(reps_n.bit_length() - 1)]
        registers += [(rows << i, 0) for i in range(reps_m.bit_length() - 1)]
        wm, wn = self.warps_per_cta
        warps = [(16 << i, 0) for i in range(wm.bit_length() - 1)]
        warps += [(0, self.n << i) for i in range(wn.bit_length() - 1)]
        return L.make_linear(shape, registers, _LANES, warps)

    def __str__(self) -> str:
        return (f"#ttg.nvidia_mma<{{versionMajor = {self.version}, versionMinor = 0, warpsPerCTA = "
                f"{list(self.warps_per_cta)}, instrShape = {list(self.instr_shape)}}}>")

    @classmethod
    def parse(cls, text: str) -> "NvidiaMma":
        fields = {name: value for name, value in re.findall(r"(\w+)\s*=\s*(\[[^\]]*\]|\d+)", text)}
        try:
            version = int(fields["versionMajor"])
            warps = tuple(int(w) for w in re.findall(r"\d+", fields["warpsPerCTA"]))
            instr = tuple(int(w) for w in re.findall(r"\d+", fields["instrShape"]))
        except KeyError as e:
            raise ValueError(f"{text!r} is not an nvidia_mma layout: no {e.args[0]}") from None
        return cls(version, warps, instr)  # type: ignore[arg-type]


L.register_layout("#ttg.nvidia_mma", NvidiaMma.parse)
