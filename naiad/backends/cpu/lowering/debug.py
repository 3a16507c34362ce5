"""device_print, device_assert and bounds checks on the CPU.

All three call back into Python (`naiad.backends.cpu.runtime`) through external functions.
Printing does so one element at a time: debugging output is small and rare, so simplicity wins
over speed there.  Assertions and bounds checks test a vector chunk at a time and call back only
for a chunk that fails.

Bounds checks (option ``bounds_check``): the launcher appends the address range of every array
argument to the argument slots (a count, then start/end pairs).  Before each load, store or atomic, every
active lane's address is tested against those ranges; a lane outside all of them is reported
(with an access id that the metadata maps to the source line and the pointer argument) and
masked off, so the kernel never touches the bad address.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from xdsl.dialects.builtin import FileLineColLoc, TensorType

from naiad.backends.cpu import runtime
from naiad.backends.cpu.lowering.tiles import numel
from naiad.codegen import llvm_types as lt
from naiad.ir.types import PointerType

_KINDS = {lt.F32: runtime.KIND_FLOAT32, lt.F64: runtime.KIND_FLOAT64, lt.F16: runtime.KIND_FLOAT16}


def source_location(op: Any) -> tuple[str, int]:
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return loc.filename.data, loc.line.data
    return "<unknown>", 0


def _string(kernel: Any, text: str) -> ir.Value:
    """A pointer to a NUL-terminated global string (one per distinct text)."""
    return lt.opaque(kernel.b, lt.c_string(kernel.llmod, text))


def _as_bits(kernel: Any, value: ir.Value, mlir_type: Any, signed: bool) -> tuple[ir.Value, int, int]:
    """(int64 carrying the value's bits or integer value, its kind for the printer, bit width)."""
    b = kernel.b
    element = lt.element(mlir_type)
    storage = lt.scalar(mlir_type)
    if isinstance(element, PointerType):
        return value, runtime.KIND_POINTER, 64
    if lt.is_bf16(mlir_type):
        return b.zext(value, lt.I64), runtime.KIND_BFLOAT16, 16
    if storage in _KINDS:
        width = lt.byte_size(storage) * 8
        bits = b.bitcast(value, ir.IntType(width))
        return (b.zext(bits, lt.I64) if width < 64 else bits), _KINDS[storage], width
    width = storage.width
    if width < 64:
        value = b.sext(value, lt.I64) if signed and width > 1 else b.zext(value, lt.I64)
    return value, runtime.KIND_SIGNED if signed else runtime.KIND_UNSIGNED, width


def lower_print(kernel: Any, op: Any) -> None:
    """One call into the runtime per element: (prefix, pid, flat index, shape text, operand
    number or -1, kind, bits, hex | width << 1); a print without values passes a null shape."""
    fn = lt.function(kernel.llmod, "naiad_print", lt.VOID,
                     [lt.PTR] + [lt.I32] * 4 + [lt.PTR] + [lt.I32] * 2 + [lt.I64, lt.I32])
    prefix = _string(kernel, op.prefix.data)
    hexadecimal = int(bool(op.hex.value.data))
    signed = list(op.isSigned.get_values())
    args = list(op.args)
    zero = ir.Constant(lt.I32, 0)
    if not args:
        kernel.b.call(fn, [prefix, *kernel.program_ids, zero, ir.Constant(lt.PTR, None), ir.Constant(lt.I32, -1),
                           zero, ir.Constant(lt.I64, 0), zero])
        return
    for position, value in enumerate(args):
        is_signed = bool(signed[position]) if position < len(signed) else True
        operand = ir.Constant(lt.I32, position if len(args) > 1 else -1)
        is_tensor = isinstance(value.type, TensorType)
        shape = _string(kernel, ",".join(str(d) for d in value.type.get_shape()) if is_tensor else "")

        def element(index: ir.Value, value=value, operand=operand, shape=shape,
                    is_signed=is_signed, is_tensor=is_tensor) -> None:
            held = kernel.chunks.value_at(value, index, 1) if is_tensor else kernel.scalar(value)
            bits, kind, width = _as_bits(kernel, held, value.type, is_signed)
            kernel.b.call(fn, [prefix, *kernel.program_ids, index, shape, operand, ir.Constant(lt.I32, kind),
                               bits, ir.Constant(lt.I32, hexadecimal | width << 1)])

        kernel.counted_loop(numel(value.type) if is_tensor else 1, element)


def lower_assert(kernel: Any, op: Any) -> None:
    """``device_assert``: a chunk of the condition at a time, tested with one vector reduction;
    only a chunk with a failing lane calls back (once: the message names no element).  Torch's
    Inductor asserts every gathered index, so this runs on the hot path of its kernels."""
    fn = lt.function(kernel.llmod, "naiad_assert_fail", lt.VOID, [lt.PTR, lt.PTR] + [lt.I32] * 4)
    file, line = source_location(op)
    message, file_text = _string(kernel, op.message.data), _string(kernel, file)
    cond = op.condition
    b = kernel.b

    def fail_unless(ok: ir.Value) -> None:
        with b.if_then(b.not_(ok), likely=False):
            b.call(fn, [message, file_text, ir.Constant(lt.I32, line), *kernel.program_ids])

    def chunk(index: ir.Value, lanes: int) -> None:
        ok = kernel.chunks.value_at(cond, index, lanes)
        fail_unless(lt.all_lanes(b, kernel.llmod, ok))

    if isinstance(cond.type, TensorType):
        kernel.for_each_chunk(cond.type, chunk)
    else:
        fail_unless(kernel.scalar(cond))


def check_access(kernel: Any, op: Any, addresses: ir.Value, mask: ir.Value | None, lanes: int,
                 element: ir.Type) -> ir.Value | None:
    """Bounds checks: report and mask off lanes whose address lies outside every argument buffer."""
    b = kernel.b
    file, line = source_location(op)
    access = len(kernel.debug_accesses)
    kernel.debug_accesses.append({"kind": _access_kind(op), "file": file, "line": line,
                                  "argument": kernel.pointer_argument(op.operands[0])})
    size = lt.byte_size(element)
    ctx = kernel.ctx(lanes)
    active = mask if mask is not None else ctx.const(lt.I1, 1)
    inside = _inside_any_range(kernel, addresses, size, lanes)
    bad = b.and_(active, b.not_(inside))
    any_bad = bad if lanes == 1 else b.call(
        lt.intrinsic(kernel.llmod, "vector.reduce.or", [bad.type], lt.I1, [bad.type]), [bad])
    report = lt.function(kernel.llmod, "naiad_out_of_bounds", lt.VOID, [lt.I32, lt.I64] + [lt.I32] * 3)
    with b.if_then(any_bad, likely=False):
        for lane in range(lanes):
            lane_bad = bad if lanes == 1 else b.extract_element(bad, ir.Constant(lt.I32, lane))
            address = addresses if lanes == 1 else b.extract_element(addresses, ir.Constant(lt.I32, lane))
            with b.if_then(lane_bad):
                b.call(report, [ir.Constant(lt.I32, access), address, *kernel.program_ids])
    return b.and_(active, inside)


def _access_kind(op: Any) -> str:
    return {"tt.load": "load", "tt.store": "store"}.get(op.name, "atomic")


def _inside_any_range(kernel: Any, addresses: ir.Value, size: int, lanes: int) -> ir.Value:
    """Whether each lane's [address, address + size) lies inside one of the argument ranges."""
    b = kernel.b
    ctx = kernel.ctx(lanes)
    count, table = kernel.debug_ranges
    pre = b.block
    header, body, done = (b.append_basic_block(f"bounds.{n}") for n in ("header", "body", "done"))
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(lt.I64)
    i.add_incoming(ir.Constant(lt.I64, 0), pre)
    inside = b.phi(lt.vector(lt.I1, lanes))
    inside.add_incoming(ctx.const(lt.I1, 0), pre)
    b.cbranch(b.icmp_signed("<", i, count), body, done)
    b.position_at_end(body)
    pair = b.gep(table, [b.mul(i, ir.Constant(lt.I64, 16))], source_etype=lt.I8)
    start = b.load(pair, typ=lt.I64, align=8)
    end = b.load(b.gep(pair, [ir.Constant(lt.I64, 8)], source_etype=lt.I8), typ=lt.I64, align=8)
    last = b.add(addresses, ctx.const(lt.I64, size))
    fits = b.and_(b.icmp_unsigned(">=", addresses, ctx.splat(start)),
                  b.icmp_unsigned("<=", last, ctx.splat(end)))
    updated = b.or_(inside, fits)
    inside.add_incoming(updated, body)
    i.add_incoming(b.add(i, ir.Constant(lt.I64, 1)), body)
    b.branch(header)
    b.position_at_end(done)
    return inside
