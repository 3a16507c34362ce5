"""libdevice on the CPU: the generic module's functions, which the CPU lowering resolves to LLVM
intrinsics, libm calls, or Naiad's own IR (see `naiad.codegen.hooks`).  The CPU backend maps
``naiad.language.extra.libdevice`` to this module through ``get_module_map``; functions the CPU
implements differently would be defined here, after the import."""

from naiad.language.extra.libdevice import *  # noqa: F401,F403
