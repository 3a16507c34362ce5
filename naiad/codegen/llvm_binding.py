"""llvmlite's binding with code generators and assembly printers initialized, once: every
target's for the GPU backends (NVPTX, AMDGPU), the host's alone for the CPU backend."""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=None)
def all_targets() -> Any:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


@functools.lru_cache(maxsize=None)
def native_target() -> Any:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm
