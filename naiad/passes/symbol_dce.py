"""Symbol DCE (MLIR's ``symbol-dce``): delete private functions that nothing calls.

Public functions (kernels) are the roots; a private `tt.func` survives only if a `tt.call`
in a surviving function reaches it.  After inlining this removes every device function
whose calls were all inlined.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from naiad.ir import tt


def functions(module: Operation) -> dict[str, tt.FuncOp]:
    """The module's `tt.func`s by name."""
    return {op.sym_name.data: op for op in module.walk() if isinstance(op, tt.FuncOp)}


def callees(func: tt.FuncOp) -> set[str]:
    """Names of the functions `func` calls."""
    return {op.callee.string_value() for op in func.walk() if isinstance(op, tt.CallOp)}


def _is_private(func: tt.FuncOp) -> bool:
    return func.sym_visibility is not None and func.sym_visibility.data == "private"


def symbol_dce(module: Operation) -> bool:
    """Erase the private functions unreachable from a public one; True if any went."""
    funcs = functions(module)
    live: set[str] = set()
    work = [name for name, func in funcs.items() if not _is_private(func)]
    while work:
        name = work.pop()
        if name in live or name not in funcs:
            continue
        live.add(name)
        work.extend(callees(funcs[name]))
    dead = [func for name, func in funcs.items() if name not in live]
    for func in dead:
        func.detach()
        func.erase()
    return bool(dead)


@dataclass(frozen=True)
class SymbolDCE(ModulePass):
    name = "symbol-dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        symbol_dce(op)
