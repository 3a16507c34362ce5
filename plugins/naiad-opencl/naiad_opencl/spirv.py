"""LLVM's SPIR-V target through llvmlite: O3 and SPIR-V emission."""

from __future__ import annotations

import functools
import threading
from typing import Any

from naiad_opencl.hooks import TRIPLE


@functools.lru_cache(maxsize=None)
def _llvm() -> Any:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def _machine() -> Any:
    """A new target machine each time: LLVM's SPIR-V back end keeps per-module state in its
    target machine, and a second module emitted through one crashed the process."""
    return _llvm().Target.from_triple(TRIPLE).create_target_machine(opt=3)


def optimize(llir: str) -> str:
    """``llir`` parsed, verified and optimized at O3 (as text)."""
    llvm = _llvm()
    module = llvm.parse_assembly(llir)
    module.verify()
    builder = llvm.create_pass_builder(_machine(), llvm.create_pipeline_tuning_options(speed_level=3))
    builder.getModulePassManager().run(module, builder)
    return str(module)


#: LLVM's options are process-wide: one emission at a time changes them.
_emitting = threading.Lock()


def emit_spirv(llir: str) -> bytes:
    """The SPIR-V binary of an optimized module.

    Loop strength reduction is off while the SPIR-V back end runs: in llvmlite 0.50's LLVM it
    rewrote a loop's address ``((tid >> 2) & 3) * 16 + k`` into one that lost the mask (every
    work-item past the fourth read the wrong row: an FMA dot's operands).  The option is put
    back after, for the other targets in the process."""
    llvm = _llvm()
    with _emitting:
        llvm.set_option("", "-disable-lsr=true")
        try:
            return bytes(_machine().emit_object(llvm.parse_assembly(llir)))
        finally:
            llvm.set_option("", "-disable-lsr=false")
