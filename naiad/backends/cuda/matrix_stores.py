"""``stmatrix``: a tensor-core accumulator's 16-bit values into a shared-memory tile (sm_90).

A thread of an mma accumulator layout holds, in each 16 x 16 block of its warp, the pairs
(r, c..c+1) and (r + 8, c..c+1) of both 8-column halves -- exactly what ``stmatrix.x4`` takes:
four registers of two 16-bit values, and from each lane the address of one 8-element row of
one of the four 8 x 8 matrices.  One instruction then stores what four 32-bit ``st.shared``
did, and the rows it writes are whole 16-byte chunks of the tile (Triton's epilogues store
their accumulators this way before a TMA store).
"""

from __future__ import annotations

from typing import Any, Callable

import llvmlite.ir as ir

from naiad.backends.cuda.accumulators import pack_pair
from naiad.backends.cuda.ptx_asm import asm
from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import Dist, GPUKernel

#: A thread's first registers and its lane bits in an mma accumulator: (r, c + 1), (r + 8, c),
#: (r, c + 8); lanes 1 and 2 along the columns (2, 4), lanes 4, 8, 16 down the rows.
_FRAGMENT_REGISTERS = ((0, 1), (8, 0), (0, 8))
_FRAGMENT_LANES = ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))


def _const(value: int) -> ir.Constant:
    return ir.Constant(lt.I32, value)


def store_matrices(k: GPUKernel, dist: Dist, row_bytes_contiguous: bool,
                   addresses: Callable[[list[ir.Value], list[tuple[int, ...]]], list[ir.Value]]) -> bool:
    """Store ``dist`` with ``stmatrix.x4`` when its layout is an mma accumulator's over whole
    16 x 16 blocks and its elements are 16-bit, and the destination keeps each 8 elements of
    a row in 16 contiguous, aligned bytes (``row_bytes_contiguous``); False (nothing emitted)
    otherwise.  ``addresses(thread, constants)``: the 32-bit shared addresses of the elements
    at coordinates ``thread`` (values) plus each of ``constants``, the two sharing no bit."""
    linear = L.linear_of(dist.layout, dist.shape)
    if linear is None or len(dist.shape) != 2 or not row_bytes_contiguous or \
            lt.byte_size(dist.values[0].type) != 2 or linear.registers[:3] != _FRAGMENT_REGISTERS or \
            linear.lanes != _FRAGMENT_LANES or len(dist.values) % 8:
        return False
    split = k.split_coordinates(dist.layout, dist.shape)
    if split is None:
        return False
    b = k.b
    (row, col), constants = split
    lane = k.lane
    # the lane's row: of the warp's block (its own lane bits taken out), matrix lane // 8
    row = b.add(b.sub(row, b.lshr(lane, _const(2))),
                b.add(b.and_(lane, _const(7)), b.mul(b.and_(b.lshr(lane, _const(3)), _const(1)), _const(8))))
    col = b.add(b.sub(col, b.mul(b.and_(lane, _const(3)), _const(2))), b.mul(b.lshr(lane, _const(4)), _const(8)))
    groups = range(0, len(dist.values), 8)
    for g, address in zip(groups, addresses([row, col], [constants[g] for g in groups])):
        pairs = [pack_pair(k, dist.values[g + 2 * i:g + 2 * i + 2]) for i in range(4)]
        asm(b, "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0], {$1, $2, $3, $4};", [], [address, *pairs])
    return True


def store_tile(k: GPUKernel, dist: Dist, tile: Any, base: ir.Value) -> bool:
    """`store_matrices` into a `SwizzledTile` at ``base`` whose rows run along the columns."""
    smem = k.b.ptrtoint(k.hooks.shared_base(k.b), lt.I32)
    return store_matrices(k, dist, tile.inner == 1 and tile.element_bytes == 2,
                          lambda thread, constants: [k.b.add(smem, a) for a in
                                                     tile.addresses(k.b, base, thread, constants)])
