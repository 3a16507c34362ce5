"""Intel AMX's tile registers: whether this process may use them.

Linux hands a process the tile registers' state (8 KB of it, saved at each context switch) only
when it asks, once, with ``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``; a tile
instruction run before that kills the process with SIGILL.  The permission covers every thread of
the process and its forked children, and asking again is harmless -- so the compiler asks
before it decides to use tiles (`tiles_usable`) and the driver asks before it runs code that
uses them (`require_tiles`), which may have been compiled by another process and read from the
cache.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import sys

from naiad.errors import NaiadError

#: x86-64 Linux: the ``arch_prctl`` system call, its request for an extended state component,
#: and the component of the tile data.
_SYS_ARCH_PRCTL = 158
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18


def has_tiles(features: list[str], kind: str) -> bool:
    """Whether LLVM's host features have AMX tiles that multiply ``kind`` ("bf16": ``tdpbf16ps``,
    "int8": ``tdpbssd``)."""
    return "+amx-tile" in features and f"+amx-{kind}" in features


@functools.lru_cache(maxsize=None)
def tiles_permitted() -> bool:
    """Ask Linux for the tile registers (once a process); False where it refuses, or is not
    x86-64 Linux."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        granted = libc.syscall(ctypes.c_long(_SYS_ARCH_PRCTL), ctypes.c_long(_ARCH_REQ_XCOMP_PERM),
                               ctypes.c_long(_XFEATURE_XTILEDATA))
    except (OSError, AttributeError):
        return False
    return granted == 0


def tiles_usable(features: list[str], kind: str, enabled: bool) -> bool:
    """Whether code compiled now may multiply ``kind`` on tiles: the processor has them, the
    ``NAIAD_CPU_AMX`` knob (``enabled``) allows them, and Linux granted them."""
    return enabled and has_tiles(features, kind) and tiles_permitted()


def require_tiles(kernel_name: str) -> None:
    """Before running code that uses tiles: make sure this process may."""
    if not tiles_permitted():
        raise NaiadError(f"kernel {kernel_name!r} was compiled to use AMX tiles, but Linux did not "
                         f"grant this process the tile registers (arch_prctl ARCH_REQ_XCOMP_PERM) -- "
                         f"fix: set NAIAD_CPU_AMX=0 to compile it without them, or run on a Linux "
                         f"kernel of version 5.16 or later")
