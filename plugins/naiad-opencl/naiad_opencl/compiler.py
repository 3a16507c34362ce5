"""The OpenCL backend's compiler: TTIR -> TTGIR -> LLVM IR (SPIR-V target) -> SPIR-V.

Stages (``kernel.asm`` keeps each):

- ``ttir``, ``ttgir``: Naiad's shared GPU stages (`naiad.codegen.gpu.stages`), the layouts
  sized by the device's sub-group size (the target's ``warp_size``; the ``threads_per_warp``
  option);
- ``llir``: the shared GPU lowering with `SPIRVHooks`, the shared-memory array sized, O3;
- ``spv``: LLVM's SPIR-V back end (through llvmlite): the binary the driver builds on the
  device, SPIR-V 1.4 at most.

Compiling needs no device: ``naiad compile --target opencl:intel-cpu:16 ...`` (arch, then the
sub-group size).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from pathlib import Path
from typing import Any

from naiad.backends.compiler import BackendOptions, BaseBackend, GPUTarget
from naiad.errors import NaiadError
from naiad_opencl.knobs import KNOBS

DOT_PRECISIONS = ("ieee", "tf32", "tf32x3", "bf16x3", "bf16x6")


@dataclasses.dataclass(frozen=True)
class OpenCLOptions(BackendOptions):
    """Triton's options where they apply (Intel's XPU backend's names); those that change
    nothing here (``grf_mode``...) are accepted, as there.  ``num_stages`` 3 or more stages the
    operands of a dot in a loop in a ring of two local-memory slots (one barrier a trip,
    `naiad.codegen.gpu.operand_rings`)."""

    num_warps: int = 4
    threads_per_warp: int = 0            # 0: the target's sub-group size
    num_ctas: int = 1
    num_stages: int = 2
    grf_mode: str = ""
    debug: bool = False
    enable_fp_fusion: bool = True
    sanitize_overflow: bool = False
    default_dot_input_precision: str = "ieee"
    allowed_dot_input_precisions: tuple = DOT_PRECISIONS
    max_num_imprecise_acc_default: int = 0
    supported_fp8_dtypes: tuple = ("fp8e5", "fp8e4nv", "fp8e4b15")
    deprecated_fp8_dot_operand_dtypes: tuple = ()
    backend_name: str = "opencl"


class OpenCLBackend(BaseBackend):
    knob_group = KNOBS
    api_version = 3                  # relies on API 3's defaults (load_dialects, module map, min dot size)
    binary_ext = "spv"

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "opencl"

    @functools.lru_cache(maxsize=None)
    def hash(self) -> str:
        """The package's version and sources (an edited checkout compiles again), llvmlite's
        version, the arch and the sub-group size."""
        import llvmlite

        from naiad_opencl import __version__

        return (f"naiad-opencl-{__version__}-{_sources_digest()}-llvmlite-{llvmlite.__version__}-"
                f"{self.target.arch}-sg{self.target.warp_size}")

    def parse_options(self, options: dict[str, Any]) -> OpenCLOptions:
        known = {f.name for f in dataclasses.fields(OpenCLOptions)}
        values = {k: v for k, v in options.items() if k in known and v is not None}
        if isinstance(values.get("allowed_dot_input_precisions"), list):
            values["allowed_dot_input_precisions"] = tuple(values["allowed_dot_input_precisions"])
        if not values.get("threads_per_warp"):
            values["threads_per_warp"] = int(self.target.warp_size)
        num_warps, lanes = values.get("num_warps", 4), values["threads_per_warp"]
        for name, value in (("num_warps", num_warps), ("threads_per_warp", lanes)):
            if value < 1 or value & (value - 1):
                raise NaiadError(f"{name}={value}: the opencl backend needs a power of two -- fix: "
                                 f"pass {name}={4 if name == 'num_warps' else self.target.warp_size}")
        return OpenCLOptions(**values)

    def add_stages(self, stages: dict, options: OpenCLOptions, language: Any) -> None:
        from naiad.codegen.gpu.stages import make_ttgir, make_ttir

        target = f"opencl:{self.target.arch}"
        stages["ttir"] = lambda module, metadata: make_ttir(module)
        stages["ttgir"] = lambda module, metadata: make_ttgir(module, options.num_warps,
                                                              options.threads_per_warp, target)
        stages["llir"] = lambda module, metadata: _make_llir(module, metadata, options)
        stages["spv"] = lambda llir, metadata: _make_spirv(llir)

    def pack_metadata(self, metadata: Any) -> tuple:
        return (metadata.get("num_warps", 4), metadata.get("threads_per_warp", 16), metadata.get("shared", 0))

    def get_target_name(self, options: Any) -> str:
        return f"opencl:{self.target.arch}"


@functools.lru_cache(maxsize=None)
def _sources_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _make_llir(module: Any, metadata: dict, options: OpenCLOptions) -> str:
    from naiad.codegen.gpu.stages import make_llir
    from naiad_opencl.hooks import SPIRVHooks, sized_shared_memory
    from naiad_opencl.spirv import optimize

    hooks = SPIRVHooks(options.threads_per_warp, fp_fusion=options.enable_fp_fusion)
    llmod = make_llir(module, metadata, hooks, options.num_warps, rings=options.num_stages >= 3)
    metadata["threads_per_warp"] = options.threads_per_warp
    return optimize(sized_shared_memory(str(llmod), metadata["shared"]))


def _make_spirv(llir: str) -> bytes:
    from naiad_opencl.spirv import emit_spirv

    return emit_spirv(llir)
