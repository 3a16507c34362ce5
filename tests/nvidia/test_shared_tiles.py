"""Bank conflicts of the tensor-core tiles in shared memory (naiad/backends/cuda/shared_tiles.py),
computed from the tiles' own address functions: no GPU needed.

Shared memory has 32 banks of 4 bytes.  A warp's 16-byte accesses are served a quarter-warp
(8 threads, 128 bytes) at a time: free of conflicts when those 8 chunks fall in 8 different
16-byte bank groups.  ``ldmatrix`` reads 8 rows of 16 bytes per matrix, one row address per
lane: the same rule for each 8 lanes.
"""

from __future__ import annotations

import llvmlite.ir as ir
import pytest
from xdsl.dialects.builtin import Float16Type, Float32Type, IntegerType, TensorType

from naiad.backends.cuda.shared_tiles import PaddedTile, SwizzledTile, mma_sync_tile, padded_tile, swizzled_tile
from naiad.codegen.gpu import layouts as L

pytestmark = pytest.mark.shipped_backends


class _Ints:
    """Stands in for an IRBuilder: the tiles' address arithmetic evaluated on Python ints."""

    @staticmethod
    def _v(x):
        return x.constant if isinstance(x, ir.Constant) else x

    def add(self, a, b):
        return self._v(a) + self._v(b)

    def mul(self, a, b):
        return self._v(a) * self._v(b)

    def udiv(self, a, b):
        return self._v(a) // self._v(b)

    def urem(self, a, b):
        return self._v(a) % self._v(b)

    def and_(self, a, b):
        return self._v(a) & self._v(b)

    def xor(self, a, b):
        return self._v(a) ^ self._v(b)

    def lshr(self, a, b):
        return self._v(a) >> self._v(b)

    def shl(self, a, b):
        return self._v(a) << self._v(b)


def _thread_part(layout: L.Blocked, lane: int, warp: int) -> list[int]:
    """The thread's own part of its coordinates in a blocked layout (its first element's)."""
    base = [0, 0]
    for d in layout.order:
        lane_d, lane = lane % layout.threads_per_warp[d], lane // layout.threads_per_warp[d]
        warp_d, warp = warp % layout.warps_per_cta[d], warp // layout.warps_per_cta[d]
        base[d] = (warp_d * layout.threads_per_warp[d] + lane_d) * layout.size_per_thread[d]
    return base


def _thread_coordinates(layout: L.Blocked, shape, lane: int, warp: int) -> list[tuple[int, int]]:
    """The coordinates of a thread's elements in a blocked layout (as the GPU lowering gives
    them: the thread's base along each dimension plus the element's offset, wrapped)."""
    base = _thread_part(layout, lane, warp)
    coords = []
    for element in L.elements(layout, shape):
        offsets = L.constant_offsets(layout, shape, element)
        coords.append(tuple((base[d] + offsets[d]) % shape[d] for d in range(2)))
    return coords


def _conflict_free(addresses: list[int]) -> bool:
    """32 lanes' 16-byte accesses, served 8 lanes at a time."""
    for phase in range(0, 32, 8):
        groups = [(a // 16) % 8 for a in addresses[phase:phase + 8]]
        if len(set(groups)) != 8:
            return False
    return True


_TYPES = {2: Float16Type(), 4: Float32Type(), 1: IntegerType(8)}

#: (shape, element bytes, which operand: 0 = A (K = dimension 1), 1 = B (K = dimension 0),
#: the dimension the copied elements run along)
OPERANDS = [((128, 32), 2, 0, 1), ((128, 64), 2, 0, 1), ((64, 16), 2, 0, 1),
            ((32, 128), 2, 1, 1), ((64, 256), 2, 1, 1), ((16, 64), 2, 1, 1),
            ((64, 128), 2, 1, 0), ((128, 128), 1, 0, 1), ((128, 32), 4, 0, 1), ((32, 128), 4, 1, 0)]


def _copy_layout(shape, element, along, warps=4):
    order = (along, 1 - along)
    return L.default_blocked(shape, warps, 32, 16 // element, order)


@pytest.mark.parametrize("shape, element, operand, along", OPERANDS,
                         ids=[f"{s[0]}x{s[1]}-{e}B-{'AB'[o]}-along{a}" for s, e, o, a in OPERANDS])
def test_wgmma_tiles_take_16_byte_stores_and_copies_without_conflicts(shape, element, operand, along):
    """Every 16-byte store (registers) or cp.async chunk a warp writes into a swizzled tile,
    instruction by instruction."""
    layout = _copy_layout(shape, element, along)
    mlir_type = TensorType(_TYPES[element], shape)
    tile = swizzled_tile(layout, shape, mlir_type, 1 - operand, element == 2)
    assert tile is not None and tile.inner == along
    b = _Ints()
    vector = 16 // element
    threads = [_thread_coordinates(layout, shape, lane, 0) for lane in range(32)]
    for start in range(0, len(threads[0]), vector):
        addresses = [tile.address(b, 0, list(coords[start])) for coords in threads]
        assert all(a % 16 == 0 for a in addresses)
        assert _conflict_free(addresses), (start, addresses)


def test_the_conflict_check_can_fail():
    """An unswizzled tile of 128-byte rows puts a column's chunks in one bank group."""
    addresses = [row * 128 for row in range(32)]
    assert not _conflict_free(addresses)


#: (shape, element bytes, operand) of mma.sync tiles
MMA_SYNC_OPERANDS = [((64, 32), 2, 0), ((128, 64), 2, 0), ((16, 16), 2, 0), ((32, 64), 2, 1),
                     ((64, 128), 2, 1), ((32, 32), 4, 0), ((64, 32), 1, 0), ((32, 64), 4, 1)]


@pytest.mark.parametrize("shape, element, operand", MMA_SYNC_OPERANDS,
                         ids=[f"{s[0]}x{s[1]}-{e}B-{'AB'[o]}" for s, e, o in MMA_SYNC_OPERANDS])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("geometry", ["padded", "mma_sync_tile"])
def test_ldmatrix_reads_mma_sync_tiles_without_conflicts(shape, element, operand, transposed, geometry):
    """Each ldmatrix matrix: 8 lanes give 8 consecutive rows of the tile at one 16-byte
    column (K-major: rows are M or N; a B read through .trans: rows are K) -- of a padded
    tile, and of the tile mma.sync takes (swizzled where its rows can be)."""
    if transposed and (operand == 0 or element != 2):
        pytest.skip("only a 16-bit B is read through ldmatrix.trans")
    k_dim = 1 - operand
    inner = (1 - k_dim) if transposed else k_dim
    layout, mlir_type = _copy_layout(shape, element, inner), TensorType(_TYPES[element], shape)
    may_transpose = operand == 1 and element == 2
    tile = PaddedTile(shape, inner, k_dim, element)
    assert tile == padded_tile(layout, shape, mlir_type, k_dim, may_transpose)
    if geometry == "mma_sync_tile":
        tile = mma_sync_tile(layout, shape, mlir_type, k_dim, may_transpose)
        assert isinstance(tile, SwizzledTile) and tile.inner == inner
    b = _Ints()
    rows = shape[1 - inner]
    for first in range(0, rows, 8):
        for column in range(0, shape[inner], 16 // element):
            addresses = []
            for lane in range(32):                 # four matrices: rows first + lane % 8
                row = first + lane % 8
                coords = [0, 0]
                coords[1 - inner], coords[inner] = row, (column + 16 // element * (lane // 8)) % shape[inner]
                addresses.append(tile.address(b, 0, coords))
            assert _conflict_free(addresses), (first, column, addresses)



#: Operands whose copies run across the tile's rows: 4-byte elements, one a copy, into the
#: K-major tile of a tf32 dot (its B N-contiguous, its A M-contiguous).
ACROSS = [((32, 128), 4, 1, 1), ((64, 256), 4, 1, 1), ((128, 32), 4, 0, 0), ((16, 64), 4, 1, 1)]
ADDRESSED = OPERANDS + ACROSS


def _tile(shape, element, operand, along, padded):
    layout = _copy_layout(shape, element, along)
    mlir_type = TensorType(_TYPES[element], shape)
    tile = (padded_tile(layout, shape, mlir_type, 1 - operand, element == 2) if padded
            else swizzled_tile(layout, shape, mlir_type, 1 - operand, element == 2))
    return layout, tile


@pytest.mark.parametrize("shape, element, operand, along", ADDRESSED,
                         ids=[f"{s[0]}x{s[1]}-{e}B-{'AB'[o]}-along{a}" for s, e, o, a in ADDRESSED])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("known_bits", [False, True])
def test_addresses_from_split_coordinates_equal_one_address_each(shape, element, operand, along, padded,
                                                                 known_bits):
    """`addresses` (the thread's part once, each element's constant part an immediate where the
    swizzle allows; with the bits the thread's part may set, `L.thread_bits`, or without) gives
    every thread's every element the byte `address` gives it."""
    layout, tile = _tile(shape, element, operand, along, padded)
    constants = [L.constant_offsets(layout, shape, e) for e in L.elements(layout, shape)]
    bits = L.thread_bits(layout, shape) if known_bits else None
    b = _Ints()
    base = 3 * 1024
    for warp in range(4):
        for lane in range(32):
            thread = _thread_part(layout, lane, warp)
            expected = [tile.address(b, base, list(c)) for c in _thread_coordinates(layout, shape, lane, warp)]
            assert tile.addresses(b, base, thread, constants, bits) == expected, (warp, lane)


def test_thread_bits_cover_every_threads_part():
    """`L.thread_bits`: the OR of every thread's part of its coordinates, no more."""
    for shape, element, _, along in ADDRESSED:
        layout = _copy_layout(shape, element, along)
        seen = [0, 0]
        for warp in range(4):
            for lane in range(32):
                for d, part in enumerate(_thread_part(layout, lane, warp)):
                    seen[d] |= part
        assert L.thread_bits(layout, shape) == tuple(seen), (shape, element, along)


class _CountingXors(_Ints):
    """`_Ints` that counts the XORs computed: a thread's swizzled offsets, each a register."""

    def __init__(self):
        self.xors = 0

    def xor(self, a, b):
        self.xors += 1
        return super().xor(a, b)


@pytest.mark.parametrize("known_bits, xors", [(True, 2), (False, 32)])
def test_known_thread_bits_leave_a_tf32_b_tiles_copies_to_immediates(known_bits, xors):
    """A tf32 dot's 32x128 B, N-contiguous, copied element by element into its K-major
    swizzled tile: grouped below the swizzle's phase, each of a thread's 32 copies needs a
    swizzled offset of its own (a register, added to the ring's slot in each iteration);
    knowing the thread's bits, the constants agree on all but one of them: two offsets."""
    layout, tile = _tile((32, 128), 4, 1, 1, False)
    assert tile.inner == 0 and tile.width == 128
    constants = [L.constant_offsets(layout, (32, 128), e) for e in L.elements(layout, (32, 128))]
    assert len(constants) == 32
    b = _CountingXors()
    bits = L.thread_bits(layout, (32, 128)) if known_bits else None
    tile.addresses(b, 0, _thread_part(layout, 5, 1), constants, bits)
    assert b.xors == xors           # the thread's swizzle, and one XOR per further offset


def _sectors_split(tile, shape, element, along) -> int:
    """Of every warp's cp.async copies (16-byte chunks along ``along`` of a row-major tensor
    whose rows run along it), the 32-byte global sectors whose chunks land in two different
    32-byte pieces of shared memory: L2 serves such a sector twice."""
    layout = _copy_layout(shape, element, along)
    b = _Ints()
    vector = 16 // element
    split = 0
    for warp in range(4):
        threads = [_thread_coordinates(layout, shape, lane, warp) for lane in range(32)]
        for start in range(0, len(threads[0]), vector):
            pieces: dict[int, set[int]] = {}
            for coords in threads:
                row, column = coords[start][1 - along], coords[start][along]
                sector = (row * shape[along] + column) * element // 32
                pieces.setdefault(sector, set()).add(tile.address(b, 0, list(coords[start])) // 32)
            split += sum(len(p) > 1 for p in pieces.values())
    return split


@pytest.mark.parametrize("shape, element, operand", MMA_SYNC_OPERANDS,
                         ids=[f"{s[0]}x{s[1]}-{e}B-{'AB'[o]}" for s, e, o in MMA_SYNC_OPERANDS])
def test_mma_sync_tiles_take_copies_sector_by_sector(shape, element, operand):
    """The tile mma.sync copies its operands into keeps each global sector's two chunks in one
    32-byte piece of shared memory, and its copies are free of bank conflicts; a padded tile
    (16 bytes after each row) splits the sectors of every other row."""
    k_dim = 1 - operand
    along = 1 - k_dim if operand == 1 and element == 2 else k_dim
    layout, mlir_type = _copy_layout(shape, element, along), TensorType(_TYPES[element], shape)
    tile = mma_sync_tile(layout, shape, mlir_type, k_dim, operand == 1 and element == 2)
    assert tile.inner == along
    assert _sectors_split(tile, shape, element, along) == 0
    assert _sectors_split(PaddedTile(shape, along, k_dim, element), shape, element, along) > 0
    b = _Ints()
    threads = [_thread_coordinates(layout, shape, lane, 0) for lane in range(32)]
    for start in range(0, len(threads[0]), 16 // element):
        assert _conflict_free([tile.address(b, 0, list(coords[start])) for coords in threads]), start


def test_mma_sync_tiles_too_narrow_to_swizzle_are_padded():
    """Rows of 16 bytes (an 8-column fp16 B) or fewer than 8 rows: the padded geometry."""
    narrow = mma_sync_tile(_copy_layout((16, 8), 2, 1), (16, 8), TensorType(Float16Type(), (16, 8)), 0, True)
    assert narrow == PaddedTile((16, 8), 1, 0, 2)
    few = mma_sync_tile(_copy_layout((4, 64), 2, 1), (4, 64), TensorType(Float16Type(), (4, 64)), 1, False)
    assert few == PaddedTile((4, 64), 1, 1, 2)
