"""Block-pointer accesses as copies of the tensor memory accelerator (TMA, sm_90 on).

A tensor descriptor's ``load`` and ``store`` (and a block pointer's) reach the TTIR as
``tt.load`` / ``tt.store`` through a ``tt.make_tensor_ptr``.  Where the launch can describe that
tensor to the hardware -- its base is a kernel argument, its shape and strides arguments,
constants, or sums, differences and products of them (which the launcher computes), the
base is 16-byte aligned, the strides are multiples of 16 bytes, the last is 1, and the block
fits a TMA box -- this pass gives the kernel one more parameter, a ``CUtensorMap`` passed by
value (a ``!tt.ptr<i8, 101>`` argument: a pointer into the parameter space), and turns the access
into ``ttng.tensor_map_load`` / ``ttng.tensor_map_store`` (`naiad.ir.ttg`; lowered by
`naiad.backends.cuda.tma`).  The launcher encodes each map from the argument values
(`naiad.backends.cuda.tensor_map_encoding.TensorMap`, listed in the module's
``naiad.tensor_maps`` attribute and from there in the kernel's metadata).

Inside loops only loads whose one use is as tensor-core dot operands are taken: the software
pipeliner stages those through rings of the copy engine's copies (`naiad.backends.cuda.pipeline`);
other loads in loops stay ordinary (vector loads, whose latency the warps hide).  Everything the
pass leaves goes the portable way (`naiad.passes.block_pointers`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from xdsl.dialects import scf
from xdsl.dialects.builtin import (ArrayAttr, BFloat16Type, DictionaryAttr, Float16Type, Float32Type,
                                   Float64Type, FunctionType, IntegerAttr, IntegerType, StringAttr, i8)
from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import SSAValue

from naiad.backends.cuda.shared_tiles import swizzle_bytes
from naiad.backends.cuda.tensor_map_encoding import ELEMENT_BYTES, TensorMap
from naiad.codegen.axis_info import analyze
from naiad.ir import arith, tt
from naiad.ir.ttg import TensorMapLoadOp, TensorMapStoreOp
from naiad.ir.types import PointerType, element_type

#: NVPTX's address space of kernel parameters: a tensor map argument lives there.
PARAM_SPACE = 101

#: Largest extent of a TMA box along any dimension, and the most dimensions it has.
MAX_BOX, MAX_RANK = 256, 5

#: The map's element type (a ``CUtensorMapDataType``, `naiad.backends.cuda.tensor_map_encoding`) of each
#: float type; any other element moves as the unsigned integer of its size.
FLOATS = {Float16Type: "fp16", BFloat16Type: "bf16", Float32Type: "fp32", Float64Type: "fp64"}
UNSIGNED = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}

#: Shared memory one map's block may take (the rest of the 227 KB stays the kernel's).
MAX_BLOCK_BYTES = 64 * 1024

_CASTS = (arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp, arith.IndexCastOp)


def copy_geometry(block: tuple[int, ...], element_bytes: int) -> tuple[int, tuple[int, ...]]:
    """(swizzle bytes, the box of one copy) for a block: a 2-D block whose rows can be swizzled
    lands as a `SwizzledTile` (the geometry wgmma reads, and free of bank conflicts for the
    reads of any layout), one copy per swizzle atom (the engine's box is then one atom wide);
    any other block lands row-major (swizzle 0), in one copy -- or, a single row longer than a
    box may be, in copies of `MAX_BOX` elements one after another.  Either way a block of more
    than `MAX_BOX` rows (its first dimension) takes one copy per `MAX_BOX` rows as well."""
    rows = min(block[0], MAX_BOX)
    if len(block) == 2 and block[0] % 8 == 0:
        width = swizzle_bytes(block[1] * element_bytes)
        if width:
            return width, (rows, width // element_bytes)
    if all(extent == 1 for extent in block[:-1]) and block[-1] > MAX_BOX:
        return 0, (*block[:-1], MAX_BOX)
    return 0, (rows, *block[1:]) if len(block) > 1 else tuple(block)


def module_maps(module: Any) -> list[TensorMap]:
    """The maps a module's kernel takes (its ``naiad.tensor_maps`` attribute), in parameter order."""
    text = module.attributes.get("naiad.tensor_maps")
    return [TensorMap.from_json(m) for m in json.loads(text.data)] if text is not None else []


def use_tensor_maps(module: Any) -> bool:
    """Turn every block-pointer access of the kernel that a tensor map can make into a TMA
    copy (see the module docstring); True if any was."""
    kernels = tt.public_functions(module)
    if not kernels:
        return False
    func = kernels[0]
    axis = analyze(func)
    maps: list[TensorMap] = []
    params: dict[TensorMap, SSAValue] = {}
    for op in list(func.walk()):
        if not isinstance(op, (tt.LoadOp, tt.StoreOp, tt.DescriptorReduceOp)) or \
                not isinstance(op.ptr.owner, tt.MakeTensorPtrOp):
            _refuse_reduce(op)
            continue
        if isinstance(op, tt.LoadOp) and (op.isVolatile.value.data or
                                          (_in_loop(op) and not _staged_operand(op.results[0]))):
            continue
        found = _describe(func, axis, op.ptr.owner, _fill(op), not isinstance(op, tt.LoadOp))
        if found is None:
            _refuse_reduce(op)
            continue
        if found not in params:
            params[found] = _add_parameter(func)
            maps.append(found)
        offsets = list(op.ptr.owner.offsets)
        if isinstance(op, tt.LoadOp):
            new = TensorMapLoadOp(params[found], offsets, op.results[0].type)
        else:
            kind = op.kind.data if isinstance(op, tt.DescriptorReduceOp) else None
            new = TensorMapStoreOp(params[found], offsets, op.value, kind)
        op.parent_block().insert_op_before(new, op)
        if isinstance(op, tt.LoadOp):
            op.results[0].replace_all_uses_with(new.results[0])
        new.location = getattr(op, "location", None)
        op.detach()
        op.erase()
    if maps:
        module.attributes["naiad.tensor_maps"] = StringAttr(json.dumps([m.to_json() for m in maps]))
    return bool(maps)


def _refuse_reduce(op: Any) -> None:
    """A ``tt.descriptor_reduce`` (a reduction only the copy engine does) that no map can make."""
    if isinstance(op, tt.DescriptorReduceOp):
        loc = getattr(op, "location", None)
        where = f"{loc.filename.data}:{loc.line.data}: " if isinstance(loc, FileLineColLoc) else ""
        raise NotImplementedError(
            f"{where}desc.atomic_{op.kind.data} of {op.value.type} blocks is a reduction of the copy "
            f"engine, and the engine cannot take this descriptor: its base must be 16-byte "
            f"aligned, its strides (but the last, 1) and its rows multiples of 16 bytes, its shape "
            f"and strides kernel arguments, constants, or sums, differences and products of them, and "
            f"its block one the engine moves -- fix: "
            f"align the tensor, or reduce into a float32 descriptor")


def _in_loop(op: Any) -> bool:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, tt.FuncOp):
        if isinstance(parent, (scf.ForOp, scf.WhileOp)):
            return True
        parent = parent.parent_op()
    return False


def _staged_operand(value: SSAValue) -> bool:
    """Whether the pipeliner stages ``value`` through the copy engine's rings: every use is
    as a dot's A or B (directly or through a transpose), and the engine's geometry (rows along
    the block's last dimension, swizzled) is one wgmma reads -- K-major, or either way for
    16-bit elements (`naiad.backends.cuda.pipeline`, which checks the same on the TTGIR)."""
    dims = _summed_dims(value, transposed=False)
    shape = value.type.get_shape()
    size = ELEMENT_BYTES.get(_element_name(element_type(value.type)) or "", 0)
    if not dims or len(shape) != 2 or not copy_geometry(tuple(shape), size)[0]:
        return False
    return size == 2 or all(d == 1 for d in dims)


def _summed_dims(value: SSAValue, transposed: bool) -> list[int] | None:
    """The dimension of ``value`` each dot using it sums over; None where a use is not a
    dot's A or B (directly or through ``tt.trans``)."""
    dims: list[int] = []
    for use in value.uses:
        user = use.operation
        if isinstance(user, tt.TransOp):
            inner = _summed_dims(user.results[0], not transposed)
            if inner is None:
                return None
            dims += inner
        elif isinstance(user, tt.DotOp) and use.index < 2:
            dims.append((1 - use.index) if not transposed else use.index)
        else:
            return None
    return dims


def _fill(op: Any) -> str | None:
    """"zero" or "nan": what a load's elements outside the tensor read as ("zero" for a store,
    which writes none of them); None for a padding a map cannot give."""
    padding = getattr(op, "padding", None)
    if padding is None:
        return "zero"
    return "nan" if padding.data.value == tt.PaddingOption.NAN.value else "zero"


def _describe(func: Any, axis: dict, make: tt.MakeTensorPtrOp, fill: str | None,
              store: bool) -> TensorMap | None:
    """The map of ``make``'s tensor, or None where no launch of this specialization could
    encode it.  A store needs rows of a whole number of 16-byte chunks too: the copy engine
    writes whole chunks, past the tensor's inner extent up to the next 16 bytes (a hardware
    limit that Triton documents; here such a store stays ordinary, writing nothing outside)."""
    block = make.result.type.pointee_type
    box = tuple(block.get_shape())
    element = _element_name(element_type(block))
    if fill is None or element is None or not 1 <= len(box) <= MAX_RANK:
        return None
    size = ELEMENT_BYTES[element]
    swizzle, copy_box = copy_geometry(box, size)
    if max(copy_box) > MAX_BOX or (box[-1] * size) % 16 or math.prod(box) * size > MAX_BLOCK_BYTES or \
            (fill == "nan" and element not in FLOATS.values()):
        return None
    base = _argument(func, make.base)
    if base is None or axis[make.base].divisibility[0] < 16:
        return None
    shape = [_source(func, s) for s in make.shape]
    strides = [_source(func, s) for s in make.strides]
    if None in shape or None in strides or strides[-1] != ("const", 1):
        return None
    chunked = list(make.strides)[:-1] + ([list(make.shape)[-1]] if store else [])
    if not all(_whole_chunks(value, axis, size) for value in chunked):
        return None
    return TensorMap(element, copy_box, swizzle, fill, base, tuple(shape), tuple(strides[:-1]))


def _element_name(ty: Any) -> str | None:
    """The map's element type for IR type ``ty`` (booleans are bytes in memory); None for a
    type no map moves."""
    if type(ty) in FLOATS:
        return FLOATS[type(ty)]
    if isinstance(ty, IntegerType):
        return UNSIGNED.get(max(1, ty.width.data // 8))
    width = getattr(ty, "bitwidth", None)          # the fp8 formats
    return UNSIGNED.get(width // 8) if width == 8 else None


def _argument(func: Any, value: SSAValue) -> int | None:
    args = list(func.body.block.args)
    return args.index(value) if value in args else None


def _source(func: Any, value: SSAValue, depth: int = 0) -> tuple | None:
    """Where a launch reads an integer from: a kernel argument (through integer casts), a
    constant, or an add, subtract or multiply of such values (at most `_MAX_DEPTH` deep, as
    tutorial 06's ``Z * H * N_CTX``); None for a value the launch cannot compute."""
    value, constant = _integer(value)
    if constant is not None:
        return "const", constant
    index = _argument(func, value)
    if index is not None:
        return "arg", index
    op = _ARITHMETIC.get(type(value.owner))
    if op is None or depth >= _MAX_DEPTH or not isinstance(value.type, IntegerType):
        return None
    a, b = (_source(func, operand, depth + 1) for operand in value.owner.operands)
    return (op, value.type.width.data, a, b) if a is not None and b is not None else None


_ARITHMETIC = {arith.AddiOp: "add", arith.SubiOp: "sub", arith.MuliOp: "mul"}
_MAX_DEPTH = 4


def _integer(value: SSAValue) -> tuple[SSAValue, int | None]:
    """``value`` through its integer casts, and the constant it is (None if not one)."""
    while isinstance(value.owner, _CASTS):
        value = value.owner.operands[0]
    if isinstance(value.owner, arith.ConstantOp) and isinstance(value.owner.value, IntegerAttr):
        return value, value.owner.value.value.data
    return value, None


def _whole_chunks(value: SSAValue, axis: dict, size: int) -> bool:
    """Whether a count of ``size``-byte elements (a stride, an extent) is a multiple of 16
    bytes for every launch of this specialization."""
    value, count = _integer(value)
    if count is not None:
        return count > 0 and (count * size) % 16 == 0
    divisibility = axis[value].divisibility[0] if value in axis else 1
    return (divisibility * size) % 16 == 0


def _add_parameter(func: Any) -> SSAValue:
    """A new last kernel parameter for a tensor map (no attributes)."""
    block = func.body.block
    param = block.insert_arg(PointerType(i8, PARAM_SPACE), len(block.args))
    param.name_hint = f"tensor_map{sum(1 for a in block.args if a.type == param.type) - 1}"
    func.properties["function_type"] = FunctionType.from_lists(
        [a.type for a in block.args], func.function_type.outputs.data)
    if func.arg_attrs is not None:
        func.properties["arg_attrs"] = ArrayAttr([*func.arg_attrs.data, DictionaryAttr({})])
    return param
