"""llvmlite's binding with every target's code generator and assembly printer initialized, once:
what the GPU backends compile with (NVPTX, AMDGPU), where the CPU backend needs only the host's."""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=None)
def all_targets() -> Any:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm
