"""Reorder broadcast: elementwise work moves before splats and broadcasts, so it runs on
the scalar or the small tensor."""

from __future__ import annotations

from naiad.passes.reorder_broadcast import reorder_broadcast

from .ttir import count, module, ops, returned

PTR = "!tt.ptr<f32>"


def reordered(args: str, body: str, results: str = ""):
    mod = module(args, body, results)
    reorder_broadcast(mod)
    mod.verify()
    return mod


def test_elementwise_of_splats_becomes_a_splat_of_the_scalar_op() -> None:
    mod = reordered("%x: f32, %y: f32", """
        %a = tt.splat %x : f32 -> tensor<128xf32>
        %b = tt.splat %y : f32 -> tensor<128xf32>
        %c = arith.constant dense<2.0> : tensor<128xf32>
        %s = arith.addf %a, %b : tensor<128xf32>
        %m = arith.mulf %s, %c : tensor<128xf32>
        %e = math.exp %m : tensor<128xf32>
        %k = arith.cmpf olt, %e, %c : tensor<128xf32>
        tt.return %k : tensor<128xi1>
    """, "tensor<128xi1>")
    splat = returned(mod).owner
    assert splat.name == "tt.splat" and str(splat.src.type) == "i1"
    for name in ("arith.addf", "arith.mulf", "math.exp", "arith.cmpf"):
        assert [str(op.results[0].type) for op in ops(mod, name)] in (["f32"], ["i1"])


def test_elementwise_of_a_broadcast_and_splats_runs_before_the_broadcast() -> None:
    mod = reordered("%x: tensor<1x64xi32>, %y: i32", """
        %b = tt.broadcast %x : tensor<1x64xi32> -> tensor<32x64xi32>
        %s = tt.splat %y : i32 -> tensor<32x64xi32>
        %c = arith.constant dense<3> : tensor<32x64xi32>
        %a = arith.addi %b, %s : tensor<32x64xi32>
        %m = arith.muli %a, %c : tensor<32x64xi32>
        tt.return %m : tensor<32x64xi32>
    """, "tensor<32x64xi32>")
    broadcast = returned(mod).owner
    assert broadcast.name == "tt.broadcast"
    assert {str(op.result.type) for op in ops(mod, "arith.addi") + ops(mod, "arith.muli")} == \
        {"tensor<1x64xi32>"}


def test_addptr_of_splat_pointer_and_broadcast_offsets_moves_too() -> None:
    mod = reordered(f"%p: {PTR}, %o: tensor<32x1xi32>", f"""
        %ps = tt.splat %p : {PTR} -> tensor<32x16x{PTR}>
        %ob = tt.broadcast %o : tensor<32x1xi32> -> tensor<32x16xi32>
        %q = tt.addptr %ps, %ob : tensor<32x16x{PTR}>, tensor<32x16xi32>
        tt.return %q : tensor<32x16x{PTR}>
    """, f"tensor<32x16x{PTR}>")
    addptr, = ops(mod, "tt.addptr")
    assert str(addptr.result.type) == f"tensor<32x1x{PTR}>"


def test_two_broadcasts_and_loads_are_left_alone() -> None:
    mod = reordered(f"%x: tensor<1x64xi32>, %y: tensor<32x1xi32>, %p: tensor<32x64x{PTR}>", f"""
        %a = tt.broadcast %x : tensor<1x64xi32> -> tensor<32x64xi32>
        %b = tt.broadcast %y : tensor<32x1xi32> -> tensor<32x64xi32>
        %s = arith.addi %a, %b : tensor<32x64xi32>
        %l = tt.load %p : tensor<32x64x{PTR}>
        tt.return %s, %l : tensor<32x64xi32>, tensor<32x64xf32>
    """, "tensor<32x64xi32>, tensor<32x64xf32>")
    assert str(ops(mod, "arith.addi")[0].result.type) == "tensor<32x64xi32>"
    assert count(mod, "tt.broadcast") == 2


def test_expand_dims_of_a_broadcast_expands_first() -> None:
    mod = reordered("%x: tensor<1x8xi32>", """
        %b = tt.broadcast %x : tensor<1x8xi32> -> tensor<4x8xi32>
        %e = tt.expand_dims %b {axis = 0 : i32} : tensor<4x8xi32> -> tensor<1x4x8xi32>
        tt.return %e : tensor<1x4x8xi32>
    """, "tensor<1x4x8xi32>")
    broadcast = returned(mod).owner
    assert broadcast.name == "tt.broadcast"
    assert str(broadcast.src.type) == "tensor<1x1x8xi32>"
