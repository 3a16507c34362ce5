"""Language features that PyTorch Inductor's generated kernels and helpers rely on, run on the
CPU backend: externs whose arguments broadcast like a binary operator's, functions marked the
way Triton marks its builtins (``__triton_builtin__``, called with ``_semantic=`` or
``_builder=``), ``tl.core._unwrap_if_constexpr``, the ``logical_and`` / ``logical_or`` tensor
methods; every ``libdevice.``, ``tl.``, ``tl.math.`` and ``tl_math.`` name of torch 2.13's
Triton code generator and helpers, and the idioms its kernels are made of."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.compiler.errors import CompilationError
from naiad.language.extra import libdevice

pytestmark = pytest.mark.shipped_backends


# -- externs broadcast their arguments --------------------------------------------------------
@naiad.jit
def ldexp_by_one_element(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, libdevice.ldexp(tl.load(x + offs), tl.full([1], 3, tl.int32)))


def test_extern_broadcasts_a_one_element_block():
    x = np.linspace(-4, 4, 128, dtype=np.float32)
    out = np.zeros_like(x)
    ldexp_by_one_element[(1,)](x, out, BLOCK=128)
    np.testing.assert_array_equal(out, x * 8)


@naiad.jit
def outer_atan2(y, x, out, M: tl.constexpr, N: tl.constexpr):
    rows, cols = tl.arange(0, M), tl.arange(0, N)
    a = tl.load(y + rows)[:, None]               # [M, 1]
    b = tl.load(x + cols)                        # [N]: one dimension fewer
    tl.store(out + rows[:, None] * N + cols[None, :], libdevice.atan2(a, b))


def test_extern_broadcasts_rows_against_columns_of_lower_rank():
    y = np.linspace(-2, 2, 4).astype(np.float64)
    x = np.linspace(-3, 3, 8).astype(np.float64)
    out = np.zeros((4, 8))
    outer_atan2[(1,)](y, x, out, M=4, N=8)
    np.testing.assert_allclose(out, np.arctan2(y[:, None], x[None, :]), rtol=1e-15)


@naiad.jit
def fma_of_scalar_and_blocks(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs[None, :], libdevice.fma(2.0, tl.load(x + offs)[None, :], tl.load(x)))


def test_extern_splats_a_scalar_among_blocks():
    x = np.arange(16, dtype=np.float32)
    out = np.zeros_like(x)
    fma_of_scalar_and_blocks[(1,)](x, out, BLOCK=16)
    np.testing.assert_array_equal(out, 2 * x + x[0])


@naiad.jit
def mismatched_extern(x, out):
    a = tl.load(x + tl.arange(0, 16))
    b = tl.load(x + tl.arange(0, 8))
    tl.store(out + tl.arange(0, 16), libdevice.hypot(a, b))  # E:mismatch


def test_extern_arguments_that_cannot_broadcast_name_the_kernel_and_line():
    x = np.zeros(16, np.float32)
    with pytest.raises(CompilationError) as info:
        mismatched_extern[(1,)](x, x)
    message = str(info.value)
    assert "mismatched_extern" in message and "[16] and [8] are incompatible" in message
    assert f":{_line_of('mismatch')}:" in message


@naiad.jit
def wrong_dtype_extern(x, out):
    offs = tl.arange(0, 16)
    tl.store(out + offs, libdevice.erf(tl.load(x + offs)))  # E:dtype


def test_extern_of_a_wrong_dtype_names_the_kernel_and_line():
    x = np.zeros(16, np.int32)
    with pytest.raises(CompilationError) as info:
        wrong_dtype_extern[(1,)](x, x)
    message = str(info.value)
    assert "wrong_dtype_extern" in message and f":{_line_of('dtype')}:" in message
    assert "libdevice.erf(" in message          # the source line, under the kernel's name
    assert "no version of this function takes (int32); it accepts (fp32), (fp64)" in message
    assert ".to(tl.float32)" in message


# -- functions marked as Triton marks its builtins --------------------------------------------
def doubled(n, *, _builder=None):
    """A helper written for Triton < 3.4: it declares ``_builder``."""
    assert _builder is not None, "the kernel's semantic object was not passed"
    assert isinstance(n, tl.constexpr), "a compile-time argument arrives as a constexpr"
    return tl.constexpr(2 * n.value)


doubled.__triton_builtin__ = True


def semantic_wrapper(*args, _semantic, **kwargs):
    """What Inductor's ``triton_builtin`` makes of such a helper for Triton >= 3.4."""
    kwargs["_builder"] = _semantic
    return doubled(*args, **kwargs)


semantic_wrapper.__triton_builtin__ = True


def plus_one(value):
    """A builtin that declares neither keyword gets neither."""
    return value + 1


plus_one.__triton_builtin__ = True


@naiad.jit
def calls_triton_builtins(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    TWICE: tl.constexpr = semantic_wrapper(BLOCK)
    FOUR_TIMES: tl.constexpr = doubled(TWICE)
    tl.store(out + offs, plus_one(tl.load(x + offs)) + TWICE + FOUR_TIMES)


def test_triton_marked_builtins_get_the_semantic_object_as_triton_passes_it():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros_like(x)
    calls_triton_builtins[(1,)](x, out, BLOCK=8)
    np.testing.assert_array_equal(out, x + 1 + 16 + 32)


@naiad.jit
def runtime_value_to_constexpr_helper(x, out):
    tl.store(out, doubled(tl.load(x)))  # E:builtin


def test_a_failing_triton_marked_builtin_names_the_kernel_and_line():
    x = np.zeros(4, np.float32)
    with pytest.raises(CompilationError) as info:
        runtime_value_to_constexpr_helper[(1,)](x, x)
    message = str(info.value)
    assert "runtime_value_to_constexpr_helper" in message and f":{_line_of('builtin')}:" in message
    assert "a compile-time argument arrives as a constexpr" in message


# -- tl.core._unwrap_if_constexpr and tensor methods -------------------------------------------
@naiad.jit
def unpack_bits(x, out, DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    DTYPE = tl.core._unwrap_if_constexpr(DTYPE)        # as Inductor's unpack_value does
    offs = tl.arange(0, BLOCK)
    value = tl.core._unwrap_if_constexpr(tl.load(x + offs))
    tl.store(out + offs, value.to(DTYPE, bitcast=True).to(tl.int64) + DTYPE.primitive_bitwidth)


def test_unwrap_if_constexpr_inside_and_outside_kernels():
    x = np.array([1.0, -2.0, 0.5, 0.0], np.float32)
    out = np.zeros(4, np.int64)
    unpack_bits[(1,)](x, out, DTYPE=tl.int32, BLOCK=4)
    np.testing.assert_array_equal(out, x.view(np.int32).astype(np.int64) + 32)
    unwrap = tl.core._unwrap_if_constexpr
    assert unwrap(tl.constexpr(3)) == 3 and type(unwrap(tl.constexpr(3))) is int
    assert unwrap([tl.constexpr(1), (tl.constexpr(2), 3)]) == [1, (2, 3)]
    assert unwrap("text") == "text"


@naiad.jit
def logical_methods(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    low, high = v > 2, v < 5
    tl.store(out + offs, low.logical_and(high).to(tl.int32) + 2 * low.logical_or(v == 0).to(tl.int32))


def test_logical_and_or_are_tensor_methods():
    x = np.arange(8, dtype=np.int32)
    out = np.zeros_like(x)
    logical_methods[(1,)](x, out, BLOCK=8)
    expected = ((x > 2) & (x < 5)).astype(np.int32) + 2 * ((x > 2) | (x == 0)).astype(np.int32)
    np.testing.assert_array_equal(out, expected)


def _line_of(marker: str) -> int:
    """The line of this file that ends with ``# E:<marker>``."""
    with open(__file__) as f:
        (line,) = [i + 1 for i, text in enumerate(f) if text.rstrip().endswith(f"# E:{marker}")]
    return line


# -- every name Inductor's generated code and helpers use exists ------------------------------------
#: Torch 2.13's files that write or hold Triton code.
INDUCTOR_FILES = ("runtime/triton_helpers.py", "codegen/triton.py", "codegen/common.py",
                  "codegen/triton_split_scan.py", "codegen/triton_combo_kernel.py",
                  "codegen/simd.py", "select_algorithm.py")
#: Names those files mention outside code (a docstring of triton.py says "storing tl.bool").
NOT_CODE = {("tl", "bool")}


def test_every_name_inductor_calls_exists():
    import importlib.util
    import io
    import re
    import tokenize
    from pathlib import Path

    import naiad.language.math as tl_math
    from naiad.language import core

    spec = importlib.util.find_spec("torch")
    if spec is None:
        pytest.skip("torch is not installed")
    root = Path(spec.origin).parent / "_inductor"
    namespaces = {"libdevice": libdevice, "tl_math": tl_math, "tl.math": tl_math, "tl.core": core,
                  "tl": tl}
    pattern = re.compile(r"\b(libdevice|tl_math|tl\.math|tl\.core|tl)\.([A-Za-z_]\w*)\b(?!\{)")
    used = set()
    for name in INDUCTOR_FILES:
        source = (root / name).read_text()
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        code = " ".join(t.string for t in tokens if t.type != tokenize.COMMENT)
        used |= {m.groups() for m in pattern.finditer(code)}
    assert {("libdevice", "cyl_bessel_i0"), ("libdevice", "llrint"), ("tl_math", "abs")} <= used
    missing = sorted(f"{space}.{name}" for space, name in used - NOT_CODE
                     if not hasattr(namespaces[space], name))
    assert not missing


@naiad.jit
def inductor_idioms(x, mantissa_ptr, exponent_ptr, flags_ptr, rounded_ptr, BLOCK: tl.constexpr):
    """What Inductor writes: frexp from ilogb and ldexp, booleans from isinf/isnan, signbit
    compared with 0, llrint to an index, nearbyint for round(x, 3), mul_rn."""
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs)
    zero = v == 0
    not_finite = libdevice.isinf(v).to(tl.int1) | libdevice.isnan(v).to(tl.int1)
    special = zero | not_finite
    safe = tl.where(special, 1.0, v)
    e = libdevice.ilogb(safe) + 1
    tl.store(exponent_ptr + offs, tl.where(special, 0, e))
    tl.store(mantissa_ptr + offs, tl.where(zero, 0, tl.where(not_finite, v, libdevice.ldexp(safe, -e))))
    tl.store(flags_ptr + offs, (libdevice.signbit(v) != 0).to(tl.int32) + 2 * not_finite.to(tl.int32))
    index = libdevice.llrint(v).to(tl.int64)
    tl.store(rounded_ptr + offs, libdevice.nearbyint(1e3 * libdevice.mul_rn(v, 1.0)) * 1e-3 + index)


def test_inductor_idioms():
    x = np.array([0.0, -0.0, 1.0, -3.5, 6.25e-3, np.inf, -np.inf, np.nan], np.float64)
    mantissa, exponent = np.zeros_like(x), np.zeros(8, np.int32)
    flags, rounded = np.zeros(8, np.int32), np.zeros_like(x)
    inductor_idioms[(1,)](x, mantissa, exponent, flags, rounded, BLOCK=8)
    want_m, want_e = np.frexp(x[:5])
    np.testing.assert_array_equal(mantissa[:5], want_m)
    np.testing.assert_array_equal(exponent[:5], want_e)
    np.testing.assert_array_equal(mantissa[5:], x[5:])
    np.testing.assert_array_equal(flags, [0, 1, 0, 1, 0, 2, 3, 2 + np.signbit(x[7])])
    np.testing.assert_allclose(rounded[:5], np.round(x[:5], 3) + np.rint(x[:5]), rtol=1e-15)
