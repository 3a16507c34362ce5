"""``triton.runtime.errors`` / ``triton.compiler.errors`` under compat: Naiad's exception types
under Triton's names, so ``except triton.CompilationError`` catches Naiad's."""

from naiad.compiler.errors import CompilationError, CompileTimeAssertionFailure, UnsupportedLanguageConstruct
from naiad.errors import NaiadError as TritonError
from naiad.errors import OutOfResources  # one class: backends raise it, the autotuner skips it


class InterpreterError(TritonError):
    """Raised by Triton's interpreter; kept so that code catching it imports."""


#: Looks like a package, so that `import triton.<missing>` reaches the compat layer's
#: "not provided" error instead of Python's "not a package".
__path__: list[str] = []

__all__ = ["CompilationError", "CompileTimeAssertionFailure", "InterpreterError", "OutOfResources",
           "TritonError", "UnsupportedLanguageConstruct"]
