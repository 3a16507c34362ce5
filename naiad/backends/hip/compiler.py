"""The AMD backend's compiler: TTIR -> TTGIR -> LLVM IR (AMDGPU) -> amdgcn -> hsaco.

Stages (``kernel.asm`` keeps each):

- ``ttir``, ``ttgir``: Naiad's shared GPU stages (`naiad.codegen.gpu.stages`), the layouts
  sized by the architecture's wavefront (64 lanes on CDNA, 32 on RDNA); with the ``mfma`` option,
  fp16/bf16 dots on the matrix cores (`naiad.backends.hip.mfma`);
- ``llir``: the shared GPU lowering with `AMDGPUHooks`, the kernel's attributes and LDS size
  written in, optimized at O3;
- ``amdgcn``: the ISA, from LLVM's AMDGPU back end through llvmlite;
- ``hsaco``: the code object: the object LLVM emits, linked by LLD (`naiad.backends.hip.linker`).

Compiling needs no AMD GPU and no ROCm: ``naiad compile --target hip:gfx942 ...``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from naiad import knobs
from naiad.backends.compiler import BACKEND_API_VERSION, BackendOptions, BaseBackend, GPUTarget
from naiad.backends.hip.knobs import KNOBS
from naiad.errors import NaiadError

DOT_PRECISIONS = ("ieee", "tf32", "tf32x3", "bf16x3", "bf16x6")


@dataclasses.dataclass(frozen=True)
class HIPOptions(BackendOptions):
    """Triton's HIPOptions where they apply.  ``num_stages`` 2 or more (the default, as Triton's
    AMD backend) issues the loads that feed dots one iteration ahead (register prefetch; deeper
    counts prefetch one iteration too), a dot's operands staged in LDS together (two barriers a
    trip); 3 or more stages them in a ring of two LDS slots instead (one barrier a trip,
    `naiad.codegen.gpu.operand_rings`; twice the LDS, as Triton's ``num_stages - 1`` buffers)
    where the LDS holds it.  Where ``mfma`` is on,
    ``matrix_instr_nonkdim`` picks the MFMA size (32, 16, or 0 for the larger that fits) and
    ``kpack`` (1 or 2) how many instructions' k a lane holds consecutively
    (`naiad.backends.hip.mfma.operand_layout`)."""

    num_warps: int = 4
    waves_per_eu: int = 0
    num_stages: int = 2
    num_ctas: int = 1
    matrix_instr_nonkdim: int = 0
    kpack: int = 1
    warp_size: int = 64
    debug: bool = False
    enable_fp_fusion: bool = True
    sanitize_overflow: bool = False
    default_dot_input_precision: str = "ieee"
    allowed_dot_input_precisions: tuple = DOT_PRECISIONS
    max_num_imprecise_acc_default: int = 0
    supported_fp8_dtypes: tuple = ("fp8e5", "fp8e4nv", "fp8e4b15", "fp8e4b8", "fp8e5b16")
    deprecated_fp8_dot_operand_dtypes: tuple = ()
    #: fp16/bf16 dots on MFMA (`naiad.backends.hip.mfma`); default: the ``NAIAD_HIP_MFMA`` knob.
    mfma: bool = False
    backend_name: str = "hip"
    arch: str = "gfx942"


class HIPBackend(BaseBackend):
    api_version = BACKEND_API_VERSION
    binary_ext = "hsaco"
    knob_group = KNOBS
    cache_env_vars = ("NAIAD_LLD_PATH", "NAIAD_ROCM_PATH", "NAIAD_DEBUG")

    @staticmethod
    def default_warp_size(arch: Any) -> int:
        """A wavefront's lanes on ``arch`` (``naiad compile --target hip:gfx942`` reads it)."""
        from naiad.backends.hip.target import wave_size

        return wave_size(arch)

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "hip"

    @functools.lru_cache(maxsize=None)
    def hash(self) -> str:
        """llvmlite's version, the architecture, the wavefront and the linker found."""
        import llvmlite

        from naiad.backends.hip.linker import linker_version

        return f"llvmlite-{llvmlite.__version__}-{self.target.arch}-w{self.target.warp_size}-{linker_version()}"

    def parse_options(self, options: dict[str, Any]) -> HIPOptions:
        from naiad.backends.hip.target import check_arch, wave_size

        values = HIPOptions.given(options)
        values.setdefault("debug", knobs.runtime.debug)
        values.setdefault("enable_fp_fusion", knobs.language.default_fp_fusion)
        values["arch"] = check_arch(self.target.arch)
        if values.get("mfma") and wave_size(values["arch"]) == 32:
            raise NaiadError(f"mfma=True: {values['arch']} is an RDNA GPU, whose matrix cores (WMMA) "
                             f"the hip backend does not use yet -- fix: leave mfma unset there (dots "
                             f"run on FMA), or compile for a CDNA GPU (gfx90a, gfx942, gfx950)")
        values.setdefault("mfma", KNOBS.mfma and wave_size(values["arch"]) == 64)
        values["warp_size"] = int(self.target.warp_size or wave_size(values["arch"]))
        if values.get("matrix_instr_nonkdim", 0) not in (0, 16, 32):
            raise NaiadError(f"matrix_instr_nonkdim={values['matrix_instr_nonkdim']}: the hip backend's "
                             f"MFMA instructions are 32 or 16 wide -- fix: pass 32, 16, or 0 (the "
                             f"larger that fits)")
        if values.get("kpack", 1) not in (1, 2):
            raise NaiadError(f"kpack={values['kpack']}: the hip backend packs the k of 1 or 2 MFMA "
                             f"instructions into a lane's registers -- fix: pass kpack=1 or 2")
        num_warps = values.get("num_warps", 4)
        if num_warps < 1 or num_warps & (num_warps - 1) or num_warps * values["warp_size"] > 1024:
            raise NaiadError(f"num_warps={num_warps}: the hip backend needs a power of two with at most "
                             f"1024 threads per block ({values['warp_size']}-lane wavefronts) -- fix: "
                             f"pass num_warps=4")
        return HIPOptions(**values)

    def add_stages(self, stages: dict, options: HIPOptions, language: Any) -> None:
        from naiad.codegen.gpu.stages import make_ttgir, make_ttir

        target = f"hip:{options.arch}"
        stages["ttir"] = lambda module, metadata: make_ttir(module)
        stages["ttgir"] = lambda module, metadata: make_ttgir(module, options.num_warps,
                                                              options.warp_size, target,
                                                              _ttgir_passes(options))
        stages["llir"] = lambda module, metadata: _make_llir(module, metadata, options)
        stages["amdgcn"] = lambda llir, metadata: _make_amdgcn(llir, metadata, options)
        stages["hsaco"] = lambda amdgcn, metadata: _make_hsaco(metadata, options)

    def pack_metadata(self, metadata: Any) -> tuple:
        return (metadata.get("num_warps", 4), metadata.get("warp_size", 64), metadata.get("shared", 0))

    def get_target_name(self, options: Any) -> str:
        return f"hip:{self.target.arch}"


def _ttgir_passes(options: HIPOptions) -> Any:
    """The backend's TTGIR passes on each kernel: with ``num_stages`` 2 or more, the loads that
    feed dots issued one iteration ahead (`naiad.passes.prefetch_loads`); with the ``mfma``
    option, dots on MFMA (`naiad.backends.hip.mfma`); None when neither applies."""
    steps = []
    if options.num_stages >= 2:
        from naiad.passes.prefetch_loads import prefetch_loads

        steps.append(prefetch_loads)
    if options.mfma:
        from naiad.backends.hip.mfma import accelerate_matmul

        steps.append(lambda func: accelerate_matmul(func, options.num_warps, options.arch,
                                                    options.matrix_instr_nonkdim, options.kpack))
    if not steps:
        return None

    def run(func: Any) -> None:
        for step in steps:
            step(func)
    return run


def _make_llir(module: Any, metadata: dict, options: HIPOptions) -> str:
    from naiad.backends.hip.hooks import AMDGPUHooks
    from naiad.backends.hip.mfma import RULES, staging
    from naiad.backends.hip.target import data_layout, lds_bytes, optimize
    from naiad.codegen.gpu.stages import make_llir_in

    def new_hooks() -> AMDGPUHooks:
        return AMDGPUHooks(options.arch, options.warp_size, data_layout(options.arch),
                           fp_fusion=options.enable_fp_fusion, waves_per_eu=options.waves_per_eu)

    llmod, hooks = make_llir_in(module, metadata, new_hooks, options.num_warps, lds_bytes(options.arch),
                                options.num_stages >= 3, rules=RULES, staging=staging)
    metadata["warp_size"] = options.warp_size
    llir = hooks.finish_module(str(llmod), metadata["name"], metadata["shared"])
    return optimize(llir, options.arch)


def _make_amdgcn(llir: str, metadata: dict, options: HIPOptions) -> str:
    """The ISA (for reading and checking); the object the next stage links is emitted from the
    same IR, kept in the metadata's scratch for it."""
    from naiad.backends.hip.target import emit_assembly

    _check_library_calls(llir, metadata["name"])
    metadata["_llir"] = llir
    return emit_assembly(llir, options.arch)


#: LLVM intrinsics AMDGPU's code generator turns into C library calls, which it cannot make:
#: met in a module (an edited or overridden ``.llir``; the lowering never emits them), it would
#: stop the process ("no libcall available").
_LIBRARY_INTRINSICS = re.compile(r"@llvm\.(exp|exp2|exp10|log|log2|log10|sin|cos|tan|pow|powi|"
                                 r"asin|acos|atan|atan2|sinh|cosh|tanh)\.(?:v\d+)?f64\b")


def _check_library_calls(llir: str, name: str) -> None:
    found = _LIBRARY_INTRINSICS.search(llir)
    if found is not None:
        raise NaiadError(f"kernel {name!r}: its LLVM IR calls llvm.{found.group(1)} on doubles, which "
                         f"the hip backend cannot compile (AMD GPUs have no C math library) -- fix: "
                         f"use tl.{found.group(1)} on the values (Naiad computes it), or fp32")


def _make_hsaco(metadata: dict, options: HIPOptions) -> bytes:
    from naiad.backends.hip.linker import link
    from naiad.backends.hip.target import emit_object

    return link(emit_object(metadata.pop("_llir"), options.arch), metadata["name"])
