"""Loop unrolling: loops asking for it (tt.loop_unroll_factor) compute the same values,
checked by running the IR before and after on many bounds; remainder loops, full unrolling
and untouched loops have the expected shape."""

from __future__ import annotations

import itertools

from xdsl.dialects import scf

from naiad.ir import arith
from naiad.passes.canonicalize import canonicalize
from naiad.passes.folding import fold_int_binary
from naiad.passes.loop_unroll import loop_unroll

from .ttir import count, module, ops

LOOP = """
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c3 = arith.constant 3 : i32
    %r, %n = scf.for %i = {lb} to {ub} step {step}
        iter_args(%acc = %c0, %k = %c0) -> (i32, i32) : i32 {{
      %m = arith.muli %acc, %c3 : i32
      %a = arith.addi %m, %i : i32
      %k1 = arith.addi %k, %c1 : i32
      scf.yield %a, %k1 : i32, i32
    }} {attrs}
    tt.return %r, %n : i32, i32
"""


def loop_module(factor: int | None, lb="%lb", ub="%ub", step="%step"):
    attrs = "" if factor is None else f"{{tt.loop_unroll_factor = {factor} : i32}}"
    return module("%lb: i32, %ub: i32, %step: i32",
                  LOOP.format(lb=lb, ub=ub, step=step, attrs=attrs), "i32, i32")


def run(mod, *args: int) -> list[int]:
    """Interpret the kernel of `mod` on i32 arguments (the ops the loops above use)."""
    func = mod.ops.first
    return _run_block(func.body.block, dict(zip(func.args, args)))


def _run_block(block, env) -> list[int]:
    for op in block.ops:
        if op.name in ("tt.return", "scf.yield"):
            return [env[v] for v in op.operands]
        if isinstance(op, arith.ConstantOp):
            env[op.result] = op.value.value.data
        elif isinstance(op, scf.ForOp):
            lb, ub, step = (env[v] for v in (op.lb, op.ub, op.step))
            values = [env[v] for v in op.iter_args]
            for i in range(lb, ub, step):
                values = _run_block(op.body.block, env | dict(zip(op.body.block.args,
                                                                  [i, *values])))
            env.update(zip(op.res, values))
        else:
            a, b = (env[v] for v in op.operands)
            env[op.results[0]] = fold_int_binary(type(op), a, b, 32)
    raise AssertionError("block without terminator")


BOUNDS = [(0, 10, 1), (0, 7, 2), (3, 4, 1), (5, 5, 1), (9, 2, 1), (-6, 11, 3), (0, 1, 5),
          (1, 100, 7)]


def test_unrolled_loops_compute_what_the_original_computes() -> None:
    original = loop_module(None)
    for factor in (2, 3, 4, 8):
        mod = loop_module(factor)
        loop_unroll(mod)
        mod.verify()
        assert count(mod, "scf.for") == 2
        epilogue = ops(mod, "scf.for")[1]
        assert epilogue.attributes["tt.num_stages"].value.data == 1
        for bounds in BOUNDS:
            assert run(mod, *bounds) == run(original, *bounds), (factor, bounds)


def test_constant_bounds_unroll_with_or_without_remainder_or_fully() -> None:
    for (lb, ub, step), factor in itertools.product([(0, 12, 1), (2, 13, 3), (0, 3, 1)],
                                                    (2, 3, 4)):
        bounds = {"lb": f"%b{lb}", "ub": f"%b{ub}", "step": f"%b{step}"}
        text = LOOP.format(attrs=f"{{tt.loop_unroll_factor = {factor} : i32}}", **bounds)
        constants = "".join(f"%b{v} = arith.constant {v} : i32\n"
                            for v in sorted({lb, ub, step}))
        mod = module("", constants + text, "i32, i32")
        expected = run(mod)
        loop_unroll(mod)
        trips = len(range(lb, ub, step))
        loops = 0 if trips <= factor else 1 if trips % factor == 0 else 2
        assert count(mod, "scf.for") == loops, (lb, ub, step, factor)
        canonicalize(mod)  # folds the bounds; loops of zero or one trip disappear
        mod.verify()
        if trips > factor:
            loops = (trips // factor > 1) + (trips % factor > 1)
        assert count(mod, "scf.for") == loops, (lb, ub, step, factor)
        assert run(mod) == expected


def test_loops_without_the_attribute_or_with_factor_one_are_untouched() -> None:
    for factor in (None, 1):
        mod = loop_module(factor)
        loop_unroll(mod)
        loop, = ops(mod, "scf.for")
        assert len(loop.body.block.ops) == 4


def test_nested_loops_unroll() -> None:
    mod = module("%n: i32", """
        %c0 = arith.constant 0 : i32
        %c1 = arith.constant 1 : i32
        %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %c0) -> (i32) : i32 {
          %s = scf.for %j = %c0 to %i step %c1 iter_args(%b = %acc) -> (i32) : i32 {
            %t = arith.addi %b, %j : i32
            scf.yield %t : i32
          } {tt.loop_unroll_factor = 2 : i32}
          %u = arith.muli %s, %i : i32
          scf.yield %u : i32
        } {tt.loop_unroll_factor = 3 : i32}
        tt.return %r : i32
    """, "i32")
    original = [run(mod, n) for n in range(8)]
    loop_unroll(mod)
    mod.verify()
    assert [run(mod, n) for n in range(8)] == original
    assert not any("tt.loop_unroll_factor" in op.attributes for op in ops(mod, "scf.for"))
