"""What a target supplies to the shared lowering rules.

`TargetHooks` gives defaults that any LLVM target can use: C math library names resolve to LLVM
intrinsics where LLVM has one (so they vectorize), otherwise to a call of the library function
per lane.  A backend overrides what differs: its math library (``__nv_expf`` on NVIDIA), fast
vector implementations of hot functions, bounds checks in debug mode, inline assembly.
"""

from __future__ import annotations

from typing import Any, Callable

import llvmlite.ir as ir

from naiad.codegen import elementwise, fp8, llvm_types as lt, mathlib

#: C math function (fp32 spelling without the trailing "f") -> LLVM intrinsic.
INTRINSICS = {
    "exp": "exp", "exp2": "exp2", "exp10": "exp10", "log": "log", "log2": "log2",
    "log10": "log10", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "fabs": "fabs",
    "floor": "floor", "ceil": "ceil", "trunc": "trunc", "round": "round", "rint": "rint",
    "nearbyint": "nearbyint", "fma": "fma", "pow": "pow", "copysign": "copysign",
    "fmin": "minnum", "fmax": "maxnum",
}


def c_base_name(symbol: str, ret: ir.Type) -> str:
    """``expf`` -> ``exp`` for fp32 (C names fp32 functions with a trailing f)."""
    if lt.scalar_of(ret) == lt.F32 and symbol.endswith("f") and symbol[:-1] in INTRINSICS:
        return symbol[:-1]
    return symbol


def _not_a_number(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return ctx.b.zext(ctx.b.fcmp_unordered("uno", args[0], args[0]), lt.vector(lt.I32, ctx.lanes))


def _infinite(ctx: Any, args: list[ir.Value]) -> ir.Value:
    magnitude = ctx.intrinsic("fabs", args)
    inf = ctx.const(lt.scalar_of(args[0].type), float("inf"))
    return ctx.b.zext(ctx.b.fcmp_ordered("==", magnitude, inf), lt.vector(lt.I32, ctx.lanes))


def _finite(ctx: Any, args: list[ir.Value]) -> ir.Value:
    magnitude = ctx.intrinsic("fabs", args)
    inf = ctx.const(lt.scalar_of(args[0].type), float("inf"))
    return ctx.b.zext(ctx.b.fcmp_ordered("<", magnitude, inf), lt.vector(lt.I32, ctx.lanes))


def _signbit(ctx: Any, args: list[ir.Value]) -> ir.Value:
    t = lt.scalar_of(args[0].type)
    width = lt.byte_size(t) * 8
    bits = ctx.b.bitcast(args[0], lt.vector(ir.IntType(width), ctx.lanes))
    sign = ctx.b.lshr(bits, ctx.const(ir.IntType(width), width - 1))
    return ctx.b.trunc(sign, lt.vector(lt.I32, ctx.lanes)) if width > 32 else sign


def _reciprocal(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return ctx.b.fdiv(ctx.const(lt.scalar_of(args[0].type), 1.0), args[0])


def _rsqrt(ctx: Any, args: list[ir.Value]) -> ir.Value:
    return _reciprocal(ctx, [ctx.intrinsic("sqrt", args)])


def _bit_intrinsic(name: str, result_width: int | None = None) -> Callable:
    def lower(ctx: Any, args: list[ir.Value]) -> ir.Value:
        t = args[0].type
        if name == "ctlz":
            fn = lt.intrinsic(ctx.module, name, [t], t, [t, lt.I1])
            value = ctx.b.call(fn, [args[0], ir.Constant(lt.I1, 0)])
        else:
            value = ctx.intrinsic(name, args)
        if result_width is not None and lt.scalar_of(t).width != result_width:
            value = ctx.b.trunc(value, lt.vector(ir.IntType(result_width), ctx.lanes))
        return value
    return lower


def _same_bits(ctx: Any, args: list[ir.Value], target: ir.Type) -> ir.Value:
    return ctx.b.bitcast(args[0], lt.vector(target, ctx.lanes))


#: Naiad's own libdevice symbols (no C equivalent), implemented in LLVM IR for every target.
NAIAD_FUNCTIONS: dict[str, Callable[[Any, list[ir.Value]], ir.Value]] = {
    "__naiad_isnan": _not_a_number, "__naiad_isnanf": _not_a_number,
    "__naiad_isinf": _infinite, "__naiad_isinff": _infinite,
    "__naiad_isfinite": _finite, "__naiad_isfinitef": _finite,
    "__naiad_signbit": _signbit, "__naiad_signbitf": _signbit,
    "__naiad_rsqrt": _rsqrt, "__naiad_rsqrtf": _rsqrt,
    "__naiad_rcp": _reciprocal, "__naiad_rcpf": _reciprocal,
    "__naiad_sqrt_rn": lambda ctx, a: ctx.intrinsic("sqrt", a),
    "__naiad_sqrt_rnf": lambda ctx, a: ctx.intrinsic("sqrt", a),
    "__naiad_fast_exp": lambda ctx, a: ctx.intrinsic("exp", a),
    "__naiad_fast_expf": lambda ctx, a: ctx.intrinsic("exp", a),
    "__naiad_fast_log": lambda ctx, a: ctx.intrinsic("log", a),
    "__naiad_fast_logf": lambda ctx, a: ctx.intrinsic("log", a),
    "__naiad_clz": _bit_intrinsic("ctlz"), "__naiad_clzll": _bit_intrinsic("ctlz", 32),
    "__naiad_popc": _bit_intrinsic("ctpop"), "__naiad_popcll": _bit_intrinsic("ctpop", 32),
    "__naiad_brev": _bit_intrinsic("bitreverse"), "__naiad_brevll": _bit_intrinsic("bitreverse"),
    "__naiad_float_as_int": lambda ctx, a: _same_bits(ctx, a, lt.I32),
    "__naiad_int_as_float": lambda ctx, a: _same_bits(ctx, a, lt.F32),
    "__naiad_double_as_longlong": lambda ctx, a: _same_bits(ctx, a, lt.I64),
    "__naiad_longlong_as_double": lambda ctx, a: _same_bits(ctx, a, lt.F64),
}


class TargetHooks:
    """Defaults for an LLVM target with a C math library; backends override what differs."""

    #: The backend's name, for error messages.
    name = "this"

    #: LLVM fast-math flags on float add, sub and mul. ``("contract",)`` lets LLVM fuse a
    #: multiply and the add of its result into one fma (one rounding instead of two), as
    #: Triton's ``enable_fp_fusion`` does on NVIDIA; none keeps every result rounded, as numpy.
    float_flags: tuple[str, ...] = ()
    #: The widest integer type (bits) the target's LLVM code generator takes; an operation
    #: that would need a wider one (``tl.umulhi`` of 64-bit values: i128) is computed in
    #: halves instead.  SPIR-V has no integer wider than 64 bits.
    widest_integer: int = 128

    def call_math(self, ctx: Any, symbol: str, args: list[ir.Value], ret: ir.Type) -> ir.Value:
        """``symbol`` (a C math name, or a ``__naiad_`` one) applied to ``args``: Naiad's own
        functions are computed in LLVM IR (`NAIAD_FUNCTIONS`, then `naiad.codegen.mathlib`)."""
        own = NAIAD_FUNCTIONS.get(symbol) or mathlib.FUNCTIONS.get(symbol)
        if own is not None:
            return own(ctx, args)
        intrinsic = INTRINSICS.get(c_base_name(symbol, ret))
        if intrinsic is not None:
            return ctx.intrinsic(intrinsic, args)
        if symbol.startswith("__naiad_"):
            raise NotImplementedError(f"libdevice function {symbol[len('__naiad_'):]} is not "
                                      f"available on the {self.name} backend yet")
        return self.library_call(ctx, symbol, args, ret)

    def scale_by_powers_of_two(self, ctx: Any, value: ir.Value, exponent: ir.Value) -> ir.Value | None:
        """``value * 2**exponent`` (fp32 vectors; ``exponent`` holds whole numbers in [-150,
        128]) rounded once, where the target has one instruction for it; else None, and
        `naiad.codegen.fastmath` multiplies by two powers of two built from exponent bits."""
        return None

    def offset_address(self, ctx: Any, address: ir.Value, offset: ir.Value, size: int) -> ir.Value:
        """The i64 ``address`` moved by ``offset`` (i64, signed) elements of ``size`` bytes."""
        scaled = ctx.b.mul(offset, ctx.const(lt.I64, size)) if size != 1 else offset
        return ctx.b.add(address, scaled)

    def approximate(self, ctx: Any, name: str, args: list[ir.Value]) -> ir.Value | None:
        """A fast approximate ``div``, ``sqrt`` or ``rsqrt`` where the target's Triton uses one
        for the plain operator (``/``, ``tl.sqrt``, ``tl.rsqrt``); None keeps IEEE rounding."""
        return None

    def library_call(self, ctx: Any, symbol: str, args: list[ir.Value], ret: ir.Type) -> ir.Value:
        """Call the scalar library function ``symbol`` once per lane."""
        scalar_args = [lt.scalar_of(a.type) for a in args]
        fn = lt.function(ctx.module, symbol, lt.scalar_of(ret), scalar_args)
        if ctx.lanes == 1:
            return ctx.b.call(fn, args)
        result = ir.Constant(ret, ir.Undefined)
        for lane in range(ctx.lanes):
            index = ir.Constant(lt.I32, lane)
            value = ctx.b.call(fn, [ctx.b.extract_element(a, index) for a in args])
            result = ctx.b.insert_element(result, value, index)
        return result

    def f32_to_bf16(self, ctx: Any, value: ir.Value) -> ir.Value:
        """``float`` -> bf16 bits (``i16``), to nearest even (`naiad.codegen.elementwise`)."""
        return elementwise.f32_to_bf16(ctx, value)

    def fp8_to_f32(self, ctx: Any, value: ir.Value, fp8_type: Any) -> ir.Value:
        """fp8 bits (``i8``) -> the exact ``float`` (`naiad.codegen.fp8`)."""
        return fp8.fp8_to_f32(ctx, value, fp8_type)

    def f32_to_fp8(self, ctx: Any, value: ir.Value, fp8_type: Any, rounding: str) -> ir.Value:
        """``float`` -> fp8 bits (``i8``), rounded "rtne" or "rtz" (`naiad.codegen.fp8`)."""
        return fp8.f32_to_fp8(ctx, value, fp8_type, rounding)

    def nan_propagating_extremum(self, ctx: Any, name: str, args: list[ir.Value]) -> ir.Value:
        """``tl.maximum`` / ``tl.minimum`` with ``propagate_nan=ALL`` (``name``: "maximum" or
        "minimum"): LLVM's intrinsic of that name."""
        return ctx.intrinsic(name, args)

    def float_to_int(self, ctx: Any, value: ir.Value, target: ir.Type, signed: bool) -> ir.Value:
        """A float converted to the integer type ``target`` with saturation (out of range: the
        type's limit; NaN: 0): LLVM's ``fptosi.sat`` / ``fptoui.sat``.  An f16 source is widened
        to f32 first (exact): on x86 CPUs with AVX512-FP16, LLVM's own saturating f16 -> i16
        conversion turns NaN into -32768."""
        if lt.scalar_of(value.type) == lt.F16:
            value = ctx.b.fpext(value, lt.vector(lt.F32, lt.lanes_of(value.type)))
        name = "fptosi.sat" if signed else "fptoui.sat"
        fn = lt.intrinsic(ctx.module, name, [target, value.type], target, [value.type])
        return ctx.b.call(fn, [value])

    def truncate_toward_zero(self, ctx: Any, value: ir.Value, target_mlir: Any) -> ir.Value:
        """A float narrowed rounding toward zero, in storage form (bf16: its 16 bits).

        bf16 keeps the top half of the fp32 bits.  Otherwise round to nearest and, where that
        went away from zero, step back one unit in the last place (bits - 1 for either sign).
        """
        b = ctx.b
        if lt.is_bf16(target_mlir):
            bits = b.bitcast(value, lt.vector(lt.I32, ctx.lanes))
            top = b.trunc(b.lshr(bits, ctx.const(lt.I32, 16)), lt.vector(lt.I16, ctx.lanes))
            quiet = b.or_(top, ctx.const(lt.I16, 0x40))
            return b.select(b.fcmp_unordered("uno", value, value), quiet, top)
        narrow_type = lt.vector(lt.scalar(target_mlir), ctx.lanes)
        nearest = b.fptrunc(value, narrow_type)
        away = b.fcmp_ordered(">", ctx.intrinsic("fabs", [b.fpext(nearest, value.type)]),
                              ctx.intrinsic("fabs", [value]))
        int_type = ir.IntType(lt.byte_size(narrow_type) * 8)
        bits = b.bitcast(nearest, lt.vector(int_type, ctx.lanes))
        stepped = b.bitcast(b.sub(bits, ctx.const(int_type, 1)), narrow_type)
        return b.select(away, stepped, nearest)

    def inline_asm(self, ctx: Any, op: Any, args: list[ir.Value]) -> ir.Value:
        raise NotImplementedError(f"tl.inline_asm_elementwise is not supported on the {self.name} "
                                  f"backend (its assembly is written for another instruction set)")

    def printf(self, b: ir.IRBuilder, text: str, values: list[ir.Value]) -> None:
        """C's ``printf(text, values...)`` on a GPU target (``tl.device_print``)."""
        raise NotImplementedError(f"tl.device_print is not supported on the {self.name} backend yet")

    def assert_fail(self, b: ir.IRBuilder, message: str, file: str, line: int, function: str) -> None:
        """Report a failed ``tl.device_assert`` and stop the kernel, on a GPU target."""
        raise NotImplementedError(f"tl.device_assert is not supported on the {self.name} backend yet")

    def check_access(self, kernel: Any, op: Any, addresses: ir.Value, mask: ir.Value | None,
                     lanes: int, element: ir.Type) -> ir.Value | None:
        """Called before every memory access with its lane addresses and mask; returns the mask
        to use (debug modes check bounds here and mask off bad lanes)."""
        return mask
