"""Combine: Triton's TTIR peepholes, with the conditions under which each is exact."""

from __future__ import annotations

from naiad.passes.combine import combine
from naiad.passes.constants import splat_value

from .ttir import count, module, ops, returned

PTR = "!tt.ptr<f32>"
T = "tensor<16x16xf32>"


def combined(args: str, body: str, results: str = ""):
    mod = module(args, body, results)
    combine(mod)
    mod.verify()
    return mod


def test_add_of_a_dot_with_zero_accumulator_accumulates_in_the_dot() -> None:
    mod = combined(f"%a: {T}, %b: {T}, %d: {T}", f"""
        %z = arith.constant dense<0.0> : {T}
        %p = tt.dot %a, %b, %z : {T} * {T} -> {T}
        %s = arith.addf %d, %p : {T}
        %q = tt.dot %a, %b, %z : {T} * {T} -> {T}
        %t = arith.addf %q, %d : {T}
        tt.return %s, %t : {T}, {T}
    """, f"{T}, {T}")
    assert count(mod, "arith.addf") == 0 and count(mod, "tt.dot") == 2
    d = mod.ops.first.args[2]
    assert all(dot.c is d for dot in ops(mod, "tt.dot"))


def test_integer_dot_add_combines_too() -> None:
    ti = "tensor<16x16xi8>"
    acc = "tensor<16x16xi32>"
    mod = combined(f"%a: {ti}, %b: {ti}, %d: {acc}", f"""
        %z = arith.constant 0 : i32
        %zs = tt.splat %z : i32 -> {acc}
        %p = tt.dot %a, %b, %zs : {ti} * {ti} -> {acc}
        %s = arith.addi %p, %d : {acc}
        tt.return %s : {acc}
    """, acc)
    assert count(mod, "arith.addi") == 0 and returned(mod).owner.c is mod.ops.first.args[2]


def test_dot_add_is_left_alone_when_the_dot_has_other_users_or_a_nonzero_accumulator() -> None:
    mod = combined(f"%a: {T}, %b: {T}, %d: {T}", f"""
        %z = arith.constant dense<0.0> : {T}
        %p = tt.dot %a, %b, %z : {T} * {T} -> {T}
        %s = arith.addf %d, %p : {T}
        %q = tt.dot %a, %b, %d : {T} * {T} -> {T}
        %t = arith.addf %q, %d : {T}
        tt.return %s, %p, %t : {T}, {T}, {T}
    """, f"{T}, {T}, {T}")
    assert count(mod, "arith.addf") == 2


def test_dot_add_keeps_a_dot_with_imprecise_accumulation() -> None:
    t8 = "tensor<16x16xf8E4M3FN>"
    mod = combined(f"%a: {t8}, %b: {t8}, %d: {T}", f"""
        %z = arith.constant dense<0.0> : {T}
        %p = tt.dot %a, %b, %z {{maxNumImpreciseAcc = 32 : i32}} : {t8} * {t8} -> {T}
        %s = arith.addf %d, %p : {T}
        tt.return %s : {T}
    """, T)
    assert count(mod, "arith.addf") == 1


def test_addptr_chains_with_64_bit_offsets_merge() -> None:
    mod = combined(f"%p: {PTR}, %a: i64, %b: i64", f"""
        %q = tt.addptr %p, %a : {PTR}, i64
        %r = tt.addptr %q, %b : {PTR}, i64
        tt.return %r : {PTR}
    """, PTR)
    outer = returned(mod).owner
    assert outer.ptr is mod.ops.first.args[0]
    assert outer.offset.owner.name == "arith.addi"


def test_addptr_chains_with_32_bit_offsets_merge_only_when_the_sum_fits() -> None:
    mod = combined(f"%p: {PTR}, %a: i32", f"""
        %c1 = arith.constant 1 : i32
        %c2 = arith.constant 2 : i32
        %max = arith.constant 2147483647 : i32
        %q = tt.addptr %p, %c1 : {PTR}, i32
        %r = tt.addptr %q, %c2 : {PTR}, i32
        %s = tt.addptr %p, %max : {PTR}, i32
        %t = tt.addptr %s, %c1 : {PTR}, i32
        %u = tt.addptr %p, %a : {PTR}, i32
        %v = tt.addptr %u, %c1 : {PTR}, i32
        tt.return %r, %t, %v : {PTR}, {PTR}, {PTR}
    """, f"{PTR}, {PTR}, {PTR}")
    fits, overflows, unknown = (returned(mod, i).owner for i in range(3))
    assert fits.ptr is mod.ops.first.args[0]
    assert overflows.ptr.owner.name == "tt.addptr"
    assert unknown.ptr.owner.name == "tt.addptr"


def test_select_of_a_load_masked_by_the_same_condition_becomes_the_load() -> None:
    mod = combined(f"%p: tensor<8x{PTR}>, %c: i1, %o: tensor<8xf32>", f"""
        %m = tt.splat %c : i1 -> tensor<8xi1>
        %l = tt.load %p, %m : tensor<8x{PTR}>
        %s = arith.select %c, %l, %o : tensor<8xf32>
        tt.return %s : tensor<8xf32>
    """, "tensor<8xf32>")
    assert count(mod, "arith.select") == 0 and count(mod, "tt.load") == 1
    assert returned(mod).owner.other is mod.ops.first.args[2]


def test_select_of_a_load_with_another_mask_or_user_is_kept() -> None:
    mod = combined(f"%p: tensor<8x{PTR}>, %c: i1, %m: tensor<8xi1>, %o: tensor<8xf32>", f"""
        %l = tt.load %p, %m : tensor<8x{PTR}>
        %s = arith.select %c, %l, %o : tensor<8xf32>
        %ms = tt.splat %c : i1 -> tensor<8xi1>
        %k = tt.load %p, %ms : tensor<8x{PTR}>
        %t = arith.select %c, %k, %o : tensor<8xf32>
        tt.return %s, %t, %k : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
    """, "tensor<8xf32>, tensor<8xf32>, tensor<8xf32>")
    assert count(mod, "arith.select") == 2 and count(mod, "tt.load") == 2


def test_broadcast_of_a_splat_is_a_splat() -> None:
    mod = combined("%x: f32", """
        %s = tt.splat %x : f32 -> tensor<1x16xf32>
        %b = tt.broadcast %s : tensor<1x16xf32> -> tensor<8x16xf32>
        tt.return %b : tensor<8x16xf32>
    """, "tensor<8x16xf32>")
    assert count(mod, "tt.broadcast") == 0 and returned(mod).owner.name == "tt.splat"


def test_sum_of_broadcast_products_becomes_a_dot() -> None:
    mod = combined("%x: tensor<32x16xf32>, %y: tensor<16x64xf32>", """
        %a = tt.expand_dims %x {axis = 2 : i32} : tensor<32x16xf32> -> tensor<32x16x1xf32>
        %b = tt.expand_dims %y {axis = 0 : i32} : tensor<16x64xf32> -> tensor<1x16x64xf32>
        %ab = tt.broadcast %a : tensor<32x16x1xf32> -> tensor<32x16x64xf32>
        %bb = tt.broadcast %b : tensor<1x16x64xf32> -> tensor<32x16x64xf32>
        %m = arith.mulf %ab, %bb : tensor<32x16x64xf32>
        %r = "tt.reduce"(%m) <{axis = 1 : i32}> ({
        ^bb0(%l: f32, %k: f32):
          %s = arith.addf %l, %k : f32
          tt.reduce.return %s : f32
        }) : (tensor<32x16x64xf32>) -> tensor<32x64xf32>
        tt.return %r : tensor<32x64xf32>
    """, "tensor<32x64xf32>")
    dot = returned(mod).owner
    assert dot.name == "tt.dot" and splat_value(dot.c) == 0.0
    assert count(mod, "tt.reduce") == count(mod, "arith.mulf") == 0
