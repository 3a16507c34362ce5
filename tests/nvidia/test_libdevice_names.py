"""libdevice on the cuda backend without a GPU: every function of
`naiad.language.extra.libdevice` resolves to a function NVIDIA's libdevice defines (or to
Naiad's own IR)."""

from __future__ import annotations


import llvmlite.ir as ir
import pytest

import naiad.language as tl
from naiad.codegen import llvm_types as lt
from naiad.codegen.elementwise import Lowering
from naiad.codegen.hooks import NAIAD_FUNCTIONS
from naiad.language.extra import libdevice

from .conftest import libdevice_path, needs_libdevice

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
