"""tl.device_print, tl.device_assert and tl.inline_asm_elementwise on the cuda backend.

CI (no GPU): the kernels compile to PTX that calls ``vprintf`` / ``__assertfail`` with the
CPU backend's line format, and carries the user's assembly; bad constraints are a clear error.
GPU: prints give the same lines as the CPU backend (in another order: threads print
concurrently), a failed assertion stops the kernel with its message, and inline assembly gives
numpy's values (run in subprocesses where the output or a dead CUDA context is the point).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.compiler.compiler import ASTSource, UnsupportedByBackend

from .conftest import TARGET, compile_cuda, needs_ptxas

pytestmark = pytest.mark.shipped_backends
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- kernels -----------------------------------------------------------------------------------
@naiad.jit
def print_kernel(x_ptr, n, HEX: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.device_print("x ", x, hex=HEX)
    tl.device_print("n ", n)
    tl.device_print(" here")


@naiad.jit
def print_2d_kernel(x_ptr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.device_print("pair ", x, x + 1)


@naiad.jit
def assert_kernel(x_ptr, limit, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.device_assert(x < limit, "x is too big")


@naiad.jit
def funnel_shift_kernel(X, Y, Z, n, BLOCK: tl.constexpr):
    x = tl.load(X + tl.arange(0, BLOCK))
    y = tl.load(Y + tl.arange(0, BLOCK))
    s = tl.full([BLOCK], n, tl.int32)
    z = tl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $2, $3;", "=r,r, r, r", [x, y, s],
                                  dtype=tl.int32, is_pure=True, pack=1)
    tl.store(Z + tl.arange(0, BLOCK), z)


@naiad.jit
def packed_asm_kernel(X, Y, BLOCK: tl.constexpr):
    x = tl.load(X + tl.arange(0, BLOCK))
    y = tl.inline_asm_elementwise("and.b32 $0, $1, 0x1F1F1F1F; shl.b32 $0, $0, 3;", "=r,r", [x],
                                  dtype=tl.int8, is_pure=True, pack=4)
    tl.store(Y + tl.arange(0, BLOCK), y)


@naiad.jit
def two_outputs_asm_kernel(A, B, C, D, BLOCK: tl.constexpr):
    a = tl.load(A + tl.arange(0, BLOCK))
    b = tl.load(B + tl.arange(0, BLOCK))
    # four uint8 of `a` arrive in one register ($4); c = int32(a), d = max(float(a), b)
    c, d = tl.inline_asm_elementwise(
        asm="""{
            .reg .b8 t<4>;
            mov.b32 {t0, t1, t2, t3}, $8;
            cvt.u32.u8 $0, t0; cvt.u32.u8 $1, t1; cvt.u32.u8 $2, t2; cvt.u32.u8 $3, t3;
            cvt.rn.f32.s32 $4, $0; cvt.rn.f32.s32 $5, $1; cvt.rn.f32.s32 $6, $2; cvt.rn.f32.s32 $7, $3;
            max.f32 $4, $4, $9; max.f32 $5, $5, $10; max.f32 $6, $6, $11; max.f32 $7, $7, $12;
        }""",
        constraints="=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r", args=[a, b],
        dtype=(tl.int32, tl.float32), is_pure=True, pack=4)
    tl.store(C + tl.arange(0, BLOCK), c)
    tl.store(D + tl.arange(0, BLOCK), d)


@naiad.jit
def pointer_asm_kernel(X, Y, BLOCK: tl.constexpr):
    tl.inline_asm_elementwise("ld.global.b8 $0, [$1]; shl.b32 $0, $0, 3; st.global.b8 [$2], $0;",
                              "=r,l,l", [X + tl.arange(0, BLOCK), Y + tl.arange(0, BLOCK)],
                              dtype=tl.int8, is_pure=False, pack=1)


@naiad.jit
def bad_constraints_kernel(X, BLOCK: tl.constexpr):
    x = tl.load(X + tl.arange(0, BLOCK))
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [x], dtype=tl.int32,
                                  is_pure=True, pack=1)
    tl.store(X + tl.arange(0, BLOCK), y)


# -- CI: the code --------------------------------------------------------------------------------
def _llir_strings(kernel) -> list[str]:
    return re.findall(r'c"([^"]*)\\00"', kernel.asm["llir"])


@pytest.mark.parametrize("hexadecimal", [False, True])
@pytest.mark.parametrize("dtype,spec", [("*fp32", "%f"), ("*fp16", "%f"), ("*i8", "%d"),
                                        ("*u16", "%u"), ("*i64", "%lld"), ("*u64", "%llu")])
def test_print_formats_lines_like_the_cpu_backend(dtype, spec, hexadecimal):
    kernel = compile_cuda(print_kernel, {"x_ptr": dtype, "n": "i32"}, {"HEX": hexadecimal, "BLOCK": 16})
    strings = _llir_strings(kernel)
    if hexadecimal:
        spec = "%a" if spec == "%f" else {"%d": "0x%02x", "%u": "0x%04x", "%lld": "0x%016llx",
                                           "%llu": "0x%016llx"}[spec]
    assert f"pid (%u, %u, %u) idx (%2u) x: {spec}\\0A" in strings
    assert "pid (%u, %u, %u) idx () n: %d\\0A" in strings          # printed without hex=
    assert "pid (%u, %u, %u) here\\0A" in strings
    assert "vprintf" in kernel.asm["ptx"]


def test_print_of_two_tensors_names_each_operand():
    kernel = compile_cuda(print_2d_kernel, {"x_ptr": "*i32"}, {"M": 4, "N": 16})
    strings = _llir_strings(kernel)
    assert "pid (%u, %u, %u) idx (%1u, %2u) pair: (operand 0) %d\\0A" in strings
    assert "pid (%u, %u, %u) idx (%1u, %2u) pair: (operand 1) %d\\0A" in strings


@needs_ptxas
def test_assert_calls_assertfail_only_in_debug_mode():
    signature, constexprs = {"x_ptr": "*fp32", "limit": "fp32"}, {"BLOCK": 64}
    plain = compile_cuda(assert_kernel, signature, constexprs)
    debug = naiad.compile(ASTSource(assert_kernel, signature, constexprs, {}), target=TARGET,
                          options={"num_warps": 4, "debug": True})
    assert "__assertfail" not in plain.asm["ptx"]
    assert "__assertfail" in debug.asm["ptx"] and isinstance(debug.asm["cubin"], bytes)
    assert "x is too big" in _llir_strings(debug) and "assert_kernel" in _llir_strings(debug)


@needs_ptxas
@pytest.mark.parametrize("fn,signature,text", [
    (funnel_shift_kernel, {"X": "*i32", "Y": "*i32", "Z": "*i32", "n": "i32"}, "shf.l.wrap.b32"),
    (packed_asm_kernel, {"X": "*u8", "Y": "*i8"}, "and.b32"),
    (two_outputs_asm_kernel, {"A": "*u8", "B": "*fp32", "C": "*i32", "D": "*fp32"}, "max.f32"),
    (pointer_asm_kernel, {"X": "*i8", "Y": "*i8"}, "st.global.b8"),
])
def test_inline_asm_reaches_the_ptx(fn, signature, text):
    kernel = compile_cuda(fn, signature, {"BLOCK": 512})
    assert text in kernel.asm["ptx"] and isinstance(kernel.asm["cubin"], bytes)


def test_inline_asm_with_wrong_constraints_is_a_clear_error():
    with pytest.raises(UnsupportedByBackend) as info:
        compile_cuda(bad_constraints_kernel, {"X": "*i32"}, {"BLOCK": 128})
    assert ("the constraints name 3 operands, but 1 result(s) and 1 argument(s) with pack=1 need 2"
            in str(info.value))
    assert "bad_constraints_kernel" in str(info.value)


# -- GPU ----------------------------------------------------------------------------------------
def run_prints(device: str) -> None:
    """Launch the print kernels on ``device`` (run in a subprocess by the tests)."""
    import torch

    x = torch.arange(-8, 8, dtype=torch.int32, device=device)
    print_kernel[(2,)](x, 7, HEX=False, BLOCK=16)
    print_kernel[(1,)](x.to(torch.float16), -3, HEX=False, BLOCK=16)
    print_kernel[(1,)](x.to(torch.int8), 5, HEX=True, BLOCK=16)
    print_2d_kernel[(1,)](torch.arange(64, dtype=torch.int32, device=device), M=4, N=16)
    if device == "cuda":
        torch.cuda.synchronize()


def _printed(device: str) -> list[str]:
    result = subprocess.run([sys.executable, "-c", f"from tests.nvidia.test_debug_asm import run_prints; "
                             f"run_prints({device!r})"], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return sorted(result.stdout.splitlines())


def test_prints_the_cpu_backends_lines(gpu):
    on_gpu, on_cpu = _printed("cuda"), _printed("cpu")
    assert len(on_gpu) == 2 * 16 + 2 + 2 + 16 + 1 + 1 + 16 + 1 + 1 + 2 * 64
    assert on_gpu == on_cpu


def run_failing_assert() -> None:
    import torch

    x = torch.arange(64, dtype=torch.float32, device="cuda")
    assert_kernel[(1,)](x, 1000.0, BLOCK=64, debug=True)      # holds: runs
    torch.cuda.synchronize()
    print("first launch passed", flush=True)
    assert_kernel[(1,)](x, 40.0, BLOCK=64, debug=True)        # fails for x >= 40
    torch.cuda.synchronize()


def test_a_failed_assert_stops_the_kernel_with_its_message(gpu):
    result = subprocess.run([sys.executable, "-c", "from tests.nvidia.test_debug_asm import "
                             "run_failing_assert; run_failing_assert()"], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert "first launch passed" in result.stdout
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "x is too big" in output and "assert_kernel" in output


def test_inline_asm_funnel_shift(gpu):
    torch = gpu
    rng = np.random.default_rng(40)
    x = rng.integers(-2**31, 2**31, 512, dtype=np.int64).astype(np.int32)
    y = rng.integers(-2**31, 2**31, 512, dtype=np.int64).astype(np.int32)
    z = torch.empty(512, dtype=torch.int32, device="cuda")
    funnel_shift_kernel[(1,)](torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda(), z, 9, BLOCK=512)
    wide = (y.astype(np.uint32).astype(np.uint64) << 32) | x.astype(np.uint32).astype(np.uint64)
    expected = ((wide << np.uint64(9)) >> np.uint64(32)).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(z.cpu().numpy(), expected)


def test_inline_asm_packs_four_bytes_per_register(gpu):
    torch = gpu
    x = np.random.default_rng(41).integers(0, 256, 512).astype(np.uint8)
    y = torch.empty(512, dtype=torch.int8, device="cuda")
    packed_asm_kernel[(1,)](torch.from_numpy(x).cuda(), y, BLOCK=512)
    np.testing.assert_array_equal(y.cpu().numpy(), ((x & 0x1F) << 3).astype(np.int8))


def test_inline_asm_with_two_packed_outputs(gpu):
    torch = gpu
    rng = np.random.default_rng(42)
    a = rng.integers(0, 256, 512).astype(np.uint8)
    b = (rng.random(512) * 300).astype(np.float32)
    c = torch.empty(512, dtype=torch.int32, device="cuda")
    d = torch.empty(512, dtype=torch.float32, device="cuda")
    two_outputs_asm_kernel[(1,)](torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c, d, BLOCK=512)
    np.testing.assert_array_equal(c.cpu().numpy(), a.astype(np.int32))
    np.testing.assert_array_equal(d.cpu().numpy(), np.maximum(a.astype(np.float32), b))


def test_inline_asm_with_side_effects_through_pointers(gpu):
    torch = gpu
    x = np.random.default_rng(43).integers(-128, 128, 512).astype(np.int8)
    y = torch.zeros(512, dtype=torch.int8, device="cuda")
    pointer_asm_kernel[(1,)](torch.from_numpy(x).cuda(), y, BLOCK=512)
    np.testing.assert_array_equal(y.cpu().numpy(), (x.astype(np.int32) << 3).astype(np.int8))
