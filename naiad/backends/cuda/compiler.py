"""The NVIDIA backend's compiler: TTIR -> TTGIR -> LLVM IR (NVPTX) -> PTX -> cubin.

Stages (``kernel.asm`` keeps each):

- ``ttir``: the shared GPU TTIR stage (`naiad.codegen.gpu.stages.make_ttir`);
- ``ttgir``: the shared GPU TTGIR stage with NVIDIA's passes (split fp32 dots, tensor-core
  layouts, software pipelining) before each tensor's layout is written on the op that makes it;
- ``llir``: LLVM IR from the shared GPU lowering with `NVPTXHooks`, libdevice linked in for the
  functions the kernel calls, optimized at O3;
- ``ptx``: llvmlite's NVPTX back end for the device's ``sm_XX``;
- ``cubin``: ``ptxas`` when one is found (`naiad.backends.cuda.toolchain`), otherwise the PTX
  itself, which the driver compiles when it loads it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from naiad import knobs
from naiad.backends.compiler import BACKEND_API_VERSION, BackendOptions, BaseBackend, GPUTarget
from naiad.backends.cuda.knobs import KNOBS

DOT_PRECISIONS = ("tf32", "tf32x3", "ieee", "bf16x3", "bf16x6")

#: The descriptor reductions that only the copy engine does (`naiad.backends.cuda.tensor_maps`).
_COPY_ENGINE_REDUCTIONS = (("min", "fp16"), ("min", "bf16"), ("max", "fp16"), ("max", "bf16"))


@dataclasses.dataclass(frozen=True)
class CUDAOptions(BackendOptions):
    """Triton's CUDA options (those not used yet are accepted and change nothing)."""

    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 3
    maxnreg: int | None = None
    warp_size: int = 32
    debug: bool = False
    enable_fp_fusion: bool = True
    sanitize_overflow: bool = False
    default_dot_input_precision: str = "tf32"
    allowed_dot_input_precisions: tuple = DOT_PRECISIONS
    max_num_imprecise_acc_default: int = 0
    supported_fp8_dtypes: tuple = ("fp8e5", "fp8e4nv", "fp8e4b15")
    deprecated_fp8_dot_operand_dtypes: tuple = ()
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False
    instrumentation_mode: str = ""
    #: Descriptor atomics done as one reduction of the block (op, element type), beyond the
    #: element atomics every target has: the copy engine's (sm_90 on) fp16/bf16 minima and maxima.
    descriptor_reductions: tuple = ()
    backend_name: str = "cuda"
    arch: int = 90


class CUDABackend(BaseBackend):
    api_version = BACKEND_API_VERSION
    binary_ext = "cubin"
    knob_group = KNOBS
    cache_env_vars = ("NAIAD_PTXAS_PATH", "NAIAD_LIBDEVICE_PATH", "NAIAD_DEBUG")

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "cuda"

    @functools.lru_cache(maxsize=None)
    def hash(self) -> str:
        import llvmlite

        from naiad.backends.cuda.toolchain import toolchain_hash

        return f"llvmlite-{llvmlite.__version__}-sm{self.target.arch}-{toolchain_hash()}"

    def derived_asm(self, name: str, asm: dict[str, Any]) -> str | None:
        """``asm["sass"]``: the cubin disassembled by cuobjdump (as Triton gives it)."""
        if name != "sass":
            return None
        from naiad.backends.cuda.toolchain import disassemble
        from naiad.errors import NaiadError

        if not asm["cubin"].startswith(b"\x7fELF"):
            raise NaiadError("kernel.asm['sass'] needs a cubin, and this kernel's binary is its "
                             "PTX (no ptxas was found when it was compiled) -- fix: pip install "
                             "nvidia-cuda-nvcc (or set NAIAD_PTXAS_PATH) and compile again")
        return disassemble(asm["cubin"])

    def parse_options(self, options: dict[str, Any]) -> CUDAOptions:
        values = CUDAOptions.given(options)
        values.setdefault("debug", knobs.runtime.debug)
        values.setdefault("enable_fp_fusion", knobs.language.default_fp_fusion)
        values["arch"] = int(self.target.arch)
        if values["arch"] >= 90:
            values.setdefault("descriptor_reductions", _COPY_ENGINE_REDUCTIONS)
        if isinstance(values.get("descriptor_reductions"), list):       # from JSON
            values["descriptor_reductions"] = tuple(tuple(r) for r in values["descriptor_reductions"])
        num_warps = values.get("num_warps", 4)
        if num_warps < 1 or num_warps & (num_warps - 1) or num_warps > 32:
            from naiad.errors import NaiadError

            raise NaiadError(f"num_warps={num_warps}: the cuda backend needs a power of two from 1 "
                             f"to 32 -- fix: pass num_warps=4 (or 1, 2, 8, 16, 32)")
        return CUDAOptions(**values)

    def add_stages(self, stages: dict, options: CUDAOptions, language: Any) -> None:
        # Each stage imports what it runs: a compile answered from the cache imports no
        # compiler (the lowering and xDSL's dialects, ~0.15 s of a process's first launch).
        stages["ttir"] = lambda module, metadata: _make_ttir(module, self.target)
        stages["ttgir"] = lambda module, metadata: _make_ttgir(module, options, self.target)
        stages["llir"] = lambda module, metadata: _make_llir(module, metadata, options)
        stages["ptx"] = lambda llir, metadata: _make_ptx(llir, metadata, options)
        stages["cubin"] = lambda ptx, metadata: _make_cubin(ptx, metadata, options)

    def pack_metadata(self, metadata: Any) -> tuple:
        return (metadata.get("num_warps", 4), metadata.get("shared", 0))

    def get_target_name(self, options: Any) -> str:
        return f"cuda:{self.target.arch}"


def _make_ttir(module: Any, target: GPUTarget) -> Any:
    from naiad.codegen.gpu.stages import make_ttir

    return make_ttir(module, _block_copies(target))


def _block_copies(target: GPUTarget) -> Any:
    """The TMA pass where the GPU has the copy engine (sm_90 on), else None."""
    if int(target.arch) < 90:
        return None
    from naiad.backends.cuda.tensor_maps import use_tensor_maps

    return use_tensor_maps


def _make_ttgir(module: Any, options: CUDAOptions, target: GPUTarget) -> Any:
    """The shared TTGIR stage with NVIDIA's passes before the layouts: fp32 dots in split
    precisions as bf16 / tf32 dots, tensor-core layouts on the dots (`accelerate_matmul`), and
    software pipelining of the loads that feed them (`pipeline`)."""
    from naiad.backends.cuda.accelerate_matmul import accelerate_matmul, dot_shape, layout_for
    from naiad.backends.cuda.pipeline import pipeline
    from naiad.codegen.gpu.stages import make_ttgir
    from naiad.passes import run_passes
    from naiad.passes.split_f32_dots import split_f32_dots

    def nvidia_passes(func: Any) -> None:
        split_f32_dots(func, lambda dot, part: layout_for((part, part, "f32"), dot_shape(dot),
                                                           options.num_warps, target.arch) is not None)
        accelerate_matmul(func, options.num_warps, target.arch)
        if pipeline(func, options.num_stages, target.arch):
            run_passes(module, ("cse", "dce"))

    return make_ttgir(module, options.num_warps, 32, f"cuda:{target.arch}", nvidia_passes)


def _make_llir(module: Any, metadata: dict, options: CUDAOptions) -> str:
    from naiad.backends.cuda.async_copies import prepare
    from naiad.backends.cuda.hooks import NVPTXHooks
    from naiad.backends.cuda.pipeline import shared_bytes, strength_reduction
    from naiad.backends.cuda.target import link_libdevice, optimize
    from naiad.backends.cuda.tensor_cores import RULES, fma_staging
    from naiad.backends.cuda.tensor_maps import module_maps
    from naiad.codegen.gpu.stages import make_llir_in

    from naiad.backends.cuda.toolchain import find_ptxas, newest_ptx

    # fence.acquire (PTX 8.6) only where the ptxas that assembles the kernel has it, on sm_90 on
    newest = newest_ptx(find_ptxas()) if options.arch >= 90 else None
    metadata["tensor_maps"] = [m.to_json() for m in module_maps(module)]
    metadata["strength_reduction"] = strength_reduction(module)

    def new_hooks() -> NVPTXHooks:
        return NVPTXHooks(fp_fusion=options.enable_fp_fusion, maxnreg=options.maxnreg, newest_ptx=newest,
                          arch=options.arch)

    # with 3 or more stages, FMA dots' operands in rings of two slots where they fit
    llmod, hooks = make_llir_in(module, metadata, new_hooks, options.num_warps, shared_bytes(options.arch),
                                options.num_stages >= 3, rules=RULES, prepare=prepare, staging=fma_staging)
    metadata["ptx_version"] = hooks.ptx_version
    return optimize(link_libdevice(str(llmod), metadata["name"]), options.arch, hooks.ptx_version)


def _make_ptx(llir: str, metadata: dict, options: CUDAOptions) -> str:
    from naiad.backends.cuda.target import emit_ptx

    return emit_ptx(llir, options.arch, metadata.get("ptx_version"), metadata.get("strength_reduction", False))


def _make_cubin(ptx: str, metadata: dict, options: CUDAOptions) -> bytes:
    from naiad.backends.cuda import register_budget
    from naiad.backends.cuda.toolchain import find_ptxas, ptx_to_cubin

    ptxas = find_ptxas()
    if ptxas is None:
        metadata["binary_format"] = "ptx"
        return ptx.encode() + b"\0"
    metadata["binary_format"] = "cubin"
    # a kernel given ``maxnreg`` states it in its PTX, and register_budget leaves it as asked
    cubin, budget = register_budget.assemble(
        ptx, lambda text: ptx_to_cubin(text, options.arch, ptxas=ptxas, maxnreg=options.maxnreg))
    if budget is not None:
        metadata["register_budget"] = budget
    return cubin
