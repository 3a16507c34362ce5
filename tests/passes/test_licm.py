"""LICM: pure, speculatable, invariant ops leave scf.for / scf.while bodies (innermost loops
first); loads, stores, ops that read loop values, trapping divisions and loops marked
tt.disable_licm stay."""

from __future__ import annotations

from naiad.passes.licm import licm

from .ttir import count, module, ops

PTR = "!tt.ptr<f32>"


def licm_of(args: str, body: str, results: str = ""):
    mod = module(args, body, results)
    licm(mod)
    mod.verify()
    return mod


def test_invariant_pure_ops_are_hoisted_and_the_rest_stays() -> None:
    mod = licm_of(f"%p: {PTR}, %x: i32, %n: i32", f"""
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        scf.for %i = %c0 to %n step %c1 : i32 {{
          %c4 = arith.constant 4 : i32
          %a = arith.muli %x, %c4 : i32
          %r = tt.make_range {{end = 8 : i32, start = 0 : i32}} : tensor<8xi32>
          %s = tt.splat %a : i32 -> tensor<8xi32>
          %o = arith.addi %r, %s : tensor<8xi32>
          %b = arith.addi %a, %i : i32
          %q = tt.addptr %p, %b : {PTR}, i32
          %v = tt.load %p : {PTR}
          tt.store %q, %v : {PTR}
        }}
        tt.return
    """)
    body = [op.name for op in ops(mod, "scf.for")[0].body.block.ops]
    assert body == ["arith.addi", "tt.addptr", "tt.load", "tt.store", "scf.yield"]
    assert count(mod, "tt.make_range") == 1


def test_divisions_are_hoisted_only_when_they_cannot_trap() -> None:
    mod = licm_of("%x: i32, %y: i32, %n: i32", """
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %c3 = arith.constant 3 : i32
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %c0) -> (i32) : i32 {
          %safe = arith.divsi %x, %c3 : i32
          %unsafe = arith.divsi %x, %y : i32
          %u = arith.remui %x, %y : i32
          %s = arith.addi %safe, %unsafe : i32
          %t = arith.addi %s, %u : i32
          %a = arith.addi %acc, %t : i32
          scf.yield %a : i32
        }
        tt.return %r : i32
    """, "i32")
    body = [op.name for op in ops(mod, "scf.for")[0].body.block.ops]
    assert body.count("arith.divsi") == 1 and "arith.remui" in body


def test_nested_loops_hoist_all_the_way_out() -> None:
    mod = licm_of("%x: f32, %n: i32", """
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (f32) : i32 {
          %s = scf.for %j = %c0 to %n step %c1 iter_args(%b = %acc) -> (f32) : i32 {
            %sq = arith.mulf %x, %x : f32
            %e = math.exp %sq : f32
            %n2 = arith.addf %b, %e : f32
            scf.yield %n2 : f32
          }
          scf.yield %s : f32
        }
        tt.return %r : f32
    """, "f32")
    func = mod.ops.first
    assert [op.name for op in func.body.block.ops][:4] == [
        "arith.constant", "arith.constant", "arith.mulf", "math.exp"]


def test_while_loops_hoist_from_both_regions() -> None:
    mod = licm_of("%x: i32, %n: i32", """
        %c0 = arith.constant 0 : i32
        %r = scf.while (%i = %c0) : (i32) -> i32 {
          %lim = arith.muli %n, %n : i32
          %go = arith.cmpi slt, %i, %lim : i32
          scf.condition(%go) %i : i32
        } do {
        ^bb0(%j: i32):
          %step = arith.addi %x, %x : i32
          %next = arith.addi %j, %step : i32
          scf.yield %next : i32
        }
        tt.return %r : i32
    """, "i32")
    func_ops = [op.name for op in mod.ops.first.body.block.ops]
    assert func_ops[:4] == ["arith.constant", "arith.muli", "arith.addi", "scf.while"]


def test_disable_licm_is_respected() -> None:
    mod = licm_of("%x: i32, %n: i32", """
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %c0) -> (i32) : i32 {
          %a = arith.muli %x, %x : i32
          %b = arith.addi %acc, %a : i32
          scf.yield %b : i32
        } {tt.disable_licm = 1 : i32}
        tt.return %r : i32
    """, "i32")
    assert [op.name for op in ops(mod, "scf.for")[0].body.block.ops][0] == "arith.muli"
