"""The lowering GPU-style backends share: TTIR with layouts -> LLVM IR run by a program's
threads (`kernel.GPUKernel`), one rule per op in the ``ops_*`` modules, target specifics in a
backend's hooks.  Importing the package registers every rule."""

from naiad.codegen.gpu import (ops_basic, ops_control, ops_dot, ops_memory, ops_reduce,  # noqa: F401
                               ops_shapes)
