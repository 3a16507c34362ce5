"""GPU rules for ``tl.device_print`` and ``tl.device_assert``.

A print writes one line per element, from the thread that owns it (`GPUKernel.owner`), in the
layout every backend prints (`naiad.codegen.print_lines`) through the target's
``printf``; a scalar print is written by thread 0 alone, so a program prints it once.  An
assertion calls the target's ``assert_fail`` from every thread that holds a false element: on
NVIDIA that prints the message and stops the kernel, which leaves the CUDA context unusable
(as in Triton, where device_assert exists for debugging: it is only compiled with debug on).
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from xdsl.dialects.builtin import FileLineColLoc

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu.kernel import GPUKernel, is_tensor, rule, shape_of
from naiad.codegen.print_lines import index_width, print_line
from naiad.ir import tt
from naiad.ir.types import PointerType


def _value_format(k: GPUKernel, value: ir.Value, mlir_type: Any, signed: bool,
                  hexadecimal: bool) -> tuple[str, ir.Value]:
    """(printf conversion, argument) of one value as C's varargs pass it: floats as double,
    integers of up to 32 bits as 32-bit ints."""
    b = k.b
    element = lt.element(mlir_type)
    storage = lt.scalar(mlir_type)
    if isinstance(element, PointerType):
        return "0x%llx", value
    if not isinstance(storage, ir.IntType):
        wide = b.fpext(value, lt.F64) if storage != lt.F64 else value
        return ("%a" if hexadecimal else "%f"), wide
    width = storage.width
    long = "ll" if width > 32 else ""
    if width < 32:
        value = b.sext(value, lt.I32) if signed and width > 1 and not hexadecimal else b.zext(value, lt.I32)
    if hexadecimal:
        return f"0x%0{max(1, width // 4)}{long}x", value
    return (f"%{long}d" if signed and width > 1 else f"%{long}u"), value


def _escape(text: str) -> str:
    return text.replace("%", "%%")


@rule(tt.PrintOp)
def _print(k: GPUKernel, op: Any) -> None:
    pid = [k.hooks.program_id(k.b, axis) for axis in range(3)]
    where = ("%u",) * 3
    prefix = _escape(op.prefix.data)
    args = list(op.args)
    if not args:
        k.when(k.is_thread0(), lambda: k.hooks.printf(k.b, print_line(where, prefix), pid))
        return
    signed = list(op.isSigned.get_values())
    hexadecimal = bool(op.hex.value.data)
    for position, value in enumerate(args):
        operand = position if len(args) > 1 else None
        is_signed = bool(signed[position]) if position < len(signed) else True
        if not is_tensor(value):
            spec, printed = _value_format(k, k.scalar(value), value.type, is_signed, hexadecimal)
            line = print_line(where, prefix, spec, (), operand)
            k.when(k.is_thread0(),
                   lambda line=line, printed=printed: k.hooks.printf(k.b, line, [*pid, printed]))
            continue
        shape = shape_of(value)
        layout = k.layout_of(value)
        index = [f"%{index_width(d)}u" for d in shape]
        held = k.tensor(value, layout).values
        for element, coords, owns in zip(held, k.coordinates(layout, shape), k.owner(layout, shape)):
            spec, printed = _value_format(k, element, value.type, is_signed, hexadecimal)
            line = print_line(where, prefix, spec, index, operand)
            k.when(owns, lambda line=line, coords=coords, printed=printed:
                    k.hooks.printf(k.b, line, [*pid, *coords, printed]))


@rule(tt.AssertOp)
def _assert(k: GPUKernel, op: Any) -> None:
    loc = op.location
    file, line = (loc.filename.data, loc.line.data) if isinstance(loc, FileLineColLoc) else ("<unknown>", 0)
    message, function = op.message.data, k.func_op.sym_name.data
    cond = op.condition
    held = k.tensor(cond, k.layout_of(cond)).values if is_tensor(cond) else [k.scalar(cond)]
    for ok in held:
        failed = k.b.not_(ok if ok.type == lt.I1 else k.b.icmp_unsigned("!=", ok, ir.Constant(ok.type, 0)))
        k.when(failed, lambda: k.hooks.assert_fail(k.b, message, file, line, function))

