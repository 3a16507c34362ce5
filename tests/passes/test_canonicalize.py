"""Canonicalize: splats become constants, shape ops of splats stay splats, identities
simplify, known branches and loops disappear, and dead code goes (loads only when unused and
not volatile)."""

from __future__ import annotations

from naiad.passes.canonicalize import canonicalize
from naiad.passes.constants import splat_value

from .ttir import count, module, ops, returned, returned_constant

PTR = "!tt.ptr<f32>"


def canonical(args: str, body: str, results: str = ""):
    mod = module(args, body, results)
    canonicalize(mod)
    mod.verify()
    return mod


def test_splat_of_a_constant_becomes_a_dense_constant() -> None:
    mod = canonical("", """
        %c = arith.constant 1.0 : f32
        %s = tt.splat %c : f32 -> tensor<128xf32>
        tt.return %s : tensor<128xf32>
    """, "tensor<128xf32>")
    assert count(mod, "tt.splat") == 0
    constant = returned(mod).owner
    assert constant.name == "arith.constant"
    assert str(constant.value) == "dense<1.000000e+00> : tensor<128xf32>"


def test_shape_ops_of_a_splat_constant_become_constants() -> None:
    mod = canonical("", """
        %c = arith.constant dense<3> : tensor<1x8xi32>
        %b = tt.broadcast %c : tensor<1x8xi32> -> tensor<4x8xi32>
        %t = tt.trans %b {order = array<i32: 1, 0>} : tensor<4x8xi32> -> tensor<8x4xi32>
        %r = tt.reshape %t : tensor<8x4xi32> -> tensor<32xi32>
        %e = tt.expand_dims %r {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
        tt.return %e : tensor<1x32xi32>
    """, "tensor<1x32xi32>")
    assert count(mod, "arith.constant") == 1
    assert returned_constant(mod) == 3
    assert str(returned(mod).type) == "tensor<1x32xi32>"


def test_shape_ops_of_a_splat_become_one_splat() -> None:
    mod = canonical("%x: i32", """
        %s = tt.splat %x : i32 -> tensor<1x8xi32>
        %b = tt.broadcast %s : tensor<1x8xi32> -> tensor<4x8xi32>
        %e = tt.expand_dims %b {axis = 2 : i32} : tensor<4x8xi32> -> tensor<4x8x1xi32>
        %r = tt.reshape %e : tensor<4x8x1xi32> -> tensor<32xi32>
        tt.return %r : tensor<32xi32>
    """, "tensor<32xi32>")
    assert [op.name for op in mod.ops.first.body.block.ops] == ["tt.splat", "tt.return"]
    assert str(returned(mod).type) == "tensor<32xi32>"


def test_identity_shape_ops_and_nested_ones_simplify() -> None:
    mod = canonical("%x: tensor<4x8xi32>, %y: tensor<1x8xi32>", """
        %t = tt.trans %x {order = array<i32: 0, 1>} : tensor<4x8xi32> -> tensor<4x8xi32>
        %a = tt.trans %t {order = array<i32: 1, 0>} : tensor<4x8xi32> -> tensor<8x4xi32>
        %b = tt.trans %a {order = array<i32: 1, 0>} : tensor<8x4xi32> -> tensor<4x8xi32>
        %c = tt.broadcast %y : tensor<1x8xi32> -> tensor<1x8xi32>
        %d = tt.reshape %c : tensor<1x8xi32> -> tensor<1x8xi32>
        tt.return %b, %d : tensor<4x8xi32>, tensor<1x8xi32>
    """, "tensor<4x8xi32>, tensor<1x8xi32>")
    func = mod.ops.first
    assert returned(mod, 0) is func.args[0] and returned(mod, 1) is func.args[1]
    assert count(mod, "tt.trans") == count(mod, "tt.broadcast") == 0


def test_broadcast_of_broadcast_is_one_broadcast() -> None:
    mod = canonical("%x: tensor<1x1xi32>", """
        %a = tt.broadcast %x : tensor<1x1xi32> -> tensor<1x8xi32>
        %b = tt.broadcast %a : tensor<1x8xi32> -> tensor<4x8xi32>
        tt.return %b : tensor<4x8xi32>
    """, "tensor<4x8xi32>")
    assert count(mod, "tt.broadcast") == 1
    assert returned(mod).owner.src is mod.ops.first.args[0]


def test_algebraic_identities() -> None:
    mod = canonical("%x: i32, %f: f32", """
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %m1 = arith.constant -1 : i32
        %f1 = arith.constant 1.0 : f32
        %fm0 = arith.constant -0.0 : f32
        %a = arith.addi %c0, %x : i32
        %b = arith.muli %a, %c1 : i32
        %c = arith.andi %b, %m1 : i32
        %d = arith.divsi %c, %c1 : i32
        %e = arith.mulf %f, %f1 : f32
        %g = arith.addf %e, %fm0 : f32
        tt.return %d, %g : i32, f32
    """, "i32, f32")
    func = mod.ops.first
    assert returned(mod, 0) is func.args[0] and returned(mod, 1) is func.args[1]


def test_absorbing_and_self_operations() -> None:
    mod = canonical("%x: i32", """
        %c0 = arith.constant 0 : i32
        %a = arith.muli %x, %c0 : i32
        %b = arith.subi %x, %x : i32
        %c = arith.xori %x, %x : i32
        %d = arith.ori %x, %x : i32
        %e = arith.maxsi %x, %x : i32
        tt.return %a, %b, %c, %d, %e : i32, i32, i32, i32, i32
    """, "i32, i32, i32, i32, i32")
    assert [returned_constant(mod, i) for i in range(3)] == [0, 0, 0]
    assert returned(mod, 3) is returned(mod, 4) is mod.ops.first.args[0]


def test_float_identities_that_do_not_hold_for_every_value_are_kept() -> None:
    mod = canonical("%f: f32", """
        %z = arith.constant 0.0 : f32
        %a = arith.addf %f, %z : f32
        %b = arith.mulf %f, %z : f32
        %c = arith.subf %f, %f : f32
        tt.return %a, %b, %c : f32, f32, f32
    """, "f32, f32, f32")
    assert count(mod, "arith.addf") == count(mod, "arith.mulf") == count(mod, "arith.subf") == 1


def test_constants_move_to_the_right_of_commutative_ops() -> None:
    mod = canonical("%x: i32", """
        %c = arith.constant 5 : i32
        %a = arith.addi %c, %x : i32
        tt.return %a : i32
    """, "i32")
    add = returned(mod).owner
    assert add.lhs is mod.ops.first.args[0] and splat_value(add.rhs) == 5


def test_select_simplifies() -> None:
    mod = canonical("%c: i1, %x: tensor<4xi32>, %y: tensor<4xi32>, %m: tensor<4xi1>", """
        %t = arith.constant true
        %mt = arith.constant dense<true> : tensor<4xi1>
        %mf = arith.constant dense<false> : tensor<4xi1>
        %a = arith.select %t, %x, %y : tensor<4xi32>
        %b = arith.select %mf, %x, %y : tensor<4xi1>, tensor<4xi32>
        %d = arith.select %c, %x, %x : tensor<4xi32>
        %e = arith.select %m, %mt, %mf : tensor<4xi1>, tensor<4xi1>
        tt.return %a, %b, %d, %e : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi1>
    """, "tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi1>")
    _, x, y, m = mod.ops.first.args
    assert [returned(mod, i) for i in range(4)] == [x, y, x, m]
    assert count(mod, "arith.select") == 0


def test_compare_of_a_value_with_itself() -> None:
    mod = canonical("%x: tensor<4xi32>", """
        %a = arith.cmpi sle, %x, %x : tensor<4xi32>
        %b = arith.cmpi ult, %x, %x : tensor<4xi32>
        tt.return %a, %b : tensor<4xi1>, tensor<4xi1>
    """, "tensor<4xi1>, tensor<4xi1>")
    assert [returned_constant(mod, 0), returned_constant(mod, 1)] == [-1, 0]


def test_addptr_with_zero_offset_is_the_pointer() -> None:
    mod = canonical(f"%p: {PTR}", f"""
        %z = arith.constant 0 : i32
        %s = tt.splat %p : {PTR} -> tensor<8x{PTR}>
        %zs = tt.splat %z : i32 -> tensor<8xi32>
        %q = tt.addptr %s, %zs : tensor<8x{PTR}>, tensor<8xi32>
        tt.return %q : tensor<8x{PTR}>
    """, f"tensor<8x{PTR}>")
    assert count(mod, "tt.addptr") == 0


def test_if_with_a_constant_condition_becomes_the_branch_taken() -> None:
    mod = canonical(f"%p: {PTR}, %x: f32", f"""
        %t = arith.constant true
        %f = arith.constant false
        %a = scf.if %t -> (f32) {{
          %d = arith.addf %x, %x : f32
          scf.yield %d : f32
        }} else {{
          scf.yield %x : f32
        }}
        %b = scf.if %f -> (f32) {{
          %m = arith.mulf %x, %x : f32
          scf.yield %m : f32
        }} else {{
          scf.yield %x : f32
        }}
        scf.if %f {{
          tt.store %p, %x : {PTR}
        }}
        tt.return %a, %b : f32, f32
    """, "f32, f32")
    assert count(mod, "scf.if") == 0 and count(mod, "tt.store") == 0
    assert returned(mod, 0).owner.name == "arith.addf"
    assert returned(mod, 1) is mod.ops.first.args[1]


def test_loops_with_known_trip_counts_of_zero_or_one_disappear() -> None:
    mod = canonical("%x: i32", """
        %c0 = arith.constant 0 : i32
        %c4 = arith.constant 4 : i32
        %c8 = arith.constant 8 : i32
        %a = scf.for %i = %c8 to %c4 step %c4 iter_args(%acc = %x) -> (i32) : i32 {
          %n = arith.addi %acc, %i : i32
          scf.yield %n : i32
        }
        %b = scf.for %i = %c4 to %c8 step %c8 iter_args(%acc = %x) -> (i32) : i32 {
          %n = arith.muli %acc, %i : i32
          scf.yield %n : i32
        }
        tt.return %a, %b : i32, i32
    """, "i32, i32")
    assert count(mod, "scf.for") == 0
    assert returned(mod, 0) is mod.ops.first.args[0]
    single = returned(mod, 1).owner
    assert single.name == "arith.muli" and splat_value(single.rhs) == 4


def test_masks_known_at_compile_time() -> None:
    mod = canonical(f"%p: tensor<8x{PTR}>, %o: tensor<8xf32>", f"""
        %t = arith.constant dense<true> : tensor<8xi1>
        %f = arith.constant dense<false> : tensor<8xi1>
        %a = tt.load %p, %t, %o : tensor<8x{PTR}>
        %b = tt.load %p, %f, %o : tensor<8x{PTR}>
        tt.store %p, %a, %t : tensor<8x{PTR}>
        tt.store %p, %b, %f : tensor<8x{PTR}>
        tt.return
    """)
    load, = ops(mod, "tt.load")
    store, = ops(mod, "tt.store")
    assert load.mask is None and load.other is None
    assert store.mask is None and store.value is load.result


def test_dead_ops_go_but_effects_stay() -> None:
    mod = canonical(f"%p: {PTR}, %x: f32", f"""
        %a = arith.addf %x, %x : f32
        %l = tt.load %p : {PTR}
        %v = tt.load %p {{isVolatile = true}} : {PTR}
        %r = tt.atomic_rmw fadd, relaxed, gpu, %p, %x : ({PTR}, f32) -> f32
        tt.store %p, %x : {PTR}
        tt.print " x" {{hex = false, isSigned = array<i32: 0>}} : %x : f32
        tt.return
    """)
    assert count(mod, "arith.addf") == 0
    assert count(mod, "tt.load") == 1 and ops(mod, "tt.load")[0].isVolatile.value.data
    assert count(mod, "tt.atomic_rmw") == count(mod, "tt.store") == count(mod, "tt.print") == 1


def test_constants_gather_at_the_top_of_the_function_once_each() -> None:
    mod = canonical("%x: i32, %n: i32", """
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (i32) : i32 {
          %two = arith.constant 2 : i32
          %again = arith.constant 1 : i32
          %m = arith.muli %acc, %two : i32
          %s = arith.addi %m, %again : i32
          scf.yield %s : i32
        }
        tt.return %r : i32
    """, "i32")
    body = list(mod.ops.first.body.block.ops)
    assert [op.name for op in body[:3]] == ["arith.constant"] * 3
    assert count(mod, "arith.constant") == 3
