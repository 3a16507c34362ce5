"""Parse xDSL operations' declarative assembly formats when first used, not when defined.

xDSL parses an operation's ``assembly_format`` text as its class is defined. The dialects a
compile imports (builtin, arith, math, scf and Naiad's ``tt``) define about 150 operations,
and parsing their formats was about a sixth of a cold compile, though a compile prints only the
dozen or so kinds of operation a kernel holds. Importing this module, before those dialects,
makes xDSL's ``FormatProgram.from_str`` return a stand-in that parses the format the first
time an operation of that kind is printed or parsed. The printed text is the same.

An error in a format now surfaces at that first use rather than at import; the test suite
parses the format of every operation Naiad registers, so Naiad's own never do.
"""

from __future__ import annotations

from typing import Any

from xdsl.irdl.declarative_assembly_format import FormatProgram

_parse_now = FormatProgram.from_str


class LazyFormat:
    """An operation's format text, parsed into xDSL's program on first use."""

    __slots__ = ("_text", "_op_def", "_program")
    made: list[LazyFormat] = []     # every format deferred in this process (for tests)
    parsed = 0                      # how many of them have been parsed

    def __init__(self, text: str, op_def: Any):
        self._text, self._op_def, self._program = text, op_def, None
        LazyFormat.made.append(self)

    def program(self) -> FormatProgram:
        if self._program is None:
            self._program = _parse_now(self._text, self._op_def)
            LazyFormat.parsed += 1
        return self._program

    def parse(self, parser: Any, op_type: type) -> Any:
        return self.program().parse(parser, op_type)

    def print(self, printer: Any, op: Any) -> None:
        return self.program().print(printer, op)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.program(), name)


FormatProgram.from_str = staticmethod(LazyFormat)
