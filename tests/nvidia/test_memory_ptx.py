"""Global-memory ops of the cuda backend as PTX: atomics with PTX's memory semantics and scopes
(``atom.global.gpu.acq_rel.add.f32``), cache modifiers and eviction policies of loads and stores
(``ld.global.cg.v4.b32``, ``st.global.L1::evict_first``), ``tl.multiple_of`` /
``tl.max_contiguous`` hints giving 128-bit accesses, and ``tl.atomic_poll``.

The compile tests run anywhere (sm_90 PTX, and a cubin where ptxas is found: ptxas accepting
every instruction is part of the check); the ``gpu`` tests run the same kernels against torch.
"""

import re

import pytest

import naiad
import naiad.language as tl

from .conftest import compile_cuda, needs_ptxas, ptxas_path

try:
    import torch
except ImportError:          # the compile tests need no torch
    torch = None

pytestmark = pytest.mark.shipped_backends


def _aligned(*names):
    """``tt.divisibility`` 16 for these parameters, as a launch with aligned tensors gives."""
    return {name: [["tt.divisibility", 16]] for name in names}


def _check_binary(kernel):
    if ptxas_path() is not None:
        assert kernel.asm["cubin"][:4] == b"\x7fELF"


# == atomics =======================================================================================
@naiad.jit
def rmw_kernel(z_ptr, x_ptr, old_ptr, OP: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr,
               BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    m = offs < BLOCK - 3                       # masked-off elements stay untouched
    if OP == "add":
        old = tl.atomic_add(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "max":
        old = tl.atomic_max(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "min":
        old = tl.atomic_min(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "and":
        old = tl.atomic_and(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "or":
        old = tl.atomic_or(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "xor":
        old = tl.atomic_xor(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    else:
        old = tl.atomic_xchg(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    tl.store(old_ptr + offs, old, mask=m)


#: Triton type -> the atomic ops the frontend takes on it.
_INTS = ["i32", "u32", "i64", "u64"]
RMW_CASES = ([("add", t) for t in _INTS + ["fp16", "bf16", "fp32", "fp64"]]
             + [(op, t) for op in ("max", "min") for t in _INTS + ["fp32", "fp64"]]
             + [(op, t) for op in ("and", "or", "xor") for t in _INTS]
             + [("xchg", t) for t in ("i32", "i64", "fp32", "fp64")])

#: (op, Triton type) -> the PTX operation and type the atom must have.
_PTX_RMW = {"add": {"i32": "add.u32", "u32": "add.u32", "i64": "add.u64", "u64": "add.u64",
                    "fp16": "add.noftz.f16", "bf16": "add.noftz.bf16", "fp32": "add.f32",
                    "fp64": "add.f64"},
            "max": {"i32": "max.s32", "u32": "max.u32", "i64": "max.s64", "u64": "max.u64",
                    "fp32": "max.s32", "fp64": "max.s64"},
            "min": {"i32": "min.s32", "u32": "min.u32", "i64": "min.s64", "u64": "min.u64",
                    "fp32": "min.s32", "fp64": "min.s64"},
            "xchg": {"i32": "exch.b32", "i64": "exch.b64", "fp32": "exch.b32", "fp64": "exch.b64"}}


def _rmw(op, dtype, sem="acq_rel", scope="gpu"):
    return compile_cuda(rmw_kernel, {"z_ptr": "*" + dtype, "x_ptr": "*" + dtype, "old_ptr": "*" + dtype},
                        {"OP": op, "SEM": sem, "SCOPE": scope, "BLOCK": 128})


@needs_ptxas
@pytest.mark.parametrize("op, dtype", RMW_CASES)
def test_atomic_rmw_is_ptx_atom_for_every_op_and_type(op, dtype):
    """Every atomic the frontend makes is one ``atom.global.gpu.acq_rel.<op>.<type>`` that ptxas
    takes (bf16 add included: sm_90 has it); float max/min are integer atomics on the bits."""
    kernel = _rmw(op, dtype)
    ptx = kernel.asm["ptx"]
    bits = dtype[-2:] if dtype[-2:] in ("32", "64") else "16"
    expected = _PTX_RMW.get(op, {}).get(dtype, f"{op}.b{bits}")
    assert f"atom.global.gpu.acq_rel.{expected} " in ptx
    float_minmax = op in ("max", "min") and dtype.startswith("fp")
    if float_minmax:            # the negative values: unsigned min for max, max for min
        other = {"max": "min", "min": "max"}[op]
        assert f"atom.global.gpu.acq_rel.{other}.u{bits} " in ptx
    assert "atom.global.gpu.acq_rel" in ptx and "atom.acq_rel" not in ptx
    _check_binary(kernel)


@needs_ptxas
@pytest.mark.parametrize("sem", ["relaxed", "acquire", "release", "acq_rel"])
@pytest.mark.parametrize("scope", ["gpu", "cta", "sys"])
def test_atomic_rmw_takes_the_semantics_and_scope(sem, scope):
    kernel = _rmw("add", "fp32", sem, scope)
    assert f"atom.global.{scope}.{sem}.add.f32 " in kernel.asm["ptx"]
    _check_binary(kernel)


@naiad.jit
def cas_kernel(lock_ptr, out_ptr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    old = tl.atomic_cas(lock_ptr, 0, 1, sem=SEM, scope=SCOPE)
    tl.store(out_ptr, old)


@naiad.jit
def cas_block_kernel(slots_ptr, cmp_ptr, val_ptr, out_ptr, SEM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_cas(slots_ptr + offs, tl.load(cmp_ptr + offs), tl.load(val_ptr + offs), sem=SEM)
    tl.store(out_ptr + offs, old)


@needs_ptxas
@pytest.mark.parametrize("dtype", ["i32", "i64"])
@pytest.mark.parametrize("sem", ["relaxed", "acquire", "release", "acq_rel"])
@pytest.mark.parametrize("scope", ["gpu", "cta", "sys"])
def test_atomic_cas_is_ptx_atom_with_the_semantics(sem, scope, dtype):
    kernel = compile_cuda(cas_kernel, {"lock_ptr": "*" + dtype, "out_ptr": "*" + dtype},
                          {"SEM": sem, "SCOPE": scope})
    ptx = kernel.asm["ptx"]
    assert f"atom.global.{sem}.{scope}.cas.b{dtype[1:]} " in ptx
    assert "atom.cas" not in ptx and "atom.global.cas" not in ptx
    _check_binary(kernel)


@needs_ptxas
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "i16", "fp32", "fp64"])
def test_atomic_cas_on_the_bits_of_any_width(dtype):
    kernel = compile_cuda(cas_block_kernel, {"slots_ptr": "*" + dtype, "cmp_ptr": "*" + dtype,
                                             "val_ptr": "*" + dtype, "out_ptr": "*" + dtype},
                          {"SEM": "acq_rel", "BLOCK": 64})
    bits = dtype[-2:] if dtype[-2:] in ("32", "64") else "16"
    assert f"atom.global.acq_rel.gpu.cas.b{bits} " in kernel.asm["ptx"]
    _check_binary(kernel)
