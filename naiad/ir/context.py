"""Reading and writing TTIR text: the xDSL context with every dialect a TTIR module uses.

`arith` comes from `naiad.ir.arith` (xDSL's, made tensor-capable where Triton needs it).
"""

from __future__ import annotations

import importlib
import re
import struct

from io import StringIO

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.math import Math
from xdsl.dialects.scf import Scf
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError

from naiad.errors import NaiadError
from naiad.ir.arith import ARITH
from naiad.ir.gpu import GPU
from naiad.ir.tt import TT
from naiad.ir.ttg import TTG, TTNG

class IRParseError(NaiadError, ValueError):
    """IR text that does not parse or does not verify; the message gives the line."""


def make_context() -> Context:
    """A context with builtin, arith (tensor-capable, see above), math, scf, gpu, tt, ttg and ttng loaded,
    and cf and func registered: TTIR text may hold them, but Naiad's own IR never does, so they
    are imported only when a parsed text uses them (xDSL's cf costs a cold compile ~7 ms)."""
    ctx = Context()
    for dialect in (Builtin, ARITH, Math, Scf, GPU, TT, TTG, TTNG):
        ctx.load_dialect(dialect)
    ctx.register_dialect("cf", lambda: importlib.import_module("xdsl.dialects.cf").Cf)
    ctx.register_dialect("func", lambda: importlib.import_module("xdsl.dialects.func").Func)
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


#: A dense float literal holding hex tokens (bits): ``dense<0xFF800000> : tensor<4xf32>``, or a
#: list with some (``dense<[1.0, 0x7FC00000]>``), as MLIR and xDSL print infinities and NaNs.
#: xDSL reads a bare hex token as an integer *value*; its quoted form is raw bytes.
_HEX_DENSE = re.compile(r"dense<(\[[^<>]*\]|0x[0-9A-Fa-f]+)>(\s*:\s*tensor<[^<>]*x(f16|bf16|f32|f64)>)")
_FLOAT_FORMATS = {"f16": "<e", "f32": "<f", "f64": "<d"}


def _element_bytes(token: str, element: str) -> bytes:
    width = 2 if element in ("f16", "bf16") else 4 if element == "f32" else 8
    if token.lower().startswith("0x"):
        return int(token, 16).to_bytes(width, "little")
    if element == "bf16":
        return struct.pack("<f", float(token))[2:]
    return struct.pack(_FLOAT_FORMATS[element], float(token))


def _quote_hex_dense(text: str) -> str:
    """Rewrite each float dense literal with hex tokens as xDSL's quoted raw-bytes form."""
    def quoted(match: re.Match) -> str:
        body, element = match.group(1), match.group(3)
        if "0x" not in body.lower():
            return match.group(0)
        tokens = [t for t in re.split(r"[\s,\[\]]+", body) if t]
        raw = b"".join(_element_bytes(t, element) for t in tokens)
        return f'dense<"0x{raw.hex().upper()}">{match.group(2)}'
    return _HEX_DENSE.sub(quoted, text)


def parse_module(text: str, ctx: Context | None = None, name: str = "<ttir>") -> ModuleOp:
    """Parse and verify a module; `IRParseError` names the offending line."""
    parser = _LineRecordingParser(ctx or make_context(), _quote_hex_dense(text), name)
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


#: How `Printer.print_bytes_literal` writes each byte: ``\\`` for a backslash, ``\XX`` (hex)
#: for a quote, control and non-ASCII bytes, the character itself otherwise.
_BYTE_ESCAPES = tuple("\\\\" if b == 0x5C else f"\\{b:02X}" if b < 0x20 or b > 0x7E or b == 0x22
                      else chr(b) for b in range(256))


class _TextPrinter(Printer):
    """xDSL's printer with string literals written in one piece: xDSL prints them a byte at a
    time, each byte a `print_string` call, and the layouts of a TTGIR module (``ttg.layout``)
    are long strings -- a cold compile spent ~15 ms there.  The text is the same."""

    def print_bytes_literal(self, bytestring: bytes) -> None:
        self.print_string('"' + "".join([_BYTE_ESCAPES[b] for b in bytestring]) + '"')


def print_module(module: Operation) -> str:
    """The module as MLIR text, in the custom syntax of each op."""
    out = StringIO()
    _TextPrinter(stream=out).print_op(module)
    return out.getvalue()
