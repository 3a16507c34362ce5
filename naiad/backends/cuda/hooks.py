"""What NVIDIA GPUs supply to the shared lowering (`naiad.codegen.gpu`): the NVPTX triple,
thread and program ids, ``bar.sync``, warp shuffles, shared memory (address space 3), kernel
parameters, and math through libdevice (``__nv_expf``...; `naiad.backends.cuda.compiler` links
the functions a kernel calls)."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.backends.cuda import conversions, matrix_stores, memory_ptx
from naiad.backends.cuda.ptx_asm import asm
from naiad.backends.cuda.tensor_map_encoding import MAP_ALIGN, MAP_BYTES
from naiad.backends.cuda.tensor_maps import PARAM_SPACE
from naiad.codegen import fastmath, llvm_types as lt
from naiad.codegen.gpu.hooks import GPUHooks
from naiad.codegen.hooks import NAIAD_FUNCTIONS, c_base_name
from naiad.ir.types import PointerType

TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"


class _ByValue(ir.PointerType):
    """The (opaque) pointer type of a parameter passed by value: llvmlite prints ``byval``
    with the pointee type it reads here."""

    def __init__(self, pointee: ir.Type):
        super().__init__()
        self.pointee = pointee


def _is_tensor_map(mlir_type: Any) -> bool:
    return isinstance(mlir_type, PointerType) and mlir_type.address_space.data == PARAM_SPACE


#: C math names (fp32 spelling without "f") that NVPTX lowers natively; the rest is libdevice.
_NATIVE = {"sqrt", "fabs", "floor", "ceil", "trunc", "rint", "nearbyint", "fma", "fmin", "fmax",
           "copysign"}
_ROUNDINGS = ("rn", "rz", "rd", "ru")
#: Naiad libdevice names (``__naiad_`` + key) that NVIDIA's libdevice spells differently
#: (``__nv_`` + value); the others are ``__nv_`` + the same name.  The fast fp32 exp and log
#: are libdevice's own, not the shared IR of `naiad.codegen.hooks.NAIAD_FUNCTIONS`.
_LIBDEVICE_NAMES = {
    "fast_expf": "fast_expf", "fast_logf": "fast_logf", "fast_exp": "exp", "fast_log": "log",
    "fast_dividef": "fast_fdividef", "pownf": "powif", "pown": "powi",
    **{f"{op}_{r}f": f"f{op}_{r}" for op in ("add", "mul", "div") for r in _ROUNDINGS},
    **{f"{op}_{r}": f"d{op}_{r}" for op in ("add", "mul", "div") for r in _ROUNDINGS},
    **{f"fma_{r}f": f"fmaf_{r}" for r in _ROUNDINGS},
}


#: Triton 3.6's instructions for fp32 ``/``, ``tl.sqrt`` and ``tl.rsqrt``.  The roots flush
#: subnormal inputs to zero (``.ftz``), as Triton's do: without it ptxas scales every subnormal
#: in and out around the MUFU (an element-wise sqrt: 72 SASS instructions and 22 registers
#: against Triton's 48 and 18).
_APPROXIMATE = {"div": "div.full.f32", "sqrt": "sqrt.approx.ftz.f32", "rsqrt": "rsqrt.approx.ftz.f32"}


def _ptx(ctx: Any, instruction: str, args: list[ir.Value]) -> ir.Value:
    """One fp32 PTX instruction on ``args`` (inline assembly: LLVM has no intrinsic for them)."""
    operands = ", ".join(f"${i + 1}" for i in range(len(args)))
    return asm(ctx.b, f"{instruction} $0, {operands};", [lt.F32], args, effects=False)


def _exp(ctx: Any, args: list[ir.Value]) -> ir.Value:
    """``tl.exp`` as Triton computes it on NVIDIA: ``ex2.approx(x * log2(e))``."""
    scaled = ctx.b.fmul(args[0], ir.Constant(lt.F32, 1.4426950408889634))
    return _ptx(ctx, "ex2.approx.f32", [scaled])


#: fp32 math that Triton computes with PTX's approximate instructions.  ``tl.exp2`` flushes
#: subnormal results to zero, as Triton 3.6's does (its PTX has ``ex2.approx.ftz.f32``): without
#: ``.ftz`` ptxas wraps every MUFU.EX2 in a compare and two multiplies, which in attention's
#: softmax is a third of the loop's instructions.  ``tl.erf`` is Naiad's own polynomial (the
#: CPU's, `fastmath.erf_f32`, within 2.4 ulp): both of its pieces are evaluated, with
#: immediates, where libdevice's ``erff`` selects its coefficients (a move each): a GELU thread's
#: 8 elements take 296 SASS instructions instead of 304 in fp32 (304, not 312, in fp16), no MUFU.
_FAST_F32 = {"expf": _exp, "exp2f": lambda ctx, args: _ptx(ctx, "ex2.approx.ftz.f32", args),
             "erff": lambda ctx, args: fastmath.erf_f32(ctx, args[0])}


#: Inline-assembly constraint letter -> the LLVM type of its PTX register.
_REGISTER_TYPES = {"c": lt.I8, "h": lt.I16, "r": lt.I32, "l": lt.I64, "f": lt.F32, "d": lt.F64}


class NVPTXHooks(GPUHooks):
    name = "cuda"
    warp_size = 32
    global_addrspace = 1
    constant_addrspace = 4
    shared_addrspace = 3
    counts_barrier_threads = True

    def __init__(self, fp_fusion: bool = True, maxnreg: int | None = None, newest_ptx: int | None = None,
                 arch: int = 80):
        """``arch``: the compute capability (``90`` for sm_90), which picks the conversion
        instructions; ``fp_fusion``: the ``enable_fp_fusion`` option (float multiply-adds become fmas);
        ``maxnreg``: the option of that name (the kernel's ``.maxnreg`` in the PTX);
        ``newest_ptx``: the newest PTX ISA version the toolchain takes (None: the minimum of
        the target).  ``ptx_version`` is then the version the kernel's instructions need
        beyond the target's minimum (None while they need none)."""
        self.float_flags = ("contract",) if fp_fusion else ()
        self.maxnreg = maxnreg
        self.newest_ptx = newest_ptx
        self.arch = arch
        self.ptx_version: int | None = None

    def prepare_module(self, module: ir.Module) -> None:
        module.triple = TRIPLE
        module.data_layout = DATA_LAYOUT
        self._smem = None
        self._print_slots: dict[str, ir.Value] = {}

    # -- kernel interface ------------------------------------------------------------------------
    def mark_kernel(self, fn: ir.Function, threads: int) -> None:
        fn.calling_convention = "ptx_kernel"
        fn.attributes.add("nounwind")
        module = fn.module
        limits = [("maxntidx", threads)] + ([("maxnreg", self.maxnreg)] if self.maxnreg else [])
        for name, value in limits:
            annotation = module.add_metadata([fn, ir.MetaDataString(module, name), ir.Constant(lt.I32, value)])
            module.add_named_metadata("nvvm.annotations", annotation)

    def param_type(self, mlir_type: Any) -> ir.Type:
        """A tensor map (`naiad.backends.cuda.tensor_maps`) is its 128 bytes, passed by value."""
        if _is_tensor_map(mlir_type):
            return _ByValue(ir.ArrayType(lt.I8, MAP_BYTES))
        return super().param_type(mlir_type)

    def param_value(self, b: ir.IRBuilder, param: ir.Value, mlir_type: Any) -> ir.Value:
        """A tensor map parameter stays in the parameter space (``__grid_constant__``: no copy
        to local memory, which the copy engine could not read); its value is its generic
        address, what ``cp.async.bulk.tensor`` takes."""
        if not _is_tensor_map(mlir_type):
            return super().param_value(b, param, mlir_type)
        param.attributes.add("byval")
        param.attributes.align = MAP_ALIGN
        fn, module = param.parent, param.parent.module
        index = module.add_metadata([ir.Constant(lt.I32, list(fn.args).index(param) + 1)])
        module.add_named_metadata("nvvm.annotations", module.add_metadata(
            [fn, ir.MetaDataString(module, "grid_constant"), index]))
        return b.ptrtoint(param, lt.I64)

    # -- ids, barriers, shuffles, shared memory ------------------------------------------------
    def _special(self, b: ir.IRBuilder, name: str) -> ir.Value:
        fn = lt.function(b.module, f"llvm.nvvm.read.ptx.sreg.{name}", lt.I32, [])
        return b.call(fn, [])

    def thread_id(self, b: ir.IRBuilder) -> ir.Value:
        return self._special(b, "tid.x")

    def lane_id(self, b: ir.IRBuilder) -> ir.Value:
        return self._special(b, "laneid")

    def program_id(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._special(b, f"ctaid.{'xyz'[axis]}")

    def num_programs(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        return self._special(b, f"nctaid.{'xyz'[axis]}")

    def barrier(self, b: ir.IRBuilder) -> None:
        """``bar.sync 0`` (``bar.sync 0, count`` where only `barrier_threads` remain) through
        the intrinsic, which LLVM knows is convergent (inline assembly is not: O3 copied it into
        both arms of a branch, and the threads deadlocked)."""
        if self.barrier_threads is None:
            fn = lt.function(b.module, "llvm.nvvm.barrier.cta.sync.aligned.all", lt.VOID, [lt.I32])
            args = [ir.Constant(lt.I32, 0)]
        else:
            fn = lt.function(b.module, "llvm.nvvm.barrier.cta.sync.aligned.count", lt.VOID, [lt.I32, lt.I32])
            args = [ir.Constant(lt.I32, 0), ir.Constant(lt.I32, self.barrier_threads)]
        fn.attributes.add("convergent")
        b.call(fn, args)

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, offset: int) -> ir.Value:
        """The 32-bit ``value`` of lane ``lane ^ offset``."""
        fn = lt.function(b.module, "llvm.nvvm.shfl.sync.bfly.i32", lt.I32, [lt.I32] * 4)
        return b.call(fn, [ir.Constant(lt.I32, -1), value, ir.Constant(lt.I32, offset),
                           ir.Constant(lt.I32, 31)])

    def shuffle_index(self, b: ir.IRBuilder, value: ir.Value, lane: ir.Value) -> ir.Value:
        """The 32-bit ``value`` of lane ``lane`` (an i32)."""
        fn = lt.function(b.module, "llvm.nvvm.shfl.sync.idx.i32", lt.I32, [lt.I32] * 4)
        return b.call(fn, [ir.Constant(lt.I32, -1), value, lane, ir.Constant(lt.I32, 31)])

    def shuffle_up(self, b: ir.IRBuilder, value: ir.Value, delta: int) -> ir.Value:
        """The 32-bit ``value`` of lane ``lane - delta`` (a lane's own below ``delta``)."""
        fn = lt.function(b.module, "llvm.nvvm.shfl.sync.up.i32", lt.I32, [lt.I32] * 4)
        return b.call(fn, [ir.Constant(lt.I32, -1), value, ir.Constant(lt.I32, delta),
                           ir.Constant(lt.I32, 0)])

    def shared_base(self, b: ir.IRBuilder) -> ir.Value:
        module = b.module
        smem = module.globals.get("global_smem")
        if smem is None:
            smem = ir.GlobalVariable(module, ir.ArrayType(lt.I8, 0), "global_smem",
                                     addrspace=self.shared_addrspace)
            smem.linkage = "external"
            smem.align = 1024            # tensor-core tiles: the swizzle follows the address bits
        return lt.opaque(b, smem, self.shared_addrspace)

    def store_in_shared(self, k: Any, dist: Any, addresses: Any) -> bool:
        return self.arch >= 90 and matrix_stores.store_matrices(k, dist, True, addresses)

    # -- memory with hints, atomics, polling: PTX (`memory_ptx`) ----------------------------------
    def access_policy(self, k: Any, op: Any, store: bool) -> Any:
        return memory_ptx.access_policy(k, op, store)

    def load_with_policy(self, k: Any, policy: Any, address: ir.Value, vtype: ir.Type,
                         nbytes: int, mask: ir.Value | None, otherwise: ir.Value) -> ir.Value:
        return memory_ptx.load_with_policy(k, policy, address, vtype, nbytes, mask, otherwise)

    def store_with_policy(self, k: Any, policy: Any, address: ir.Value, value: ir.Value,
                          nbytes: int, mask: ir.Value | None) -> None:
        memory_ptx.store_with_policy(k, policy, address, value, nbytes, mask)

    def atomic_rmw(self, k: Any, op: Any, address: ir.Value, value: ir.Value) -> ir.Value:
        return memory_ptx.atomic_rmw(k, op, address, value)

    def reduction_width(self, k: Any, op: Any) -> int:
        return memory_ptx.reduction_width(op, self.arch)

    def reduce_global(self, k: Any, op: Any, address: ir.Value, values: list[ir.Value]) -> None:
        if len(values) > 1:
            self.require_ptx(memory_ptx.VECTOR_RED_PTX)
        memory_ptx.reduce_global(k, op, address, values)

    def atomic_cas(self, k: Any, op: Any, address: ir.Value, expected: ir.Value,
                   value: ir.Value) -> ir.Value:
        return memory_ptx.atomic_cas(k, op, address, expected, value)

    def relaxed_load(self, b: ir.IRBuilder, address: ir.Value, element: ir.Type, scope: str) -> ir.Value:
        return memory_ptx.relaxed_load(b, address, element, scope)

    def require_ptx(self, version: int) -> None:
        """The kernel uses an instruction of PTX ISA ``version`` (75 for 7.5): its PTX is
        written in that version at least."""
        self.ptx_version = max(self.ptx_version or 0, version)

    def acquire_fence(self, b: ir.IRBuilder, scope: str) -> None:
        acquire_only = (self.newest_ptx or 0) >= memory_ptx.FENCE_ACQUIRE_PTX
        if acquire_only:
            self.require_ptx(memory_ptx.FENCE_ACQUIRE_PTX)
        memory_ptx.acquire_fence(b, scope, acquire_only)

    def clock_ns(self, b: ir.IRBuilder) -> ir.Value:
        return memory_ptx.clock_ns(b)

    def asm_register_type(self, letter: str) -> ir.Type:
        """PTX register classes; an unknown letter is a 32-bit register."""
        return _REGISTER_TYPES.get(letter, lt.I32)

    def inline_asm(self, ctx: Any, op: Any, args: list[ir.Value]) -> ir.Value:
        """Reached only from combine functions: elsewhere the GPU rule (`ops_asm`) runs it."""
        raise NotImplementedError("tl.inline_asm_elementwise inside a combine function (tl.reduce, "
                                  "tl.associative_scan) is not supported by the cuda backend yet")

    # -- debugging -----------------------------------------------------------------------------
    def printf(self, b: ir.IRBuilder, text: str, values: list[ir.Value]) -> None:
        """CUDA's device printf, ``vprintf(format, arguments)``: the arguments in one local
        struct, each at its natural alignment (as C's varargs lay them out)."""
        vprintf = lt.function(b.module, "vprintf", lt.I32, [lt.PTR, lt.PTR])
        packed = ir.LiteralStructType([v.type for v in values])
        slot = self._print_slots.get(str(packed))
        if slot is None:         # one per layout, at the kernel's entry (not a dynamic alloca)
            here = b.block
            b.position_at_start(b.function.entry_basic_block)
            slot = self._print_slots[str(packed)] = b.alloca(packed)
            b.position_at_end(here)
        for i, v in enumerate(values):
            b.store(v, b.gep(slot, [ir.Constant(lt.I32, 0), ir.Constant(lt.I32, i)]))
        b.call(vprintf, [lt.c_string(b.module, text).bitcast(lt.PTR), lt.opaque(b, slot)])

    def assert_fail(self, b: ir.IRBuilder, message: str, file: str, line: int, function: str) -> None:
        """``__assertfail``: the driver prints the message with the thread and block, and the
        kernel stops (the context then reports CUDA_ERROR_ASSERT)."""
        fail = lt.function(b.module, "__assertfail", lt.VOID, [lt.PTR, lt.PTR, lt.I32, lt.PTR, lt.I64])
        fail.attributes.add("noreturn")
        message, file, function = (lt.c_string(b.module, t).bitcast(lt.PTR) for t in (message, file, function))
        b.call(fail, [message, file, ir.Constant(lt.I32, line), function, ir.Constant(lt.I64, 1)])

    # -- conversions: one instruction where the GPU has it (`conversions`) -----------------------------
    def f32_to_bf16(self, ctx: Any, value: ir.Value) -> ir.Value:
        converted = conversions.f32_to_bf16(ctx, self.arch, value)
        return super().f32_to_bf16(ctx, value) if converted is None else converted

    def float_to_int(self, ctx: Any, value: ir.Value, target: ir.Type, signed: bool) -> ir.Value:
        converted = conversions.float_to_int(ctx, value, target, signed)
        return super().float_to_int(ctx, value, target, signed) if converted is None else converted

    def f32_to_fp8(self, ctx: Any, value: ir.Value, fp8_type: Any, rounding: str) -> ir.Value:
        converted = conversions.f32_to_fp8(ctx, self.arch, value, fp8_type, rounding)
        return super().f32_to_fp8(ctx, value, fp8_type, rounding) if converted is None else converted

    def fp8_to_f32(self, ctx: Any, value: ir.Value, fp8_type: Any) -> ir.Value:
        converted = conversions.fp8_to_f32(ctx, self.arch, value, fp8_type)
        return super().fp8_to_f32(ctx, value, fp8_type) if converted is None else converted

    # -- math ----------------------------------------------------------------------------------------
    def approximate(self, ctx: Any, name: str, args: list[ir.Value]) -> ir.Value | None:
        """Triton's fp32 ``/``, ``tl.sqrt`` and ``tl.rsqrt`` on NVIDIA: ``div.full``,
        ``sqrt.approx.ftz``, ``rsqrt.approx.ftz`` (the ``_rn`` functions stay IEEE)."""
        if ctx.lanes != 1 or args[0].type != lt.F32:
            return None
        return _ptx(ctx, _APPROXIMATE[name], args)

    def call_math(self, ctx: Any, symbol: str, args: list[ir.Value], ret: ir.Type) -> ir.Value:
        scalar = lt.scalar_of(ret)
        if symbol in _FAST_F32 and ctx.lanes == 1 and scalar == lt.F32:
            return _FAST_F32[symbol](ctx, args)
        if symbol.startswith("__naiad_"):
            name = symbol[len("__naiad_"):]
            own = NAIAD_FUNCTIONS.get(symbol)
            if own is not None and name not in _LIBDEVICE_NAMES:
                return own(ctx, args)
            return self.library_call(ctx, "__nv_" + _LIBDEVICE_NAMES.get(name, name), args, ret)
        base = c_base_name(symbol, ret)
        if base in _NATIVE:
            intrinsic = {"fmin": "minnum", "fmax": "maxnum"}.get(base, base)
            return ctx.intrinsic(intrinsic, args)
        return self.library_call(ctx, "__nv_" + symbol, args, ret)
