"""loop-carried-pointers: a pointer tensor that an scf.for or scf.while advances by a
loop-invariant offset becomes an i64 offset carried by the loop (a scalar when the offset is
one number splatted, else a tensor), and the pointers inside and after the loop are
``tt.addptr`` of the loop-invariant initial pointers; anything else is left alone."""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType, i64

from naiad.ir import tt
from naiad.passes import TTIR_PIPELINE, get_pass, registered_passes
from naiad.passes.loop_pointers import loop_carried_pointers

from .ttir import module, ops

P = "!tt.ptr<f32>"
PTRS = f"tensor<8x{P}>"
ARGS = f"%p: {P}, %n: i32, %stride: i32"


def rewritten(args: str, body: str):
    mod = module(args, body)
    assert loop_carried_pointers(mod)
    mod.verify()
    return mod


def _loop_over(step: str, ty: str = "i32", yielded: str = "%next", advance: str = "") -> str:
    """A kernel summing 8-element rows in an scf.for whose pointers advance by ``%step`` (of
    element type `ty`): `step` defines it in front of the loop, or `advance` in the body."""
    return f"""
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %zero = arith.constant dense<0.000000e+00> : tensor<8xf32>
        %r = tt.make_range {{end = 8 : i32, start = 0 : i32}} : tensor<8xi32>
        %s = tt.splat %p : {P} -> {PTRS}
        %init = tt.addptr %s, %r : {PTRS}, tensor<8xi32>
        {step}
        %res, %sum = scf.for %i = %c0 to %n step %c1 iter_args(%ptrs = %init, %acc = %zero) -> ({PTRS}, tensor<8xf32>) : i32 {{
          %x = tt.load %ptrs : {PTRS}
          %a = arith.addf %acc, %x : tensor<8xf32>
          {advance}
          %next = tt.addptr %ptrs, %step : {PTRS}, tensor<8x{ty}>
          scf.yield {yielded}, %a : {PTRS}, tensor<8xf32>
        }}
        tt.store %res, %sum : {PTRS}
        tt.return
    """


def _from_initial_pointers(ptr, init) -> object:
    """The offset added to `init` when `ptr` is ``tt.addptr(init, offset)``."""
    op = ptr.owner
    assert isinstance(op, tt.AddPtrOp) and op.ptr is init
    return op.offset


def test_scalar_step_becomes_a_carried_i64_offset() -> None:
    body = _loop_over("%step = tt.splat %stride : i32 -> tensor<8xi32>")
    mod = rewritten(ARGS, body)
    loop = ops(mod, "scf.for")[0]
    init = ops(mod, "tt.addptr")[0].result
    assert [str(t) for t in loop.result_types] == ["i64", "tensor<8xf32>"]
    offset = loop.body.block.args[1]
    load = ops(mod, "tt.load")[0]
    assert load.ptr.owner.parent_op() is loop
    splat = _from_initial_pointers(load.ptr, init).owner
    assert isinstance(splat, tt.SplatOp) and splat.src is offset
    following = loop.body.block.last_op.operands[0].owner
    assert following.name == "arith.addi" and following.lhs is offset
    assert following.rhs.owner.name == "arith.extsi"         # the i32 stride, widened once
    assert not loop.is_ancestor(following.rhs.owner)
    store = ops(mod, "tt.store")[0]
    assert _from_initial_pointers(store.ptr, init).owner.src is loop.results[0]


def test_constant_step_and_shape_ops_of_a_splat() -> None:
    body = _loop_over("%step = arith.constant dense<16> : tensor<8xi32>")
    mod = rewritten(ARGS, body)
    following = ops(mod, "scf.for")[0].body.block.last_op.operands[0].owner
    assert following.rhs.owner.value.value.data == 16 and following.rhs.type == i64

    body = _loop_over("""%s1 = tt.splat %stride : i32 -> tensor<1xi32>
        %e = tt.reshape %s1 : tensor<1xi32> -> tensor<1x1xi32>
        %b = tt.broadcast %e : tensor<1x1xi32> -> tensor<1x8xi32>
        %step = tt.reshape %b : tensor<1x8xi32> -> tensor<8xi32>""")
    mod = rewritten(ARGS, body)
    assert str(ops(mod, "scf.for")[0].result_types[0]) == "i64"


def test_i64_step_is_not_widened() -> None:
    body = _loop_over("""%wide = arith.extsi %stride : i32 to i64
        %step = tt.splat %wide : i64 -> tensor<8xi64>""", ty="i64")
    mod = rewritten(ARGS, body)
    following = ops(mod, "scf.for")[0].body.block.last_op.operands[0].owner
    (wide,) = ops(mod, "arith.extsi")
    assert following.rhs is wide.result


def test_invariant_tensor_step_becomes_a_carried_offset_tensor() -> None:
    body = _loop_over("""%st = tt.splat %stride : i32 -> tensor<8xi32>
        %step = arith.muli %r, %st : tensor<8xi32>""")
    mod = rewritten(ARGS, body)
    loop = ops(mod, "scf.for")[0]
    assert loop.result_types[0] == TensorType(i64, [8])
    assert loop.iter_args[0].owner.name == "arith.constant"            # zeros
    init = ops(mod, "tt.addptr")[0].result
    assert _from_initial_pointers(ops(mod, "tt.load")[0].ptr, init) is loop.body.block.args[1]


def test_steps_that_change_in_the_loop_are_left_alone() -> None:
    body = _loop_over("", advance="%step = tt.splat %i : i32 -> tensor<8xi32>")
    mod = module(ARGS, body)
    assert not loop_carried_pointers(mod)

    body = _loop_over("%step = tt.splat %stride : i32 -> tensor<8xi32>",
                      yielded="%init")        # reset, not advanced
    mod = module(ARGS, body)
    assert not loop_carried_pointers(mod)


def test_while_loop() -> None:
    mod = rewritten(ARGS, f"""
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %r = tt.make_range {{end = 8 : i32, start = 0 : i32}} : tensor<8xi32>
        %s = tt.splat %p : {P} -> {PTRS}
        %init = tt.addptr %s, %r : {PTRS}, tensor<8xi32>
        %step = tt.splat %stride : i32 -> tensor<8xi32>
        %k, %res = scf.while (%row = %c0, %ptrs = %init) : (i32, {PTRS}) -> (i32, {PTRS}) {{
          %more = arith.cmpi slt, %row, %n : i32
          scf.condition(%more) %row, %ptrs : i32, {PTRS}
        }} do {{
        ^bb0(%row2: i32, %ptrs2: {PTRS}):
          %x = tt.load %ptrs2 : {PTRS}
          %y = arith.addf %x, %x : tensor<8xf32>
          tt.store %ptrs2, %y : {PTRS}
          %next = tt.addptr %ptrs2, %step : {PTRS}, tensor<8xi32>
          %row3 = arith.addi %row2, %c1 : i32
          scf.yield %row3, %next : i32, {PTRS}
        }}
        %last = tt.load %res : {PTRS}
        tt.store %res, %last : {PTRS}
        tt.return
    """)
    loop = ops(mod, "scf.while")[0]
    init = ops(mod, "tt.addptr")[0].result
    assert [str(t) for t in loop.result_types] == ["i32", "i64"]
    assert [str(t) for t in loop.before_region.block.arg_types] == ["i32", "i64"]
    after = loop.after_region.block
    assert [str(t) for t in after.arg_types] == ["i32", "i64"]
    inside, outside = ops(mod, "tt.load")
    assert _from_initial_pointers(inside.ptr, init).owner.src is after.args[1]
    assert _from_initial_pointers(outside.ptr, init).owner.src is loop.results[1]
    following = after.last_op.operands[1].owner
    assert following.name == "arith.addi" and following.lhs is after.args[1]


def test_registered_but_not_in_the_shared_pipeline() -> None:
    assert "loop-carried-pointers" in registered_passes()
    assert "loop-carried-pointers" not in TTIR_PIPELINE
    mod = module(ARGS, _loop_over("%step = tt.splat %stride : i32 -> tensor<8xi32>"))
    get_pass("loop-carried-pointers")(mod)
    assert str(ops(mod, "scf.for")[0].result_types[0]) == "i64"
