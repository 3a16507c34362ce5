"""What an OpenCL device supplies to Naiad's shared GPU lowering: SPIR-V through LLVM.

The kernel is an LLVM module for ``spirv64-unknown-unknown``: a ``spir_kernel`` function whose
pointers are global memory (address space 1), OpenCL's work-item functions by their mangled
names (``_Z12get_local_idj``), ``barrier``, the sub-group shuffles of ``cl_khr_subgroup_shuffle``
(a Naiad "warp" is an OpenCL sub-group, of the size ``!intel_reqd_sub_group_size`` fixes), and
the block's shared memory as one ``__local`` array (address space 3) sized after the lowering
(`sized_shared_memory`).  Math goes through LLVM intrinsics (which the SPIR-V back end turns
into ``OpenCL.std`` instructions) or OpenCL's builtins by their mangled names; atomics,
polling loads and fences are the contract's plain-LLVM defaults.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu.hooks import GPUHooks, sized_shared_array
from naiad.codegen.gpu.kernel import is_tensor
from naiad.codegen.hooks import c_base_name

TRIPLE = "spirv64-unknown-unknown"
DATA_LAYOUT = ("e-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-"
               "v1024:1024-G1")
#: The shared-memory array, declared empty while the kernel is lowered.
SHARED = "naiad_shared"
#: OpenCL's barrier flags: local and global memory both fenced.
_LOCAL_AND_GLOBAL = 3
#: Argument types -> their Itanium mangling in OpenCL builtin names.
_MANGLED = {"float": "f", "double": "d", "half": "Dh", "i32": "i", "i64": "l", "i16": "s", "i8": "c"}


#: The `access_policy` of a scalar store, and the global its masked-off work-items store to.
_SCALAR_STORE = "scalar store"
_SINK = "__naiad_store_sink"


class SPIRVHooks(GPUHooks):
    name = "opencl"
    shared_symbol = SHARED
    global_addrspace = 1
    constant_addrspace = 2
    shared_addrspace = 3
    widest_integer = 64          # SPIR-V has no i128 (LLVM's back end stops the process on one)

    def __init__(self, sub_group_size: int, fp_fusion: bool = True):
        """``sub_group_size``: the lanes of a Naiad warp; ``fp_fusion``: the
        ``enable_fp_fusion`` option."""
        self.warp_size = sub_group_size
        self.float_flags = ("contract",) if fp_fusion else ()

    # -- the module and the kernel's interface ---------------------------------------------------
    def prepare_module(self, module: ir.Module) -> None:
        module.triple = TRIPLE
        module.data_layout = DATA_LAYOUT

    def mark_kernel(self, fn: ir.Function, threads: int) -> None:
        fn.calling_convention = "spir_kernel"
        module = fn.module
        fn.set_metadata("intel_reqd_sub_group_size", module.add_metadata([ir.Constant(lt.I32, self.warp_size)]))

    def access_policy(self, k: Any, op: Any, store: bool) -> Any:
        """Scalar stores take `store_with_policy` (cache hints are ignored: they change speed,
        not results)."""
        return _SCALAR_STORE if store and not is_tensor(op.ptr) else None

    def store_with_policy(self, k: Any, policy: Any, address: ir.Value, value: ir.Value,
                          nbytes: int, mask: ir.Value | None) -> None:
        """A scalar store without a branch: where ``mask`` is off (every work-item but the
        first), the store goes to a sink nobody reads.  Behind a first-work-item branch, Intel's
        CPU runtime ran the sub-group shuffles that computed the value (a reduction's butterfly,
        used nowhere else) inside the branch, with the other lanes inactive: each shuffle gave
        the lane's own value, and ``tl.sum`` of 16 elements with one warp came out as 4x one
        lane's part (Triton's test_reduce1d: 92 cases)."""
        b = k.b
        if mask is not None:
            sink = b.ptrtoint(self._store_sink(b.module), lt.I64)
            address = b.select(mask, address, sink)
        b.store(value, b.inttoptr(address, ir.PointerType(addrspace=self.global_addrspace))).align = nbytes

    def _store_sink(self, module: ir.Module) -> ir.GlobalVariable:
        existing = module.globals.get(_SINK)
        if existing is not None:
            return existing
        sink = ir.GlobalVariable(module, ir.ArrayType(lt.I8, 16), _SINK, addrspace=self.global_addrspace)
        sink.initializer = ir.Constant(sink.value_type, None)
        sink.linkage = "internal"
        sink.align = 16
        return sink

    # -- ids, synchronization, shuffles, shared memory ----------------------------------------
    def _builtin(self, b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value],
                 convergent: bool = False) -> ir.Value:
        fn = lt.function(b.module, name, ret, [a.type for a in args])
        fn.calling_convention = "spir_func"
        if convergent:
            fn.attributes.add("convergent")
        return b.call(fn, args, cconv="spir_func")

    def _work_item(self, b: ir.IRBuilder, name: str, axis: int) -> ir.Value:
        value = self._builtin(b, name, lt.I64, [ir.Constant(lt.I32, axis)])
        return b.trunc(value, lt.I32)

    def thread_id(self, b: ir.IRBuilder) -> ir.Value:
        return self._work_item(b, "_Z12get_local_idj", 0)

    def program_id(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._work_item(b, "_Z12get_group_idj", axis)

    def num_programs(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._work_item(b, "_Z14get_num_groupsj", axis)

    def barrier(self, b: ir.IRBuilder) -> None:
        self._builtin(b, "_Z7barrierj", lt.VOID, [ir.Constant(lt.I32, _LOCAL_AND_GLOBAL)], convergent=True)

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, offset: int) -> ir.Value:
        return self._builtin(b, "_Z21sub_group_shuffle_xorij", lt.I32, [value, ir.Constant(lt.I32, offset)],
                             convergent=True)

    def shuffle_index(self, b: ir.IRBuilder, value: ir.Value, lane: ir.Value) -> ir.Value:
        return self._builtin(b, "_Z17sub_group_shuffleij", lt.I32, [value, lane], convergent=True)

    def lane_id(self, b: ir.IRBuilder) -> ir.Value:
        """The work-item's index in its sub-group (OpenCL leaves a shifted shuffle's lanes below
        the shift undefined: the default `shuffle_up` goes through `shuffle_index` with it)."""
        return self._builtin(b, "_Z22get_sub_group_local_idv", lt.I32, [])

    # -- conversions and math ---------------------------------------------------------------------
    def nan_propagating_extremum(self, ctx: Any, name: str, args: list[ir.Value]) -> ir.Value:
        """The NaN-ignoring extremum with the NaN put back: the SPIR-V back end turns LLVM's
        NaN-propagating one into OpenCL's ``fmax`` / ``fmin``, which ignore NaNs."""
        a, b = args
        value = ctx.intrinsic("maxnum" if name == "maximum" else "minnum", args)
        either_nan = ctx.b.fcmp_unordered("uno", a, b)
        return ctx.b.select(either_nan, ctx.b.fadd(a, b), value)

    def float_to_int(self, ctx: Any, value: ir.Value, target: ir.Type, signed: bool) -> ir.Value:
        """The saturating conversion, NaN -> 0 made explicit: LLVM's SPIR-V back end gives it
        to OpenCL's, which Intel's CPU runtime turns NaN into the type's maximum with."""
        converted = super().float_to_int(ctx, value, target, signed)
        is_nan = ctx.b.fcmp_unordered("uno", value, value)
        return ctx.b.select(is_nan, ir.Constant(converted.type, None), converted)

    def library_call(self, ctx: Any, symbol: str, args: list[ir.Value], ret: ir.Type) -> ir.Value:
        """OpenCL's builtin of the C function's name (``erff`` -> ``erf(float)``, mangled
        ``_Z3erff``), called once per lane."""
        base = c_base_name(symbol, ret)
        if base == symbol and symbol.endswith("f") and lt.scalar_of(ret) == lt.F32:
            base = symbol[:-1]                 # a C fp32 name LLVM has no intrinsic for
        mangled = f"_Z{len(base)}{base}" + "".join(_MANGLED[str(lt.scalar_of(a.type))] for a in args)
        scalar_args = [lt.scalar_of(a.type) for a in args]
        fn = lt.function(ctx.module, mangled, lt.scalar_of(ret), scalar_args)
        fn.calling_convention = "spir_func"
        if ctx.lanes == 1:
            return ctx.b.call(fn, args, cconv="spir_func")
        result = ir.Constant(ret, ir.Undefined)
        for lane in range(ctx.lanes):
            index = ir.Constant(lt.I32, lane)
            value = ctx.b.call(fn, [ctx.b.extract_element(a, index) for a in args], cconv="spir_func")
            result = ctx.b.insert_element(result, value, index)
        return result


def sized_shared_memory(llir: str, nbytes: int) -> str:
    """The lowered module with its shared-memory array given the kernel's size (SPIR-V has no
    unsized ``__local`` array)."""
    return sized_shared_array(llir, SHARED, nbytes)