"""The ``triton`` top-level module under compat: ``triton.jit``, ``triton.cdiv``, errors, ..."""

import naiad.language as language
from naiad import cdiv, knobs, next_power_of_2, testing
from naiad.compat import runtime
from naiad.compat.errors import CompilationError, OutOfResources, TritonError
from naiad.compat.compiler import compile
from naiad.runtime.autotuner import Config, autotune, heuristics
from naiad.runtime.allocation import set_allocator
from naiad.language.core import constexpr_function
from naiad.runtime.jit import JITFunction, jit
from naiad.runtime.kernel_interface import KernelInterface
from naiad.runtime.tensor_wrapper import TensorWrapper, reinterpret

__naiad_compat__ = True
#: The Triton release whose language this compatibility layer follows.
__version__ = "3.6.0"

#: Looks like a package, so that `import triton.<missing>` reaches the compat layer's
#: "not provided" error instead of Python's "not a package".
__path__: list[str] = []

__all__ = ["CompilationError", "Config", "JITFunction", "KernelInterface", "OutOfResources", "TensorWrapper",
           "TritonError", "autotune", "cdiv", "compile", "constexpr_function", "heuristics", "jit", "knobs", "language", "next_power_of_2",
           "reinterpret", "runtime", "set_allocator", "testing"]
