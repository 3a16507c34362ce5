"""One lowering rule per element-wise TTIR op, shared by every backend.

A rule receives the LLVM values of the op's operands (all scalars, or all vectors of the same
lane count: a CPU chunk, or a GPU thread's elements) in *compute* types and returns the result
in the compute type.  Compute types equal storage types except bf16 and fp8, which are stored
as ``i16`` / ``i8`` and computed in ``float`` (`to_compute` / `to_storage` convert at the
boundary), so every floating-point rule is written once; rules that only move bits (select,
bitcast) see the storage forms.

Rules are looked up by op class in `RULES` (``@rule(OpClass)`` registers one), the way JAX's
Pallas registers lowering rules per primitive.  Anything target-specific (the math library
behind ``tt.extern_elementwise``) goes through `naiad.codegen.hooks.TargetHooks`.
"""

from __future__ import annotations

from typing import Any, Callable

import llvmlite.ir as ir
from xdsl.dialects import math as xmath

from naiad.codegen import llvm_types as lt
from naiad.ir import arith, tt

RULES: dict[type, Callable[..., ir.Value]] = {}
#: Ops whose rule returns the result in storage form already (it chooses the rounding itself).
STORAGE_RESULT: set[type] = set()
#: Ops that move bits without computing: their rule takes the operands in storage form and
#: returns the result in storage form, so no conversion can change the bits (a round trip
#: through ``float`` would turn an fp8 infinity into the largest finite value, and NaNs into
#: the canonical NaN).
STORAGE_OPERANDS: set[type] = set()


class Lowering:
    """What a rule may use: the IR builder, the module, the target hooks, the lane count."""

    def __init__(self, builder: ir.IRBuilder, hooks: Any, lanes: int):
        self.b = builder
        self.hooks = hooks
        self.lanes = lanes

    @property
    def module(self) -> ir.Module:
        return self.b.module

    def compute_type(self, mlir_type: Any) -> ir.Type:
        """The LLVM type a value of ``mlir_type`` is computed in, with this lowering's lanes."""
        t = lt.F32 if lt.is_bf16(mlir_type) or lt.is_fp8(mlir_type) else lt.scalar(mlir_type)
        return lt.vector(t, self.lanes)

    def splat(self, value: ir.Value) -> ir.Value:
        """A scalar repeated across the lanes (the value itself when lanes == 1)."""
        if self.lanes == 1:
            return value
        vec = ir.VectorType(value.type, self.lanes)
        undef = ir.Constant(vec, ir.Undefined)
        first = self.b.insert_element(undef, value, ir.Constant(lt.I32, 0))
        return self.b.shuffle_vector(first, undef, ir.Constant(ir.VectorType(lt.I32, self.lanes),
                                                             [0] * self.lanes))

    def const(self, t: ir.Type, value: Any) -> ir.Value:
        """A constant of scalar type ``t`` splat across the lanes."""
        scalar = ir.Constant(t, value)
        return scalar if self.lanes == 1 else ir.Constant(ir.VectorType(t, self.lanes), [scalar] * self.lanes)

    def intrinsic(self, name: str, args: list[ir.Value], ret: ir.Type | None = None) -> ir.Value:
        """Call the overloaded intrinsic ``llvm.<name>`` on values of one type."""
        ty = args[0].type
        fn = lt.intrinsic(self.module, name, [ty], ret or ty, [a.type for a in args])
        return self.b.call(fn, args)


def rule(*op_classes: type, storage_result: bool = False,
         storage_operands: bool = False) -> Callable:
    def register(fn: Callable) -> Callable:
        for cls in op_classes:
            RULES[cls] = fn
            if storage_result:
                STORAGE_RESULT.add(cls)
            if storage_operands:
                STORAGE_OPERANDS.add(cls)
        return fn
    return register


def lower(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    """Apply the rule of ``op`` to storage-typed ``args``; the result is storage-typed."""
    try:
        fn = RULES[type(op)]
    except KeyError:
        raise NotImplementedError(f"no lowering rule for {op.name}") from None
    if type(op) in STORAGE_OPERANDS:
        return fn(ctx, op, args)
    computed = [to_compute(ctx, a, v.type) for a, v in zip(args, op.operands)]
    result = fn(ctx, op, computed)
    if type(op) in STORAGE_RESULT:
        return result
    return to_storage(ctx, result, op.results[0].type)


def scalar_constant(ctx: Lowering, value: Any, mlir_type: Any) -> ir.Value:
    """A Python number as one element of ``mlir_type``, in its storage type (bf16 as its bits,
    fp8 through the target's conversion, integers wrapped to their width)."""
    storage = lt.scalar(mlir_type)
    if lt.is_bf16(mlir_type):
        return ir.Constant(lt.I16, lt.bf16_bits(float(value)))
    if lt.is_fp8(mlir_type):      # encoded by the shared conversion; LLVM folds it
        return to_storage(ctx, ir.Constant(lt.F32, float(value)), mlir_type)
    if isinstance(storage, ir.IntType):
        return ir.Constant(storage, int(value) & ((1 << storage.width) - 1))
    return ir.Constant(storage, float(value))


def apply_region(ctx: Lowering, region: Any, args: list[ir.Value]) -> list[ir.Value]:
    """The values a combine region (of ``tt.reduce`` or ``tt.scan``) yields for ``args``, its
    block arguments -- scalars, or vectors of ``ctx.lanes`` (the CPU combines a chunk of
    independent accumulators at once).  Its ops must be element-wise: they are lowered with
    these rules, constants splat to the lanes."""
    block = region.block
    env = dict(zip(block.args, args))
    scalar = Lowering(ctx.b, ctx.hooks, 1)
    for op in block.ops:
        if op is block.last_op:
            return [env[v] for v in op.operands]
        if isinstance(op, arith.ConstantOp):
            env[op.results[0]] = ctx.splat(scalar_constant(scalar, op.value.value.data, op.results[0].type))
        elif type(op) in RULES:
            env[op.results[0]] = lower(ctx, op, [env[v] for v in op.operands])
        else:
            raise NotImplementedError(f"{op.name} in a reduction's or scan's combine function is not "
                                      f"supported yet (only element-wise operations are)")
    raise RuntimeError("internal error: a combine region without a terminator")


# -- storage <-> compute -------------------------------------------------------------------
def to_compute(ctx: Lowering, value: ir.Value, mlir_type: Any) -> ir.Value:
    if lt.is_bf16(mlir_type):
        wide = ctx.b.shl(ctx.b.zext(value, lt.vector(lt.I32, ctx.lanes)), ctx.const(lt.I32, 16))
        return ctx.b.bitcast(wide, lt.vector(lt.F32, ctx.lanes))
    if lt.is_fp8(mlir_type):
        return ctx.hooks.fp8_to_f32(ctx, value, lt.element(mlir_type))
    return value


def to_storage(ctx: Lowering, value: ir.Value, mlir_type: Any) -> ir.Value:
    if lt.is_bf16(mlir_type):
        return ctx.hooks.f32_to_bf16(ctx, value)
    if lt.is_fp8(mlir_type):
        return ctx.hooks.f32_to_fp8(ctx, value, lt.element(mlir_type), "rtne")
    return value


def f32_to_bf16(ctx: Lowering, value: ir.Value) -> ir.Value:
    """Round to nearest even, keeping NaNs quiet (the bf16 of a NaN is a NaN)."""
    b, i32 = ctx.b, lt.vector(lt.I32, ctx.lanes)
    bits = b.bitcast(value, i32)
    lsb = b.and_(b.lshr(bits, ctx.const(lt.I32, 16)), ctx.const(lt.I32, 1))
    rounded = b.add(bits, b.add(lsb, ctx.const(lt.I32, 0x7FFF)))
    is_nan = b.fcmp_unordered("uno", value, value)
    result = b.select(is_nan, b.or_(bits, ctx.const(lt.I32, 0x400000)), rounded)
    return b.trunc(b.lshr(result, ctx.const(lt.I32, 16)), lt.vector(lt.I16, ctx.lanes))


def widened(ctx: Lowering, value: ir.Value, mlir_type: Any, compute: ir.Type) -> ir.Value:
    """A dot operand or accumulator in storage form as the dot's compute type ``compute`` (a
    scalar type; ``value`` may be a vector): bf16 and fp8 through `to_compute`, integers
    sign-extended, floats extended (or rounded, to a narrower compute type)."""
    value = to_compute(ctx, value, mlir_type)
    src = lt.scalar_of(value.type)
    if src == compute:
        return value
    target = lt.vector(compute, lt.lanes_of(value.type))
    if isinstance(compute, ir.IntType):
        return ctx.b.sext(value, target)
    return ctx.b.fpext(value, target) if lt.byte_size(src) < lt.byte_size(compute) else ctx.b.fptrunc(value, target)


def narrowed(ctx: Lowering, value: ir.Value, mlir_type: Any) -> ir.Value:
    """A dot's result in its compute type as the storage form of ``mlir_type`` (the inverse of
    `widened`: bf16 and fp8 through `to_storage`, integers truncated, floats rounded)."""
    storage = lt.scalar(mlir_type)
    if lt.is_bf16(mlir_type) or lt.is_fp8(mlir_type):
        return to_storage(ctx, value, mlir_type)
    if lt.scalar_of(value.type) == storage:
        return value
    target = lt.vector(storage, lt.lanes_of(value.type))
    if isinstance(storage, ir.IntType):
        return ctx.b.trunc(value, target)
    return ctx.b.fptrunc(value, target)


# -- integer and float arithmetic -----------------------------------------------------------
def _binary(method: str) -> Callable:
    def lower_binary(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
        return getattr(ctx.b, method)(args[0], args[1])
    return lower_binary


def _contractable(method: str) -> Callable:
    """A float add, sub or mul carrying the target's `TargetHooks.float_flags`."""
    def lower_contractable(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
        return getattr(ctx.b, method)(args[0], args[1], flags=ctx.hooks.float_flags)
    return lower_contractable


for _cls, _method in ((arith.AddiOp, "add"), (arith.SubiOp, "sub"), (arith.MuliOp, "mul"),
                      (arith.AndIOp, "and_"), (arith.OrIOp, "or_"),
                      (arith.XOrIOp, "xor"), (arith.ShLIOp, "shl"), (arith.ShRSIOp, "ashr"),
                      (arith.ShRUIOp, "lshr"), (arith.RemFOp, "frem"), (tt.PreciseDivFOp, "fdiv")):
    rule(_cls)(_binary(_method))
for _cls, _method in ((arith.AddfOp, "fadd"), (arith.SubfOp, "fsub"), (arith.MulfOp, "fmul")):
    rule(_cls)(_contractable(_method))


@rule(arith.DivfOp)
def _divf(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    """``/`` on floats: the target's fast division where it has one (Triton's on NVIDIA is
    ``div.full.f32``); ``tl.math.div_rn`` (PreciseDivFOp) stays IEEE."""
    fast = ctx.hooks.approximate(ctx, "div", args)
    return fast if fast is not None else ctx.b.fdiv(args[0], args[1])


def _safe_divisor(ctx: Lowering, dividend: ir.Value, divisor: ir.Value, signed: bool) -> ir.Value:
    """The divisor with 1 where LLVM's division is undefined: a zero divisor, and ``MIN / -1``.

    x86 traps on both, killing the process, and they are common in practice: a masked load
    fills the masked-off lanes with zeros, and those lanes are divided too.  With 1 there,
    ``MIN / -1`` gives MIN and ``MIN % -1`` gives 0 (the two's-complement wrap-around results);
    a zero divisor gives an unspecified (but harmless) value, as on GPUs.
    """
    t = lt.scalar_of(divisor.type)
    bad = ctx.b.icmp_unsigned("==", divisor, ctx.const(t, 0))
    if signed:
        minimum = ctx.b.icmp_unsigned("==", dividend, ctx.const(t, 1 << (t.width - 1)))
        minus_one = ctx.b.icmp_signed("==", divisor, ctx.const(t, -1))
        bad = ctx.b.or_(bad, ctx.b.and_(minimum, minus_one))
    return ctx.b.select(bad, ctx.const(t, 1), divisor)


def _division(method: str, signed: bool) -> Callable:
    def lower_division(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
        return getattr(ctx.b, method)(args[0], _safe_divisor(ctx, args[0], args[1], signed))
    return lower_division


for _cls, _method, _signed in ((arith.DivSIOp, "sdiv", True), (arith.RemSIOp, "srem", True),
                               (arith.DivUIOp, "udiv", False), (arith.RemUIOp, "urem", False)):
    rule(_cls)(_division(_method, _signed))


@rule(arith.NegfOp)
def _negf(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return ctx.b.fneg(args[0])


def _intrinsic_rule(name: str) -> Callable:
    def lower_intrinsic(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
        return ctx.intrinsic(name, args)
    return lower_intrinsic


@rule(arith.MaximumfOp, arith.MinimumfOp)
def _nan_propagating_extremum(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return ctx.hooks.nan_propagating_extremum(ctx, "maximum" if isinstance(op, arith.MaximumfOp) else "minimum",
                                              args)


for _cls, _name in ((arith.MaxSIOp, "smax"), (arith.MinSIOp, "smin"), (arith.MaxUIOp, "umax"),
                    (arith.MinUIOp, "umin"), (arith.MaxnumfOp, "maxnum"),
                    (arith.MinnumfOp, "minnum"), (tt.PreciseSqrtOp, "sqrt"),
                    (xmath.FloorOp, "floor"), (xmath.CeilOp, "ceil"), (xmath.AbsFOp, "fabs"),
                    (xmath.FmaOp, "fma"), (xmath.TruncOp, "trunc"), (xmath.RoundEvenOp, "roundeven"),
                    (xmath.RoundOp, "round")):
    rule(_cls)(_intrinsic_rule(_name))


@rule(xmath.AbsIOp)
def _absi(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    fn = lt.intrinsic(ctx.module, "abs", [args[0].type], args[0].type, [args[0].type, lt.I1])
    return ctx.b.call(fn, [args[0], ir.Constant(lt.I1, 0)])


@rule(xmath.SqrtOp)
def _sqrt(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    """``tl.sqrt``: the target's fast square root where it has one (``tl.sqrt_rn`` is IEEE)."""
    fast = ctx.hooks.approximate(ctx, "sqrt", args)
    return fast if fast is not None else ctx.intrinsic("sqrt", args)


@rule(xmath.RsqrtOp)
def _rsqrt(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    fast = ctx.hooks.approximate(ctx, "rsqrt", args)
    if fast is not None:
        return fast
    one = ctx.const(lt.scalar_of(args[0].type), 1.0)
    return ctx.b.fdiv(one, ctx.intrinsic("sqrt", args))


def _libm_rule(c_name: str) -> Callable:
    def lower_libm(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
        suffix = "f" if lt.scalar_of(args[0].type) == lt.F32 else ""
        return ctx.hooks.call_math(ctx, c_name + suffix, args, args[0].type)
    return lower_libm


# Transcendentals go through the target's math library (which may map them to intrinsics, or
# to faster vector code: the CPU's exp).
for _cls, _name in ((xmath.ExpOp, "exp"), (xmath.Exp2Op, "exp2"), (xmath.LogOp, "log"),
                    (xmath.Log2Op, "log2"), (xmath.SinOp, "sin"), (xmath.CosOp, "cos"),
                    (xmath.ErfOp, "erf"), (xmath.TanhOp, "tanh"), (xmath.Log1pOp, "log1p"),
                    (xmath.ExpM1Op, "expm1"), (xmath.TanOp, "tan"), (xmath.AtanOp, "atan")):
    rule(_cls)(_libm_rule(_name))


# -- comparisons and select ------------------------------------------------------------------
_ICMP = {"eq": ("==", True), "ne": ("!=", True), "slt": ("<", True), "sle": ("<=", True),
         "sgt": (">", True), "sge": (">=", True), "ult": ("<", False), "ule": ("<=", False),
         "ugt": (">", False), "uge": (">=", False)}
_FCMP_ORDERED = {"oeq": "==", "one": "!=", "olt": "<", "ole": "<=", "ogt": ">", "oge": ">=",
                 "ord": "ord"}
_FCMP_UNORDERED = {"ueq": "==", "une": "!=", "ult": "<", "ule": "<=", "ugt": ">", "uge": ">=",
                   "uno": "uno"}


@rule(arith.CmpiOp)
def _cmpi(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    name = arith.CmpiOp.PREDICATES[op.predicate.value.data]
    symbol, signed = _ICMP[name]
    compare = ctx.b.icmp_signed if signed else ctx.b.icmp_unsigned
    return compare(symbol, args[0], args[1])


@rule(arith.CmpfOp)
def _cmpf(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    name = arith.CmpfOp.PREDICATES[op.predicate.value.data]
    if name in ("false", "true"):
        return ctx.const(lt.I1, int(name == "true"))
    if name in _FCMP_ORDERED:
        return ctx.b.fcmp_ordered(_FCMP_ORDERED[name], args[0], args[1])
    return ctx.b.fcmp_unordered(_FCMP_UNORDERED[name], args[0], args[1])


@rule(arith.SelectOp, storage_operands=True)
def _select(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    cond = args[0]
    if lt.lanes_of(cond.type) != lt.lanes_of(args[1].type):
        cond = ctx.splat(cond)
    return ctx.b.select(cond, args[1], args[2])


# -- conversions ----------------------------------------------------------------------------------
def _result(ctx: Lowering, op: Any) -> ir.Type:
    return ctx.compute_type(op.results[0].type)


def _int_resize(ctx: Lowering, value: ir.Value, target: ir.Type, signed: bool) -> ir.Value:
    old, new = lt.scalar_of(value.type).width, lt.scalar_of(target).width
    if old == new:
        return value
    if old > new:
        return ctx.b.trunc(value, target)
    return ctx.b.sext(value, target) if signed else ctx.b.zext(value, target)


@rule(arith.ExtSIOp)
def _extsi(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return _int_resize(ctx, args[0], _result(ctx, op), True)


@rule(arith.ExtUIOp, arith.TruncIOp)
def _extui(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return _int_resize(ctx, args[0], _result(ctx, op), False)


def _f64_to_f32_odd(ctx: Lowering, value: ir.Value) -> ir.Value:
    """f64 -> f32 rounding to odd (toward zero, then the last bit set when inexact).

    Rounding twice to nearest (f64 -> f32 -> f16) is wrong when the first rounding lands on a
    tie of the second; rounding to odd first cannot make a tie, so the second rounding to any
    format at least two bits narrower than f32 (f16, bf16, fp8) is correctly rounded.  It also
    keeps f64 -> f16 away from ``fptrunc double to half``, which x86 compiles into a call of
    ``__truncdfhf2``, a compiler-runtime function the process may not have.
    """
    b = ctx.b
    f32, i32 = lt.vector(lt.F32, ctx.lanes), lt.vector(lt.I32, ctx.lanes)
    nearest = b.fptrunc(value, f32)
    back = b.fpext(nearest, value.type)
    inexact = b.fcmp_ordered("!=", back, value)
    rounded_away = b.fcmp_ordered(">", ctx.intrinsic("fabs", [back]), ctx.intrinsic("fabs", [value]))
    bits = b.bitcast(nearest, i32)
    toward_zero = b.select(rounded_away, b.sub(bits, ctx.const(lt.I32, 1)), bits)
    odd = b.or_(toward_zero, ctx.const(lt.I32, 1))
    return b.bitcast(b.select(inexact, odd, bits), f32)


def _float_resize(ctx: Lowering, value: ir.Value, mlir_target: Any) -> ir.Value:
    """A float ``value`` in the compute type of the float type ``mlir_target``, rounded once."""
    target = ctx.compute_type(mlir_target)
    src, dst = lt.scalar_of(value.type), lt.scalar_of(target)
    if src == dst:
        return value
    if src == lt.F64 and (dst == lt.F16 or dst != lt.scalar(mlir_target)):
        value = _f64_to_f32_odd(ctx, value)      # f16, or bf16/fp8 (rounded by to_storage)
        return value if dst == lt.F32 else ctx.b.fptrunc(value, target)
    if lt.byte_size(src) > lt.byte_size(dst):
        return ctx.b.fptrunc(value, target)
    return ctx.b.fpext(value, target)


@rule(arith.ExtFOp, arith.TruncFOp)
def _float_cast(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return _float_resize(ctx, args[0], op.results[0].type)


@rule(tt.FpToFpOp, storage_result=True)
def _fp_to_fp(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    """Float conversions with an explicit rounding; the fp8 formats go through the hooks."""
    target = op.results[0].type
    rounding = op.rounding.data.value if op.rounding is not None else "rtne"
    if lt.is_fp8(target):
        as_f32 = _float_resize(ctx, args[0], target)
        return ctx.hooks.f32_to_fp8(ctx, as_f32, lt.element(target), rounding)
    narrowing = lt.byte_size(args[0].type) > lt.byte_size(lt.scalar(target)) or lt.is_bf16(target)
    if rounding == "rtz" and narrowing:
        return ctx.hooks.truncate_toward_zero(ctx, args[0], target)
    return to_storage(ctx, _float_resize(ctx, args[0], target), target)


@rule(arith.SIToFPOp)
def _sitofp(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return ctx.b.sitofp(args[0], _result(ctx, op))


@rule(arith.UIToFPOp)
def _uitofp(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return ctx.b.uitofp(args[0], _result(ctx, op))


def _float_to_int(signed: bool) -> Callable:
    """Float -> integer with saturation (NaN -> 0), as GPUs convert (`TargetHooks.float_to_int`):
    LLVM's plain ``fptosi`` gives poison out of range, which an address computed from it would
    turn into a crash."""
    def lower_float_to_int(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
        return ctx.hooks.float_to_int(ctx, args[0], _result(ctx, op), signed)
    return lower_float_to_int


rule(arith.FPToSIOp)(_float_to_int(True))
rule(arith.FPToUIOp)(_float_to_int(False))


@rule(tt.BitcastOp, arith.BitcastOp, storage_operands=True)
def _bitcast(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    target = lt.vector(lt.scalar(op.results[0].type), ctx.lanes)
    return args[0] if args[0].type == target else ctx.b.bitcast(args[0], target)


@rule(tt.PtrToIntOp, tt.IntToPtrOp)
def _ptr_int(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return _int_resize(ctx, args[0], _result(ctx, op), False)


@rule(tt.AddPtrOp)
def _addptr(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    """Pointers are i64 addresses: ``p + offset * sizeof(pointee)`` (offsets are signed), as
    the target computes it (`TargetHooks.offset_address`)."""
    pointee = lt.element(op.operands[0].type).pointee_type
    size = lt.byte_size(lt.scalar(pointee)) if not hasattr(pointee, "element_type") else 0
    offset = _int_resize(ctx, args[1], lt.vector(lt.I64, ctx.lanes), True)
    return ctx.hooks.offset_address(ctx, args[0], offset, size)


@rule(tt.ClampFOp)
def _clampf(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    x, low, high = args
    propagate = op.propagateNan.data.value == "all"
    clamped = ctx.intrinsic("minnum", [ctx.intrinsic("maxnum", [x, low]), high])
    if not propagate:
        return clamped
    return ctx.b.select(ctx.b.fcmp_unordered("uno", x, x), x, clamped)


@rule(tt.MulhiUIOp)
def _mulhi(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return unsigned_high_half(ctx, *args)


def unsigned_high_half(ctx: Lowering, a: ir.Value, b: ir.Value) -> ir.Value:
    """The high half of the unsigned product of two integers (``tl.umulhi``), through an
    integer twice as wide where the target has one."""
    width = lt.scalar_of(a.type).width
    if 2 * width > ctx.hooks.widest_integer:
        return _mulhi_by_halves(ctx, a, b)
    wide = lt.vector(ir.IntType(2 * width), ctx.lanes)
    product = ctx.b.mul(ctx.b.zext(a, wide), ctx.b.zext(b, wide))
    return ctx.b.trunc(ctx.b.lshr(product, ctx.const(ir.IntType(2 * width), width)), a.type)


def _mulhi_by_halves(ctx: Lowering, a: ir.Value, b: ir.Value) -> ir.Value:
    """The high half of an unsigned product from the four products of the operands' halves,
    for targets without an integer twice as wide (64-bit ``tl.umulhi`` on SPIR-V, which has
    no i128): the low half's carries are summed in ``middle``, which cannot overflow."""
    bld, kind = ctx.b, a.type
    half = lt.scalar_of(kind).width // 2
    shift, mask = ctx.const(lt.scalar_of(kind), half), ctx.const(lt.scalar_of(kind), (1 << half) - 1)
    a_low, a_high = bld.and_(a, mask), bld.lshr(a, shift)
    b_low, b_high = bld.and_(b, mask), bld.lshr(b, shift)
    low_low, low_high = bld.mul(a_low, b_low), bld.mul(a_low, b_high)
    high_low, high_high = bld.mul(a_high, b_low), bld.mul(a_high, b_high)
    middle = bld.add(bld.add(bld.lshr(low_low, shift), bld.and_(low_high, mask)), bld.and_(high_low, mask))
    carries = bld.add(bld.add(bld.lshr(low_high, shift), bld.lshr(high_low, shift)), bld.lshr(middle, shift))
    return bld.add(high_high, carries)


@rule(tt.ExternElementwiseOp)
def _extern(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return ctx.hooks.call_math(ctx, op.symbol.data, args, _result(ctx, op))


@rule(tt.ElementwiseInlineAsmOp)
def _inline_asm(ctx: Lowering, op: Any, args: list[ir.Value]) -> ir.Value:
    return ctx.hooks.inline_asm(ctx, op, args)
