"""Inliner (MLIR's ``inline`` as Triton runs it first in make_ttir): every `tt.call` of a
function not marked ``noinline = true`` is replaced by a copy of the callee's body.

The frontend emits each call to a ``@jit`` device function, and each combine function of a
reduction, as a `tt.call` to a private `tt.func`; after inlining, the later passes see the
whole computation at once.  Callee bodies are one block ending in `tt.return` (the frontend
only returns at the end of a function), so a call becomes the callee's ops with its
arguments substituted, and the call's results become the returned values.  Copies keep the
callee's source locations.  Calls in copied bodies are inlined in turn; calls between
mutually recursive functions are left alone.  Private functions no longer called are then
deleted (`symbol_dce`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from naiad.ir import tt
from naiad.passes.symbol_dce import callees, functions, symbol_dce


def _recursive(funcs: dict[str, tt.FuncOp]) -> set[str]:
    """Names of the functions that can reach themselves through calls."""
    graph = {name: callees(func) for name, func in funcs.items()}

    def reaches(start: str) -> bool:
        seen: set[str] = set()
        work = list(graph[start])
        while work:
            name = work.pop()
            if name == start:
                return True
            if name not in seen and name in graph:
                seen.add(name)
                work.extend(graph[name])
        return False

    return {name for name in graph if reaches(name)}


def _inlinable(callee: tt.FuncOp | None, recursive: set[str], noinline_too: bool) -> bool:
    if callee is None or callee.sym_name.data in recursive:
        return False
    noinline = callee.noinline
    if noinline is not None and noinline.value.data and not noinline_too:
        return False
    body = callee.body
    return len(body.blocks) == 1 and isinstance(body.block.last_op, tt.ReturnOp)


def inline_call(call: tt.CallOp, callee: tt.FuncOp) -> None:
    """Replace `call` by a copy of `callee`'s body."""
    block = callee.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, call.arguments))
    parent = call.parent_block()
    for op in block.ops:
        if op is block.last_op:
            Rewriter.replace_op(call, [], [mapping.get(v, v) for v in op.operands])
            return
        parent.insert_op_before(op.clone(value_mapper=mapping), call)


def inline(module: Operation, noinline_too: bool = False) -> bool:
    """Inline every inlinable call in `module`, then drop unused private functions.

    ``noinline_too`` inlines functions marked ``noinline`` as well: for a backend whose lowering
    has no calls (the result is the same; only the code size differs)."""
    funcs = functions(module)
    recursive = _recursive(funcs)
    changed = False
    while calls := [op for op in module.walk() if isinstance(op, tt.CallOp)
                    and _inlinable(funcs.get(op.callee.string_value()), recursive, noinline_too)]:
        for call in calls:
            inline_call(call, funcs[call.callee.string_value()])
        changed = True
    return symbol_dce(module) or changed


@dataclass(frozen=True)
class Inline(ModulePass):
    name = "inline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        inline(op)
