"""Block pointers as tensors of pointers and masks, for backends that lower only the latter.

``tt.make_tensor_ptr`` describes a tile of a strided array (base, shape, strides, offsets);
``tt.advance`` moves it; ``tt.load`` / ``tt.store`` through it check ``boundaryCheck`` dimensions
and pad.  This pass (Triton's RewriteTensorPointer, for GPUs without TMA) replaces each access by
``base + sum((offset_d + arange(B_d)) * stride_d)`` with the mask ``0 <= index_d < shape_d``
over the checked dimensions, and a block pointer carried by ``scf.for`` by its offsets (its
base, shape and strides must not change in the loop).  Anything else a block pointer reaches
(``scf.if`` results, ``scf.while``) is left alone, and the backend reports it as unsupported.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import scf
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerAttr, IntegerType, TensorType, i32, i64
from xdsl.ir import Block, Region, SSAValue

from naiad.ir import arith, tt
from naiad.ir.types import PointerType, element_type


class _Tile:
    """A block pointer's parts: scalar SSA values (offsets i32, shape and strides i64)."""

    def __init__(self, base: SSAValue, shape: list, strides: list, offsets: list, block: TensorType):
        self.base, self.shape, self.strides, self.offsets, self.block = base, shape, strides, offsets, block

    def moved(self, offsets: list) -> "_Tile":
        return _Tile(self.base, self.shape, self.strides, offsets, self.block)


def rewrite_block_pointers(module: Any) -> bool:
    """Rewrite every block pointer of ``module`` that the pass can; True if it changed any."""
    tiles: dict[SSAValue, _Tile] = {}
    dead: list[Any] = []
    for func in module.body.ops:
        if isinstance(func, tt.FuncOp) and func.body.blocks:
            _rewrite(func.body.block, tiles, dead)
    for op in reversed(dead):
        if all(not r.uses for r in op.results):
            op.detach()
            op.erase()
    return bool(tiles)


def _is_block_pointer(value: SSAValue) -> bool:
    t = value.type
    return isinstance(t, PointerType) and isinstance(t.pointee_type, TensorType)


def _rewrite(block: Block, tiles: dict, dead: list) -> None:
    for op in list(block.ops):
        if isinstance(op, tt.MakeTensorPtrOp):
            tiles[op.result] = _Tile(op.base, list(op.shape), list(op.strides), list(op.offsets),
                                     op.result.type.pointee_type)
            dead.append(op)
        elif isinstance(op, tt.AdvanceOp) and op.ptr in tiles:
            tile = tiles[op.ptr]
            moved = [_insert(op, arith.AddiOp(o, d)) for o, d in zip(tile.offsets, op.offsets)]
            tiles[op.result] = tile.moved(moved)
            dead.append(op)
        elif isinstance(op, tt.LoadOp) and op.ptr in tiles:
            _rewrite_load(op, tiles[op.ptr])
        elif isinstance(op, tt.StoreOp) and op.ptr in tiles:
            _rewrite_store(op, tiles[op.ptr])
        elif isinstance(op, scf.ForOp) and any(v in tiles for v in op.iter_args):
            _rewrite_for(op, tiles, dead)
        else:
            for region in op.regions:
                for inner in region.blocks:
                    _rewrite(inner, tiles, dead)


def _insert(before: Any, op: Any) -> SSAValue | None:
    """Put ``op`` before ``before``; its result (None for a store)."""
    before.parent_block().insert_op_before(op, before)
    return op.results[0] if op.results else None


def _pointers_and_mask(at: Any, tile: _Tile, checked: list[int]) -> tuple[SSAValue, SSAValue | None]:
    shape = list(tile.block.get_shape())
    rank = len(shape)
    total, mask = None, None
    for d in range(rank):
        index = _insert(at, tt.MakeRangeOp(0, shape[d]))
        offset = _insert(at, tt.SplatOp(tile.offsets[d], [shape[d]]))
        index = _insert(at, arith.AddiOp(index, offset))
        current = [shape[d]]
        for axis in range(rank):
            if axis == d:
                continue
            current.insert(axis, 1)
            index = _insert(at, tt.ExpandDimsOp(operands=[index], result_types=[TensorType(i32, current)],
                                                properties={"axis": IntegerAttr(axis, i32)}))
        index = _insert(at, tt.BroadcastOp(operands=[index], result_types=[TensorType(i32, shape)]))
        wide = _insert(at, arith.ExtSIOp(index, TensorType(i64, shape)))
        term = _insert(at, arith.MuliOp(wide, _insert(at, tt.SplatOp(tile.strides[d], shape))))
        total = term if total is None else _insert(at, arith.AddiOp(total, term))
        if d in checked:
            zero = _insert(at, arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(TensorType(i64, shape), [0])))
            above = _insert(at, arith.CmpiOp(wide, zero, "sge"))
            below = _insert(at, arith.CmpiOp(wide, _insert(at, tt.SplatOp(tile.shape[d], shape)), "slt"))
            inside = _insert(at, arith.AndIOp(above, below))
            mask = inside if mask is None else _insert(at, arith.AndIOp(mask, inside))
    base = _insert(at, tt.SplatOp(tile.base, shape))
    pointers = _insert(at, tt.AddPtrOp(base, total))
    return pointers, mask


def _rewrite_load(op: Any, tile: _Tile) -> None:
    checked = list(op.boundaryCheck.get_values()) if op.boundaryCheck is not None else []
    pointers, mask = _pointers_and_mask(op, tile, checked)
    other = None
    if mask is not None:
        value_type = op.result.type
        nan = op.padding is not None and op.padding.data.value == "nan"
        fill = 0 if isinstance(element_type(value_type), IntegerType) else float("nan") if nan else 0.0
        other = _insert(op, arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(value_type, [fill])))
    new = tt.LoadOp(pointers, mask, other)
    new.properties["cache"] = op.properties["cache"]
    new.properties["evict"] = op.properties["evict"]
    new.properties["isVolatile"] = op.properties["isVolatile"]
    _insert(op, new)
    op.result.replace_all_uses_with(new.result)
    op.detach()
    op.erase()


def _rewrite_store(op: Any, tile: _Tile) -> None:
    checked = list(op.boundaryCheck.get_values()) if op.boundaryCheck is not None else []
    pointers, mask = _pointers_and_mask(op, tile, checked)
    new = tt.StoreOp(pointers, op.value, mask)
    new.properties["cache"] = op.properties["cache"]
    new.properties["evict"] = op.properties["evict"]
    _insert(op, new)
    op.detach()
    op.erase()


def _rewrite_for(op: Any, tiles: dict, dead: list) -> None:
    """A loop carrying block pointers carries their offsets instead."""
    old_block = op.body.block
    inits, types, slots = [], [], []
    for value, arg in zip(op.iter_args, old_block.args[1:]):
        tile = tiles.get(value)
        if tile is None:
            slots.append(None)
            inits.append(value)
            types.append(arg.type)
        else:
            slots.append(tile)
            inits.extend(tile.offsets)
            types.extend(o.type for o in tile.offsets)
    new_block = Block(arg_types=[old_block.args[0].type] + types)
    old_block.args[0].replace_all_uses_with(new_block.args[0])
    _bind(old_block.args[1:], slots, list(new_block.args[1:]), tiles)
    for inner in list(old_block.ops):
        inner.detach()
        new_block.add_op(inner)
    loop = scf.ForOp(op.lb, op.ub, op.step, inits, Region([new_block]))
    op.parent_block().insert_op_before(loop, op)
    _rewrite(new_block, tiles, dead)
    yield_op = new_block.last_op
    operands = []
    for value, tile in zip(yield_op.operands, slots):
        if tile is None:
            operands.append(value)
            continue
        moved = tiles.get(value)
        if moved is None or moved.base is not tile.base or moved.strides != tile.strides or \
                moved.shape != tile.shape:
            raise NotImplementedError("a block pointer whose base, shape or strides change inside "
                                      "a loop")
        operands.extend(moved.offsets)
    new_block.insert_op_before(scf.YieldOp(*operands), yield_op)
    yield_op.detach()
    yield_op.erase()
    _bind(op.results, slots, list(loop.results), tiles)
    dead.append(op)


def _bind(olds: Any, slots: list, news: list, tiles: dict) -> None:
    """Old loop values onto the new loop's: one for one, or, for a block pointer (its tile in
    ``slots``), its tile moved to the next offsets."""
    position = 0
    for old, tile in zip(olds, slots):
        if tile is None:
            old.replace_all_uses_with(news[position])
            position += 1
        else:
            count = len(tile.offsets)
            tiles[old] = tile.moved(news[position:position + count])
            position += count
