"""The host CPU as a compilation target: triple, CPU name, features, vector width.

The target's ``arch`` names the CPU model (``x86_64-znver1``), so code compiled for one machine
is never reused on another with different vector instructions; the cache key also covers the
full feature string (`host_features`).
"""

from __future__ import annotations

import functools
import platform

from naiad.backends.compiler import GPUTarget
from naiad.codegen.llvm_binding import native_target
from naiad.errors import NaiadError


@functools.lru_cache(maxsize=None)
def host_target() -> GPUTarget:
    llvm = native_target()
    return GPUTarget("cpu", f"{platform.machine()}-{llvm.get_host_cpu_name()}", 1)


@functools.lru_cache(maxsize=None)
def host_features() -> str:
    return native_target().get_host_cpu_features().flatten()


def vector_bytes(features: str) -> int:
    """The width of the widest vector registers the features allow (AVX-512, AVX, SSE/NEON)."""
    enabled = {f[1:] for f in features.split(",") if f.startswith("+")}
    if "avx512f" in enabled:
        return 64
    if "avx" in enabled or "avx2" in enabled:
        return 32
    return 16


@functools.lru_cache(maxsize=None)
def target_machine(arch: str):
    """The shared LLVM target machine for compiling to ``arch`` (the host's)."""
    return new_target_machine(arch)


def new_target_machine(arch: str):
    """A target machine of one's own: an execution engine takes ownership of the one it gets
    and frees it with itself, so each engine needs a fresh one."""
    llvm = native_target()
    if arch != host_target().arch:
        raise NaiadError(f"cannot compile for CPU {arch!r} on this machine ({host_target().arch}) -- "
                         f"fix: compile on a machine of that kind")
    triple = llvm.get_process_triple()
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=host_features(), opt=3, reloc="pic",
        codemodel="jitdefault")
