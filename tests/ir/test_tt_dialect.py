"""The tt dialect: every op prints and parses back to the same text, and bad IR is
rejected with a message that says what is wrong."""

from __future__ import annotations

import textwrap
from io import StringIO

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    f16,
    f32,
    i32,
)
from xdsl.printer import Printer

from naiad.ir import (
    AddPtrOp,
    CacheModifier,
    CallOp,
    FuncOp,
    GetProgramIdOp,
    IRParseError,
    LoadOp,
    MakeRangeOp,
    PaddingOption,
    PointerType,
    ReturnOp,
    SplatOp,
    StoreOp,
    parse_module,
    print_module,
    tensor_of,
)
from naiad.ir.arith import CmpiOp
from naiad.ir.tt import MemSemantic, MemSyncScope, RMWOp


def kernel(args: str, body: str) -> str:
    """A module holding one public kernel with `args` and the ops in `body`."""
    ops = textwrap.indent(textwrap.dedent(body).strip(), " " * 4)
    return f"builtin.module {{\n  tt.func public @k({args}) {{\n{ops}\n    tt.return\n  }}\n}}"


P = "!tt.ptr<f32>"
T4P = "tensor<4x!tt.ptr<f32>>"

ROUND_TRIPS = {
    "program_ids": kernel("", """
        %0 = tt.get_program_id x : i32
        %1 = tt.get_program_id y : i32
        %2 = tt.get_program_id z : i32
        %3 = tt.get_num_programs x : i32
        %4 = tt.get_num_programs z : i32
    """),
    "make_range": kernel("", """
        %0 = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
        %1 = tt.make_range {end = 40 : i32, start = 8 : i32} : tensor<32xi32>
    """),
    "splat": kernel(f"%arg0: f32, %arg1: {P}", f"""
        %0 = tt.splat %arg0 : f32 -> tensor<4x8xf32>
        %1 = tt.splat %arg1 : {P} -> {T4P}
    """),
    "broadcast_expand_dims": kernel("%arg0: tensor<32xf32>", """
        %0 = tt.expand_dims %arg0 {axis = 0 : i32} : tensor<32xf32> -> tensor<1x32xf32>
        %1 = tt.expand_dims %arg0 {axis = 1 : i32} : tensor<32xf32> -> tensor<32x1xf32>
        %2 = tt.broadcast %0 : tensor<1x32xf32> -> tensor<16x32xf32>
    """),
    "reshape": kernel("%arg0: tensor<4x8xf16>", """
        %0 = tt.reshape %arg0 : tensor<4x8xf16> -> tensor<32xf16>
        %1 = tt.reshape %arg0 allow_reorder : tensor<4x8xf16> -> tensor<2x16xf16>
        %2 = tt.reshape %arg0 allow_reorder efficient_layout : tensor<4x8xf16> -> tensor<8x4xf16>
    """),
    "trans": kernel("%arg0: tensor<2x4x8xf32>", """
        %0 = tt.trans %arg0 {order = array<i32: 2, 0, 1>} : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
    """),
    "cat_join_split": kernel("%arg0: tensor<4x8xi32>, %arg1: tensor<4x8xi32>", """
        %0 = tt.cat %arg0, %arg1 : tensor<4x8xi32> -> tensor<8x8xi32>
        %1 = tt.join %arg0, %arg1 : tensor<4x8xi32> -> tensor<4x8x2xi32>
        %2, %3 = tt.split %1 : tensor<4x8x2xi32> -> tensor<4x8xi32>
    """),
    "gather": kernel("%arg0: tensor<16x4xf32>, %arg1: tensor<8x4xi32>", """
        %0 = tt.gather %arg0[%arg1] {axis = 0 : i32} : (tensor<16x4xf32>, tensor<8x4xi32>) -> tensor<8x4xf32>
    """),
    "histogram": kernel("%arg0: tensor<64xi32>", """
        %0 = tt.histogram %arg0 : tensor<64xi32> -> tensor<16xi32>
    """),
    "addptr": kernel(f"%arg0: {P}, %arg1: i64, %arg2: {T4P}, %arg3: tensor<4xi32>", f"""
        %0 = tt.addptr %arg0, %arg1 : {P}, i64
        %1 = tt.addptr %arg2, %arg3 : {T4P}, tensor<4xi32>
    """),
    "address_space": kernel("%arg0: !tt.ptr<f16, 3>, %arg1: tensor<4xi32>", """
        %0 = tt.splat %arg0 : !tt.ptr<f16, 3> -> tensor<4x!tt.ptr<f16, 3>>
        %1 = tt.addptr %0, %arg1 : tensor<4x!tt.ptr<f16, 3>>, tensor<4xi32>
        %2 = tt.load %1 : tensor<4x!tt.ptr<f16, 3>>
    """),
    "load": kernel(f"%arg0: {P}, %arg1: {T4P}, %arg2: tensor<4xi1>, %arg3: tensor<4xf32>", f"""
        %0 = tt.load %arg0 : {P}
        %1 = tt.load %arg1, %arg2 : {T4P}
        %2 = tt.load %arg1, %arg2, %arg3 : {T4P}
        %3 = tt.load %arg1 evictionPolicy = evict_first {{isVolatile = true}} : {T4P}
        %4 = tt.load %arg1, %arg2 evictionPolicy = evict_last : {T4P}
    """),
    **{
        f"load_cache_{c}": kernel(f"%arg0: {T4P}", f"""
            %0 = tt.load %arg0 cacheModifier = {c} evictionPolicy = evict_first : {T4P}
        """)
        for c in ("ca", "cg", "wb", "cs", "wt", "cv")
    },
    "store": kernel(f"%arg0: {P}, %arg1: f32, %arg2: {T4P}, %arg3: tensor<4xf32>, %arg4: tensor<4xi1>", f"""
        tt.store %arg0, %arg1 : {P}
        tt.store %arg2, %arg3, %arg4 : {T4P}
        tt.store %arg2, %arg3 cacheModifier = wb evictionPolicy = evict_last : {T4P}
    """),
    "block_pointer": kernel("%arg0: !tt.ptr<f16>, %arg1: i64, %arg2: i32", """
        %0 = tt.make_tensor_ptr %arg0, [%arg1, %arg1], [%arg1, %arg1], [%arg2, %arg2] {order = array<i32: 1, 0>} : !tt.ptr<tensor<128x64xf16>>
        %1 = tt.advance %0, [%arg2, %arg2] : !tt.ptr<tensor<128x64xf16>>
        %2 = tt.load %1 {boundaryCheck = array<i32: 0, 1>, padding = 1 : i32} : !tt.ptr<tensor<128x64xf16>>
        %3 = tt.load %1 {boundaryCheck = array<i32: 1>, padding = 2 : i32} : !tt.ptr<tensor<128x64xf16>>
        %4 = tt.load %1 : !tt.ptr<tensor<128x64xf16>>
        tt.store %1, %2 {boundaryCheck = array<i32: 0>} : !tt.ptr<tensor<128x64xf16>>
        tt.descriptor_reduce %0, %2 {kind = "min"} : !tt.ptr<tensor<128x64xf16>>, tensor<128x64xf16>
    """),
    "block_pointer_address_space": kernel("%arg0: !tt.ptr<i8, 5>, %arg1: i64, %arg2: i32", """
        %0 = tt.make_tensor_ptr %arg0, [%arg1], [%arg1], [%arg2] {order = array<i32: 0>} : !tt.ptr<tensor<64xi8>, 5>
    """),
    **{
        f"atomic_rmw_{op}": kernel(f"%arg0: {T4P}, %arg1: tensor<4xf32>, %arg2: tensor<4xi1>", f"""
            %0 = tt.atomic_rmw {op}, {sem}, {scope}, %arg0, %arg1, %arg2 : ({T4P}, tensor<4xf32>, tensor<4xi1>) -> tensor<4xf32>
            %1 = tt.atomic_rmw {op}, {sem}, {scope}, %arg0, %arg1 : ({T4P}, tensor<4xf32>) -> tensor<4xf32>
        """)
        for i, op in enumerate(RMWOp)
        for sem in [tuple(MemSemantic)[i % 4]]
        for scope in [tuple(MemSyncScope)[i % 3]]
    },
    "atomic_cas": kernel("%arg0: !tt.ptr<i32>, %arg1: i32, %arg2: i32", """
        %0 = tt.atomic_cas acq_rel, gpu, %arg0, %arg1, %arg2 : (!tt.ptr<i32>, i32, i32) -> i32
        %1 = tt.atomic_cas relaxed, sys, %arg0, %arg1, %arg2 : (!tt.ptr<i32>, i32, i32) -> i32
    """),
    "atomic_poll": kernel("%arg0: !tt.ptr<i32>, %arg1: i32, %arg2: i64", """
        %0 = tt.atomic_poll acquire, gpu, %arg0, %arg1 : (!tt.ptr<i32>, i32) -> i1
        %1 = tt.atomic_poll relaxed, sys, %arg0, %arg1, %arg2 : (!tt.ptr<i32>, i32, i64) -> i1
    """),
    "reduce_to_scalar": kernel("%arg0: tensor<128xf32>", """
        %0 = "tt.reduce"(%arg0) <{axis = 0 : i32}> ({
        ^bb0(%arg1: f32, %arg2: f32):
          %1 = arith.addf %arg1, %arg2 : f32
          tt.reduce.return %1 : f32
        }) : (tensor<128xf32>) -> f32
    """),
    "reduce_two_operands": kernel("%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xi32>", """
        %0, %1 = "tt.reduce"(%arg0, %arg1) <{axis = 1 : i32}> ({
        ^bb0(%arg2: f32, %arg3: i32, %arg4: f32, %arg5: i32):
          tt.reduce.return %arg2, %arg3 : f32, i32
        }) : (tensor<4x8xf32>, tensor<4x8xi32>) -> (tensor<4xf32>, tensor<4xi32>)
    """),
    "scan": kernel("%arg0: tensor<4x8xi32>", """
        %0 = "tt.scan"(%arg0) <{axis = 1 : i32, reverse = true}> ({
        ^bb0(%arg1: i32, %arg2: i32):
          %1 = arith.addi %arg1, %arg2 : i32
          tt.scan.return %1 : i32
        }) : (tensor<4x8xi32>) -> tensor<4x8xi32>
    """),
    "dot": kernel("%arg0: tensor<16x32xf16>, %arg1: tensor<32x64xf16>, %arg2: tensor<16x64xf32>", """
        %0 = tt.dot %arg0, %arg1, %arg2 : tensor<16x32xf16> * tensor<32x64xf16> -> tensor<16x64xf32>
        %1 = tt.dot %arg0, %arg1, %0, inputPrecision = tf32 : tensor<16x32xf16> * tensor<32x64xf16> -> tensor<16x64xf32>
        %2 = tt.dot %arg0, %arg1, %1, inputPrecision = tf32x3 {maxNumImpreciseAcc = 32 : i32} : tensor<16x32xf16> * tensor<32x64xf16> -> tensor<16x64xf32>
        %3 = tt.dot %arg0, %arg1, %2, inputPrecision = bf16x3 : tensor<16x32xf16> * tensor<32x64xf16> -> tensor<16x64xf32>
        %4 = tt.dot %arg0, %arg1, %3, inputPrecision = bf16x6 : tensor<16x32xf16> * tensor<32x64xf16> -> tensor<16x64xf32>
    """),
    "dot_batched": kernel("%arg0: tensor<2x16x32xi8>, %arg1: tensor<2x32x16xi8>, %arg2: tensor<2x16x16xi32>", """
        %0 = tt.dot %arg0, %arg1, %arg2 : tensor<2x16x32xi8> * tensor<2x32x16xi8> -> tensor<2x16x16xi32>
    """),
    "fp_to_fp": kernel("%arg0: tensor<4xf32>, %arg1: tensor<4xf8E4M3FN>", """
        %0 = tt.fp_to_fp %arg0, rounding = rtne : tensor<4xf32> -> tensor<4xf8E5M2>
        %1 = tt.fp_to_fp %arg0, rounding = rtz : tensor<4xf32> -> tensor<4xf16>
        %2 = tt.fp_to_fp %arg1 : tensor<4xf8E4M3FN> -> tensor<4xbf16>
    """),
    "casts": kernel(f"%arg0: tensor<4xf32>, %arg1: {P}, %arg2: i64", f"""
        %0 = tt.bitcast %arg0 : tensor<4xf32> -> tensor<4xi32>
        %1 = tt.bitcast %arg1 : {P} -> !tt.ptr<i8>
        %2 = tt.int_to_ptr %arg2 : i64 -> {P}
        %3 = tt.ptr_to_int %arg1 : {P} -> i64
    """),
    "math": kernel("%arg0: tensor<4xf32>, %arg1: tensor<4xi32>", """
        %0 = tt.clampf %arg0, %arg0, %arg0, propagateNan = none : tensor<4xf32>
        %1 = tt.clampf %arg0, %arg0, %arg0, propagateNan = all : tensor<4xf32>
        %2 = tt.precise_sqrt %arg0 : tensor<4xf32>
        %3 = tt.precise_divf %arg0, %2 : tensor<4xf32>
        %4 = tt.mulhiui %arg1, %arg1 : tensor<4xi32>
    """),
    "extern_elementwise": kernel("%arg0: tensor<4xf32>, %arg1: tensor<4xi32>", """
        %0 = tt.extern_elementwise %arg0, %arg1 {libname = "libdevice", libpath = "/lib/libdevice.bc", pure = true, symbol = "__nv_ldexpf"} : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
    """),
    "elementwise_inline_asm": kernel("%arg0: tensor<8xi8>", """
        %0, %1 = tt.elementwise_inline_asm "cvt.rn.f16x2.e4m3x2 $0, $2;" {constraints = "=r,=r,r", packed_element = 4 : i32, pure = true} %arg0 : tensor<8xi8> -> tensor<8xf16>, tensor<8xf16>
    """),
    "print_assert_assume": kernel("%arg0: tensor<4xi32>, %arg1: tensor<4xi1>, %arg2: i1", """
        tt.print " x: " {hex = false, isSigned = array<i32: 1>} : %arg0 : tensor<4xi32>
        tt.print "done" {hex = true, isSigned = array<i32>}
        tt.assert %arg1, "x must be positive" : tensor<4xi1>
        tt.assert %arg2, "scalar" : i1
        tt.assume %arg2 : i1
    """),
    "arith_on_tensors": kernel("%arg0: tensor<4xi32>, %arg1: tensor<4xf32>, %arg2: i1, %arg3: f32", """
        %0 = arith.cmpi ult, %arg0, %arg0 : tensor<4xi32>
        %1 = arith.cmpf olt, %arg1, %arg1 : tensor<4xf32>
        %2 = arith.select %0, %arg1, %arg1 : tensor<4xi1>, tensor<4xf32>
        %3 = arith.select %arg2, %arg3, %arg3 : f32
        %4 = arith.extsi %arg0 : tensor<4xi32> to tensor<4xi64>
        %5 = arith.extui %0 : tensor<4xi1> to tensor<4xi32>
        %6 = arith.trunci %arg0 : tensor<4xi32> to tensor<4xi8>
        %7 = arith.sitofp %arg0 : tensor<4xi32> to tensor<4xf32>
        %8 = arith.uitofp %arg0 : tensor<4xi32> to tensor<4xf16>
        %9 = arith.fptosi %arg1 : tensor<4xf32> to tensor<4xi32>
        %10 = arith.fptoui %arg1 : tensor<4xf32> to tensor<4xi16>
    """),
    "call": textwrap.dedent("""\
        builtin.module {
          tt.func private @helper(%arg0: f32) -> f32 attributes {noinline = true} {
            tt.return %arg0 : f32
          }
          tt.func public @k(%arg0: f32) {
            %0 = tt.call @helper(%arg0) : (f32) -> f32
            tt.return
          }
        }"""),
}


@pytest.mark.parametrize("text", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_round_trip(text: str) -> None:
    assert print_module(parse_module(text)) == text


def test_every_op_has_a_round_trip() -> None:
    from naiad.ir import TT

    covered = "\n".join(ROUND_TRIPS.values())
    missing = [op.name for op in TT.operations if op.name not in covered]
    assert missing == []


def test_default_valued_keywords_are_not_printed() -> None:
    text = kernel(f"%arg0: {T4P}", f"""
        %0 = tt.load %arg0 cacheModifier = none evictionPolicy = evict_normal : {T4P}
    """)
    assert "cacheModifier" not in print_module(parse_module(text))


def vector_add() -> ModuleOp:
    """`out[i] = x[i] + y[i]` for i < n, in blocks of 1024, built op by op."""
    ptr = PointerType(f32)
    block = tensor_of([1024], f32)
    divisible = DictionaryAttr({"tt.divisibility": IntegerAttr(16, i32)})
    func = FuncOp(
        "add_kernel",
        ([ptr, ptr, ptr, i32], []),
        arg_attrs=ArrayAttr([divisible] * 4),
        noinline=False,
    )
    x, y, out, n = func.args

    def emit(op):
        func.body.block.add_op(op)
        return op

    pid = emit(GetProgramIdOp(0))
    size = emit(arith.ConstantOp.from_int_and_width(1024, i32))
    start = emit(arith.MuliOp(pid, size))
    offsets = emit(arith.AddiOp(emit(SplatOp(start, [1024])), emit(MakeRangeOp(0, 1024))))
    mask = emit(
        CmpiOp(offsets, emit(SplatOp(n, [1024])), "slt")
    )
    zero = emit(SplatOp(emit(arith.ConstantOp(FloatAttr(0.0, f32))), [1024]))

    def pointers(base):
        return emit(AddPtrOp(emit(SplatOp(base, [1024])), offsets))

    a = emit(LoadOp(pointers(x), mask, zero))
    b = emit(LoadOp(pointers(y), mask, zero))
    total = emit(arith.AddfOp(a, b))
    emit(StoreOp(pointers(out), total, mask))
    emit(ReturnOp())
    assert total.result.type == block
    return ModuleOp([func])


VECTOR_ADD = """\
builtin.module {
  tt.func public @add_kernel(%arg0: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %arg1: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %arg2: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %arg3: i32 {tt.divisibility = 16 : i32}) attributes {noinline = false} {
    %0 = tt.get_program_id x : i32
    %1 = arith.constant 1024 : i32
    %2 = arith.muli %0, %1 : i32
    %3 = tt.splat %2 : i32 -> tensor<1024xi32>
    %4 = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
    %5 = arith.addi %3, %4 : tensor<1024xi32>
    %6 = tt.splat %arg3 : i32 -> tensor<1024xi32>
    %7 = arith.cmpi slt, %5, %6 : tensor<1024xi32>
    %8 = arith.constant 0.000000e+00 : f32
    %9 = tt.splat %8 : f32 -> tensor<1024xf32>
    %10 = tt.splat %arg0 : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %11 = tt.addptr %10, %5 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %12 = tt.load %11, %7, %9 : tensor<1024x!tt.ptr<f32>>
    %13 = tt.splat %arg1 : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %14 = tt.addptr %13, %5 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    %15 = tt.load %14, %7, %9 : tensor<1024x!tt.ptr<f32>>
    %16 = arith.addf %12, %15 : tensor<1024xf32>
    %17 = tt.splat %arg2 : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>>
    %18 = tt.addptr %17, %5 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32>
    tt.store %18, %16, %7 : tensor<1024x!tt.ptr<f32>>
    tt.return
  }
}"""


def test_vector_add_builds_verifies_and_round_trips() -> None:
    module = vector_add()
    module.verify()
    assert print_module(module) == VECTOR_ADD
    assert print_module(parse_module(VECTOR_ADD)) == VECTOR_ADD


def test_generic_form_round_trips() -> None:
    """The generic form spells enum attributes `#tt<cache_modifier ca>` and parses back."""
    module = parse_module(ROUND_TRIPS["load_cache_cg"] + "\n")
    out = StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    assert "cache = #tt<cache_modifier cg>" in out.getvalue()
    assert "evict = #tt<eviction_policy evict_first>" in out.getvalue()
    assert print_module(parse_module(out.getvalue())) == print_module(module)


def test_builders() -> None:
    block_ptr = PointerType(tensor_of([4, 4], f16))
    helper = FuncOp("helper", ([f32], [f32]), visibility="private")
    helper.body.block.add_op(ReturnOp(helper.args[0]))
    kernel_func = FuncOp("k", ([f32, block_ptr], []))
    x, ptr = kernel_func.args
    load = LoadOp(ptr, boundary_check=[0, 1], padding=PaddingOption.NAN, cache=CacheModifier.CG)
    for op in (
        CallOp("helper", [x], [f32]),
        load,
        StoreOp(ptr, load, boundary_check=[1]),
        ReturnOp(),
    ):
        kernel_func.body.block.add_op(op)
    module = ModuleOp([helper, kernel_func])
    module.verify()
    text = print_module(module)
    assert "tt.call @helper(%arg0) : (f32) -> f32" in text
    assert (
        "tt.load %arg1 cacheModifier = cg {boundaryCheck = array<i32: 0, 1>, padding = 2 : i32}"
        in text
    )
    assert print_module(parse_module(text)) == text
    assert GetProgramIdOp(2).axis_index == 2


BAD_IR = {
    "addptr_shape": (
        kernel("%arg0: tensor<4x!tt.ptr<f32>>, %arg1: tensor<8xi32>", """
            %0 = tt.addptr %arg0, %arg1 : tensor<4x!tt.ptr<f32>>, tensor<8xi32>
        """),
        "shape [4] does not match [8]",
    ),
    "load_mask_shape": (
        kernel(f"%arg0: {T4P}, %arg1: tensor<8xi1>", """
            %0 = "tt.load"(%arg0, %arg1) <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<4x!tt.ptr<f32>>, tensor<8xi1>) -> tensor<4xf32>
        """),
        "mask must have type tensor<4xi1>, got tensor<8xi1>",
    ),
    "load_result_type": (
        kernel(f"%arg0: {T4P}", """
            %0 = "tt.load"(%arg0) <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<4x!tt.ptr<f32>>) -> tensor<4xf16>
        """),
        "result must have type tensor<4xf32>, got tensor<4xf16>",
    ),
    "make_range_empty": (
        kernel("", "%0 = tt.make_range {end = 0 : i32, start = 0 : i32} : tensor<0xi32>"),
        "end (0) must be greater than start (0)",
    ),
    "make_range_size": (
        kernel("", "%0 = tt.make_range {end = 64 : i32, start = 0 : i32} : tensor<32xi32>"),
        "result must be tensor<64xi32>",
    ),
    "trans_not_permutation": (
        kernel("%arg0: tensor<4x8xf32>", """
            %0 = tt.trans %arg0 {order = array<i32: 0, 0>} : tensor<4x8xf32> -> tensor<4x4xf32>
        """),
        "order [0, 0] is not a permutation",
    ),
    "dot_k_mismatch": (
        kernel("%arg0: tensor<16x32xf16>, %arg1: tensor<16x64xf16>, %arg2: tensor<16x64xf32>", """
            %0 = tt.dot %arg0, %arg1, %arg2 : tensor<16x32xf16> * tensor<16x64xf16> -> tensor<16x64xf32>
        """),
        "dot K dimensions differ",
    ),
    "reduce_return_count": (
        kernel("%arg0: tensor<128xf32>", """
            %0 = "tt.reduce"(%arg0) <{axis = 0 : i32}> ({
            ^bb0(%arg1: f32, %arg2: f32):
              tt.reduce.return %arg1, %arg2 : f32, f32
            }) : (tensor<128xf32>) -> f32
        """),
        "tt.reduce region returns 2 values (f32, f32), expected 1 (f32)",
    ),
    "reduce_result_shape": (
        kernel("%arg0: tensor<4x8xf32>", """
            %0 = "tt.reduce"(%arg0) <{axis = 0 : i32}> ({
            ^bb0(%arg1: f32, %arg2: f32):
              tt.reduce.return %arg1 : f32
            }) : (tensor<4x8xf32>) -> tensor<4xf32>
        """),
        "reduce result must be a tensor of shape [8] of f32",
    ),
    "broadcast_non_unit": (
        kernel("%arg0: tensor<2x32xf32>", """
            %0 = tt.broadcast %arg0 : tensor<2x32xf32> -> tensor<16x32xf32>
        """),
        "cannot broadcast shape [2, 32] to [16, 32]",
    ),
    "store_value_type": (
        kernel(f"%arg0: {T4P}, %arg1: tensor<4xf16>", """
            tt.store %arg0, %arg1 : tensor<4x!tt.ptr<f32>>
        """),
        "operand is used with type tensor<4xf32>",
    ),
    "reshape_count": (
        kernel("%arg0: tensor<4x8xf32>", "%0 = tt.reshape %arg0 : tensor<4x8xf32> -> tensor<16xf32>"),
        "reshape must keep the number of elements",
    ),
    "join_shape": (
        kernel("%arg0: tensor<4xf32>", "%0 = tt.join %arg0, %arg0 : tensor<4xf32> -> tensor<2x4xf32>"),
        "tt.join of two tensor<4xf32> must give shape [4, 2]",
    ),
    "fp_to_fp_needs_rounding": (
        kernel("%arg0: f32", "%0 = tt.fp_to_fp %arg0: f32 -> f16"),
        "rounding mode is required",
    ),
    "bitcast_width": (
        kernel("%arg0: f32", "%0 = tt.bitcast %arg0: f32 -> i16"),
        "bitcast needs the same bit width",
    ),
    "atomic_pointee": (
        kernel("%arg0: !tt.ptr<f16>, %arg1: f32", """
            %0 = tt.atomic_rmw fadd, relaxed, gpu, %arg0, %arg1 : (!tt.ptr<f16>, f32) -> f32
        """),
        "does not point to values of type f32",
    ),
    "advance_rank": (
        kernel("%arg0: !tt.ptr<tensor<4x4xf32>>, %arg1: i32", """
            %0 = tt.advance %arg0, [%arg1] : !tt.ptr<tensor<4x4xf32>>
        """),
        "needs 2 offsets",
    ),
    "load_of_non_pointer": (
        kernel("%arg0: tensor<4xf32>", "%0 = tt.load %arg0 : tensor<4xf32>"),
        "expected a pointer type, got tensor<4xf32>",
    ),
    "extsi_narrowing": (
        kernel("%arg0: tensor<4xi32>", "%0 = arith.extsi %arg0 : tensor<4xi32> to tensor<4xi8>"),
        "arith.extsi cannot go from i32 to i8",
    ),
    "call_types": (
        textwrap.dedent("""\
            builtin.module {
              tt.func private @f(%arg0: i32) {
                tt.return
              }
              tt.func public @k(%arg0: f32) {
                tt.call @f(%arg0) : (f32) -> ()
                tt.return
              }
            }"""),
        "call operand types do not match",
    ),
}


@pytest.mark.parametrize("text, message", BAD_IR.values(), ids=BAD_IR.keys())
def test_verifier_rejects(text: str, message: str) -> None:
    with pytest.raises(IRParseError) as info:
        parse_module(text)
    assert message in str(info.value)


def test_verify_error_names_the_line() -> None:
    text, _ = BAD_IR["trans_not_permutation"]
    with pytest.raises(IRParseError) as info:
        parse_module(text)
    assert str(info.value).startswith("<ttir>:3: 'tt.trans' does not verify")
    assert "tt.trans %arg0 {order = array<i32: 0, 0>}" in str(info.value)


def test_parse_error_names_the_line() -> None:
    with pytest.raises(IRParseError, match=r"<ttir>:3:\d+"):
        parse_module(kernel("", "%0 = tt.get_program_id w : i32"))


@pytest.mark.parametrize("element", ["f16", "f32", "f64"])
@pytest.mark.parametrize("value", [float("-inf"), float("inf"), float("nan"), -2.5])
def test_special_float_splats_survive_print_and_parse(element, value):
    """xDSL prints an infinite or NaN splat as its bits (``dense<0xFF800000>``) and would read
    the bare hex back as an integer value: a dumped kernel edited and overridden would change."""
    import math

    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, Float16Type, Float32Type, Float64Type, ModuleOp

    ftype = {"f16": Float16Type(), "f32": Float32Type(), "f64": Float64Type()}[element]
    from xdsl.dialects.builtin import TensorType

    ttype = TensorType(ftype, [4])
    module = ModuleOp([arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(ttype, [value] * 4), ttype)])
    text = print_module(module)
    again = parse_module(text)
    assert print_module(again) == text
    values = list(again.body.block.first_op.value.get_values())
    assert len(values) == 4
    assert all(math.isnan(v) if math.isnan(value) else v == value for v in values), (text, values)


def test_cf_and_func_text_parses_though_they_load_lazily() -> None:
    """Naiad's IR never holds cf or func, so the context only registers them; a text that
    uses them still parses (and gpu.barrier is Naiad's own op now)."""
    from naiad.ir import parse_module, print_module

    text = textwrap.dedent("""\
        builtin.module {
          func.func @f(%a : i32) -> i32 {
            gpu.barrier
            cf.br ^bb1(%a : i32)
          ^bb1(%b : i32):
            func.return %b : i32
          }
        }""")
    printed = print_module(parse_module(text))
    assert "cf.br ^" in printed and "gpu.barrier" in printed and "func.return" in printed
