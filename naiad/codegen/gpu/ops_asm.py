"""GPU rule for ``tl.inline_asm_elementwise``: the user's assembly once per ``pack`` elements
of each thread, as Triton runs it.

Operands follow Triton's convention: ``$0``.. name the results' registers, then the
arguments'; an operand narrower than 32 bits carries ``32 // bits`` consecutive elements of the
pack in one register (four int8s in a ``b32``), wider ones one element per register.  Each
register is cast to its constraint's type, which the target names (`GPUHooks.asm_register_type`;
on NVIDIA ``r`` i32, ``l`` i64, ``h`` i16, ``c`` i8, ``f`` f32, ``d`` f64): bit casts for floats
given to integer registers, as in Triton's kernels (a float32 passed as ``r``).  An impure asm
(``is_pure=False``) is a side-effecting call LLVM keeps and does not reorder.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu import layouts as L
from naiad.codegen.gpu.kernel import GPUKernel, is_tensor, rule, shape_of
from naiad.ir import tt

def _per_register(storage: ir.Type, pack: int) -> int:
    return max(1, min(pack, 32 // lt.bit_width(storage)))


def _cast(b: ir.IRBuilder, value: ir.Value, target: ir.Type) -> ir.Value:
    """``value`` (an integer) as a register of type ``target``: same-width bit casts, else a
    zero extension or truncation of the bits."""
    width, have = lt.bit_width(target), lt.bit_width(value.type)
    bits = value if have == width else (
        b.zext(value, ir.IntType(width)) if have < width else b.trunc(value, ir.IntType(width)))
    return bits if bits.type == target else b.bitcast(bits, target)


def _pack(b: ir.IRBuilder, values: list[ir.Value]) -> ir.Value:
    """Several elements' bits in one integer, the first in the low bits."""
    bits = [lt.to_bits(b, v) for v in values]
    if len(bits) == 1:
        return bits[0]
    vector = ir.Constant(ir.VectorType(bits[0].type, len(bits)), None)
    for i, v in enumerate(bits):
        vector = b.insert_element(vector, v, ir.Constant(lt.I32, i))
    return b.bitcast(vector, ir.IntType(lt.bit_width(bits[0].type) * len(bits)))


def _unpack(b: ir.IRBuilder, register: ir.Value, storage: ir.Type, count: int) -> list[ir.Value]:
    width = lt.bit_width(storage)
    as_int = lt.to_bits(b, register)
    bits = _cast(b, as_int, ir.IntType(width * count))
    if count == 1:
        return [lt.from_bits(b, bits, storage)]
    vector = b.bitcast(bits, ir.VectorType(ir.IntType(width), count))
    return [lt.from_bits(b, b.extract_element(vector, ir.Constant(lt.I32, i)), storage) for i in range(count)]


def _storage(mlir_type: Any) -> ir.Type:
    storage = lt.scalar(mlir_type)
    if storage == lt.I1:
        raise NotImplementedError("tl.inline_asm_elementwise on booleans is not supported by the "
                                  "GPU lowering yet (pass them as int8)")
    return storage


@rule(tt.ElementwiseInlineAsmOp)
def _inline_asm(k: GPUKernel, op: Any) -> None:
    pack = op.packed_element.value.data
    results = list(op.result)
    constraints = [c.strip() for c in op.constraints.data.split(",") if c.strip()]
    operands = [c for c in constraints if not c.startswith("~")]
    clobbers = [c for c in constraints if c.startswith("~")]
    tensor = bool(results) and is_tensor(results[0])
    layout = k.layout_of(results[0]) if tensor else None
    count = L.element_count(layout, shape_of(results[0])) if tensor else 1
    if count % pack:
        raise NotImplementedError(f"tl.inline_asm_elementwise with pack={pack}: a thread holds "
                                  f"{count} elements here, not a multiple of {pack}")
    args = [(k.tensor(a, layout).values if tensor and is_tensor(a) else [k.scalar(a)] * count,
             _storage(a.type)) for a in op.args]
    outs = [_storage(r.type) for r in results]
    shapes = [_per_register(s, pack) for s in outs] + [_per_register(s, pack) for _, s in args]
    registers = sum(pack // n for n in shapes)
    if registers != len(operands):
        raise NotImplementedError(f"tl.inline_asm_elementwise: the constraints name "
                                  f"{len(operands)} operands, but {len(results)} result(s) and "
                                  f"{len(args)} argument(s) with pack={pack} need {registers}")
    types = [k.hooks.asm_register_type(c.lstrip("=")[-1:]) for c in operands]
    n_out = sum(pack // n for n in shapes[:len(outs)])
    ret = ir.VoidType() if n_out == 0 else types[0] if n_out == 1 else ir.LiteralStructType(types[:n_out])
    asm = ir.InlineAsm(ir.FunctionType(ret, types[n_out:]), op.asm_string.data, ",".join(operands + clobbers),
                       side_effect=not op.pure.value.data)
    values: list[list[ir.Value]] = [[] for _ in results]
    for start in range(0, count, pack):
        inputs = []
        for (held, storage), per in zip(args, shapes[len(outs):]):
            for first in range(start, start + pack, per):
                inputs.append(_cast(k.b, _pack(k.b, held[first:first + per]), types[n_out + len(inputs)]))
        call = k.b.call(asm, inputs)
        produced = [call] if n_out == 1 else [k.b.extract_value(call, i) for i in range(n_out)]
        for r, (storage, per) in enumerate(zip(outs, shapes)):
            for _ in range(pack // per):
                values[r].extend(_unpack(k.b, produced.pop(0), storage, per))
    for result, held in zip(results, values):
        if tensor:
            k.define(result, held)
        else:
            k.env[result] = held[0]
