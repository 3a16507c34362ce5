"""TTIR structure tests: one small kernel per language construct.

Each test generates TTIR through `ttir_for` (as a launch would), checks the operations it
must contain (names, counts, types, attributes), and that the module verifies and survives a
print/parse round trip.  Typing expectations come from `naiad.language.promotion`, the tested
statement of Triton's rules.
"""

import importlib.util
import itertools
import types
from collections import Counter

import pytest

import naiad.language as tl
from naiad.compiler.frontend import make_ttir, specialize, ttir_for
from naiad.ir import parse_module, print_module
from naiad.language import promotion
from naiad.runtime.jit import JITFunction, jit


# -- helpers ---------------------------------------------------------------------------------

class FakeArray:
    """An array argument of any dtype name (numpy has no bfloat16) at a chosen address."""

    def __init__(self, dtype: str, address: int = 1024):
        self.dtype = types.SimpleNamespace(name=dtype)
        self.address = address

    def data_ptr(self) -> int:
        return self.address


def arr(dtype: str = "float32") -> FakeArray:
    return FakeArray(dtype)


F32, F16, BF16, F64 = arr("float32"), arr("float16"), arr("bfloat16"), arr("float64")
I32, I64, I8, U32, U8 = arr("int32"), arr("int64"), arr("int8"), arr("uint32"), arr("uint8")


def compile_ttir(kernel: JITFunction, *args, **kwargs):
    """The kernel's TTIR; it must verify and print/parse back to the same text."""
    module = ttir_for(kernel, *args, **kwargs)
    module.verify()
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    return module


def ops(module, name: str) -> list:
    return [op for op in module.walk() if op.name == name]


def op_counts(module) -> Counter:
    return Counter(op.name for op in module.walk())


def types_of(module, name: str) -> list[str]:
    """The result type (MLIR text) of every ``name`` operation, in order."""
    return [str(op.results[0].type) for op in ops(module, name)]


def functions(module) -> dict:
    return {op.sym_name.data: op for op in ops(module, "tt.func")}


def kernel_func(module, name: str):
    return functions(module)[name]


def ir_name(ty: tl.dtype) -> str:
    """The MLIR spelling of a scalar dtype (signedness is not part of MLIR integers)."""
    if ty.is_int():
        return f"i{ty.int_bitwidth}"
    return {"fp16": "f16", "bf16": "bf16", "fp32": "f32", "fp64": "f64"}[ty.name]


# -- programs, ranges, creation --------------------------------------------------------------

@jit
def k_program_ids(X):
    total = tl.program_id(0) + tl.program_id(1) + tl.program_id(2)
    total += tl.num_programs(0) + tl.num_programs(1) + tl.num_programs(axis=2)
    tl.store(X, total)


def test_program_id_and_num_programs_on_three_axes():
    module = compile_ttir(k_program_ids, I32)
    pids, nums = ops(module, "tt.get_program_id"), ops(module, "tt.get_num_programs")
    assert [op.axis.data for op in pids] == ["x", "y", "z"]
    assert [op.axis.data for op in nums] == ["x", "y", "z"]
    assert set(types_of(module, "tt.get_program_id")) == {"i32"}
    assert op_counts(module)["arith.addi"] == 5


@jit
def k_arange(X, START: tl.constexpr, END: tl.constexpr):
    offsets = tl.arange(START, END)
    tl.store(X + offsets, offsets)


def test_arange_makes_a_range_of_its_bounds():
    module = compile_ttir(k_arange, I32, START=32, END=96)
    (rng,) = ops(module, "tt.make_range")
    assert (rng.start.value.data, rng.end.value.data) == (32, 96)
    assert str(rng.results[0].type) == "tensor<64xi32>"


@jit
def k_creation(X, B: tl.constexpr):
    a = tl.full((B, 2 * B), 7, tl.int16)
    z = tl.zeros([B], tl.float16)
    like = tl.zeros_like(tl.arange(0, B))
    s = tl.full([], 3.5, tl.float64)
    tl.store(X + tl.arange(0, B), like + tl.sum(a, 1) + z.to(tl.int32) + s.to(tl.int32))


def test_full_zeros_and_zeros_like_splat_a_constant():
    module = compile_ttir(k_creation, I32, B=8)
    body = kernel_func(module, "k_creation")
    splats = [str(op.results[0].type) for op in body.walk() if op.name == "tt.splat"]
    assert splats[:3] == ["tensor<8x16xi16>", "tensor<8xf16>", "tensor<8xi32>"]
    constants = [str(op.results[0].type) for op in body.walk() if op.name == "arith.constant"]
    assert constants[:4] == ["i16", "f16", "i32", "f64"]
    # tl.full with shape () is a scalar: no splat for it.
    assert "tensor<f64>" not in print_module(module)


# -- binary operators ------------------------------------------------------------------------

_OPERATORS = ["+", "-", "*", "/", "//", "%", "&", "|", "^", "<<", ">>",
              "==", "!=", "<", "<=", ">", ">="]
_DTYPES = [tl.int1, tl.int8, tl.int16, tl.int32, tl.int64, tl.uint8, tl.uint32, tl.uint64,
           tl.float16, tl.bfloat16, tl.float32, tl.float64]


@jit
def op_add(a, b):
    return a + b


@jit
def op_sub(a, b):
    return a - b


@jit
def op_mul(a, b):
    return a * b


@jit
def op_truediv(a, b):
    return a / b


@jit
def op_floordiv(a, b):
    return a // b


@jit
def op_mod(a, b):
    return a % b


@jit
def op_and(a, b):
    return a & b


@jit
def op_or(a, b):
    return a | b


@jit
def op_xor(a, b):
    return a ^ b


@jit
def op_lshift(a, b):
    return a << b


@jit
def op_rshift(a, b):
    return a >> b


@jit
def op_eq(a, b):
    return a == b


@jit
def op_ne(a, b):
    return a != b


@jit
def op_lt(a, b):
    return a < b


@jit
def op_le(a, b):
    return a <= b


@jit
def op_gt(a, b):
    return a > b


@jit
def op_ge(a, b):
    return a >= b


_OPERATORS = {"+": op_add, "-": op_sub, "*": op_mul, "/": op_truediv, "//": op_floordiv,
              "%": op_mod, "&": op_and, "|": op_or, "^": op_xor, "<<": op_lshift, ">>": op_rshift,
              "==": op_eq, "!=": op_ne, "<": op_lt, "<=": op_le, ">": op_gt, ">=": op_ge}
_DTYPES = [tl.int1, tl.int8, tl.int16, tl.int32, tl.int64, tl.uint8, tl.uint32, tl.uint64,
           tl.float16, tl.bfloat16, tl.float32, tl.float64]


@jit
def k_binary(X, Y, A: tl.constexpr, B: tl.constexpr, OPS: tl.constexpr):
    offsets = tl.arange(0, 16)
    a = tl.load(X + offsets).to(A)
    b = tl.load(Y + offsets).to(B)
    for i in tl.static_range(len(OPS)):
        OPS[i](a, b)


def _expected_op(op: str, a: tl.dtype, b: tl.dtype, ty: tl.dtype) -> str:
    """The arith operation Triton lowers ``a op b`` to, computed in type ``ty``."""
    if op in ("/", "//", "%"):
        return promotion.division_semantics(op, ty)
    if op == ">>":
        return "arith.shrsi" if promotion.right_shift_is_arithmetic(a, b) else "arith.shrui"
    if op in ("==", "!=", "<", "<=", ">", ">="):
        return "arith.cmpf" if ty.is_floating() else "arith.cmpi"
    base = {"+": "add", "-": "sub", "*": "mul", "&": "and", "|": "or", "^": "xor", "<<": "shl"}[op]
    return f"arith.{base}{'f' if ty.is_floating() else 'i'}"


def _legal(op: str, a: tl.dtype, b: tl.dtype) -> bool:
    try:
        promotion.binary_op_types(op, a, b)
    except (TypeError, ValueError):
        return False
    return True


@pytest.mark.parametrize("a,b", list(itertools.product(_DTYPES, _DTYPES)), ids=lambda t: t.name)
def test_binary_operator_types_follow_promotion(a, b):
    legal = [op for op in _OPERATORS if _legal(op, a, b)]
    module = ttir_for(k_binary, F32, F32, A=a, B=b, OPS=tuple(_OPERATORS[op] for op in legal))
    helpers = [f for name, f in functions(module).items() if name.startswith("op_")]
    assert len(helpers) == len(legal)
    for op, helper in zip(legal, helpers):
        types = promotion.binary_op_types(op, a, b)
        (result,) = helper.function_type.outputs.data
        assert str(result) == f"tensor<16x{ir_name(types.result)}>", op
        names = {o.name for o in helper.walk()}
        assert _expected_op(op, a, b, types.lhs) in names, (op, names)


@jit
def k_scalar_operand(X, SCALAR: tl.constexpr, A: tl.constexpr):
    x = tl.load(X + tl.arange(0, 16)).to(A)
    op_add(x, SCALAR)
    op_mul(SCALAR, x)


@pytest.mark.parametrize("scalar", [1, 7, 2.5, 1e300, True, 300])
@pytest.mark.parametrize("dtype", [tl.int8, tl.int32, tl.uint32, tl.float16, tl.bfloat16, tl.float64])
def test_python_scalars_do_not_widen_tensors(scalar, dtype):
    if not _legal("+", dtype, scalar):
        pytest.skip("Triton rejects this pair (tested in test_errors)")
    module = compile_ttir(k_scalar_operand, F32, SCALAR=scalar, A=dtype)
    expected = ir_name(promotion.binary_op_types("+", dtype, scalar).result)
    outputs = [str(f.function_type.outputs.data[0]) for n, f in functions(module).items()
               if n.startswith("op_")]
    assert outputs == [f"tensor<16x{expected}>"] * 2


@jit
def k_int_division(X, Y, Z):
    offsets = tl.arange(0, 16)
    a, b = tl.load(X + offsets), tl.load(Y + offsets)
    tl.store(Z + offsets, a // b + a % b)


def test_integer_division_truncates_like_c():
    signed = op_counts(compile_ttir(k_int_division, I32, I32, I32))
    assert signed["arith.divsi"] == 1 and signed["arith.remsi"] == 1
    unsigned = op_counts(compile_ttir(k_int_division, U32, U32, U32))
    assert unsigned["arith.divui"] == 1 and unsigned["arith.remui"] == 1


@jit
def k_constexpr_fold(X, A: tl.constexpr, B: tl.constexpr):
    tl.static_assert(A // B == -4)     # Python's semantics for compile-time values
    tl.static_assert(A % B == 1)
    tl.store(X, A * B + 1)


def test_constexpr_arithmetic_is_folded_at_compile_time():
    module = compile_ttir(k_constexpr_fold, I32, A=-7, B=2)
    assert "arith.muli" not in op_counts(module)
    constants = [op.value.value.data for op in ops(module, "arith.constant")]
    assert constants == [-13]


# -- comparisons, unary operators, where, casts ------------------------------------------------

@jit
def k_compare(X, Y, Z):
    offsets = tl.arange(0, 16)
    x, y = tl.load(X + offsets), tl.load(Y + offsets)
    tl.store(Z + offsets, (x < y) | (x == y) | (x >= y) | (x != y) | (x > y) | (x <= y))


@pytest.mark.parametrize("arrays,predicates", [
    ((F32, F32), ["olt", "oeq", "oge", "une", "ogt", "ole"]),
    ((I32, I32), ["slt", "eq", "sge", "ne", "sgt", "sle"]),
    ((U32, U32), ["ult", "eq", "uge", "ne", "ugt", "ule"]),
])
def test_comparisons_pick_predicates_by_signedness(arrays, predicates):
    module = compile_ttir(k_compare, *arrays, arr("int1"))
    name = "arith.cmpf" if arrays[0] is F32 else "arith.cmpi"
    found = [op.predicate.value.data for op in ops(module, name)]
    text = print_module(module)
    assert all(f"{name} {p}," in text for p in predicates), (found, text)
    assert set(types_of(module, name)) == {"tensor<16xi1>"}


@jit
def k_unary(X, F, B):
    offsets = tl.arange(0, 16)
    i, f = tl.load(X + offsets), tl.load(F + offsets)
    m = tl.load(B + offsets)
    tl.store(X + offsets, -i + ~i)
    tl.store(F + offsets, -f)
    tl.store(B + offsets, not m)


def test_unary_operators():
    counts = op_counts(compile_ttir(k_unary, I32, F32, arr("bool")))
    assert counts["arith.negf"] == 1
    assert counts["arith.subi"] == 1        # -i is 0 - i
    assert counts["arith.xori"] == 2        # ~i and `not m` (xor with all ones)


@jit
def k_where(X, Y, C):
    offsets = tl.arange(0, 16)
    x = tl.load(X + offsets)
    c = tl.load(C + offsets)
    a = tl.where(c, x, 0.0)                     # Python scalar: stays fp16
    b = tl.where(offsets < 4, x, tl.load(Y))    # fp16 block, fp32 scalar tensor: fp32
    s = tl.where(tl.program_id(0) > 0, 1, 2)    # scalar condition and values
    tl.store(X + offsets, a + b.to(tl.float16) + s)


def test_where_selects_with_promoted_types():
    module = compile_ttir(k_where, F16, F32, arr("bool"))
    assert types_of(module, "arith.select") == ["tensor<16xf16>", "tensor<16xf32>", "i32"]


@jit
def k_casts(X, Y):
    offsets = tl.arange(0, 16)
    x = tl.load(X + offsets)
    down = x.to(tl.float16, fp_downcast_rounding="rtz")
    bits = x.to(tl.int32, bitcast=True)
    up = down.to(tl.float64)
    i8 = tl.cast(x, tl.int8)
    u = i8.to(tl.uint64)
    back = u.to(tl.float32)
    fp8 = x.to(tl.float8e5)
    b = x.to(tl.int1)
    tl.store(Y + offsets, bits + i8 + b + (up + back.to(tl.float64) + fp8.to(tl.float64)).to(tl.int32))


def test_casts_bitcasts_and_rounding_modes():
    module = compile_ttir(k_casts, F32, I32)
    counts = op_counts(module)
    fp_to_fp = ops(module, "tt.fp_to_fp")
    assert [op.rounding.data.value if op.rounding else None for op in fp_to_fp][:2] == ["rtz", "rtne"]
    assert counts["tt.bitcast"] == 1 and types_of(module, "tt.bitcast") == ["tensor<16xi32>"]
    assert counts["arith.extf"] >= 2 and counts["arith.fptosi"] >= 1
    widen = [(op.name, str(op.results[0].type)) for op in module.walk()
             if op.name in ("arith.extsi", "arith.extui") and str(op.operands[0].type) == "tensor<16xi8>"]
    assert ("arith.extsi", "tensor<16xi64>") in widen          # int8 -> uint64 sign-extends
    assert counts["arith.uitofp"] == 1                                    # u64 -> fp32
    assert "arith.cmpf une" in print_module(module)                       # float -> int1 is x != 0


# -- loads and stores --------------------------------------------------------------------------

@jit
def k_load_store(X, Y, n, B: tl.constexpr):
    offsets = tl.arange(0, B)
    mask = offsets < n
    x = tl.load(X + offsets, mask=mask, other=1.5, cache_modifier=".cg",
                eviction_policy="evict_last", volatile=True)
    y = tl.load(X + offsets)
    tl.store(Y + offsets, x + y, mask=mask, cache_modifier=".wt", eviction_policy="evict_first")
    tl.store(Y, 1)


def test_load_and_store_options():
    module = compile_ttir(k_load_store, F32, F16, 100, B=32)
    masked, plain = ops(module, "tt.load")
    assert len(masked.operands) == 3 and len(plain.operands) == 1
    assert masked.cache.data == "cg" and masked.evict.data == "evict_last"
    assert bool(masked.isVolatile.value.data) and not bool(plain.isVolatile.value.data)
    assert str(masked.operands[2].type) == "tensor<32xf32>"
    store, scalar_store = ops(module, "tt.store")
    assert len(store.operands) == 3 and store.cache.data == "wt"
    assert store.evict.data == "evict_first"
    assert str(store.operands[1].type) == "tensor<32xf16>"    # the value converts to f16
    assert str(scalar_store.operands[1].type) == "f16"


# -- block pointers -----------------------------------------------------------------------------

@jit
def k_block_ptr(X, M, N, stride, B: tl.constexpr):
    p = tl.make_block_ptr(X, shape=(M, N), strides=(stride, 1), offsets=(tl.program_id(0) * B, 0),
                          block_shape=(B, 2 * B), order=(1, 0))
    a = tl.load(p, boundary_check=(0, 1), padding_option="zero")
    p = tl.advance(p, (0, 2 * B))
    b = tl.load(p, boundary_check=(1,), padding_option="nan")
    tl.store(p, a + b, boundary_check=(0,))


def test_block_pointers():
    module = compile_ttir(k_block_ptr, F32, 64, 64, 64, B=16)
    (make,) = ops(module, "tt.make_tensor_ptr")
    assert str(make.results[0].type) == "!tt.ptr<tensor<16x32xf32>>"
    assert list(make.order.get_values()) == [1, 0]
    (advance,) = ops(module, "tt.advance")
    assert str(advance.results[0].type) == "!tt.ptr<tensor<16x32xf32>>"
    first, second = ops(module, "tt.load")
    assert first.boundaryCheck.get_values() == (0, 1) and first.padding.data == "zero"
    assert second.boundaryCheck.get_values() == (1,) and second.padding.data == "nan"
    assert types_of(module, "tt.load") == ["tensor<16x32xf32>"] * 2
    (store,) = ops(module, "tt.store")
    assert store.boundaryCheck.get_values() == (0,)


# -- atomics -------------------------------------------------------------------------------------

@jit
def k_atomics(F, I, U, n, B: tl.constexpr):
    offsets = tl.arange(0, B)
    mask = offsets < n
    tl.atomic_add(F + offsets, 1.0, mask=mask, sem="relaxed", scope="cta")
    tl.atomic_add(I + offsets, 1)
    tl.atomic_max(I + offsets, 2, sem="acquire")
    tl.atomic_min(I + offsets, 2, scope="sys")
    tl.atomic_max(U + offsets, 2)
    tl.atomic_min(U + offsets, 2, mask=mask)
    tl.atomic_and(I + offsets, 3, sem="release")
    tl.atomic_or(I + offsets, 3)
    tl.atomic_xor(I + offsets, 3)
    tl.atomic_xchg(F + offsets, 4.0, mask=mask)
    tl.atomic_cas(I, 0, 1, sem="acq_rel", scope="gpu")


def test_atomics_of_every_kind():
    module = compile_ttir(k_atomics, F32, I32, U32, 10, B=16)
    rmw = ops(module, "tt.atomic_rmw")
    kinds = [op.atomic_rmw_op.data.value for op in rmw]
    assert kinds == ["fadd", "add", "max", "min", "umax", "umin", "and", "or", "xor", "exch"]
    assert [op.sem.data.value for op in rmw][:4] == ["relaxed", "acq_rel", "acquire", "acq_rel"]
    assert [op.scope.data.value for op in rmw][:4] == ["cta", "gpu", "gpu", "sys"]
    assert [len(op.operands) for op in rmw] == [3, 2, 2, 2, 2, 3, 2, 2, 2, 3]
    (cas,) = ops(module, "tt.atomic_cas")
    assert str(cas.results[0].type) == "i32"


@jit
def k_float_atomic_minmax(F, D, n, B: tl.constexpr):
    offsets = tl.arange(0, B)
    mask = offsets < n
    tl.atomic_max(F + offsets, tl.load(F + offsets), mask=mask)
    tl.atomic_min(D + offsets, tl.load(D + offsets))


def test_float_atomic_max_min_use_integer_atomics_on_the_bits():
    module = compile_ttir(k_float_atomic_minmax, F32, F64, 10, B=16)
    rmw = ops(module, "tt.atomic_rmw")
    assert [op.atomic_rmw_op.data.value for op in rmw] == ["max", "umin", "min", "umax"]
    assert [str(op.results[0].type) for op in rmw] == ["tensor<16xi32>"] * 2 + ["tensor<16xi64>"] * 2
    assert types_of(module, "arith.select") == ["tensor<16xf32>", "tensor<16xf64>"]
    assert op_counts(module)["arith.shrui"] == 2          # the sign bit picks the atomic


# -- shapes -------------------------------------------------------------------------------------

@jit
def k_shapes(X, B: tl.constexpr):
    r = tl.arange(0, B)
    col = r[:, None]
    row = r[None, :]
    grid = col * B + row
    e = tl.expand_dims(r, 0)
    e2 = tl.expand_dims(r, (0, 2))
    b = tl.broadcast_to(row, (B, B))
    b2 = row.broadcast_to(B, B)
    bx, by = tl.broadcast(col, row)
    rs = tl.reshape(grid, B * B)
    rs2 = grid.reshape((B // 2, 2 * B))
    v = tl.view(grid, [B * B])
    t = tl.trans(grid)
    t2 = grid.T
    p = tl.permute(e2, (2, 0, 1))
    p2 = e2.permute(1, 2, 0)
    tl.static_print(e, b, b2, bx, by, rs, rs2, v, t, t2, p, p2)
    tl.store(X + grid, grid)


def test_broadcast_expand_dims_reshape_view_trans_permute(capsys):
    module = compile_ttir(k_shapes, I32, B=8)
    capsys.readouterr()
    assert types_of(module, "tt.expand_dims")[:2] == ["tensor<8x1xi32>", "tensor<1x8xi32>"]
    assert "tensor<1x8x1xi32>" in types_of(module, "tt.expand_dims")
    assert {"tensor<8x8xi32>"} <= set(types_of(module, "tt.broadcast"))
    assert types_of(module, "tt.reshape") == ["tensor<64xi32>", "tensor<4x16xi32>", "tensor<64xi32>"]
    trans = ops(module, "tt.trans")
    assert [list(op.order.get_values()) for op in trans] == [[1, 0], [1, 0], [2, 0, 1], [1, 2, 0]]
    assert [str(op.results[0].type) for op in trans][2:] == ["tensor<1x1x8xi32>", "tensor<8x1x1xi32>"]


@jit
def k_join_split(X, B: tl.constexpr):
    a = tl.arange(0, B)
    j = tl.join(a, a + 1)
    lo, hi = tl.split(j)
    lo2, hi2 = j.split()
    i = tl.interleave(a, a)
    c = tl.cat(a, a, can_reorder=True)
    tl.store(X + tl.arange(0, 2 * B), i + c + tl.join(lo + hi2, hi + lo2).reshape(2 * B))


def test_join_split_interleave_cat():
    module = compile_ttir(k_join_split, I32, B=16)
    assert types_of(module, "tt.join")[0] == "tensor<16x2xi32>"
    split = ops(module, "tt.split")
    assert len(split) == 2 and [str(r.type) for r in split[0].results] == ["tensor<16xi32>"] * 2
    assert "tensor<32xi32>" in types_of(module, "tt.reshape")     # interleave = join + reshape
    assert types_of(module, "tt.cat") == ["tensor<32xi32>"]


# -- dot ------------------------------------------------------------------------------------------

@jit
def k_dot(A, B, C, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, DT: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(A + rm[:, None] * K + rk[None, :]).to(DT)
    b = tl.load(B + rk[:, None] * N + rn[None, :]).to(DT)
    c = tl.dot(a, b)
    tl.store(C + rm[:, None] * N + rn[None, :], c)


@pytest.mark.parametrize("dtype,result", [(tl.float32, "f32"), (tl.float16, "f32"),
                                          (tl.bfloat16, "f32"), (tl.int8, "i32")])
def test_dot_result_types(dtype, result):
    module = compile_ttir(k_dot, F32, F32, arr("float32" if result == "f32" else "int32"),
                          M=16, N=32, K=64, DT=dtype)
    (dot,) = ops(module, "tt.dot")
    assert str(dot.results[0].type) == f"tensor<16x32x{result}>"
    assert str(dot.operands[0].type) == f"tensor<16x64x{ir_name(dtype)}>"
    assert str(dot.operands[2].type) == f"tensor<16x32x{result}>"        # a zero accumulator


@jit
def k_dot_options(A, C, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(A + r[:, None] * B + r[None, :])
    acc = tl.zeros((B, B), tl.float32)
    acc = tl.dot(a, a, acc, input_precision="tf32x3")
    acc += tl.dot(a, a, allow_tf32=False)
    h = a.to(tl.float16)
    half = tl.dot(h, h, out_dtype=tl.float16)
    acc2 = tl.dot(h, h, acc, max_num_imprecise_acc=0)
    m = a @ a
    tl.store(C + r[:, None] * B + r[None, :], acc + half + acc2 + m)


def test_dot_accumulator_precision_and_out_dtype():
    module = compile_ttir(k_dot_options, F32, F32, B=16)
    dots = ops(module, "tt.dot")
    assert [op.inputPrecision.data for op in dots][:2] == ["tf32x3", "ieee"]
    assert [str(op.results[0].type) for op in dots] == [
        "tensor<16x16xf32>", "tensor<16x16xf32>", "tensor<16x16xf16>", "tensor<16x16xf32>",
        "tensor<16x16xf32>"]
    first, _, _, with_acc, _ = dots
    assert first.operands[2].owner.name == "tt.splat"          # acc is the zeros block
    assert with_acc.operands[2].owner.name == "arith.addf"      # acc after `acc += ...`


@jit
def k_dot_batched(A, C, B: tl.constexpr):
    r = tl.arange(0, B)
    offsets = r[:, None, None] * B * B + r[None, :, None] * B + r[None, None, :]
    a = tl.load(A + offsets)
    tl.store(C + offsets, tl.dot(a, a))


def test_dot_three_dimensional_is_batched():
    (dot,) = ops(compile_ttir(k_dot_batched, F32, F32, B=16), "tt.dot")
    assert str(dot.results[0].type) == "tensor<16x16x16xf32>"


# -- reductions and scans -----------------------------------------------------------------------

def _reduce_results(module) -> list[str]:
    return [", ".join(str(r.type) for r in op.results) for op in ops(module, "tt.reduce")]


@jit
def k_reductions(X, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(X + r[:, None] * B + r[None, :])
    tl.static_print(tl.sum(x, axis=1))
    tl.static_print(tl.max(x, 0, keep_dims=True))
    tl.static_print(tl.min(x))
    tl.static_print(x.sum())
    tl.static_print(tl.sum(x, axis=None, keep_dims=True))


def test_sum_max_min_with_axes_and_keep_dims(capsys):
    module = compile_ttir(k_reductions, F32, B=8)
    capsys.readouterr()
    assert _reduce_results(module) == ["tensor<8xf32>", "tensor<8xf32>", "f32", "f32", "f32"]
    outputs = {name.rsplit("__", 1)[0]: str(f.function_type.outputs.data[0])
               for name, f in functions(module).items() if name.startswith(("sum", "max", "min"))}
    assert outputs["max"] == "tensor<1x8xf32>"          # keep_dims
    bodies = Counter(op.name for op in module.walk())
    assert bodies["arith.addf"] >= 1 and bodies["arith.maxnumf"] == 1 and bodies["arith.minnumf"] == 1
    keep_all = [f for name, f in functions(module).items() if name.startswith("sum")][-1]
    assert str(keep_all.function_type.outputs.data[0]) == "tensor<1x1xf32>"


@jit
def k_small_int_sum(X, Y):
    r = tl.arange(0, 16)
    x = tl.load(X + r)
    tl.store(Y, tl.sum(x) + tl.max(x))
    tl.store(Y + 1, tl.sum(x > 0).to(tl.int32))          # counting booleans


def test_narrow_integers_and_booleans_reduce_in_32_bits():
    module = compile_ttir(k_small_int_sum, I8, I32)
    assert _reduce_results(module) == ["i32", "i32", "i32"]
    widen = [op.name for op in module.walk() if op.name in ("arith.extsi", "arith.extui")
             and str(op.results[0].type) == "tensor<16xi32>"]
    # int8 -> int32 for sum, max and `x > 0` (comparisons promote to the literal's type);
    # the booleans widen without sign: a count of true values
    assert sorted(widen) == ["arith.extsi"] * 3 + ["arith.extui"]


@jit
def k_arg_reductions(X, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(X + r[:, None] * B + r[None, :])
    tl.static_print(tl.argmax(x, 1))
    tl.static_print(tl.argmin(x, 0, keep_dims=True))
    tl.static_print(tl.max(x, 1, return_indices=True))     # the specialization argmax made
    tl.static_print(tl.min(x, axis=None, return_indices=True, return_indices_tie_break_left=False))


def test_argmax_argmin_and_return_indices(capsys):
    module = compile_ttir(k_arg_reductions, F32, B=8)
    capsys.readouterr()
    assert _reduce_results(module) == ["tensor<8xf32>, tensor<8xi32>"] * 2 + ["f32, i32"]
    # tie-break-left compares indices; the fast variant does not
    left = [f for n, f in functions(module).items() if n.startswith("_argmax_left")]
    fast = [f for n, f in functions(module).items() if n.startswith("_argmin_fast")]
    assert left and fast
    assert sum(op.name == "arith.cmpi" for op in left[0].walk()) == 1
    assert sum(op.name == "arith.cmpi" for op in fast[0].walk()) == 0


@jit
def k_xor_sum(X, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(X + r[:, None] * B + r[None, :])
    tl.store(X + r, tl.xor_sum(x, 1) + x.xor_sum(axis=0))


def test_xor_sum():
    module = compile_ttir(k_xor_sum, I32, B=8)
    assert _reduce_results(module) == ["tensor<8xi32>"] * 2
    assert op_counts(module)["arith.xori"] == 1     # one combine function, called twice


@jit
def add_and_max(a, ia, b, ib):
    return a + b, tl.maximum(ia, ib)


@jit
def k_user_reduce(X, I, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(X + r)
    i = tl.load(I + r)
    total, top = tl.reduce((x, i), 0, add_and_max)
    both = tl.reduce((x, i), axis=0, combine_fn=add_and_max, keep_dims=True)
    tl.store(X, total + top + both[0].sum())


def test_reduce_with_a_user_combine_function_returning_a_tuple():
    module = compile_ttir(k_user_reduce, F32, I32, B=32)
    first, second = ops(module, "tt.reduce")[:2]
    assert [str(r.type) for r in first.results] == ["f32", "i32"]
    assert [str(r.type) for r in second.results] == ["f32", "i32"]
    assert first.axis.value.data == 0
    (ret,) = [op for op in first.walk() if op.name == "tt.reduce.return"]
    assert len(ret.operands) == 2
    assert "tensor<1xf32>" in types_of(module, "tt.splat")      # keep_dims of a 1-D reduction


@jit
def mul_combine(a, b):
    return a * b


@jit
def k_scans(X, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(X + r[:, None] * B + r[None, :])
    a = tl.cumsum(x, 1)
    b = tl.cumprod(x, axis=0, reverse=True)
    c = tl.associative_scan(x, 1, mul_combine, reverse=True)
    d = x.cumsum(0)
    tl.store(X + r[:, None] * B + r[None, :], a + b + c + d)


def test_cumsum_cumprod_and_associative_scan():
    module = compile_ttir(k_scans, F32, B=8)
    scans = ops(module, "tt.scan")      # the kernel's own scan first, then cumsum, cumprod
    assert [(op.axis.value.data, bool(op.reverse.value.data)) for op in scans] == [
        (1, True), (1, False), (0, True), (0, False)]
    assert set(types_of(module, "tt.scan")) == {"tensor<8x8xf32>"}


# -- math, standard library ------------------------------------------------------------------------

@jit
def k_math(X, I, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(X + r)
    i = tl.load(I + r)
    y = tl.exp(x) + tl.exp2(x) + tl.log(x) + tl.log2(x) + tl.sqrt(x) + tl.rsqrt(x)
    y += tl.sin(x) + tl.cos(x) + tl.abs(x) + tl.floor(x) + tl.ceil(x) + tl.erf(x)
    y += tl.fma(x, x, x) + tl.div_rn(x, x) + tl.sqrt_rn(x) + tl.fdiv(x, x, ieee_rounding=True)
    y += tl.maximum(x, 1.0) + tl.minimum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)
    y += tl.clamp(x, 0.0, 1.0) + x.exp() + tl.math.log(x)
    j = tl.abs(i) + tl.umulhi(i, i) + tl.maximum(i, 3)
    tl.store(X + r, y)
    tl.store(I + r, j)


def test_math_functions_emit_math_and_tt_ops():
    counts = op_counts(compile_ttir(k_math, F32, I32, B=16))
    for name in ("math.exp", "math.exp2", "math.log2", "math.sqrt", "math.rsqrt", "math.sin",
                 "math.cos", "math.absf", "math.floor", "math.ceil", "math.erf", "math.fma",
                 "math.absi", "tt.precise_sqrt", "tt.mulhiui", "tt.clampf", "arith.minimumf",
                 "arith.maxnumf", "arith.maxsi"):
        assert counts[name] >= 1, name
    assert counts["math.log"] == 2 and counts["math.exp"] == 2
    assert counts["tt.precise_divf"] == 2


@jit
def k_softmax_sigmoid_cdiv(X, n, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(X + r)
    s = tl.softmax(x) + tl.sigmoid(x) + x.softmax(ieee_rounding=True)
    tl.store(X + r, s + tl.cdiv(n, B) + tl.cdiv(B, 4))


def test_softmax_sigmoid_cdiv():
    module = compile_ttir(k_softmax_sigmoid_cdiv, F32, 1000, B=16)
    names = set(functions(module))
    assert {n.rsplit("__", 1)[0] for n in names} >= {"softmax", "sigmoid", "cdiv", "max", "sum"}
    counts = op_counts(module)
    assert counts["tt.reduce"] == 2            # max and sum, shared by both softmaxes
    assert counts["math.exp"] == 3 and counts["arith.divsi"] == 1      # cdiv(B, 4) is folded
    assert counts["tt.precise_divf"] == 1       # ieee_rounding=True


@jit
def k_sort_flip(X, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(X + r)
    up = tl.sort(x)
    down = tl.sort(x, descending=True)
    f = tl.flip(x)
    grid = tl.load(X + r[:, None] * B + r[None, :])
    f2 = tl.flip(grid, 0)
    tl.store(X + r, up + down + f + tl.sum(f2, 0))


def test_sort_and_flip():
    module = compile_ttir(k_sort_flip, F32, B=8)
    names = {n.rsplit("__", 1)[0] for n in functions(module)}
    assert {"sort", "flip", "_bitonic_merge", "_compare_swap", "xor_sum"} <= names
    sorts = [f for n, f in functions(module).items() if n.startswith("sort")]
    assert len(sorts) == 2          # ascending and descending are two specializations
    assert all(str(f.function_type.outputs.data[0]) == "tensor<8xf32>" for f in sorts)


# -- control flow --------------------------------------------------------------------------------

@jit
def k_loops(X, n, B: tl.constexpr):
    acc = tl.zeros([B], tl.float32)
    for i in range(n):
        acc += tl.load(X + i * B + tl.arange(0, B))
    for i in tl.range(0, n, 2, num_stages=3, loop_unroll_factor=2):
        acc *= 2.0
    for i in tl.static_range(3):
        acc += i
    for i in tl.static_range(1, 8, 3):
        acc += i
    j = 0
    while j < n:
        acc -= 1.0
        j += 1
    tl.store(X + tl.arange(0, B), acc)


def test_range_static_range_tl_range_and_while():
    module = compile_ttir(k_loops, F32, 10, B=16)
    first, second = ops(module, "scf.for")
    assert [str(r.type) for r in first.results] == ["tensor<16xf32>"]
    assert "tt.num_stages" not in first.attributes
    assert second.attributes["tt.num_stages"].value.data == 3
    assert second.attributes["tt.loop_unroll_factor"].value.data == 2
    (loop,) = ops(module, "scf.while")
    assert [str(r.type) for r in loop.results] == ["tensor<16xf32>", "i32"] or \
        [str(r.type) for r in loop.results] == ["i32", "tensor<16xf32>"]
    # static_range is unrolled: 0, 1, 2 and then 1, 4, 7 are added as constants
    body = kernel_func(module, "k_loops")
    top_level = [op for op in body.body.block.ops if op.name == "arith.addf"]
    assert len(top_level) == 6


@jit
def k_loop_bounds(X, lo, hi, step):
    acc = hi - hi
    for i in range(lo, hi, step):
        acc += i
    tl.store(X, acc)


def test_loop_bounds_widen_to_int64():
    module = compile_ttir(k_loop_bounds, I64, 0, 2**40, 3)
    (loop,) = ops(module, "scf.for")
    assert str(loop.lb.type) == "i64" and str(loop.step.type) == "i64"
    assert [str(r.type) for r in loop.results] == ["i64"]
    assert str(loop.body.block.args[0].type) == "i64"


@jit
def k_runtime_if(X, n, B: tl.constexpr):
    offsets = tl.arange(0, B)
    if n > 10:
        scale = 2.0
        shift = 1
    elif n > 5:
        scale = 3.0
        shift = 2
    else:
        scale = 4.0
        shift = 3
    value = n if n > 0 else 0
    tl.store(X + offsets, tl.load(X + offsets) * scale + shift + value)


def test_runtime_if_elif_else_and_ifexp():
    module = compile_ttir(k_runtime_if, F32, 7, B=16)
    ifs = ops(module, "scf.if")
    assert len(ifs) == 3
    outer, inner, ifexp = ifs
    assert [str(r.type) for r in outer.results] == ["f32", "i32"]
    assert inner.parent_op() is outer
    assert [str(r.type) for r in ifexp.results] == ["i32"]


@jit
def k_constexpr_if(X, MODE: tl.constexpr):
    if MODE == 0:
        y = tl.load(X) + 1
    elif MODE == 1:
        y = tl.load(X) * 2
    else:
        y = tl.load(X) - 3
    z = 1.0 if MODE == 0 else 2
    tl.store(X, y + z)


@pytest.mark.parametrize("mode,op", [(0, "arith.addf"), (1, "arith.mulf"), (2, "arith.subf")])
def test_constexpr_if_generates_one_branch(mode, op):
    module = compile_ttir(k_constexpr_if, F32, MODE=mode)
    counts = op_counts(module)
    assert "scf.if" not in counts
    assert counts[op] >= 1
    assert sum(counts[o] for o in ("arith.mulf", "arith.subf")) == (0 if mode == 0 else 1)


# -- functions ------------------------------------------------------------------------------------

@jit
def scaled_pair(x, FACTOR: tl.constexpr, shift=1):
    return x * FACTOR + shift, x - FACTOR


@jit
def no_result(X, value):
    tl.store(X, value)


@jit
def k_nested_calls(X, B: tl.constexpr):
    r = tl.arange(0, B)
    a, b = scaled_pair(r, 4)
    c, d = scaled_pair(r, FACTOR=3, shift=5)
    e = scaled_pair(r, 4)
    no_result(X, tl.sum(a + b + c + d + e[0] + e[1]))


def test_nested_jit_calls_constexpr_arguments_and_multiple_returns():
    module = compile_ttir(k_nested_calls, I32, B=16)
    calls = ops(module, "tt.call")
    callees = [op.callee.string_value() for op in calls]
    scaled = [c for c in callees if c.startswith("scaled_pair")]
    assert len(scaled) == 3 and len(set(scaled)) == 2       # (4, 1) reused, (3, 5) specialized
    helper = functions(module)[scaled[0]]
    assert [str(t) for t in helper.function_type.outputs.data] == ["tensor<16xi32>"] * 2
    assert helper.sym_visibility.data == "private"
    assert [op.value.value.data for op in helper.walk() if op.name == "arith.constant"] == [4, 1, 4]
    store_fn = functions(module)[[c for c in callees if c.startswith("no_result")][0]]
    assert list(store_fn.function_type.outputs.data) == []


@jit(noinline=True)
def kept_as_call(x):
    return x + 1


@jit
def k_noinline(X):
    tl.store(X, kept_as_call(tl.load(X)))


def test_noinline_functions_are_marked():
    module = compile_ttir(k_noinline, I32)
    (helper,) = [f for n, f in functions(module).items() if n.startswith("kept_as_call")]
    assert "noinline" in print_module(helper)


@jit
def tuple_maker(x):
    return (x, x + 1, x * 2)


@jit
def k_tuples(X, OFFSETS: tl.constexpr = (1, 2)):
    t = tuple_maker(tl.load(X))
    a, b, c = t
    first = t[0]
    size: tl.constexpr = len(OFFSETS)
    tl.static_assert(size == 2)
    tl.store(X + OFFSETS[1], a + b + c + first + OFFSETS[0])


def test_tuples_defaults_and_indexing():
    module = compile_ttir(k_tuples, I32)
    addptr = ops(module, "tt.addptr")
    assert len(addptr) == 1
    assert addptr[0].operands[1].owner.value.value.data == 2


@jit
def weighted(pair, scale: tl.constexpr):
    value, weight = pair
    return value * weight * scale


@jit
def k_tuple_arguments(X, Y):
    x, y = tl.load(X), tl.load(Y)
    a = weighted((x, y), 2)
    b = weighted((y, x), 2)          # same types: the same function
    c = weighted((x, 3.0), 2)        # a compile-time element stays in the callee
    tl.store(X, a + b + c)


def test_tuples_of_tensors_as_arguments():
    module = compile_ttir(k_tuple_arguments, F32, F32)
    callees = [op.callee.string_value() for op in ops(module, "tt.call")]
    assert len(callees) == 3 and callees[0] == callees[1] != callees[2]
    pair, with_constant = functions(module)[callees[0]], functions(module)[callees[2]]
    assert [str(t) for t in pair.function_type.inputs.data] == ["f32", "f32"]
    assert [str(t) for t in with_constant.function_type.inputs.data] == ["f32"]
    assert 3.0 in [op.value.value.data for op in with_constant.walk() if op.name == "arith.constant"]


@jit
def k_tuple_parameter(P, n):
    out, (src, step) = P
    tl.store(out, tl.load(src + step) + n)


def test_tuple_kernel_parameters_flatten_with_constexpr_elements():
    module = compile_ttir(k_tuple_parameter, (F32, (F16, 1)), 32)
    (func,) = ops(module, "tt.func")
    assert [str(t) for t in func.function_type.inputs.data] == ["!tt.ptr<f32>", "!tt.ptr<f16>", "i32"]
    assert [("tt.divisibility" in a.data) for a in func.arg_attrs.data] == [True, True, True]
    (addptr,) = ops(module, "tt.addptr")
    assert addptr.operands[1].owner.value.value.data == 1     # step == 1 became a constant


@jit
def k_loop_over_tuple(X, OFFSETS: tl.constexpr):
    for offset in OFFSETS:
        tl.static_assert(offset > 0)
        tl.store(X + offset, offset)
    for i, (a, b) in enumerate(((1, 2), (3, 4))):
        tl.store(X + a * b, i)


def test_loops_over_tuples_are_unrolled():
    module = compile_ttir(k_loop_over_tuple, I32, OFFSETS=(2, 5, 9))
    assert "scf.for" not in op_counts(module)
    offsets = [op.operands[1].owner.value.value.data for op in ops(module, "tt.addptr")]
    assert offsets == [2, 5, 9, 2, 12]


@jit
def k_keywords(X, n, scale: tl.constexpr = 2, offset=3):
    tl.store(X, n * scale + offset)


def test_keyword_and_default_arguments():
    module = compile_ttir(k_keywords, I32, n=5, offset=7)
    (func,) = [f for f in ops(module, "tt.func")]
    assert [str(t) for t in func.function_type.inputs.data] == ["!tt.ptr<i32>", "i32", "i32"]
    default = compile_ttir(k_keywords, I32, 5)
    (func,) = ops(default, "tt.func")
    # the default 3 is an int argument (not 1), so it stays a runtime i32
    assert len(func.function_type.inputs.data) == 3
    constants = [op.value.value.data for op in default.walk() if op.name == "arith.constant"]
    assert constants == [2]


SIZE = tl.constexpr(32)
SCALE = tl.constexpr(1.5)


@jit
def k_constexpr_globals(X):
    r = tl.arange(0, SIZE)
    tl.store(X + r, r * SCALE)


def test_constexpr_globals():
    module = compile_ttir(k_constexpr_globals, F32)
    assert types_of(module, "tt.make_range") == ["tensor<32xi32>"]
    assert [op.value.value.data for op in ops(module, "arith.constant")] == [1.5]


@jit
def k_annotations(X, B: tl.constexpr, n: "i64"):
    local: tl.constexpr = B * 2
    tl.static_assert(local == 16)
    tl.store(X + tl.arange(0, local), n)


def test_constexpr_annotations_and_typed_parameters():
    module = compile_ttir(k_annotations, I64, B=8, n=5)
    (func,) = ops(module, "tt.func")
    assert [str(t) for t in func.function_type.inputs.data] == ["!tt.ptr<i64>", "i64"]
    assert types_of(module, "tt.make_range") == ["tensor<16xi32>"]


@tl.constexpr_function
def doubled(n):
    return 2 * n


@jit
def k_constexpr_function(X, B: tl.constexpr):
    r = tl.arange(0, doubled(B))
    tl.store(X + r, r + doubled(3))


def test_constexpr_function_runs_at_compile_time():
    module = compile_ttir(k_constexpr_function, I32, B=8)
    assert types_of(module, "tt.make_range") == ["tensor<16xi32>"]
    assert 6 in [op.value.value.data for op in ops(module, "arith.constant")]
    assert doubled(4) == 8     # still a plain function outside kernels


@jit
def k_static_checks(X, B: tl.constexpr):
    tl.static_assert(B % 2 == 0, "B must be even")
    tl.static_print("B =", B, "half", B // 2)
    tl.store(X, B)


def test_static_assert_and_static_print(capsys):
    compile_ttir(k_static_checks, I32, B=8)
    assert "B = 8 half 4" in capsys.readouterr().out


# -- debugging and hints --------------------------------------------------------------------------

@jit
def k_debug_ops(X, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(X + r)
    tl.device_print("x", x)
    tl.device_print("hex", x, hex=True)
    print("py", r)
    print(r)
    tl.device_assert(x > 0, "x must be positive")
    assert x < 100, "x is too big"
    tl.debug_barrier()
    tl.store(X + r, x)


def test_device_print_assert_and_barrier():
    module = compile_ttir(k_debug_ops, I32, B=16)
    prints = ops(module, "tt.print")
    assert [op.prefix.data for op in prints] == [" x: ", " hex: ", " py: ", ": "]   # as Triton
    assert [bool(op.hex.value.data) for op in prints] == [False, True, False, False]
    assert "tt.assert" not in op_counts(module)            # debug is off
    assert op_counts(module)["gpu.barrier"] == 1
    debug = compile_ttir(k_debug_ops, I32, B=16, options=types.SimpleNamespace(debug=True))
    asserts = ops(debug, "tt.assert")
    assert [op.message.data for op in asserts] == ["x must be positive", "x is too big"]


def test_jit_debug_flag_enables_device_assert():
    debug_kernel = jit(k_debug_ops.fn, debug=True)
    assert len(ops(compile_ttir(debug_kernel, I32, B=16), "tt.assert")) == 2


@jit
def k_hints(X, n, B: tl.constexpr):
    r = tl.multiple_of(tl.arange(0, B), 16)
    r = tl.max_contiguous(r, [16])
    m = tl.max_constancy(tl.full([B], 1, tl.int32), B)
    tl.assume(n > 0)
    tl.store(X + r, m)


def test_multiple_of_max_contiguous_max_constancy_and_assume():
    module = compile_ttir(k_hints, I32, 5, B=16)
    (rng,) = ops(module, "tt.make_range")
    assert list(rng.attributes["tt.divisibility"].get_values()) == [16]
    assert list(rng.attributes["tt.contiguity"].get_values()) == [16]
    (splat,) = [op for op in ops(module, "tt.splat") if "tt.constancy" in op.attributes]
    assert list(splat.attributes["tt.constancy"].get_values()) == [16]
    (assume,) = ops(module, "tt.assume")
    assert assume.operands[0].owner.name == "arith.cmpi"


@jit
def k_inline_asm(X, B: tl.constexpr):
    r = tl.arange(0, B)
    y = tl.inline_asm_elementwise("shl.b32 $0, $1, 3;", "=r,r", [r], dtype=tl.int32,
                                  is_pure=True, pack=1)
    a, b = tl.inline_asm_elementwise("mov $0, $2; mov $1, $2;", "=r,=r,r", [r],
                                     dtype=(tl.int32, tl.int32), is_pure=False, pack=1)
    tl.store(X + r, y + a + b)


def test_inline_asm_elementwise():
    module = compile_ttir(k_inline_asm, I32, B=16)
    first, second = ops(module, "tt.elementwise_inline_asm")
    assert first.asm_string.data == "shl.b32 $0, $1, 3;" and first.constraints.data == "=r,r"
    assert bool(first.pure.value.data) and not bool(second.pure.value.data)
    assert [str(r.type) for r in second.results] == ["tensor<16xi32>"] * 2


# -- specialization --------------------------------------------------------------------------------

@jit
def k_spec(X, one, aligned, odd, wide, huge, flag, ratio):
    tl.store(X, one + aligned + odd + wide + huge + flag + ratio)


def test_specialization_of_scalars_and_pointers():
    signature, constexprs, attrs, _ = specialize(k_spec, F32, 1, 32, 17, 2**40, 2**63 + 1, True, 0.5)
    assert signature == {"X": "*fp32", "one": "constexpr", "aligned": "i32", "odd": "i32",
                         "wide": "i64", "huge": "u64", "flag": "u1", "ratio": "fp32"}
    assert constexprs == {"one": 1}
    assert set(attrs) == {"X", "aligned", "wide"}      # 2**40 is divisible by 16
    module = compile_ttir(k_spec, F32, 1, 32, 17, 2**40, 2**63 + 1, True, 0.5)
    (func,) = ops(module, "tt.func")
    assert [str(t) for t in func.function_type.inputs.data] == [
        "!tt.ptr<f32>", "i32", "i32", "i64", "i64", "i1", "f32"]
    divisible = [i for i, a in enumerate(func.arg_attrs.data) if "tt.divisibility" in a.data]
    assert divisible == [0, 1, 3]
    assert func.arg_attrs.data[0].data["tt.divisibility"].value.data == 16


def test_unaligned_pointer_and_wide_divisible_ints():
    _, _, attrs, _ = specialize(k_spec, FakeArray("float32", 1028), 1, 2**40, 3, 2**40, 2**63, 0, 0.5)
    assert set(attrs) == {"aligned", "wide", "huge", "flag"}      # 0 is divisible by 16 too


def test_do_not_specialize():
    kernel = jit(k_spec.fn, do_not_specialize=["one", 2], do_not_specialize_on_alignment=["X"])
    signature, constexprs, attrs, _ = specialize(kernel, F32, 1, 32, 17, 2**40, 2**63 + 1, True, 0.5)
    assert signature["one"] == "i32" and constexprs == {}
    assert set(attrs) == {"wide"}       # X: no alignment; aligned (index 2): no specialization
    module = compile_ttir(kernel, F32, 1, 32, 17, 2**40, 2**63 + 1, True, 0.5)
    assert len(ops(module, "tt.func")[0].function_type.inputs.data) == 8


def test_make_ttir_accepts_triton_style_descriptions():
    module = make_ttir(k_arange, {0: "*i32", 1: "constexpr", 2: "constexpr"}, {(1,): 0, (2,): 16},
                       {(0,): [["tt.divisibility", 16]]})
    assert types_of(module, "tt.make_range") == ["tensor<16xi32>"]


# -- cache key -------------------------------------------------------------------------------------

_MODULE_SOURCE = '''
import naiad.language as tl
from naiad.runtime.jit import jit

LIMIT = tl.constexpr(4)


@jit
def helper(x):
    return x + 1


@jit
def kernel(X):
    tl.store(X, helper(tl.load(X)) + LIMIT)
'''


def _load_module(tmp_path, name: str, source: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fresh_key(*functions_: JITFunction) -> str:
    for f in functions_:
        f._cache_key = None      # keys are memoized; Triton's tests reset `hash` the same way
    return functions_[-1].cache_key


def test_cache_key_changes_with_source_callee_and_constexpr_global(tmp_path):
    m = _load_module(tmp_path, "cache_key_kernels", _MODULE_SOURCE)
    base = _fresh_key(m.helper, m.kernel)
    assert _fresh_key(m.helper, m.kernel) == base

    m.kernel._unsafe_update_src(m.kernel.src.replace("+ LIMIT", "- LIMIT"))
    assert _fresh_key(m.helper, m.kernel) != base
    m.kernel._unsafe_update_src(m.kernel.src.replace("- LIMIT", "+ LIMIT"))
    assert _fresh_key(m.helper, m.kernel) == base

    m.helper._unsafe_update_src(m.helper.src.replace("x + 1", "x + 2"))
    assert _fresh_key(m.helper, m.kernel) != base
    m.helper._unsafe_update_src(m.helper.src.replace("x + 2", "x + 1"))

    m.LIMIT = tl.constexpr(5)
    assert _fresh_key(m.helper, m.kernel) != base
    m.LIMIT = tl.constexpr(4)
    assert _fresh_key(m.helper, m.kernel) == base


def test_updated_source_is_what_gets_compiled(tmp_path):
    m = _load_module(tmp_path, "cache_src_kernels", _MODULE_SOURCE)
    m.helper._unsafe_update_src(m.helper.src.replace("x + 1", "x * 7"))
    module = compile_ttir(m.kernel, I32)
    assert op_counts(module)["arith.muli"] == 1
    assert 7 in [op.value.value.data for op in ops(module, "arith.constant")]


# -- more control flow ---------------------------------------------------------------------------

@jit
def k_if_without_else(X, n):
    a = tl.load(X)
    if n > 0:
        a = a + 1.0
    if n > 5:
        tl.store(X + 1, a)       # only a side effect: no results
    tl.store(X, a)


def test_if_without_else_yields_the_old_value():
    module = compile_ttir(k_if_without_else, F32, 3)
    carrying, effect = ops(module, "scf.if")
    assert [str(r.type) for r in carrying.results] == ["f32"]
    (else_yield,) = [op for op in carrying.false_region.walk() if op.name == "scf.yield"]
    assert else_yield.operands[0].owner.name == "tt.load"
    assert not effect.results and op_counts(module)["tt.store"] == 2


@jit
def k_nested_loops(X, n, m):
    acc = 0.0
    for i in range(n):
        for j in range(m):
            if (i + j) % 2 == 0:
                acc += 1.0
            else:
                acc -= 0.5
        acc *= 2.0
    tl.store(X, acc)


def test_nested_loops_carry_values_through_ifs():
    module = compile_ttir(k_nested_loops, F32, 4, 5)
    outer, inner = ops(module, "scf.for")
    assert inner.parent_op() is outer
    assert [str(r.type) for r in outer.results] == [str(r.type) for r in inner.results] == ["f32"]
    (branch,) = ops(module, "scf.if")
    assert branch.parent_op() is inner and [str(r.type) for r in branch.results] == ["f32"]


@jit
def k_spin_lock(Lock, X, n):
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    tl.store(X, tl.load(X) + 1)
    tl.atomic_xchg(Lock, 0)
    i = 0
    j = n
    while (i < n) & (j > 0):
        i += 1
        j -= 2
    tl.store(X + i, j)


def test_while_loops_with_side_effects_in_the_condition():
    module = compile_ttir(k_spin_lock, I32, F32, 8)
    lock, counter = ops(module, "scf.while")
    assert not lock.results
    assert any(op.name == "tt.atomic_cas" for op in lock.before_region.walk())
    assert [str(r.type) for r in counter.results] == ["i32", "i32"]


@jit
def first_return_wins():
    return tl.arange(0, 4)
    return tl.arange(0, 8)


@jit
def branch_on_constexpr(N: tl.constexpr):
    if N == 0:
        return tl.arange(0, 4)
    else:
        return tl.arange(0, 8)


@jit
def k_returns(X, N: tl.constexpr):
    a = first_return_wins() + branch_on_constexpr(N)
    tl.store(X + tl.arange(0, 4), a)


def test_code_after_return_is_ignored_and_constexpr_branches_return():
    module = compile_ttir(k_returns, I32, N=0)
    assert types_of(module, "tt.make_range") == ["tensor<4xi32>"] * 3     # one per function


# -- whole kernels from Triton's tutorials -------------------------------------------------------

@jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


@jit
def k_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
             stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def test_tutorial_matmul():
    module = compile_ttir(k_matmul, F16, F16, F16, 512, 512, 512, 512, 1, 512, 1, 512, 1,
                          BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, ACTIVATION="leaky_relu")
    (loop,) = ops(module, "scf.for")
    assert sorted(str(r.type) for r in loop.results) == [
        "tensor<32x64x!tt.ptr<f16>>", "tensor<64x32x!tt.ptr<f16>>", "tensor<64x64xf32>"]
    (dot,) = ops(module, "tt.dot")
    assert dot.parent_op() is loop and str(dot.operands[0].type) == "tensor<64x32xf16>"
    assert op_counts(module)["arith.minsi"] == 1          # min() of runtime values
    assert {n.rsplit("__", 1)[0] for n in functions(module)} == {"k_matmul", "cdiv", "leaky_relu"}


@jit
def attention_inner(acc, l_i, m_i, q, K_block_ptr, V_block_ptr, qk_scale,
                    BLOCK_N: tl.constexpr, N_CTX: tl.constexpr):
    for start_n in range(0, N_CTX, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = tl.load(K_block_ptr)
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(tl.float16), tl.load(V_block_ptr), acc)
        m_i = m_ij
        V_block_ptr = tl.advance(V_block_ptr, (BLOCK_N, 0))
        K_block_ptr = tl.advance(K_block_ptr, (0, BLOCK_N))
    return acc, l_i, m_i


@jit
def k_attention(Q, K, V, Out, sm_scale, stride, N_CTX: tl.constexpr, HEAD_DIM: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    q_ptr = tl.make_block_ptr(base=Q, shape=(N_CTX, HEAD_DIM), strides=(stride, 1),
                              offsets=(start_m * BLOCK_M, 0), block_shape=(BLOCK_M, HEAD_DIM),
                              order=(1, 0))
    v_ptr = tl.make_block_ptr(base=V, shape=(N_CTX, HEAD_DIM), strides=(stride, 1), offsets=(0, 0),
                              block_shape=(BLOCK_N, HEAD_DIM), order=(1, 0))
    k_ptr = tl.make_block_ptr(base=K, shape=(HEAD_DIM, N_CTX), strides=(1, stride), offsets=(0, 0),
                              block_shape=(HEAD_DIM, BLOCK_N), order=(0, 1))
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    acc, l_i, m_i = attention_inner(acc, l_i, m_i, tl.load(q_ptr), k_ptr, v_ptr, sm_scale * 1.44269504,
                                    BLOCK_N, N_CTX)
    o_ptr = tl.make_block_ptr(base=Out, shape=(N_CTX, HEAD_DIM), strides=(stride, 1),
                              offsets=(start_m * BLOCK_M, 0), block_shape=(BLOCK_M, HEAD_DIM),
                              order=(1, 0))
    tl.store(o_ptr, (acc / l_i[:, None]).to(Out.dtype.element_ty))


def test_tutorial_attention_with_block_pointers():
    module = compile_ttir(k_attention, F16, F16, F16, F16, 0.5, 64, N_CTX=128, HEAD_DIM=64,
                          BLOCK_M=64, BLOCK_N=32)
    (inner,) = [f for n, f in functions(module).items() if n.startswith("attention_inner")]
    assert [str(t) for t in inner.function_type.outputs.data] == [
        "tensor<64x64xf32>", "tensor<64xf32>", "tensor<64xf32>"]
    (loop,) = ops(module, "scf.for")
    assert len(loop.results) == 5           # acc, l_i, m_i and both block pointers
    assert types_of(module, "tt.dot") == ["tensor<64x32xf32>", "tensor<64x64xf32>"]
    assert op_counts(module)["tt.advance"] == 2 and op_counts(module)["math.exp2"] == 2


@jit
def k_min_max_promotion(X, Y):
    r = tl.arange(0, 16)
    b = tl.load(X + r)
    h = tl.load(Y + r)
    tl.static_print(tl.maximum(b, b), tl.minimum(h, 0.0), tl.clamp(h, 0.0, 1.0),
                    tl.maximum(h, h), tl.clamp(b, b, b))


def test_min_max_clamp_promote_like_triton(capsys):
    module = compile_ttir(k_min_max_promotion, BF16, F16)
    capsys.readouterr()
    # bf16 computes in fp32; a Python float becomes an fp32 tensor first, so fp16 widens too
    assert types_of(module, "arith.maxnumf") == ["tensor<16xf32>", "tensor<16xf16>"]
    assert types_of(module, "arith.minnumf") == ["tensor<16xf32>"]
    assert types_of(module, "tt.clampf") == ["tensor<16xf32>", "tensor<16xf32>"]


@jit
def plus_one(x):
    return x + 1


@jit
def plus_two(x):
    return x + 2


@jit
def k_introspection(X, Out, FAST: tl.constexpr):
    x = tl.load(X + tl.arange(0, 8)[:, None] * 4 + tl.arange(0, 4)[None, :])
    tl.static_assert(x.shape == [8, 4] and x.numel == 32 and len(x.shape) == 2 and x.ndim == 2)
    tl.static_assert(x.dtype == tl.float16 and x.dtype.is_floating() and not x.dtype.is_int())
    tl.static_assert(isinstance(x, tl.tensor) and x.type.is_block())
    tl.static_assert(X.dtype.element_ty == tl.float16 and Out.dtype == tl.pointer_type(tl.int32))
    wide: tl.constexpr = tl.get_int_dtype(x.dtype.primitive_bitwidth * 2, True)
    if FAST:
        FN: tl.constexpr = plus_two
    else:
        FN: tl.constexpr = plus_one
    tl.store(Out + tl.arange(0, 4), FN(tl.sum(x.to(wide, bitcast=False), 0)))


def test_compile_time_introspection_and_constexpr_functions_values():
    module = compile_ttir(k_introspection, F16, I32, FAST=True)
    (callee,) = [f for n, f in functions(module).items() if n.startswith("plus")]
    assert callee.sym_name.data.startswith("plus_two")
    assert "arith.fptosi" in op_counts(module)           # fp16 -> int32 (get_int_dtype(32))


@jit
def k_more_builtins(X, I, B: tl.constexpr):
    r = tl.arange(0, B)
    x = tl.load(X + r[:, None] * B + r[None, :])
    idx = tl.load(I + r[:, None] * B + r[None, :])
    g = tl.gather(x, idx, 1) + x.gather(idx, axis=0)
    h = tl.histogram(tl.load(I + r), 4)
    col = tl.unsqueeze(r, 1)
    flat = tl.squeeze(col, 1)
    s = tl.add(tl.mul(flat, 2), tl.sub(3, flat)) + tl.to_tensor(7)
    tl.store(X + r[:, None] * B + r[None, :], g)
    tl.store(I + r, s + tl.sum(h))


def test_gather_histogram_squeeze_and_functional_operators():
    module = compile_ttir(k_more_builtins, F32, I32, B=8)
    gathers = ops(module, "tt.gather")
    assert [op.axis.value.data for op in gathers] == [1, 0]
    assert types_of(module, "tt.gather") == ["tensor<8x8xf32>"] * 2
    assert types_of(module, "tt.histogram") == ["tensor<4xi32>"]
    assert types_of(module, "tt.reshape") == ["tensor<8xi32>"]          # squeeze
    (squeezed,) = ops(module, "tt.reshape")
    assert {use.operation.name for use in squeezed.results[0].uses} == {"arith.muli", "arith.subi"}
