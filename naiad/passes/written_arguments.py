"""Which of a kernel's arguments it may write memory through: what the read-only check reads.

A launch refuses a read-only array (``np.frombuffer`` of ``bytes``, a read-only ``mmap``) where
the kernel may store to it, and only there: read-only inputs stay allowed.  The compile
pipeline runs `written_arguments` on the kernel's TTIR and keeps the answer in the kernel's
metadata (``written_args``), so a kernel from the cache knows it too.

Writes are ``tt.store``, ``tt.atomic_rmw`` and ``tt.atomic_cas`` through their pointer, an
impure ``tt.elementwise_inline_asm`` / ``tt.extern_elementwise`` through any pointer operand,
and a ``tt.call`` through the arguments its callee writes.  Each written pointer is traced back
to the kernel's arguments along pointer values (``tt.addptr``, ``tt.splat``, ``arith.select``,
block pointers, ...), so an offset loaded from another array does not make that array written;
loop-carried and branch values follow their scf op's own operand/yield correspondence.  Where
an address is not made from arguments (an integer turned into a pointer is traced through
every operand; a pointer loaded from memory cannot be traced at all), every pointer argument
counts as written.
"""

from __future__ import annotations

from typing import Any, Callable

from xdsl.dialects import scf
from xdsl.ir import BlockArgument, Operation, SSAValue

from naiad.ir import tt
from naiad.ir.types import is_pointer


class _Untraceable(Exception):
    """A written address does not come from the function's arguments in a way this analysis
    can follow."""


def written_arguments(module: Any) -> list[int] | None:
    """Indices of the kernel's arguments (its public ``tt.func``'s, in order) that it may write
    through; None when ``module`` is not TTIR with one kernel (the caller assumes every
    pointer argument is written)."""
    kernels = tt.public_functions(module)
    if len(kernels) != 1 or not isinstance(kernels[0], tt.FuncOp):
        return None
    kernel = kernels[0]
    try:
        return sorted(_Analysis(module).writes(kernel))
    except _Untraceable:
        return [i for i, arg in enumerate(kernel.args) if is_pointer(arg.type)]


def _yielded(region: Any, index: int) -> SSAValue:
    return region.block.last_op.operands[index]


def _for_result(op: scf.ForOp, index: int) -> list[SSAValue]:
    return [op.iter_args[index], _yielded(op.body, index)]


def _if_result(op: scf.IfOp, index: int) -> list[SSAValue]:
    return [_yielded(region, index) for region in op.regions if region.blocks]


def _while_result(op: scf.WhileOp, index: int) -> list[SSAValue]:
    return [op.before_region.block.last_op.args[index]]


def _for_block_argument(op: scf.ForOp, block: Any, index: int) -> list[SSAValue]:
    return [] if index == 0 else _for_result(op, index - 1)        # 0: the induction variable


def _while_block_argument(op: scf.WhileOp, block: Any, index: int) -> list[SSAValue]:
    if block is op.before_region.block:
        return [op.arguments[index], _yielded(op.after_region, index)]
    return _while_result(op, index)


#: Structured ops: where result ``index`` comes from.
RESULT_SOURCES: dict[type[Operation], Callable[[Any, int], list[SSAValue]]] = {
    scf.ForOp: _for_result,
    scf.IfOp: _if_result,
    scf.WhileOp: _while_result,
}

#: Structured ops: where the ``index``-th argument of one of their blocks comes from.  The
#: blocks of other ops (a reduction's combine function) take values of the op's operands.
BLOCK_ARGUMENT_SOURCES: dict[type[Operation], Callable[[Any, Any, int], list[SSAValue]]] = {
    scf.ForOp: _for_block_argument,
    scf.WhileOp: _while_block_argument,
}

_IMPURE_WHEN_MARKED = (tt.ElementwiseInlineAsmOp, tt.ExternElementwiseOp)


class _Analysis:
    def __init__(self, module: Any):
        self.functions = {op.sym_name.data: op for op in module.body.ops if isinstance(op, tt.FuncOp)}
        self._writes: dict[str, set[int]] = {}

    def callee(self, call: tt.CallOp) -> tt.FuncOp:
        function = self.functions.get(call.callee.string_value())
        if function is None:
            raise _Untraceable(f"no function {call.callee}")
        return function

    def writes(self, function: tt.FuncOp) -> set[int]:
        """The argument indices ``function`` may write through (recursion: assumed none while
        the function is being analysed, which its own stores then add to)."""
        name = function.sym_name.data
        if name in self._writes:
            return self._writes[name]
        self._writes[name] = set()
        roots: list[SSAValue] = []
        for op in function.walk():
            if isinstance(op, (tt.StoreOp, tt.AtomicRMWOp, tt.AtomicCASOp)):
                roots.append(op.ptr)
            elif isinstance(op, _IMPURE_WHEN_MARKED) and not op.pure.value.data:
                roots.extend(v for v in op.operands if is_pointer(v.type))
            elif isinstance(op, tt.CallOp):
                roots.extend(op.arguments[i] for i in self.writes(self.callee(op)))
        found = self.origins(function, roots)
        self._writes[name] = found
        return found

    def origins(self, function: tt.FuncOp, values: list[SSAValue]) -> set[int]:
        """The indices of ``function``'s arguments that ``values`` are made from."""
        entry = function.body.block
        found: set[int] = set()
        seen: set[tuple[SSAValue, bool]] = set()
        work = [(value, False) for value in values]
        while work:
            value, every_operand = work.pop()
            if (value, every_operand) in seen:
                continue
            seen.add((value, every_operand))
            if isinstance(value, BlockArgument) and value.block is entry:
                found.add(value.index)
                continue
            sources, every_operand = self.sources(function, value, every_operand)
            work.extend((source, every_operand) for source in sources)
        return found

    def sources(self, function: tt.FuncOp, value: SSAValue,
                every_operand: bool) -> tuple[list[SSAValue], bool]:
        """The values ``value`` is made from (and whether to follow all their operands)."""
        if isinstance(value, BlockArgument):
            parent = value.block.parent_op()
            rule = BLOCK_ARGUMENT_SOURCES.get(type(parent))
            if rule is not None:
                return rule(parent, value.block, value.index), every_operand
            return list(parent.operands), every_operand
        op = value.owner
        index = value.index
        rule = RESULT_SOURCES.get(type(op))
        if rule is not None:
            return rule(op, index), every_operand
        if isinstance(op, tt.CallOp):
            callee = self.callee(op)
            returned = callee.body.block.last_op.operands[index]
            return [op.arguments[i] for i in self.origins(callee, [returned])], every_operand
        if isinstance(op, tt.LoadOp) or op.regions:
            raise _Untraceable(f"{op.name} makes an address")
        if isinstance(op, tt.IntToPtrOp):
            every_operand = True
        return [v for v in op.operands if every_operand or is_pointer(v.type)], every_operand
