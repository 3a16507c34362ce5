"""Math lowerings run on this host, for the hip backend's math tests: a lowering rule
(``lower(ctx, values)``) compiled for the host CPU as a function over arrays, and the distance
in units in the last place between two arrays."""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np


def host_function(lower: Callable, hooks: Any, lanes: int = 1, double: bool = False, arity: int = 1,
                  result: Any = None) -> Callable[..., np.ndarray]:
    """``lower`` over ``lanes`` floats (doubles) at a time, with the target ``hooks`` answering
    its calls of other math functions, as ``f(x, [y,] ...) -> out`` over arrays (``result``: the
    output dtype when it is not the input's)."""
    import llvmlite.binding as llvm
    import llvmlite.ir as ir

    from naiad.codegen import elementwise

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module()
    module.triple = llvm.get_process_triple()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * (arity + 1)), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    element = ir.DoubleType() if double else ir.FloatType()
    ty = element if lanes == 1 else ir.VectorType(element, lanes)
    ctx = elementwise.Lowering(b, hooks, lanes)
    values = [b.load(fn.args[i], typ=ty, align=4) for i in range(arity)]
    b.store(lower(ctx, values), fn.args[arity]).align = 4
    b.ret_void()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)),
                                        llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    call = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (arity + 1))(engine.get_function_address("f"))

    def run(*inputs: np.ndarray) -> np.ndarray:
        out = np.empty(len(inputs[0]), result or inputs[0].dtype)
        for i in range(0, len(out), lanes):
            call(*[x[i:].ctypes.data for x in inputs], out[i:].ctypes.data)
        return out
    run.engine = engine
    return run


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Units in the last place between two arrays of one float type, as exact Python ints (NaN
    and NaN: 0)."""
    width = got.dtype.itemsize * 8
    bits, sign = {32: np.int32, 64: np.int64}[width], 1 << (width - 1)

    def ordered(a: np.ndarray) -> list[int]:
        return [-(v & (sign - 1)) if v < 0 else v for v in (int(x) for x in a.view(bits))]
    return np.array([0 if np.isnan(g) and np.isnan(w) else abs(a - c)
                     for g, w, a, c in zip(got, want, ordered(got), ordered(want))], dtype=object)
