"""The lowering GPU-style backends share: TTIR with layouts -> LLVM IR run by a program's
threads (`kernel.GPUKernel`), one rule per op in the ``ops_*`` modules, target specifics in a
backend's hooks.  Importing the package registers every rule."""

from naiad.codegen.gpu import (ops_asm, ops_basic, ops_control, ops_debug, ops_dot,  # noqa: F401
                               ops_memory, ops_reduce, ops_shapes)
