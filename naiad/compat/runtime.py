"""``triton.runtime`` under compat: ``driver.active`` is Naiad's selected backend's driver."""

from __future__ import annotations

from naiad.compat import errors
from naiad.compat.runtime_driver import driver
from naiad.runtime import jit
from naiad.errors import OutOfResources
from naiad.runtime.autotuner import Autotuner, Config, Heuristics, autotune, heuristics
from naiad.runtime.jit import JITFunction
from naiad.runtime.kernel_interface import KernelInterface
from naiad.runtime.tensor_wrapper import TensorWrapper, reinterpret


#: Looks like a package, so that `import triton.<missing>` reaches the compat layer's
#: "not provided" error instead of Python's "not a package".
__path__: list[str] = []

__all__ = ["Autotuner", "Config", "Heuristics", "JITFunction", "KernelInterface", "OutOfResources", "TensorWrapper",
           "autotune", "driver", "errors", "heuristics", "jit", "reinterpret"]
