"""Naiad's own ``erff``, ``tanhf`` and ``expm1f`` (`naiad.codegen.mathlib.without_libm`), which
the hip backend uses for want of a device math library: the same IR compiled for this host and
run against SciPy / numpy in double precision, over random and edge values, one lane and four."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

special = pytest.importorskip("scipy.special")

REFERENCES = {"erff": special.erf, "tanhf": np.tanh, "expm1f": np.expm1}
MAX_ULPS = 4


def _compiled(name: str, lanes: int):
    """The function over ``lanes`` floats, as a host function ``f(float *in, float *out)``."""
    import llvmlite.binding as llvm
    import llvmlite.ir as ir

    from naiad.codegen import elementwise
    from naiad.codegen.hooks import TargetHooks
    from naiad.codegen.mathlib import without_libm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    module = ir.Module()
    module.triple = llvm.get_process_triple()
    pointer = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [pointer, pointer]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    ty = ir.FloatType() if lanes == 1 else ir.VectorType(ir.FloatType(), lanes)
    ctx = elementwise.Lowering(b, TargetHooks(), lanes)
    b.store(without_libm.FUNCTIONS[name](ctx, [b.load(fn.args[0], typ=ty)]), fn.args[1])
    b.ret_void()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)),
                                        llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("f"))

    def run(xs: np.ndarray) -> np.ndarray:
        out = np.empty_like(xs)
        for i in range(0, len(xs), lanes):
            call(xs[i:].ctypes.data, out[i:].ctypes.data)
        return out
    run.engine = engine
    return run


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    def ordered(a: np.ndarray) -> np.ndarray:
        bits = a.view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)
    return np.abs(ordered(got) - ordered(want))


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    tiny = 10.0 ** rng.uniform(-40, 2, 4000) * rng.choice([-1.0, 1.0], 4000)
    edges = [0.0, -0.0, 1e-45, -1e-45, 1e-38, 0.84375, -0.84375, 4.0, -4.0, 9.0, -9.0, 88.0, 88.7,
             89.0, -87.0, -104.0, 1e30, -1e30, np.inf, -np.inf]
    xs = np.concatenate([rng.uniform(-10, 10, 8000), rng.uniform(-1, 1, 8000), tiny, edges])
    return xs.astype(np.float32)[: len(xs) // 4 * 4]


@pytest.mark.parametrize("lanes", [1, 4])
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_within_a_few_ulps_of_the_double_precision_result(name, lanes):
    xs = _inputs()
    got = _compiled(name, lanes)(xs)
    with np.errstate(over="ignore"):
        want = REFERENCES[name](xs.astype(np.float64)).astype(np.float32)
    ulps = _ulps(got, want)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= MAX_ULPS, f"{name}({xs[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_nan_gives_nan(name):
    assert np.isnan(_compiled(name, 1)(np.array([np.nan], np.float32))[0])
