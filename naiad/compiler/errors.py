"""Compile errors a person can act on.

A `CompilationError` names the kernel, the file, line and column, shows the source line with a
caret under the column, and says what is wrong and what to do.  The code generator attaches the
position of the AST node it was visiting; whatever the language layer raised (a type error, a
shape mismatch) becomes the message.

The position is always in the user's code.  An error inside a ``@jit`` function the user wrote
keeps that function's line and lists the calls that led there (``called from kernel 'k' at
k.py:12``); an error inside Naiad's own library (``tl.sum`` is ``@jit`` code in
`naiad.language.standard`) is reported at the user's call of the library function instead,
because the library's source is not what the user can fix.  Naiad's own frames are dropped from
the traceback unless ``NAIAD_FRONTEND_DEBUG=1``, so users see their kernel, not the compiler.
"""

from __future__ import annotations

import ast

from naiad.errors import NaiadError


class CompilationError(NaiadError):
    """A kernel could not be compiled.

    ``message`` is the explanation without the source excerpt; ``kernel`` the kernel being
    compiled; ``function`` the ``@jit`` function holding the reported line (the kernel itself
    unless the line is in a device function it calls); ``lineno``/``col`` the position in
    ``filename``; ``call_stack`` the calls from the kernel down to ``function``.
    """

    def __init__(self, kernel: str, filename: str, source: str | None, node: ast.AST | None,
                 message: str, line_offset: int = 0, *, function: str | None = None):
        self.kernel = kernel
        self.function = function or kernel
        self.filename = filename
        self.message = message
        self.lineno = getattr(node, "lineno", None)
        self.col = getattr(node, "col_offset", None)
        if self.lineno is not None:
            self.lineno += line_offset
        self.source_line = _line(source, getattr(node, "lineno", None))
        self.call_stack: list[str] = []
        super().__init__(message)

    def called_from(self, caller: str, filename: str, lineno: int | None, *, is_kernel: bool) -> None:
        """Record that the function holding the error was called by ``caller`` at that line."""
        what = f"kernel '{caller}'" if is_kernel else f"'{caller}'"
        self.call_stack.append(f"{what} at {filename}:{lineno}")
        if is_kernel:
            self.kernel = caller

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno}:{(self.col or 0) + 1}" if self.lineno else self.filename
        if self.function == self.kernel and not self.call_stack:
            text = f"in kernel '{self.kernel}' at {where}:\n"
        else:
            callers = ", ".join(_collapsed(self.call_stack))
            text = f"in '{self.function}' at {where} ({callers}):\n"
        if self.source_line is not None:
            text += f"    {self.source_line}\n    {' ' * (self.col or 0)}^\n"
        return text + self.message

    def __reduce__(self):
        # Exceptions are copied (deepcopy, pickling across processes): keep every field.
        return (_rebuild, (type(self), dict(self.__dict__)))


def _collapsed(call_stack: list[str]) -> list[str]:
    """"called from X" for each call, a run of the same call (recursion) said once, with its
    depth: "called from 'f' at f.py:3 (31 times, recursively)"."""
    parts: list[str] = []
    i = 0
    while i < len(call_stack):
        j = i
        while j < len(call_stack) and call_stack[j] == call_stack[i]:
            j += 1
        repeats = f" ({j - i} times, recursively)" if j - i > 1 else ""
        parts.append(f"called from {call_stack[i]}{repeats}")
        i = j
    return parts


def _rebuild(cls, fields):
    error = cls.__new__(cls)
    NaiadError.__init__(error, fields["message"])
    error.__dict__.update(fields)
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


def error_at(kernel: str, location: object, message: str) -> CompilationError:
    """A `CompilationError` at an IR operation's source location (``loc("f.py":12:5)``), for
    problems found after the frontend: a backend that cannot lower an operation, say."""
    import linecache

    filename = getattr(getattr(location, "filename", None), "data", "<unknown>")
    line = getattr(getattr(location, "line", None), "data", None)
    col = getattr(getattr(location, "column", None), "data", 1)
    error = CompilationError(kernel, filename, None, None, message)
    error.lineno, error.col = line, max(col - 1, 0)
    text = linecache.getline(filename, line) if line else ""
    error.source_line = text.rstrip() or None
    return error
