"""What AMD GPUs supply to the shared lowering (`naiad.codegen.gpu`): the AMDGPU triple and
data layout, kernels in the ``amdgpu_kernel`` calling convention, work-item and work-group ids,
the grid's size from the dispatch packet, ``s_barrier`` between workgroup fences, cross-lane
moves through ``ds_bpermute``, the LDS (address space 3) sized to the kernel, and math through
LLVM's intrinsics and Naiad's own functions (`naiad.codegen.mathlib`)."""

from __future__ import annotations

import re
from typing import Any

import llvmlite.ir as ir

from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu.hooks import GPUHooks, sized_shared_array
from naiad.codegen.hooks import c_base_name
from naiad.codegen.mathlib import bessel_jy, composed, gamma, without_libm

#: C math functions whose fp64 forms LLVM's AMDGPU back end cannot lower (a library call).
_NO_F64 = {"exp", "exp2", "exp10", "log", "log2", "log10", "sin", "cos", "pow"}
#: Naiad's own C math functions, looked up in turn by symbol.
_OWN_MATH = (without_libm.FUNCTIONS, composed.FUNCTIONS, gamma.FUNCTIONS, bessel_jy.FUNCTIONS)
#: libdevice's fast variants, which every other target computes with the same LLVM intrinsic.
_FAST = {"__naiad_fast_exp": "exp", "__naiad_fast_log": "log"}
#: hsa_kernel_dispatch_packet_t: workgroup_size_x/y/z (u16) and grid_size_x/y/z (u32, in work-items).
_WORKGROUP_SIZE, _GRID_SIZE = 4, 12


class AMDGPUHooks(GPUHooks):
    name = "hip"
    global_addrspace = 1
    constant_addrspace = 4
    shared_addrspace = 3
    shared_symbol = "naiad_lds"

    def __init__(self, arch: str, wave_size: int, data_layout: str, fp_fusion: bool = True,
                 waves_per_eu: int = 0):
        self.arch, self.warp_size, self.data_layout = arch, wave_size, data_layout
        self.float_flags = ("contract",) if fp_fusion else ()
        self.waves_per_eu = waves_per_eu
        self.threads = 0

    # -- the module and the kernel's interface ---------------------------------------------------
    def prepare_module(self, module: ir.Module) -> None:
        from naiad.backends.hip.target import TRIPLE

        module.triple = TRIPLE
        module.data_layout = self.data_layout

    def mark_kernel(self, fn: ir.Function, threads: int) -> None:
        fn.calling_convention = "amdgpu_kernel"
        self.threads = threads

    def finish_module(self, llir: str, kernel: str, shared_bytes: int) -> str:
        """The lowered module's text with what llvmlite cannot write: the kernel's attributes
        (its workgroup size, waves per execution unit) and the LDS array at its size."""
        attributes = [f'"amdgpu-flat-work-group-size"="1,{self.threads}"', '"uniform-work-group-size"="true"']
        if self.waves_per_eu:
            attributes.append(f'"amdgpu-waves-per-eu"="{self.waves_per_eu},{self.waves_per_eu}"')
        header = re.compile(rf'^(define amdgpu_kernel void @"?{re.escape(kernel)}"?\(.*\))(.*)$', re.M)
        llir, found = header.subn(lambda m: f"{m.group(1)} #4242{m.group(2)}", llir, count=1)
        if found:
            llir += f"\nattributes #4242 = {{ {' '.join(attributes)} }}\n"
        return sized_shared_array(llir, self.shared_symbol, shared_bytes)

    # -- ids, synchronization, shuffles, shared memory ----------------------------------------
    def _intrinsic(self, b: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value],
                   convergent: bool = False) -> ir.Value:
        fn = lt.function(b.module, f"llvm.amdgcn.{name}", ret, [a.type for a in args])
        if convergent:
            fn.attributes.add("convergent")
        return b.call(fn, args)

    def thread_id(self, b: ir.IRBuilder) -> ir.Value:
        return self._intrinsic(b, "workitem.id.x", lt.I32, [])

    def program_id(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._intrinsic(b, f"workgroup.id.{'xyz'[axis]}", lt.I32, [])

    def num_programs(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        """Work-groups along ``axis``: the dispatch packet's grid size (work-items) over its
        work-group size, rounded up."""
        packet = self._intrinsic(b, "dispatch.ptr", ir.PointerType(addrspace=self.constant_addrspace), [])
        group = b.load(b.gep(packet, [ir.Constant(lt.I64, _WORKGROUP_SIZE + 2 * axis)], source_etype=lt.I8),
                       typ=lt.I16, align=2)
        grid = b.load(b.gep(packet, [ir.Constant(lt.I64, _GRID_SIZE + 4 * axis)], source_etype=lt.I8),
                      typ=lt.I32, align=4)
        group = b.zext(group, lt.I32)
        return b.udiv(b.add(grid, b.sub(group, ir.Constant(lt.I32, 1))), group)

    def barrier(self, b: ir.IRBuilder) -> None:
        b.fence("release", "workgroup")
        self._intrinsic(b, "s.barrier", lt.VOID, [], convergent=True)
        b.fence("acquire", "workgroup")

    def lane_id(self, b: ir.IRBuilder) -> ir.Value:
        """This thread's lane in its wavefront (``mbcnt`` of all lanes below it)."""
        low = self._intrinsic(b, "mbcnt.lo", lt.I32, [ir.Constant(lt.I32, -1), ir.Constant(lt.I32, 0)])
        if self.warp_size == 32:
            return low
        return self._intrinsic(b, "mbcnt.hi", lt.I32, [ir.Constant(lt.I32, -1), low])

    def shuffle_index(self, b: ir.IRBuilder, value: ir.Value, lane: ir.Value) -> ir.Value:
        """``ds_bpermute``: each lane reads lane ``lane``'s value (the index in bytes)."""
        address = b.shl(lane, ir.Constant(lt.I32, 2))
        return self._intrinsic(b, "ds.bpermute", lt.I32, [address, value], convergent=True)

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, offset: int) -> ir.Value:
        """Lane ``lane ^ offset``'s value without the LDS unit's address path where the
        hardware has a move for it: DPP (``quad_perm`` on CDNA for 1 and 2, ``row_xmask`` on
        RDNA within rows of 16), ``ds_swizzle``'s bit mode within 32 lanes (CDNA, 4 to 16),
        ``v_permlanex16`` across RDNA's two rows; ``ds_bpermute`` for the rest (32 on wave64)."""
        move = _xor_move(self.warp_size, offset)
        if move is None:
            return self.shuffle_index(b, value, b.xor(self.lane_id(b), ir.Constant(lt.I32, offset)))
        name, before, after = move
        return self._intrinsic(b, name, lt.I32, before + [value] + after, convergent=True)

    # -- math ---------------------------------------------------------------------------------------
    def call_math(self, ctx: Any, symbol: str, args: list[ir.Value], ret: ir.Type) -> ir.Value:
        """As every target, but for the double-precision transcendental functions, which LLVM's
        AMDGPU back end has no instructions for (it would stop the process asking for a library
        call): Naiad's own (`naiad.codegen.mathlib.without_libm`)."""
        base = _FAST.get(symbol, c_base_name(symbol, ret))
        if base in _NO_F64 and lt.scalar_of(ret) == lt.F64:
            own = without_libm.FUNCTIONS.get(base)
            if own is not None:
                return own(ctx, args)
            raise NotImplementedError(f"double-precision {base} is not available on the hip backend "
                                      f"yet (no device library linked) -- fix: compute it in fp32")
        return super().call_math(ctx, symbol, args, ret)

    def library_call(self, ctx: Any, symbol: str, args: list[ir.Value], ret: ir.Type) -> ir.Value:
        """AMDGPU has no C math library: Naiad's own (`naiad.codegen.mathlib.without_libm`:
        ``erff``, ``tanhf``, ``expm1f``; `naiad.codegen.mathlib.composed`: the inverse
        trigonometric and hyperbolic functions, ``tan``, ``log1p``, ``cbrt``, ``hypot``, ``fmod``...;
        `naiad.codegen.mathlib.gamma`: ``lgamma``, ``tgamma``; `naiad.codegen.mathlib.bessel_jy`:
        ``j0``, ``j1``, ``y0``, ``y1``);
        the rest is not available yet."""
        own = next((table[symbol] for table in _OWN_MATH if symbol in table), None)
        if own is not None:
            return own(ctx, args)
        raise NotImplementedError(f"math function {c_base_name(symbol, ret)} is not available on the "
                                  f"hip backend yet (no device library linked)")


#: DPP ``quad_perm`` controls: each lane of a quad reads the lane ``sel`` (2 bits a lane).
_QUAD_XOR = {1: 1 | 0 << 2 | 3 << 4 | 2 << 6, 2: 2 | 3 << 2 | 0 << 4 | 1 << 6}
#: DPP control of RDNA's ``row_xmask:n`` (lane ^ n within a row of 16).
_ROW_XMASK = 0x160


def _xor_move(warp_size: int, offset: int) -> tuple[str, list[ir.Value], list[ir.Value]] | None:
    """(intrinsic, its operands before the value, those after it) of a cross-lane move giving
    each lane lane ``lane ^ offset``'s value, or None where ``ds_bpermute`` serves."""
    def i32(v: int) -> ir.Value:
        return ir.Constant(lt.I32, v)
    old = [i32(0)]                                # DPP's and permlane's value of lanes not written

    def dpp(control: int) -> tuple[str, list[ir.Value], list[ir.Value]]:  # every row and bank
        return "update.dpp.i32", old, [i32(control), i32(0xF), i32(0xF), ir.Constant(lt.I1, 0)]
    rdna = warp_size == 32
    if rdna and offset < 16:
        return dpp(_ROW_XMASK + offset)
    if rdna and offset == 16:                  # lane i of one row reads lane i of the other
        return "permlanex16.i32", old, [i32(0x76543210), i32(0xFEDCBA98), ir.Constant(lt.I1, 0),
                                        ir.Constant(lt.I1, 0)]
    if offset in _QUAD_XOR:
        return dpp(_QUAD_XOR[offset])
    if offset < 32:                             # bit mode: ((lane & 31) | 0) ^ offset
        return "ds.swizzle", [], [i32(0x1F | offset << 10)]
    return None
