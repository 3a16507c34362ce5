"""The purity table every pass consults: traits where they are right, explicit answers where
they are missing or wrong for TTIR."""

from __future__ import annotations

from naiad.passes.effects import Effect, effect_of, is_speculatable

from .ttir import module

PTR = "!tt.ptr<f32>"


def kernel_ops(args: str, body: str):
    """The ops of the kernel body by result name (or op name for ops without results)."""
    mod = module(args, body)
    found = {}
    for op in mod.walk():
        key = op.results[0].name_hint if op.results else op.name
        found.setdefault(key, op)
    return found


def test_effects() -> None:
    ops = kernel_ops(f"%p: {PTR}, %x: f32, %i: i32, %n: i32", f"""
        %l = tt.load %p : {PTR}
        %v = tt.load %p {{isVolatile = true}} : {PTR}
        %pure = tt.extern_elementwise %x {{libname = "", libpath = "", symbol = "f",
                                           pure = true}} : (f32) -> f32
        %impure = tt.extern_elementwise %x {{libname = "", libpath = "", symbol = "g",
                                             pure = false}} : (f32) -> f32
        %u = arith.remui %i, %n : i32
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %quiet = scf.for %j = %c0 to %n step %c1 iter_args(%a = %c0) -> (i32) : i32 {{
          %b = arith.addi %a, %j : i32
          scf.yield %b : i32
        }}
        %loud = scf.for %j = %c0 to %n step %c1 iter_args(%a = %c0) -> (i32) : i32 {{
          tt.store %p, %x : {PTR}
          scf.yield %a : i32
        }}
        tt.return
    """)
    expected = {"l": Effect.READ, "v": Effect.WRITE, "pure": Effect.NONE,
                "impure": Effect.WRITE, "u": Effect.NONE, "quiet": Effect.NONE,
                "loud": Effect.WRITE, "tt.store": Effect.WRITE}
    assert {key: effect_of(ops[key]) for key in expected} == expected


def test_speculation() -> None:
    ops = kernel_ops("%x: i32, %y: i32, %f: f32, %c: i1", """
        %three = arith.constant 3 : i32
        %minus = arith.constant -1 : i32
        %d3 = arith.divsi %x, %three : i32
        %dm = arith.divsi %x, %minus : i32
        %dy = arith.divsi %x, %y : i32
        %uy = arith.divui %x, %y : i32
        %u3 = arith.remui %x, %three : i32
        %rf = arith.remf %f, %f : f32
        %s = arith.addi %x, %y : i32
        %if = scf.if %c -> (i32) {
          %in = arith.divsi %x, %y : i32
          scf.yield %in : i32
        } else {
          scf.yield %x : i32
        }
        tt.return
    """)
    expected = {"d3": True, "dm": False, "dy": False, "uy": False, "u3": True, "rf": True,
                "s": True, "if": False}
    assert {key: is_speculatable(ops[key]) for key in expected} == expected
