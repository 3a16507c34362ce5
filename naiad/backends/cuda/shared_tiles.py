"""Where a tensor-core dot's operands lie in shared memory, and how they get there.

Two tile geometries, each placed at a byte ``base`` of shared memory (an i32 value: a ring's
slot moves it at run time):

- `SwizzledTile`, for wgmma (and mma.sync, where its rows can be swizzled): the operand's ``inner`` dimension is stored contiguously, in atoms
  of ``width`` bytes (32, 64 or 128: the longest that divides a row): atom ``a`` holds, for
  every index of the other (outer) dimension in turn, ``width`` bytes of the inner one, and the
  16-byte chunks of each such row are XOR-swizzled by the row's place among 8 (the hardware's
  pattern on address bits, the tile being 1024-byte aligned).  A warp's 16-byte stores or
  copies of consecutive rows fall in different banks, and wgmma reads it through a matrix
  descriptor.
- `PaddedTile`, for mma.sync tiles whose rows are too short to swizzle (or too few, under
  8): rows along one dimension (K, or for B the dimension its
  elements run) with 16 bytes of padding after each, so that the eight 16-byte rows one
  ``ldmatrix`` reads fall in different banks.

An operand gets into a tile from registers (`store_registers`) or straight from global memory
(`copy_global`, ``cp.async``: no registers, and the copy runs while the threads go on).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import Dist, GPUKernel
from naiad.backends.cuda.ptx_asm import asm


#: The PTX ISA version of ``cp.async``'s ``ignore-src`` predicate (7.5).
IGNORE_SRC_PTX = 75


def _const(value: int) -> ir.Constant:
    return ir.Constant(lt.I32, value)


def slot_bytes(tile: Any) -> int:
    """The bytes one tile takes in a ring of them: its size rounded up to 1024, where a swizzle
    pattern starts (each slot begins at one)."""
    return -(-tile.size_bytes // 1024) * 1024


def swizzle_bytes(row_bytes: int) -> int:
    """The widest swizzle (128, 64 or 32 bytes; 0: none) a tile whose contiguous rows hold
    ``row_bytes`` can take: the rows of one swizzle atom must fill it."""
    for width in (128, 64, 32):
        if row_bytes % width == 0:
            return width
    return 0


class _Tile:
    """What both geometries share: ``shape``, the ``inner`` dimension stored contiguously, and
    ``k_dim``, the dimension the reading dot sums over -- a property of the reader, not of the
    bytes: one tile may serve several dots, transposed or not."""

    @property
    def k_major(self) -> bool:
        return self.inner == self.k_dim

    def transposed(self) -> Any:
        """The same bytes as the tile of the transposed tensor (a ``tt.trans`` moves nothing)."""
        return dataclasses.replace(self, shape=self.shape[::-1], inner=1 - self.inner, k_dim=1 - self.k_dim)

    def read_as(self, operand: int) -> Any:
        """The tile as a dot's A (0) or B (1) reads it: summing over dimension 1 or 0."""
        return dataclasses.replace(self, k_dim=1 - operand)


@dataclasses.dataclass(frozen=True)
class SwizzledTile(_Tile):
    shape: tuple[int, int]
    inner: int
    k_dim: int
    element_bytes: int
    width: int

    @property
    def size_bytes(self) -> int:
        return self.shape[0] * self.shape[1] * self.element_bytes

    @property
    def outer_size(self) -> int:
        return self.shape[1 - self.inner]

    @property
    def atom_bytes(self) -> int:
        """Bytes between two atoms along the inner dimension (the descriptor's leading offset)."""
        return self.outer_size * self.width

    @property
    def phase_bytes(self) -> int:
        """The bytes of one swizzle pattern (8 rows of ``width``): the swizzle reads and changes
        only the address bits below them."""
        return 8 * self.width

    def plain(self, b: ir.IRBuilder, outer: ir.Value, inner: ir.Value) -> ir.Value:
        """The byte offset (in the tile, before the swizzle) of element (outer, inner)."""
        byte = b.mul(inner, _const(self.element_bytes))
        atom = b.udiv(byte, _const(self.width))
        within = b.urem(byte, _const(self.width))
        return b.add(b.add(b.mul(atom, _const(self.atom_bytes)), b.mul(outer, _const(self.width))), within)

    def _plain_of(self, coords: tuple[int, ...]) -> int:
        """`plain` of constant coordinates."""
        byte = coords[self.inner] * self.element_bytes
        return byte // self.width * self.atom_bytes + coords[1 - self.inner] * self.width + byte % self.width

    def _swizzled(self, b: ir.IRBuilder, plain: ir.Value) -> ir.Value:
        phase = b.and_(b.lshr(plain, _const(7)), _const(self.width // 16 - 1))
        return b.xor(plain, b.shl(phase, _const(4)))

    def _swizzle_of(self, plain: int) -> int:
        """`_swizzled` of a known offset (or of a mask of the bits an offset may set)."""
        return plain ^ (((plain >> 7) & (self.width // 16 - 1)) << 4)

    def address(self, b: ir.IRBuilder, base: ir.Value, coords: list[ir.Value]) -> ir.Value:
        """The byte (of shared memory) of the element at tensor coordinates ``coords``."""
        return b.add(base, self._swizzled(b, self.plain(b, coords[1 - self.inner], coords[self.inner])))

    def addresses(self, b: ir.IRBuilder, base: ir.Value, thread: list[ir.Value],
                  constants: list[tuple[int, ...]], thread_bits: tuple[int, ...] | None = None) -> list[ir.Value]:
        """`address` of the coordinates ``thread`` + ``c`` for each of ``constants``, where
        the two parts share no bit (`GPUKernel.split_coordinates`: ``plain`` of the sum is then
        the sum of the parts' ``plain``).  Adding a multiple of `phase_bytes` commutes with the
        swizzle, so the elements whose constant parts agree below it share one swizzled
        offset and the rest is an immediate: one register for a thread's copies of rows 8
        apart, where LLVM, which cannot see through the XOR, would keep one for each.  Knowing
        which bits the thread's part may set (``thread_bits``, per dimension) does better
        (`_known_bits_addresses`)."""
        thread_plain = self.plain(b, thread[1 - self.inner], thread[self.inner])
        if thread_bits is not None:
            found = self._known_bits_addresses(b, base, thread_plain, constants, thread_bits)
            if found is not None:
                return found
        swizzled: dict[int, ir.Value] = {}
        result = []
        for c in constants:
            plain = self._plain_of(c)
            low = plain % self.phase_bytes
            if low not in swizzled:
                swizzled[low] = b.add(base, self._swizzled(b, b.add(thread_plain, _const(low))))
            result.append(b.add(swizzled[low], _const(plain - low)) if plain != low else swizzled[low])
        return result

    def _known_bits_addresses(self, b: ir.IRBuilder, base: ir.Value, thread_plain: ir.Value,
                              constants: list[tuple[int, ...]], thread_bits: tuple[int, ...]) -> list[ir.Value] | None:
        """`addresses` when the offsets the thread's bits give and the constants' offsets
        share no bit: the swizzle is linear over XOR, so the address is the thread's swizzled
        offset XOR the constant's, and the constant's bits outside those the thread's may set
        are an immediate.  Elements share a register when their constants agree on the
        thread's bits: a tf32 dot's B tile, copied one element at a time across its K-major
        rows, needs 2 registers for a thread's 32 copies where grouping below `phase_bytes`
        needed 32 (each added to the ring's slot in every iteration).  None when the bits
        overlap (a carry would break the XOR)."""
        units = [self._plain_of(tuple(1 << bit if d == dim else 0 for d in range(2)))
                 for dim, bits in enumerate(thread_bits) for bit in range(bits.bit_length()) if bits >> bit & 1]
        thread_mask = 0
        for unit in units:
            if unit & thread_mask:
                return None
            thread_mask |= unit
        plains = [self._plain_of(c) for c in constants]
        if any(p & thread_mask for p in plains):
            return None
        swizzled_mask = self._swizzle_of(thread_mask)
        thread_swizzled = self._swizzled(b, thread_plain)
        registers: dict[int, ir.Value] = {}
        result = []
        for plain in plains:
            swizzled = self._swizzle_of(plain)
            shared, rest = swizzled & swizzled_mask, swizzled & ~swizzled_mask
            if shared not in registers:
                moved = b.xor(thread_swizzled, _const(shared)) if shared else thread_swizzled
                registers[shared] = b.add(base, moved)
            result.append(b.add(registers[shared], _const(rest)) if rest else registers[shared])
        return result

    def block_start(self, b: ir.IRBuilder, base: ir.Value, index: ir.Value, depth: int) -> ir.Value:
        """The byte (unswizzled: a descriptor's start) where one instruction's block begins: M
        or N index ``index`` (an i32), K index ``depth``."""
        other = _const(depth)
        outer, inner = (index, other) if self.k_major else (other, index)
        return b.add(base, self.plain(b, outer, inner))


@dataclasses.dataclass(frozen=True)
class PaddedTile(_Tile):
    shape: tuple[int, int]
    inner: int
    k_dim: int
    element_bytes: int

    @property
    def row_bytes(self) -> int:
        return self.shape[self.inner] * self.element_bytes + 16

    @property
    def size_bytes(self) -> int:
        return self.shape[1 - self.inner] * self.row_bytes

    def address(self, b: ir.IRBuilder, base: ir.Value, coords: list[ir.Value]) -> ir.Value:
        """The byte (of shared memory) of the element at tensor coordinates ``coords``."""
        row, inner = coords[1 - self.inner], coords[self.inner]
        return b.add(base, b.add(b.mul(row, _const(self.row_bytes)), b.mul(inner, _const(self.element_bytes))))

    def addresses(self, b: ir.IRBuilder, base: ir.Value, thread: list[ir.Value],
                  constants: list[tuple[int, ...]], thread_bits: tuple[int, ...] | None = None) -> list[ir.Value]:
        """`address` of ``thread`` + ``c`` for each of ``constants``: the thread's address
        plus an immediate each (the geometry is linear, whatever bits the thread's part sets)."""
        start = self.address(b, base, thread)
        return [b.add(start, _const(c[1 - self.inner] * self.row_bytes + c[self.inner] * self.element_bytes))
                for c in constants]


def element_addresses(k: GPUKernel, tile: Any, base: ir.Value, layout: L.Layout, shape: tuple[int, int],
                      elements: range | list[int]) -> list[ir.Value]:
    """The shared-memory byte in ``tile`` at ``base`` of each of ``elements`` (indices among a
    thread's elements of ``layout``): from the thread's part of the coordinates plus each
    element's constant part where the layout splits so (`SwizzledTile.addresses`), else one
    address computation each."""
    split = k.split_coordinates(layout, shape)
    if split is None:
        coords = k.coordinates(layout, shape)
        return [tile.address(k.b, base, coords[e]) for e in elements]
    thread, constants = split
    return tile.addresses(k.b, base, thread, [constants[e] for e in elements], L.thread_bits(layout, shape))


def padded_tile(layout: L.Layout, shape: tuple[int, int], mlir_type: Any, k_dim: int,
                may_transpose: bool) -> PaddedTile:
    """The mma.sync tile of an operand spread by ``layout``: K-major, or along the dimension
    its elements run when ``may_transpose`` (B: its fragments come through ``ldmatrix.trans``)."""
    runs = [L.run_length(layout, shape, d) for d in (0, 1)]
    inner = 1 - k_dim if may_transpose and runs[1 - k_dim] > runs[k_dim] else k_dim
    return PaddedTile(tuple(shape), inner, k_dim, lt.byte_size(lt.memory_type(mlir_type)))


def mma_sync_tile(layout: L.Layout, shape: tuple[int, int], mlir_type: Any, k_dim: int,
                  may_transpose: bool) -> SwizzledTile | PaddedTile:
    """The mma.sync tile of an operand: rows along the dimension `padded_tile` picks, swizzled
    as wgmma's are where they can be, else padded.  A ``cp.async`` copy takes each 32-byte
    sector of global memory into shared memory in 32-byte pieces: a padded tile's odd rows
    start 16 bytes into one, so their copies ask L2 for every sector twice (measured on the
    H200: 1.5x the sectors and 2.6x the shared-memory wavefronts of each copy of the M = 16
    skinny matmul's tiles); a swizzle moves whole 16-byte chunks within 128 bytes, two of a
    sector together, and ``ldmatrix`` reads it without conflicts as well."""
    padded = padded_tile(layout, shape, mlir_type, k_dim, may_transpose)
    width = swizzle_bytes(shape[padded.inner] * padded.element_bytes)
    if width and shape[1 - padded.inner] % 8 == 0:
        return SwizzledTile(tuple(shape), padded.inner, k_dim, padded.element_bytes, width)
    return padded


def swizzled_tile(layout: L.Layout, shape: tuple[int, int], mlir_type: Any, k_dim: int,
                  may_transpose: bool) -> SwizzledTile | None:
    """The wgmma tile of an operand whose elements are spread by ``layout`` (its registers, or
    the chunks its copies move): stored along the dimension they run when the type may be
    transposed (16-bit) and that dimension's rows can be swizzled, else along K (dimension
    ``k_dim``); None when no swizzle fits."""
    element = lt.byte_size(lt.memory_type(mlir_type))
    runs = [L.run_length(layout, shape, d) for d in (0, 1)]
    inners = [k_dim]
    if may_transpose and runs[1 - k_dim] > runs[k_dim]:
        inners.insert(0, 1 - k_dim)      # ... unless its rows are too short to swizzle
    for inner in inners:
        width = swizzle_bytes(shape[inner] * element)
        if width and shape[1 - inner] % 8 == 0:
            return SwizzledTile(tuple(shape), inner, k_dim, element, width)
    return None


def store_registers(k: GPUKernel, dist: Dist, tile: Any, base: ir.Value) -> None:
    """Every thread writes its elements of ``dist`` into ``tile`` at ``base``, in vectors of up
    to 16 bytes along the tile's inner dimension (one element at a time across it)."""
    b = k.b
    run = L.run_length(dist.layout, dist.shape, tile.inner)
    vector = max(1, min(run, 16 // tile.element_bytes))
    starts = range(0, len(dist.values), vector)
    addresses = element_addresses(k, tile, base, dist.layout, dist.shape, starts)
    smem = k.hooks.shared_base(b)
    for start, address in zip(starts, addresses):
        pointer = b.gep(smem, [address], source_etype=lt.I8)
        values = [lt.to_memory(b, v) for v in dist.values[start:start + vector]]
        if vector == 1:
            b.store(values[0], pointer)
            continue
        packed = ir.Constant(ir.VectorType(values[0].type, vector), None)
        for i, v in enumerate(values):
            packed = b.insert_element(packed, v, _const(i))
        b.store(packed, pointer).align = vector * tile.element_bytes


def copy_global(k: GPUKernel, pointers: list[ir.Value], masks: list[ir.Value] | None,
                layout: L.Layout, shape: tuple[int, int], vector: int, tile: Any, base: ir.Value) -> None:
    """Every thread copies its chunks of ``vector`` elements from global memory (``pointers``,
    in ``layout``) into ``tile`` at ``base`` with ``cp.async``; where ``masks`` is off, zeros.

    A masked copy takes the mask as its ``ignore-src`` predicate (zeros where it is set):
    the predicates of a bounds check combine into one, where a source size of 16 or 0 costs
    a select for every condition of the mask, on each copy.  The predicate is PTX ISA 7.5's:
    above sm_80's minimum of 7.0."""
    b = k.b
    if masks is not None:
        k.hooks.require_ptx(IGNORE_SRC_PTX)
    nbytes = vector * tile.element_bytes
    kind = "cg" if nbytes == 16 else "ca"
    starts = range(0, len(pointers), vector)
    offsets = element_addresses(k, tile, base, layout, shape, starts)
    smem = b.ptrtoint(k.hooks.shared_base(b), lt.I32)
    for start, offset in zip(starts, offsets):
        address = b.add(smem, offset)
        if masks is None:
            asm(b, f"cp.async.{kind}.shared.global [$0], [$1], {nbytes};", [], [address, pointers[start]])
        else:
            ignored = b.not_(masks[start])
            asm(b, f"cp.async.{kind}.shared.global [$0], [$1], {nbytes}, $2;", [],
                [address, pointers[start], ignored])


def read_registers(k: GPUKernel, tile: Any, base: ir.Value, layout: L.Layout, shape: tuple[int, int],
                   storage: ir.Type) -> list[ir.Value]:
    """The elements of a tile, as a `Dist` of ``layout`` holds them (one load each)."""
    b = k.b
    smem = k.hooks.shared_base(b)
    loaded = lt.I8 if storage == lt.I1 else storage
    values = []
    for address in element_addresses(k, tile, base, layout, shape, range(L.element_count(layout, shape))):
        value = b.load(b.gep(smem, [address], source_etype=lt.I8), typ=loaded)
        values.append(lt.from_memory(b, value, storage))
    return values
