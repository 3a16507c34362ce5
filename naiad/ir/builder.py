"""Where the next operation goes, and with which source location.

The code generator and the semantic layer never place operations themselves: they hand them to
`IRBuilder.insert`, which appends to the current block and stamps the current source location
(``loc("kernel.py":12:5)``), so every later stage can point back at the kernel's line.  The
builder also builds the structured control flow (``scf.if``, ``scf.for``, ``scf.while``) from
Python callables that generate the bodies.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from naiad.ir import tt  # first: naiad.ir makes xDSL parse assembly formats lazily (lazy_formats)
from xdsl.dialects import scf
from xdsl.dialects.builtin import (ArrayAttr, DictionaryAttr, FileLineColLoc, FunctionType,
                                   IntAttr, IntegerAttr, IntegerType, ModuleOp, StringAttr,
                                   UnknownLoc)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue


class IRBuilder:
    """Appends operations to a current block of one module."""

    def __init__(self) -> None:
        self.module = ModuleOp([])
        self.block: Block | None = None
        self.loc: Attribute = UnknownLoc()
        self._locs: dict[tuple[str, int, int], Attribute] = {}
        self._depth = 0

    # -- locations and insertion -----------------------------------------------------------
    def set_loc(self, filename: str, line: int, col: int) -> None:
        # Every visited AST node sets the location; building the attribute is the costly
        # part, so each distinct position is built once.
        key = (filename, line, col)
        loc = self._locs.get(key)
        if loc is None:
            loc = self._locs[key] = FileLineColLoc(StringAttr(filename), IntAttr(line), IntAttr(col))
        self.loc = loc

    def insert(self, op: Operation) -> Operation:
        if self.block is None:
            raise RuntimeError("no insertion point: operations must be created inside a function")
        op.location = self.loc
        self.block.add_op(op)
        return op

    def value(self, op: Operation) -> SSAValue:
        """Insert a one-result operation and return its result."""
        return self.insert(op).results[0]

    @contextlib.contextmanager
    def at_end(self, block: Block) -> Iterator[Block]:
        outer = self.block
        self.block = block
        try:
            yield block
        finally:
            self.block = outer

    @contextlib.contextmanager
    def detached_block(self, discard: bool = False) -> Iterator[Block]:
        """Generate into a fresh block (a branch or loop body); with ``discard`` throw it away.

        A discarded block is a dry run: the code generator uses it to learn which variables a
        loop body assigns before building the real loop.
        """
        block = Block()
        self._depth += 1
        try:
            with self.at_end(block):
                yield block
        finally:
            self._depth -= 1
            if discard:
                for op in reversed(list(block.ops)):
                    block.detach_op(op)
                    op.drop_all_references()

    def block_depth(self) -> int:
        """How many runtime if/for/while bodies enclose the insertion point."""
        return self._depth

    @contextlib.contextmanager
    def at_module_end(self) -> Iterator[None]:
        """Generate a new function: save and restore the insertion point and depth."""
        outer, depth, loc = self.block, self._depth, self.loc
        self._depth = 0
        try:
            yield
        finally:
            self.block, self._depth, self.loc = outer, depth, loc

    @staticmethod
    def placeholder(type: Attribute, block: Block) -> SSAValue:
        """A block argument standing for a value (the loop variable during a dry run)."""
        return block.insert_arg(type, len(block.args))

    # -- functions -------------------------------------------------------------------------
    def create_function(self, name: str, arg_types: Sequence[Attribute],
                        arg_attrs: Sequence[list], *, public: bool, noinline: bool
                        ) -> tuple[tt.FuncOp, Block]:
        attrs = ArrayAttr([DictionaryAttr({k: IntegerAttr(v, IntegerType(32)) for k, v in a})
                           for a in arg_attrs])
        func = tt.FuncOp(name, (list(arg_types), []), visibility="public" if public else "private",
                         arg_attrs=attrs if any(arg_attrs) else None,
                         noinline=True if noinline else None)
        func.location = self.loc
        self.module.body.block.add_op(func)
        return func, func.body.block

    def ret(self, values: Sequence[SSAValue]) -> None:
        """Return from the function being generated; its result types become the values' types."""
        assert self.block is not None
        func = self.block.parent_op()
        while func is not None and not isinstance(func, tt.FuncOp):
            func = func.parent_op()
        assert isinstance(func, tt.FuncOp)
        func.properties["function_type"] = FunctionType.from_lists(
            func.function_type.inputs.data, [v.type for v in values])
        self.insert(tt.ReturnOp(*values))

    def call(self, func: tt.FuncOp, args: Sequence[SSAValue]) -> Sequence[SSAValue]:
        op = self.insert(tt.CallOp(func.sym_name.data, list(args), func.function_type.outputs.data))
        return op.results

    # -- structured control flow -------------------------------------------------------------
    def create_if(self, cond: SSAValue, result_types: Sequence[Attribute],
                  then_block: Block, then_values: Sequence[SSAValue],
                  else_block: Block, else_values: Sequence[SSAValue]) -> Sequence[SSAValue]:
        then_block.add_op(_located(scf.YieldOp(*then_values), self.loc))
        else_has_ops = bool(else_values) or else_block.first_op is not None
        if else_has_ops:
            else_block.add_op(_located(scf.YieldOp(*else_values), self.loc))
        op = scf.IfOp(cond, list(result_types), Region(then_block),
                      Region(else_block) if else_has_ops else None)
        return self.insert(op).results

    def create_for(self, lb: SSAValue, ub: SSAValue, step: SSAValue, init: Sequence[SSAValue],
                   body: Callable[[Sequence[SSAValue]], Sequence[SSAValue]],
                   attributes: dict[str, Any]) -> Sequence[SSAValue]:
        block = Block(arg_types=[lb.type] + [v.type for v in init])
        self._depth += 1
        try:
            with self.at_end(block):
                yielded = body(block.args)
                self.insert(scf.YieldOp(*yielded))
        finally:
            self._depth -= 1
        op = scf.ForOp(lb, ub, step, list(init), Region(block))
        for key, value in attributes.items():
            op.attributes[f"tt.{key}"] = IntegerAttr(int(value), IntegerType(32))
        return self.insert(op).results

    def create_while(self, init: Sequence[SSAValue],
                     condition: Callable[[Sequence[SSAValue]], SSAValue],
                     body: Callable[[Sequence[SSAValue]], Sequence[SSAValue]]) -> Sequence[SSAValue]:
        types = [v.type for v in init]
        before, after = Block(arg_types=types), Block(arg_types=types)
        self._depth += 1
        try:
            with self.at_end(before):
                cond = condition(before.args)
                self.insert(scf.ConditionOp(cond, *before.args))
            with self.at_end(after):
                self.insert(scf.YieldOp(*body(after.args)))
        finally:
            self._depth -= 1
        return self.insert(scf.WhileOp(list(init), types, Region(before), Region(after))).results


def _located(op: Operation, loc: Attribute) -> Operation:
    op.location = loc
    return op
