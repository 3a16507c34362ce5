"""Naiad: a compiler for the Triton kernel language in which every hardware backend is a plugin.

``import naiad`` stays cheap: it imports no backend and none of the compiler's dependencies
(llvmlite, xdsl, numpy); those load on first use.
"""

from naiad import knobs
from naiad.backends import plugin_dirs as _plugin_dirs
from naiad.backends.selection import set_backend
from naiad.compiler.compiler import compile
from naiad.compiler.errors import CompilationError
from naiad.runtime.allocation import set_allocator
from naiad.runtime.autotuner import Autotuner, Config, Heuristics, autotune, heuristics
from naiad.language.core import constexpr_function
from naiad.runtime.jit import JITFunction, jit
from naiad.version import __version__


_plugin_dirs.install_finder()


def cdiv(x, y):
    """Ceiling division, as ``triton.cdiv``: the number of blocks of size y covering x."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1), as ``triton.next_power_of_2``."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


__all__ = ["Autotuner", "CompilationError", "Config", "Heuristics", "JITFunction", "__version__", "autotune",
           "cdiv", "compile", "constexpr_function", "heuristics", "jit", "knobs", "next_power_of_2",
           "set_allocator", "set_backend"]

if knobs.runtime.profile:      # NAIAD_PROFILE=1: record the whole process, report at exit
    from naiad.profiler import process as _profiled_process

    _profiled_process.profile_process()

if knobs.compat.triton:     # last: the compat modules import the names defined above
    import naiad.compat

    naiad.compat.enable()
