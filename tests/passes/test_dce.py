"""DCE: unused pure ops and unused non-volatile loads go; effects stay; loop-carried values
that only feed themselves are dropped from scf.for and scf.while."""

from __future__ import annotations

from naiad.ir import parse_module
from naiad.passes.dce import dce

from .ttir import count, module, ops

PTR = "!tt.ptr<f32>"


def dce_of(args: str, body: str, results: str = ""):
    mod = module(args, body, results)
    dce(mod)
    mod.verify()
    return mod


def test_unused_pure_ops_and_loads_go_effects_stay() -> None:
    mod = dce_of(f"%p: {PTR}, %x: f32", f"""
        %a = arith.addf %x, %x : f32
        %b = arith.mulf %a, %a : f32
        %l = tt.load %p : {PTR}
        %v = tt.load %p {{isVolatile = true}} : {PTR}
        %c = tt.atomic_cas acq_rel, gpu, %p, %x, %x : ({PTR}, f32, f32) -> f32
        %t = arith.constant true
        tt.assert %t, "never" : i1
        tt.store %p, %x : {PTR}
        tt.return
    """)
    assert count(mod, "arith.addf") == count(mod, "arith.mulf") == 0
    assert [op.isVolatile.value.data for op in ops(mod, "tt.load")] == [-1]
    assert count(mod, "tt.atomic_cas") == count(mod, "tt.assert") == count(mod, "tt.store") == 1


def test_calls_are_kept() -> None:
    mod = parse_module("""builtin.module {
      tt.func public @k(%x: f32) {
        %r = tt.call @f(%x) : (f32) -> f32
        tt.return
      }
      tt.func private @f(%a: f32) -> f32 attributes {noinline = true} {
        tt.return %a : f32
      }
    }""")
    dce(mod)
    assert count(mod, "tt.call") == 1


def test_dead_loop_carried_values_are_dropped() -> None:
    mod = dce_of(f"%p: {PTR}, %n: i32, %x: f32", f"""
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %z = arith.constant 0.0 : f32
        %live, %dead, %count = scf.for %i = %c0 to %n step %c1
            iter_args(%a = %z, %d = %z, %k = %c0) -> (f32, f32, i32) : i32 {{
          %l = tt.load %p : {PTR}
          %a2 = arith.addf %a, %l : f32
          %d2 = arith.mulf %d, %a2 : f32
          %k2 = arith.addi %k, %c1 : i32
          scf.yield %a2, %d2, %k2 : f32, f32, i32
        }}
        tt.store %p, %live : {PTR}
        tt.return
    """)
    loop, = ops(mod, "scf.for")
    assert len(loop.res) == 1 and len(loop.iter_args) == 1
    assert count(mod, "arith.mulf") == count(mod, "arith.addi") == 0


def test_loop_carried_values_read_by_effects_stay() -> None:
    mod = dce_of(f"%p: {PTR}, %n: i32", f"""
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %unused = scf.for %i = %c0 to %n step %c1 iter_args(%k = %c0) -> (i32) : i32 {{
          %q = tt.addptr %p, %k : {PTR}, i32
          %f = arith.sitofp %k : i32 to f32
          tt.store %q, %f : {PTR}
          %k2 = arith.addi %k, %c1 : i32
          scf.yield %k2 : i32
        }}
        tt.return
    """)
    loop, = ops(mod, "scf.for")
    assert len(loop.res) == 1


def test_unused_while_results_are_dropped() -> None:
    mod = dce_of(f"%p: {PTR}, %n: i32", f"""
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %z = arith.constant 0.0 : f32
        %i, %acc = scf.while (%i0 = %c0, %a0 = %z) : (i32, f32) -> (i32, f32) {{
          %go = arith.cmpi slt, %i0, %n : i32
          scf.condition(%go) %i0, %a0 : i32, f32
        }} do {{
        ^bb0(%i1: i32, %a1: f32):
          %q = tt.addptr %p, %i1 : {PTR}, i32
          tt.store %q, %z : {PTR}
          %next = arith.addi %i1, %c1 : i32
          scf.yield %next, %z : i32, f32
        }}
        tt.return
    """)
    loop, = ops(mod, "scf.while")
    assert len(loop.res) == 1 and len(loop.after_region.block.args) == 1


def test_a_loop_without_effects_or_users_goes_entirely() -> None:
    mod = dce_of("%n: i32", """
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%k = %c0) -> (i32) : i32 {
          %k2 = arith.addi %k, %i : i32
          scf.yield %k2 : i32
        }
        tt.return
    """)
    assert count(mod, "scf.for") == 0 and count(mod, "arith.constant") == 0
