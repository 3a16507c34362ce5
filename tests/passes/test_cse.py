"""CSE: equal pure computations merge where one dominates the other; loads merge only
without a possible write between them; volatile loads and anything with effects never."""

from __future__ import annotations

from naiad.passes.cse import cse

from .ttir import count, module, ops, returned

PTR = "!tt.ptr<f32>"


def cse_of(args: str, body: str, results: str = ""):
    mod = module(args, body, results)
    cse(mod)
    mod.verify()
    return mod


def test_equal_pure_ops_merge() -> None:
    mod = cse_of("%x: i32", """
        %a = tt.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
        %b = tt.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
        %s1 = tt.splat %x : i32 -> tensor<16xi32>
        %s2 = tt.splat %x : i32 -> tensor<16xi32>
        %c = arith.addi %a, %s1 : tensor<16xi32>
        %d = arith.addi %b, %s2 : tensor<16xi32>
        %e = arith.subi %a, %s1 : tensor<16xi32>
        tt.return %c, %d, %e : tensor<16xi32>, tensor<16xi32>, tensor<16xi32>
    """, "tensor<16xi32>, tensor<16xi32>, tensor<16xi32>")
    assert returned(mod, 0) is returned(mod, 1)
    assert count(mod, "tt.make_range") == count(mod, "tt.splat") == count(mod, "arith.addi") == 1


def test_ops_differing_in_properties_do_not_merge() -> None:
    mod = cse_of("%x: tensor<16xi32>", """
        %a = tt.expand_dims %x {axis = 0 : i32} : tensor<16xi32> -> tensor<1x16xi32>
        %b = tt.expand_dims %x {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
        tt.return %a, %b : tensor<1x16xi32>, tensor<16x1xi32>
    """, "tensor<1x16xi32>, tensor<16x1xi32>")
    assert count(mod, "tt.expand_dims") == 2


def test_an_op_in_a_loop_merges_with_an_equal_one_before_it_but_not_the_reverse() -> None:
    mod = cse_of("%x: i32, %n: i32", """
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %a = arith.muli %x, %x : i32
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %a) -> (i32) : i32 {
          %b = arith.muli %x, %x : i32
          %c = arith.addi %acc, %i : i32
          %d = arith.addi %c, %b : i32
          scf.yield %d : i32
        }
        %e = arith.addi %r, %c1 : i32
        %f = arith.addi %r, %c1 : i32
        tt.return %e, %f : i32, i32
    """, "i32, i32")
    assert count(mod, "arith.muli") == 1
    assert returned(mod, 0) is returned(mod, 1)


def test_ops_in_sibling_branches_do_not_merge() -> None:
    mod = cse_of("%c: i1, %x: i32", """
        %r = scf.if %c -> (i32) {
          %a = arith.muli %x, %x : i32
          scf.yield %a : i32
        } else {
          %b = arith.muli %x, %x : i32
          scf.yield %b : i32
        }
        tt.return %r : i32
    """, "i32")
    assert count(mod, "arith.muli") == 2


def test_loads_merge_only_without_a_write_between() -> None:
    mod = cse_of(f"%p: {PTR}, %x: f32", f"""
        %a = tt.load %p : {PTR}
        %b = tt.load %p : {PTR}
        tt.store %p, %x : {PTR}
        %c = tt.load %p : {PTR}
        %v1 = tt.load %p {{isVolatile = true}} : {PTR}
        %v2 = tt.load %p {{isVolatile = true}} : {PTR}
        tt.return %a, %b, %c, %v1, %v2 : f32, f32, f32, f32, f32
    """, "f32, f32, f32, f32, f32")
    assert returned(mod, 0) is returned(mod, 1)
    assert returned(mod, 2) is not returned(mod, 0)
    assert returned(mod, 3) is not returned(mod, 4)
    assert count(mod, "tt.load") == 4


def test_a_loop_that_stores_is_a_write_between_loads() -> None:
    mod = cse_of(f"%p: {PTR}, %x: f32, %n: i32", f"""
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %a = tt.load %p : {PTR}
        scf.for %i = %c0 to %n step %c1 : i32 {{
          tt.store %p, %x : {PTR}
        }}
        %b = tt.load %p : {PTR}
        tt.return %a, %b : f32, f32
    """, "f32, f32")
    assert count(mod, "tt.load") == 2


def test_stores_and_atomics_never_merge() -> None:
    mod = cse_of(f"%p: {PTR}, %x: f32", f"""
        tt.store %p, %x : {PTR}
        tt.store %p, %x : {PTR}
        %a = tt.atomic_rmw fadd, relaxed, gpu, %p, %x : ({PTR}, f32) -> f32
        %b = tt.atomic_rmw fadd, relaxed, gpu, %p, %x : ({PTR}, f32) -> f32
        tt.return %a, %b : f32, f32
    """, "f32, f32")
    assert count(mod, "tt.store") == count(mod, "tt.atomic_rmw") == 2


def test_equal_reductions_merge_and_combine_regions_stay_closed() -> None:
    reduce = """
        %{name} = "tt.reduce"(%x) <{{axis = 0 : i32}}> ({{
        ^bb0(%l{name}: f32, %k{name}: f32):
          %z{name} = arith.constant 0.0 : f32
          %s{name} = arith.addf %l{name}, %k{name} : f32
          %t{name} = arith.addf %s{name}, %z{name} : f32
          tt.reduce.return %t{name} : f32
        }}) : (tensor<8xf32>) -> f32"""
    mod = cse_of("%x: tensor<8xf32>", f"""
        %z = arith.constant 0.0 : f32
        {reduce.format(name="a")}
        {reduce.format(name="b")}
        tt.return %a, %b, %z : f32, f32, f32
    """, "f32, f32, f32")
    assert count(mod, "tt.reduce") == 1
    inner_constant = ops(mod, "tt.reduce")[0].combineOp.block.first_op
    assert inner_constant.name == "arith.constant"
