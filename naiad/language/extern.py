"""Calling functions of an external math library element-wise (``tl.extern_elementwise``).

A library function is described by a table ``{argument dtypes: (symbol, result dtype)}``; the
call picks the row that matches its (promoted) argument types and emits one
``tt.extern_elementwise``.  Backends resolve the symbol when lowering: Naiad's generic
``libdevice`` uses C math library names (``expf``, ``tanh``), which the CPU backend finds in
libm and the CUDA backend maps onto libdevice's ``__nv_`` functions.
"""

from __future__ import annotations

from typing import Any, Callable

from xdsl.dialects.builtin import IntegerAttr, StringAttr

from naiad.ir import tt
from naiad.language import core
from naiad.language.core import builtin, tensor


def _match(args: list[tensor], table: dict[tuple, tuple]) -> tuple[tuple, tuple]:
    """The table row for these arguments, after promoting them to a common type if needed."""
    key = tuple(a.dtype for a in args)
    if key in table:
        return key, table[key]
    common = args[0].dtype
    for a in args[1:]:
        common = semantic_promote(common, a.dtype)
    promoted = tuple(common for _ in args)
    if promoted in table:
        return promoted, table[promoted]
    accepted = ", ".join("(" + ", ".join(str(t) for t in row) + ")" for row in table)
    raise TypeError(f"no version of this function takes ({', '.join(str(t) for t in key)}); "
                    f"it accepts {accepted} -- fix: convert the arguments, e.g. .to(tl.float32)")


def _broadcast_all(semantic: Any, values: list[tensor]) -> list[tensor]:
    """The arguments broadcast to one shape, pairwise as a binary operator's operands are
    (Triton's rule for every extern: ``ldexp(x, tl.full([1], 3, tl.int32))`` with ``x`` of
    shape [128] gives [128]); the broadcasts made only to find the shape are dead code."""
    widest = values[0]
    for v in values[1:]:
        widest, _ = semantic.broadcast_pair(widest, v)
    return [semantic.broadcast_pair(v, widest)[0] for v in values]


def semantic_promote(a: Any, b: Any) -> Any:
    from naiad.language import promotion

    return promotion.binary_op_types("+", a, b).result


@builtin
def extern_elementwise(lib_name: str, lib_path: str, args: list, arg_type_symbol_dict: dict,
                       is_pure: bool) -> tensor:
    """Apply an external library function element-wise; see the module docstring."""
    semantic = core.current_semantic()
    values = [core._t(a) for a in core._unwrap(args)]
    types, (symbol, ret) = _match(values, core._unwrap(arg_type_symbol_dict))
    values = _broadcast_all(semantic, [semantic.cast(v, t) for v, t in zip(values, types)])
    shape = values[0].shape
    out = core.block_type(ret, shape) if shape else ret
    op = tt.ExternElementwiseOp.build(
        operands=[[v.handle for v in values]], result_types=[semantic.ir_type(out)],
        properties={"libname": StringAttr(str(core._unwrap(lib_name))),
                    "libpath": StringAttr(str(core._unwrap(lib_path))),
                    "symbol": StringAttr(symbol),
                    "pure": IntegerAttr.from_bool(bool(core._unwrap(is_pure)))})
    return semantic._tensor(op, out)


def extern(fn: Callable) -> Callable:
    """Decorator for library functions built on `extern_elementwise` (Triton's ``@core.extern``)."""
    return builtin(fn)
