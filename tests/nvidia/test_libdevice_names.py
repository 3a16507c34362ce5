"""libdevice on the cuda backend without a GPU: every function of
`naiad.language.extra.libdevice` resolves to a function NVIDIA's libdevice defines (or to
Naiad's own IR), and the functions Inductor calls compile to PTX through ``__nv_`` calls
(``cyl_bessel_i0`` -> ``__nv_cyl_bessel_i0f``), not through the CPU's implementations."""

from __future__ import annotations

import re

import llvmlite.ir as ir
import pytest

import naiad
import naiad.language as tl
from naiad.codegen import llvm_types as lt
from naiad.codegen.elementwise import Lowering
from naiad.codegen.hooks import NAIAD_FUNCTIONS
from naiad.language.extra import libdevice

from .conftest import compile_cuda, libdevice_path, needs_libdevice

pytestmark = pytest.mark.shipped_backends

_LLVM_TYPES = {tl.float32: lt.F32, tl.float64: lt.F64, tl.int32: lt.I32, tl.int64: lt.I64,
               tl.uint32: lt.I32, tl.uint64: lt.I64}


def _libdevice_functions() -> set[str]:
    import llvmlite.binding as llvm

    with open(libdevice_path(), "rb") as f:
        return {fn.name for fn in llvm.parse_bitcode(f.read()).functions}


def _called_symbol(symbol: str, arg_types: tuple, result) -> str | None:
    """The function the cuda hooks call for ``symbol`` (None: Naiad's own IR computes it)."""
    from naiad.backends.cuda.hooks import NVPTXHooks

    hooks, called = NVPTXHooks(arch=90), []

    def record(ctx, name, args, ret):
        called.append(name)
        return ir.Constant(ret, None)

    hooks.library_call = record
    module = ir.Module()
    params = [_LLVM_TYPES[t] for t in arg_types]
    fn = ir.Function(module, ir.FunctionType(lt.VOID, params), "probe")
    builder = ir.IRBuilder(fn.append_basic_block())
    hooks.call_math(Lowering(builder, hooks, 1), symbol, list(fn.args), _LLVM_TYPES[result])
    return called[0] if called else None


@needs_libdevice
def test_every_libdevice_function_resolves_to_an_nv_function():
    defined = _libdevice_functions()
    unresolved = []
    for name, table in libdevice.SIGNATURES.items():
        for arg_types, (symbol, result) in table.items():
            called = _called_symbol(symbol, arg_types, result)
            if called is None:
                assert symbol in NAIAD_FUNCTIONS or not symbol.startswith("__naiad_"), symbol
            elif called not in defined:
                unresolved.append(f"libdevice.{name}{arg_types} -> {called}")
    assert not unresolved


@naiad.jit
def inductor_math(x, out_ptr, i_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    r = libdevice.cyl_bessel_i0(v) + libdevice.cyl_bessel_i1(v) + libdevice.erfinv(v * 0.5)
    r += libdevice.erfcx(v) + libdevice.normcdfinv(v * 0.25 + 0.5) + libdevice.add_rz(v, v)
    tl.store(out_ptr + offs, r)
    tl.store(i_ptr + offs, libdevice.llrint(v))


@needs_libdevice
@pytest.mark.parametrize("dtype,suffix", [("fp32", "f"), ("fp64", "")])
def test_inductor_functions_compile_to_ptx_through_libdevice(monkeypatch, dtype, suffix):
    from naiad.backends.cuda import target

    declared = []
    link = target.link_libdevice

    def spy(llir, kernel):
        declared.extend(re.findall(r"^declare [^\n]*@\"?(__nv_\w+)", llir, re.M))
        return link(llir, kernel)

    monkeypatch.setattr(target, "link_libdevice", spy)
    monkeypatch.setattr(naiad.knobs.compilation, "always_compile", True)
    signature = {"x": f"*{dtype}", "out_ptr": f"*{dtype}", "i_ptr": "*i64"}
    ptx = compile_cuda(inductor_math, signature, {"BLOCK": 128}).asm["ptx"]
    add = f"__nv_fadd_rz" if suffix else "__nv_dadd_rz"
    expected = {f"__nv_cyl_bessel_i0{suffix}", f"__nv_cyl_bessel_i1{suffix}", f"__nv_erfinv{suffix}",
                f"__nv_erfcx{suffix}", f"__nv_normcdfinv{suffix}", f"__nv_llrint{suffix}", add}
    assert expected <= set(declared), sorted(declared)
    assert not re.search(r"\.extern\s+\.func", ptx), "a libdevice function is left unresolved"
