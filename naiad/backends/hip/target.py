"""LLVM's AMDGPU target through llvmlite: the target machine for a gfx architecture, wave
sizes, and the module's code: assembly (``amdgcn``) and the relocatable object LLD links.

Each emission parses the IR again: LLVM's AMDGPU code generation rewrites the module it is
given (structurizing control flow), so a second emission from the same module fails.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from naiad.codegen.llvm_binding import all_targets as _llvm
from naiad.errors import NaiadError

TRIPLE = "amdgcn-amd-amdhsa"
#: Architectures whose wavefronts are 64 lanes (CDNA, and GCN before it); RDNA's are 32.
_WAVE64 = re.compile(r"gfx(9\d\w*|8\d\w*)$")
#: The architectures the backend is built and tested for.
KNOWN = ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1200")


#: LDS a workgroup may use, by architecture (64 KiB but on gfx950).
_LDS_BYTES = {"gfx950": 160 << 10}


def lds_bytes(arch: str) -> int:
    """Bytes of LDS (shared memory) one workgroup may use on ``arch``."""
    return _LDS_BYTES.get(str(arch), 64 << 10)


def wave_size(arch: str) -> int:
    """Lanes of a wavefront on ``arch``: 64 on CDNA (gfx9), 32 on RDNA (gfx10 on)."""
    return 64 if _WAVE64.match(str(arch)) else 32


def check_arch(arch: Any) -> str:
    arch = str(arch)
    if not re.fullmatch(r"gfx[0-9a-f]+", arch):
        raise NaiadError(f"hip target {arch!r}: an AMD GPU architecture is named gfx<number>, e.g. "
                         f"hip:gfx942 (MI300) -- fix: pass one of {', '.join(KNOWN)}")
    return arch


@functools.lru_cache(maxsize=None)
def target_machine(arch: str) -> Any:
    """LLVM's AMDGPU target machine for ``arch`` (position-independent code, as code objects
    are)."""
    llvm = _llvm()
    features = "+wavefrontsize64" if wave_size(arch) == 64 else "+wavefrontsize32"
    return llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=check_arch(arch), features=features, opt=3, reloc="pic")


def data_layout(arch: str) -> str:
    return str(target_machine(arch).target_data)


def optimize(llir: str, arch: str) -> str:
    """The module verified and optimized at O3 for ``arch``."""
    llvm = _llvm()
    module = llvm.parse_assembly(llir)
    module.verify()
    machine = target_machine(arch)
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(module, builder)
    return str(module)


def emit_assembly(llir: str, arch: str) -> str:
    return target_machine(arch).emit_assembly(_llvm().parse_assembly(llir))


def emit_object(llir: str, arch: str) -> bytes:
    return target_machine(arch).emit_object(_llvm().parse_assembly(llir))
