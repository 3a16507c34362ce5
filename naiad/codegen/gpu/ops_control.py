"""GPU rules for ``scf.for``, ``scf.while``, ``scf.if``: a tensor crosses a region boundary as one
LLVM phi per element a thread holds (its layout is the same on both sides, `assign`)."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from xdsl.dialects import scf

from naiad.codegen.gpu import operand_rings
from naiad.codegen.gpu.kernel import Dist, GPUKernel, is_tensor, rule


def _flat(k: GPUKernel, value: Any, like: Any) -> list[ir.Value]:
    """The LLVM values of ``value``: a tensor in the layout of ``like``, a scalar, or what a
    backend's own kind of value (`Carried`, e.g. a tile staged in shared memory) carries."""
    held = k.env.get(value)
    if isinstance(held, Carried):
        return held.carried_values()
    if is_tensor(value):
        return k.tensor(value, k.layout_of(like)).values
    return [k.scalar(value)]


class Carried:
    """A value a backend keeps in its own form (not a `Dist` of registers) that may cross a
    region boundary: the boundary carries `carried_values` and rebuilds it with `rebuilt`."""

    def carried_values(self) -> list[ir.Value]:
        raise NotImplementedError

    def rebuilt(self, values: list[ir.Value]) -> "Carried":
        raise NotImplementedError


def _templates(k: GPUKernel, values: list) -> list:
    """For each value, its `Carried` form when it has one (what a boundary rebuilds)."""
    return [k.env.get(v) if isinstance(k.env.get(v), Carried) else None for v in values]


def _phis(k: GPUKernel, values: list[list[ir.Value]], block: Any) -> list[list[ir.Value]]:
    phis = []
    for group in values:
        row = []
        for v in group:
            phi = k.b.phi(v.type)
            phi.add_incoming(v, block)
            row.append(phi)
        phis.append(row)
    return phis


def _add_incoming(phis: list[list[ir.Value]], values: list[list[ir.Value]], block: Any) -> None:
    """The values a loop's back edge brings to its phis (`_phis` made them with the entry's)."""
    for row, group in zip(phis, values):
        for phi, v in zip(row, group):
            phi.add_incoming(v, block)


def _bind(k: GPUKernel, targets: list, values: list[list[ir.Value]], likes: list,
          templates: list | None = None) -> None:
    """Bind region arguments or results to values held in the layouts of ``likes`` (or in
    the `Carried` forms of ``templates``)."""
    for i, (target, group, like) in enumerate(zip(targets, values, likes)):
        template = templates[i] if templates is not None else None
        if template is not None:
            k.env[target] = template.rebuilt(list(group))
        elif is_tensor(target):
            k.env[target] = Dist(k.layout_of(like), tuple(target.type.get_shape()), list(group))
        else:
            k.env[target] = group[0]


def _lower_body(k: GPUKernel, block: Any) -> list:
    """Lower a region's ops except its terminator; return the terminator."""
    k.forget_coordinates()
    for op in list(block.ops)[:-1]:
        k.lower_op(op)
    return block.last_op


@rule(scf.ForOp)
def lower_for(k: GPUKernel, op: Any) -> None:
    """The shared rule of ``scf.for`` (a backend's own wraps it); the rings of its dots'
    operands entered and left (`operand_rings`)."""
    rings = operand_rings.enter_loop(k, op)
    b = k.b
    lb, ub, step = (k.scalar(v) for v in (op.lb, op.ub, op.step))
    body_block = op.body.block
    carried = [_flat(k, init, result) for init, result in zip(op.iter_args, op.results)]
    templates = _templates(k, list(op.iter_args))
    pre = b.block
    header, body, done = (b.append_basic_block(f"for.{n}") for n in ("header", "body", "done"))
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lb.type)
    iv.add_incoming(lb, pre)
    phis = _phis(k, carried, pre)
    b.cbranch(b.icmp_signed("<", iv, ub), body, done)
    b.position_at_end(body)
    k.env[body_block.args[0]] = iv
    _bind(k, list(body_block.args[1:]), phis, list(op.results), templates)
    terminator = _lower_body(k, body_block)
    yielded = [_flat(k, v, r) for v, r in zip(terminator.operands, op.results)]
    end = b.block
    _add_incoming(phis, yielded, end)
    iv.add_incoming(b.add(iv, step), end)
    b.branch(header)
    b.position_at_end(done)
    k.forget_coordinates()
    _bind(k, list(op.results), phis, list(op.results), templates)
    if rings:
        operand_rings.leave_loop(k)


@rule(scf.IfOp)
def _if(k: GPUKernel, op: Any) -> None:
    b = k.b
    cond = k.scalar(op.cond)
    then_block, else_block, merge = (b.append_basic_block(f"if.{n}") for n in ("then", "else", "merge"))
    b.cbranch(cond, then_block, else_block)
    incoming = []
    for region, llblock in ((op.true_region, then_block), (op.false_region, else_block)):
        b.position_at_end(llblock)
        values = []
        if region.blocks:
            terminator = _lower_body(k, region.block)
            values = [_flat(k, v, r) for v, r in zip(terminator.operands, op.results)]
        incoming.append((values, b.block))
        b.branch(merge)
    b.position_at_end(merge)
    k.forget_coordinates()
    if not op.results:
        return
    merged = []
    for i in range(len(op.results)):
        row = []
        for j, v in enumerate(incoming[0][0][i]):
            phi = b.phi(v.type)
            for values, block in incoming:
                phi.add_incoming(values[i][j], block)
            row.append(phi)
        merged.append(row)
    _bind(k, list(op.results), merged, list(op.results))


@rule(scf.WhileOp)
def _while(k: GPUKernel, op: Any) -> None:
    b = k.b
    before, after = op.before_region.block, op.after_region.block
    carried = [_flat(k, init, arg) for init, arg in zip(op.arguments, before.args)]
    pre = b.block
    header, body, done = (b.append_basic_block(f"while.{n}") for n in ("header", "body", "done"))
    b.branch(header)
    b.position_at_end(header)
    phis = _phis(k, carried, pre)
    _bind(k, list(before.args), phis, list(before.args))
    condition = _lower_body(k, before)
    forwarded = [_flat(k, v, r) for v, r in zip(condition.args, op.results)]
    b.cbranch(k.scalar(condition.condition), body, done)
    b.position_at_end(body)
    _bind(k, list(after.args), forwarded, list(op.results))
    terminator = _lower_body(k, after)
    yielded = [_flat(k, v, arg) for v, arg in zip(terminator.operands, before.args)]
    end = b.block
    _add_incoming(phis, yielded, end)
    b.branch(header)
    b.position_at_end(done)
    k.forget_coordinates()
    _bind(k, list(op.results), forwarded, list(op.results))
