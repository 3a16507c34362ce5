"""``tt.dot`` on a GPU without tensor cores (the FMA path): both operands go to shared memory
(a ring's slot in loops where the backend plans one, `operand_rings`), then each thread
accumulates its own output elements over K in a loop (batched 3-D dots too).  Correct for every
operand type; tensor-core (mma/wgmma) lowering is a later step."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen import elementwise, llvm_types as lt
from naiad.codegen.gpu import operand_rings
from naiad.codegen.gpu.kernel import GPUKernel, numel, rule, shape_of
from naiad.ir import tt


@rule(tt.DotOp)
def fma_dot(k: GPUKernel, op: Any) -> None:
    """The shared rule: every dot, on FMA (a backend's tensor-core rule falls back to it)."""
    result = op.results[0]
    a_shape, b_shape = shape_of(op.a), shape_of(op.b)
    batched = len(a_shape) == 3
    m, kk = a_shape[-2:]
    n = b_shape[-1]
    layout = k.layout_of(result)
    acc = k.tensor(op.c, layout).values
    a, b_ = k.tensor(op.a), k.tensor(op.b)
    a_store, b_store = lt.scalar(op.a.type), lt.scalar(op.b.type)

    def write(bases: list[ir.Value]) -> None:
        for dist, shape, store, base in ((a, a_shape, a_store, bases[0]), (b_, b_shape, b_store, bases[1])):
            for value, coords in zip(dist.values, k.coordinates(dist.layout, shape)):
                k.b.store(value, k.shared_pointer(k.linear(coords, shape), store, base=base))
    a_base, b_base = operand_rings.stage(k, op, fma_staging(k, op).sizes, write)
    integer = isinstance(lt.scalar(result.type), ir.IntType)
    ctx = k.ctx()
    out_type = lt.scalar(result.type)
    compute = lt.I32 if integer else lt.F32
    if out_type in (lt.F64, lt.I64):
        compute = out_type
    coords = k.coordinates(layout, shape_of(result))
    start = [elementwise.widened(ctx, v, result.type, compute) for v in acc]
    b = k.b

    def accumulate(index: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
        updated = []
        for total, c in zip(sums, coords):
            batch, i, j = c if batched else (ir.Constant(lt.I32, 0), *c)
            row = b.add(b.mul(batch, ir.Constant(lt.I32, m)), i)              # of A: batch * M + i
            depth = b.add(b.mul(batch, ir.Constant(lt.I32, kk)), index)       # of B: batch * K + k
            x = b.load(k.shared_pointer(b.add(b.mul(row, ir.Constant(lt.I32, kk)), index), a_store,
                                        base=a_base), typ=a_store)
            y = b.load(k.shared_pointer(b.add(b.mul(depth, ir.Constant(lt.I32, n)), j), b_store,
                                        base=b_base), typ=b_store)
            x, y = elementwise.widened(ctx, x, op.a.type, compute), elementwise.widened(ctx, y, op.b.type, compute)
            updated.append(b.add(b.mul(x, y), total) if integer else _fma(k, x, y, total))
        return updated

    sums = k.carried_loop("dot", 0, lambda index: b.icmp_unsigned("<", index, ir.Constant(lt.I32, kk)),
                          start, accumulate)
    k.define(result, [elementwise.narrowed(ctx, s, result.type) for s in sums])


def fma_staging(k: GPUKernel, op: Any) -> operand_rings.Staging:
    """What `fma_dot` stages: both operands whole, row-major (for `operand_rings.plan`)."""
    a_shape, b_shape = shape_of(op.a), shape_of(op.b)
    return operand_rings.Staging((numel(a_shape) * lt.byte_size(lt.scalar(op.a.type)),
                                  numel(b_shape) * lt.byte_size(lt.scalar(op.b.type))))


def _fma(k: GPUKernel, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    fn = lt.intrinsic(k.llmod, "fma", [x.type], x.type, [x.type] * 3)
    return k.b.call(fn, [x, y, z])
