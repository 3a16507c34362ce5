"""The CPU backend's compiler: TTIR -> TTGIR -> LLVM IR -> object code for the host CPU.

Stages (``kernel.asm`` keeps each):

- ``ttir``: the shared TTIR passes (inlining, folding, CSE, ...);
- ``ttgir``: the module with its target attributes (``ttg.num-warps = 1``: one thread runs a
  program; tensors stay in the program's own memory, so no layouts are needed);
- ``llir``: LLVM IR from `naiad.backends.cpu.lowering`, optimized at O3 for the host;
- ``obj``: an ELF/Mach-O/COFF object the driver loads in-process.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from typing import Any

from naiad import knobs
from naiad.backends.compiler import BACKEND_API_VERSION, BackendOptions, BaseBackend, GPUTarget
from naiad.backends.cpu.knobs import KNOBS

DOT_PRECISIONS = ("ieee", "tf32", "tf32x3", "bf16x3", "bf16x6")


@dataclasses.dataclass(frozen=True)
class CPUOptions(BackendOptions):
    """Triton's portable options; those about GPU warps and stages are accepted and ignored.

    ``debug`` has Triton's meaning: ``device_assert`` is compiled in.  ``bounds_check`` is the
    CPU's own: every load, store and atomic is checked against the arrays passed to the launch
    (an error naming the kernel, the line, the argument and the offset instead of a crash).
    ``NAIAD_DEBUG=1`` turns both on for every kernel.  They are apart because Triton's clients
    pass ``debug=True`` for the assertions alone (torch's Inductor does, for every kernel), and
    checked accesses cost each launch its fast path.
    """

    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 3
    maxnreg: int | None = None
    warp_size: int = 1
    debug: bool = False
    bounds_check: bool = False
    enable_fp_fusion: bool = True
    sanitize_overflow: bool = False
    default_dot_input_precision: str = "ieee"
    allowed_dot_input_precisions: tuple = DOT_PRECISIONS
    max_num_imprecise_acc_default: int = 0
    supported_fp8_dtypes: tuple = ("fp8e5", "fp8e4nv", "fp8e4b15", "fp8e4b8", "fp8e5b16")
    deprecated_fp8_dot_operand_dtypes: tuple = ()
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False
    instrumentation_mode: str = ""
    backend_name: str = "cpu"
    arch: str = ""


class CPUBackend(BaseBackend):
    api_version = BACKEND_API_VERSION
    binary_ext = "obj"
    knob_group = KNOBS
    cache_env_vars = ("NAIAD_DEBUG", "NAIAD_CPU_AMX")
    default_warp_size = 1

    def __init__(self, target: GPUTarget) -> None:
        # Triton's clients name the CPU GPUTarget("cpu", "", warp_size) (torch's Inductor does,
        # with a GPU's warp size): no arch means this host, one lane a program as always here.
        if not target.arch and self.supports_target(target):
            from naiad.backends.cpu.target import host_target

            target = host_target()
        super().__init__(target)

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "cpu"

    @functools.lru_cache(maxsize=None)
    def hash(self) -> str:
        import llvmlite

        from naiad.backends.cpu.target import host_features

        features = hashlib.sha256(host_features().encode()).hexdigest()[:16]
        return f"llvmlite-{llvmlite.__version__}-{self.target.arch}-{features}"

    def parse_options(self, options: dict[str, Any]) -> CPUOptions:
        values = CPUOptions.given(options)
        for name in ("debug", "bounds_check"):
            if name not in values:
                values[name] = knobs.runtime.debug
        values["arch"] = self.target.arch
        return CPUOptions(**values)

    def add_stages(self, stages: dict, options: CPUOptions, language: Any) -> None:
        stages["ttir"] = lambda module, metadata: _make_ttir(module)
        stages["ttgir"] = lambda module, metadata: _make_ttgir(module, self.target)
        stages["llir"] = lambda module, metadata: _make_llir(module, metadata, options, self.target)
        stages["obj"] = lambda llir, metadata: _make_object(llir, self.target)

    def get_module_map(self) -> dict[str, Any]:
        from naiad.language.extra.cpu import libdevice

        return {"naiad.language.extra.libdevice": libdevice}

    def pack_metadata(self, metadata: Any) -> tuple:
        return ()

    def get_target_name(self, options: Any) -> str:
        return f"cpu:{self.target.arch}"


def _make_ttir(module: Any) -> Any:
    """The shared pipeline, then loop-carried pointer tensors turned into a loop-invariant base
    plus a carried offset: tensors carried by loops live in memory here, and a load through
    pointers read back from memory is a gather (CSE and DCE then merge the zeros it starts
    offsets with and drop the pointers nobody uses)."""
    from naiad.passes import run_passes, run_ttir_pipeline
    from naiad.passes.loop_pointers import loop_carried_pointers

    run_ttir_pipeline(module)
    if loop_carried_pointers(module):
        run_passes(module, ("cse", "dce"))
        module.verify()
    return module


def _make_ttgir(module: Any, target: GPUTarget) -> Any:
    """Target attributes (one thread per program, no layouts); loops that test for their
    first trip run it apart (naiad/passes/peel_first_iteration.py); small branches that only
    compute blocks made selects (naiad/passes/speculate_ifs.py: blocks live in memory here,
    and a branch yielding them costs copies), 2-D blocks that lie along memory's first axis
    turned over (`transpose_blocks`), then reductions folded across loops kept per vector lane
    until the loop ends (naiad/passes/reduce_locality.py)."""
    from xdsl.dialects.builtin import IntegerAttr, StringAttr, i32

    from naiad.backends.cpu.target import host_features, vector_bytes
    from naiad.backends.cpu.transpose_blocks import transpose_blocks
    from naiad.passes import run_passes
    from naiad.passes.peel_first_iteration import peel_first_iterations
    from naiad.passes.reduce_locality import reduce_locality
    from naiad.passes.speculate_ifs import speculate_ifs

    if peel_first_iterations(module):
        run_passes(module, ("canonicalize", "cse", "dce"))
        module.verify()
    if speculate_ifs(module):
        run_passes(module, ("cse", "dce"))
        module.verify()
    if transpose_blocks(module):
        module.verify()
    if reduce_locality(module, vector_bytes(host_features())):
        run_passes(module, ("cse", "dce"))
        module.verify()
    module.attributes["ttg.num-warps"] = IntegerAttr(1, i32)
    module.attributes["ttg.threads-per-warp"] = IntegerAttr(1, i32)
    module.attributes["ttg.target"] = StringAttr(f"cpu:{target.arch}")
    return module


def _make_llir(module: Any, metadata: dict, options: CPUOptions, target: GPUTarget) -> str:
    from naiad.backends.cpu import amx
    from naiad.backends.cpu.hooks import CPUHooks
    from naiad.backends.cpu.lowering.amx_matmul import uses_tiles
    from naiad.backends.cpu.lowering.kernel import KernelLowering
    from naiad.backends.cpu.target import host_features, target_machine, vector_bytes
    from naiad.codegen.llvm_binding import native_target

    llvm = native_target()
    machine = target_machine(target.arch)
    features = host_features().split(",")
    hooks = CPUHooks(options.bounds_check, compare_exchange_16="+cx16" in features,
                     bf16_pairs="+avx512bf16" in features, int8_quads="+avx512vnni" in features,
                     scalef="+avx512f" in features and "+avx512vl" in features,
                     amx_bf16=amx.tiles_usable(features, "bf16", KNOBS.amx),
                     amx_int8=amx.tiles_usable(features, "int8", KNOBS.amx))
    lowering = KernelLowering(module, hooks, vector_bytes(host_features()) // 4,
                              llvm.get_process_triple(), str(machine.target_data), options.bounds_check)
    llmod = lowering.lower()
    metadata["name"] = lowering.func_op.sym_name.data
    metadata["shared"] = lowering.scratch_bytes
    metadata["arg_types"] = [str(t) for t in lowering.func_op.function_type.inputs.data]
    metadata["debug_accesses"] = lowering.debug_accesses
    metadata["amx"] = uses_tiles(llmod)
    parsed = llvm.parse_assembly(str(llmod))
    parsed.verify()
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(parsed, builder)
    return str(parsed)


def _make_object(llir: str, target: GPUTarget) -> bytes:
    from naiad.backends.cpu.target import target_machine
    from naiad.codegen.llvm_binding import native_target

    llvm = native_target()
    module = llvm.parse_assembly(llir)
    return target_machine(target.arch).emit_object(module)
