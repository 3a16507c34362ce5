"""Reading and writing TTIR text: the xDSL context with every dialect a TTIR module uses.

`arith` comes from `naiad.ir.arith` (xDSL's, made tensor-capable where Triton needs it).
"""

from __future__ import annotations

from io import StringIO

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.cf import Cf
from xdsl.dialects.func import Func
from xdsl.dialects.gpu import GPU
from xdsl.dialects.math import Math
from xdsl.dialects.scf import Scf
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError

from naiad.errors import NaiadError
from naiad.ir.arith import ARITH
from naiad.ir.tt import TT

class IRParseError(NaiadError, ValueError):
    """IR text that does not parse or does not verify; the message gives the line."""


def make_context() -> Context:
    """A context with builtin, arith (tensor-capable, see above), math, scf, cf, func and
    tt loaded."""
    ctx = Context()
    for dialect in (Builtin, ARITH, Math, Scf, Cf, Func, GPU, TT):
        ctx.load_dialect(dialect)
    return ctx


class _LineRecordingParser(Parser):
    """Remembers the line each op starts on, so a verifier error can point at it
    (xDSL ops carry no source position unless the text has `loc(...)`)."""

    def __init__(self, ctx: Context, text: str, name: str):
        super().__init__(ctx, text, name)
        self.text = text
        self.op_lines: dict[Operation, int] = {}

    def parse_operation(self) -> Operation:
        start = self.pos
        op = super().parse_operation()
        self.op_lines[op] = self.text.count("\n", 0, start) + 1
        return op


def parse_module(text: str, ctx: Context | None = None, name: str = "<ttir>") -> ModuleOp:
    """Parse and verify a module; `IRParseError` names the offending line."""
    parser = _LineRecordingParser(ctx or make_context(), text, name)
    try:
        module = parser.parse_module()
    except ParseError as err:
        raise IRParseError(f"cannot parse {name}:\n{err}") from err
    try:
        module.verify()
    except DiagnosticException as err:
        raise IRParseError(_verify_error_message(module, parser, name, err)) from err
    return module


def _verify_error_message(
    module: ModuleOp, parser: _LineRecordingParser, name: str, err: Exception
) -> str:
    # Verify op by op, innermost first (the order of `verify`), to find the culprit.
    for op in module.walk(region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as op_err:
            line = parser.op_lines.get(op)
            if line is None:
                return f"{name}: '{op.name}' does not verify: {op_err}"
            source = parser.text.splitlines()[line - 1].strip()
            return f"{name}:{line}: '{op.name}' does not verify: {op_err}\n  {source}"
    return f"{name}: module does not verify:\n{err}"


def print_module(module: Operation) -> str:
    """The module as MLIR text, in the custom syntax of each op."""
    out = StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue()
