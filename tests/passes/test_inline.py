"""Inliner and symbol DCE: calls become the callee's body (transitively, also inside
reduction regions), noinline and recursive callees stay called, locations are kept, and
private functions nobody calls any more are deleted."""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr

from naiad.ir import parse_module
from naiad.passes.inline import inline
from naiad.passes.symbol_dce import symbol_dce

from .ttir import count, ops

MODULE = """builtin.module {
  tt.func public @kernel(%x: tensor<8xf32>, %y: f32) -> (f32, f32) {
    %a = tt.call @twice(%y) : (f32) -> f32
    %r = "tt.reduce"(%x) <{axis = 0 : i32}> ({
    ^bb0(%l: f32, %k: f32):
      %s = tt.call @add(%l, %k) : (f32, f32) -> f32
      tt.reduce.return %s : f32
    }) : (tensor<8xf32>) -> f32
    %b = tt.call @opaque(%a) : (f32) -> f32
    tt.return %r, %b : f32, f32
  }
  tt.func private @twice(%v: f32) -> f32 {
    %d = tt.call @add(%v, %v) : (f32, f32) -> f32
    tt.return %d : f32
  }
  tt.func private @add(%p: f32, %q: f32) -> f32 {
    %s = arith.addf %p, %q : f32
    tt.return %s : f32
  }
  tt.func private @opaque(%v: f32) -> f32 attributes {noinline = true} {
    tt.return %v : f32
  }
  tt.func private @unused(%v: f32) -> f32 {
    tt.return %v : f32
  }
}"""


def names(mod) -> list[str]:
    return [op.sym_name.data for op in ops(mod, "tt.func")]


def test_calls_are_inlined_transitively_and_dead_functions_removed() -> None:
    mod = parse_module(MODULE)
    inline(mod)
    mod.verify()
    assert names(mod) == ["kernel", "opaque"]
    call, = ops(mod, "tt.call")
    assert call.callee.string_value() == "opaque"
    kernel = mod.ops.first
    assert count(kernel, "arith.addf") == 2
    reduce, = ops(mod, "tt.reduce")
    assert [op.name for op in reduce.combineOp.block.ops] == ["arith.addf", "tt.reduce.return"]
    twice = call.arguments[0].owner
    assert twice.name == "arith.addf" and twice.lhs is twice.rhs is kernel.args[1]


def test_inlined_ops_keep_their_source_locations() -> None:
    mod = parse_module(MODULE)
    add = next(f for f in ops(mod, "tt.func") if f.sym_name.data == "add")
    loc = FileLineColLoc(StringAttr("kernel.py"), IntAttr(7), IntAttr(3))
    add.body.block.first_op.location = loc
    inline(mod)
    assert {op.location for op in ops(mod, "arith.addf")} == {loc}


def test_recursive_functions_are_not_inlined() -> None:
    mod = parse_module("""builtin.module {
      tt.func public @k(%x: i32) -> i32 {
        %r = tt.call @f(%x) : (i32) -> i32
        tt.return %r : i32
      }
      tt.func private @f(%v: i32) -> i32 {
        %r = tt.call @g(%v) : (i32) -> i32
        tt.return %r : i32
      }
      tt.func private @g(%v: i32) -> i32 {
        %r = tt.call @f(%v) : (i32) -> i32
        tt.return %r : i32
      }
    }""")
    inline(mod)
    mod.verify()
    assert names(mod) == ["k", "f", "g"]


def test_symbol_dce_keeps_public_functions_and_what_they_reach() -> None:
    mod = parse_module(MODULE)
    symbol_dce(mod)
    assert names(mod) == ["kernel", "twice", "add", "opaque"]
