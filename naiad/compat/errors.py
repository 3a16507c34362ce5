"""``triton.runtime.errors`` / ``triton.compiler.errors`` under compat: Naiad's exception types
under Triton's names, so ``except triton.CompilationError`` catches Naiad's."""

from naiad.compiler.errors import CompilationError, CompileTimeAssertionFailure, UnsupportedLanguageConstruct
from naiad.errors import NaiadError as TritonError


class OutOfResources(TritonError):
    """A kernel needs more registers or shared memory than the device has."""

    def __init__(self, required: int, limit: int, name: str):
        self.required, self.limit, self.name = required, limit, name
        super().__init__(f"out of resource: {name}, required: {required}, hardware limit: {limit}. "
                         f"Reducing block sizes or `num_stages` may help.")


class InterpreterError(TritonError):
    """Raised by Triton's interpreter; kept so that code catching it imports."""


#: Looks like a package, so that `import triton.<missing>` reaches the compat layer's
#: "not provided" error instead of Python's "not a package".
__path__: list[str] = []

__all__ = ["CompilationError", "CompileTimeAssertionFailure", "InterpreterError", "OutOfResources",
           "TritonError", "UnsupportedLanguageConstruct"]
