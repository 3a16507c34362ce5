"""Compile errors a person can act on.

A `CompilationError` names the kernel, the file, line and column, shows the source line with a
caret under the column, and says what is wrong and what to do.  The code generator attaches the
position of the AST node it was visiting; whatever the language layer raised (a type error, a
shape mismatch) becomes the message.  Naiad's own frames are dropped from the traceback unless
``NAIAD_FRONTEND_DEBUG=1``, so users see their kernel, not the compiler.
"""

from __future__ import annotations

import ast

from naiad.errors import NaiadError


class CompilationError(NaiadError):
    """A kernel could not be compiled.  ``.message`` is the explanation without the source excerpt."""

    def __init__(self, kernel: str, filename: str, source: str | None, node: ast.AST | None,
                 message: str, line_offset: int = 0):
        self.kernel = kernel
        self.filename = filename
        self.message = message
        self.lineno = getattr(node, "lineno", None)
        self.col = getattr(node, "col_offset", None)
        if self.lineno is not None:
            self.lineno += line_offset
        self.source_line = _line(source, getattr(node, "lineno", None))
        super().__init__(self._format())

    def _format(self) -> str:
        where = f"{self.filename}:{self.lineno}:{(self.col or 0) + 1}" if self.lineno else self.filename
        text = f"in kernel '{self.kernel}' at {where}:\n"
        if self.source_line is not None:
            text += f"    {self.source_line}\n    {' ' * (self.col or 0)}^\n"
        return text + self.message

    def __reduce__(self):
        # Exceptions are copied (deepcopy, pickling across processes): keep the formatted text.
        return (_rebuild, (type(self), str(self), self.message, self.kernel, self.filename,
                           self.lineno, self.col, self.source_line))


def _rebuild(cls, text, message, kernel, filename, lineno, col, source_line):
    error = cls.__new__(cls)
    NaiadError.__init__(error, text)
    error.message, error.kernel, error.filename = message, kernel, filename
    error.lineno, error.col, error.source_line = lineno, col, source_line
    return error


def _line(source: str | None, lineno: int | None) -> str | None:
    if source is None or lineno is None:
        return None
    lines = source.splitlines()
    return lines[lineno - 1].rstrip() if 0 < lineno <= len(lines) else None


class UnsupportedLanguageConstruct(CompilationError):
    """Python syntax that kernels cannot use (lambda, try, with, comprehensions, ...)."""


class CompileTimeAssertionFailure(CompilationError):
    """A ``tl.static_assert`` failed."""
