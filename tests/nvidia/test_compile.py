"""The cuda backend's compiler without a GPU: kernels compiled for sm_90 down to PTX (and a cubin
where ptxas is installed), and the code checked -- 128-bit accesses where axis information
proves alignment, scalar ones where it cannot, warp shuffles in reductions, libdevice linked in
and nothing of it left unresolved, the stages and metadata a launch needs, the options' errors.
Every kernel of `test_ops.py` is compiled here too, so CI proves each one compiles.

Each specialization is compiled once per run (`_compiled`): the file stays fast.
"""

from __future__ import annotations

import re

import pytest

import naiad
import naiad.language as tl
from naiad.errors import NaiadError

from . import test_ops
from .conftest import compile_cuda, libdevice_path, needs_libdevice, needs_ptxas, ptxas_path

pytestmark = pytest.mark.shipped_backends

_CACHE: dict = {}
#: Barrier calls in a kernel's LLVM IR before O3, by `_compiled`'s key.
_BARRIERS_BEFORE_O3: dict = {}
_BARRIER_CALL = re.compile(r"call[^\n]*(?:bar\.sync|@llvm\.nvvm\.barrier)")
#: PTX barriers every thread of the CTA must reach at the same instruction (``bar.sync`` is
#: ``barrier.sync.aligned``); the non-aligned ``barrier.sync`` may sit in divergent code.
_ALIGNED_BARRIER = re.compile(r"\b(?:bar(?:\.cta)?\.sync|barrier(?:\.cta)?\.sync\.aligned)\b")


def _key(value):
    return repr(sorted((str(k), repr(v)) for k, v in (value or {}).items()))


def _compiled(fn, signature, constexprs=None, attrs=None, num_warps=4):
    """`compile_cuda`, once per specialization for the whole run (never from the disk cache:
    the barrier calls of the LLVM IR before O3 are counted on the way)."""
    from naiad import knobs
    from naiad.backends.cuda import target

    key = (fn.__name__, id(fn), _key(signature), _key(constexprs), _key(attrs), num_warps)
    if key not in _CACHE:
        real, always = target.optimize, knobs.compilation.always_compile

        def counting(module, *args, **kwargs):
            _BARRIERS_BEFORE_O3[key] = len(_BARRIER_CALL.findall(str(module)))
            return real(module, *args, **kwargs)

        target.optimize, knobs.compilation.always_compile = counting, True
        try:
            _CACHE[key] = compile_cuda(fn, signature, constexprs, attrs, num_warps)
        finally:
            target.optimize, knobs.compilation.always_compile = real, always
    return _CACHE[key]


def _barriers_before_o3(fn, signature, constexprs=None, attrs=None, num_warps=4):
    key = (fn.__name__, id(fn), _key(signature), _key(constexprs), _key(attrs), num_warps)
    return _BARRIERS_BEFORE_O3.get(key)


def _aligned(*names):
    """``tt.divisibility`` 16 for these parameters, as a launch with 16-byte aligned tensors
    and sizes divisible by 16 specializes them (`naiad.compiler.signatures.describe`)."""
    return {name: [["tt.divisibility", 16]] for name in names}


def _ptx_body(kernel) -> str:
    """The PTX without its comments."""
    return "\n".join(line for line in kernel.asm["ptx"].splitlines()
                     if not line.lstrip().startswith("//"))


#: A global load / store of one 32-bit element (qualifiers such as .nc allowed, no .vN).
_SCALAR_LD32 = r"ld\.global(?:\.(?!v\d)\w+)*\.(b32|f32|u32|s32)\s"
_SCALAR_ST32 = r"st\.global(?:\.(?!v\d)\w+)*\.(b32|f32|u32|s32)\s"


# -- kernels ------------------------------------------------------------------------------------
@naiad.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@naiad.jit
def row_sum_kernel(x_ptr, out_ptr, stride, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


softmax_kernel = test_ops.softmax_kernel           # the one the GPU runs, compiled here


@naiad.jit
def barrier_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
    tl.debug_barrier()
    tl.store(out_ptr + BLOCK - 1 - offs, tl.load(out_ptr + offs) + 1.0)


ADD_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
ADD_ALIGNED = _aligned("x_ptr", "y_ptr", "out_ptr", "n")
ROW_SUM_SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "stride": "i32"}
SOFTMAX_SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "stride": "i32"}


def _add(aligned=True, dtype="fp32", block=1024, num_warps=4):
    signature = {k: ("*" + dtype if v.startswith("*") else v) for k, v in ADD_SIG.items()}
    return _compiled(add_kernel, signature, {"BLOCK": block}, ADD_ALIGNED if aligned else None,
                     num_warps)


# -- vectorized and scalar memory accesses ----------------------------------------------------------
def test_aligned_vector_add_moves_128_bits_per_access():
    ptx = _ptx_body(_add())
    assert re.search(r"ld\.global(\.\w+)*\.v4\.(b32|f32)", ptx), ptx
    assert re.search(r"st\.global(\.\w+)*\.v4\.(b32|f32)", ptx), ptx
    assert not re.search(_SCALAR_LD32, ptx), "a scalar load is left"


def test_aligned_fp16_add_moves_8_elements_per_access():
    """fp16 with 8 elements per thread (1024 = 8 x 32 lanes x 4 warps): 128 bits per access."""
    kernel = _add(dtype="fp16")
    assert "sizePerThread = [8]" in kernel.asm["ttgir"]
    ptx = _ptx_body(kernel)
    assert re.search(r"ld\.global(\.\w+)*\.v4\.b32", ptx), ptx
    assert re.search(r"st\.global(\.\w+)*\.v4\.b32", ptx), ptx
    assert not re.search(r"ld\.global(?:\.(?!v\d)\w+)*\.(b16|f16|u16)\s", ptx), "a 16-bit load is left"


def test_unaligned_vector_add_uses_scalar_accesses():
    ptx = _ptx_body(_add(aligned=False))
    assert not re.search(r"\.global(\.\w+)*\.v[248]\.", ptx), "vector access without alignment info"
    assert re.search(_SCALAR_LD32, ptx), ptx
    assert re.search(_SCALAR_ST32, ptx), ptx


def test_aligned_pointers_with_an_unaligned_size_use_scalar_accesses():
    """The mask ``offs < n`` is constant over 4 elements only when n is a multiple of 4."""
    ptx = _ptx_body(_compiled(add_kernel, ADD_SIG, {"BLOCK": 1024},
                              _aligned("x_ptr", "y_ptr", "out_ptr")))
    assert not re.search(r"\.global(\.\w+)*\.v[248]\.", ptx), ptx


# -- reductions ----------------------------------------------------------------------------------------
def test_row_reduction_uses_warp_shuffles():
    kernel = _compiled(row_sum_kernel, ROW_SUM_SIG, {"N": 1000, "BLOCK": 1024})
    assert "shfl.sync.bfly" in kernel.asm["ptx"]


def test_cross_warp_reduction_uses_shared_memory():
    kernel = _compiled(row_sum_kernel, ROW_SUM_SIG, {"N": 1000, "BLOCK": 1024}, num_warps=8)
    assert kernel.metadata["shared"] > 0
    ptx = kernel.asm["ptx"]
    assert "bar.sync" in ptx and re.search(r"st\.shared", ptx), ptx


def test_one_warp_reduction_needs_no_shared_memory():
    kernel = _compiled(row_sum_kernel, ROW_SUM_SIG, {"N": 32, "BLOCK": 32}, num_warps=1)
    assert kernel.metadata["shared"] == 0
    assert "shfl.sync.bfly" in kernel.asm["ptx"]


# -- libdevice ---------------------------------------------------------------------------------------------
@needs_libdevice
def test_softmax_links_libdevice_and_leaves_nothing_unresolved():
    kernel = _compiled(softmax_kernel, SOFTMAX_SIG, {"BLOCK": 1024})
    ptx = kernel.asm["ptx"]
    assert not re.search(r"\.extern\s+\.func[^\n]*__nv_", ptx), "an unresolved libdevice call"
    assert not re.search(r"\.extern\s+\.func", ptx), "an external function is left"
    assert "__nv_expf" not in ptx or ".func" in ptx       # inlined, or defined in the module
    assert "shfl.sync.bfly" in ptx
    assert len(ptx.splitlines()) < 3000, "unused libdevice functions were not dropped"


@needs_libdevice
def test_libdevice_calls_are_inlined_in_the_llvm_ir():
    llir = _compiled(softmax_kernel, SOFTMAX_SIG, {"BLOCK": 1024}).asm["llir"]
    assert not re.search(r"^declare[^\n]*@__nv_", llir, re.M), "a libdevice declaration is left"


def test_kernel_without_math_does_not_link_libdevice(monkeypatch):
    """A kernel that calls no libdevice function compiles where no libdevice is installed."""
    from naiad.backends.cuda import toolchain

    monkeypatch.setattr(toolchain, "find_libdevice", lambda: None)
    kernel = compile_cuda(add_kernel, ADD_SIG, {"BLOCK": 256}, ADD_ALIGNED)
    assert "__nv_" not in kernel.asm["ptx"]


# -- stages, metadata, options ---------------------------------------------------------------------------
def test_stages_and_metadata():
    kernel = _add()
    assert list(kernel.asm) == ["ttir", "ttgir", "llir", "ptx", "cubin"]
    assert kernel.metadata["name"] == "add_kernel"
    assert kernel.metadata["num_warps"] == 4
    assert kernel.metadata["shared"] == 0
    assert kernel.metadata["target"] == {"backend": "cuda", "arch": 90, "warp_size": 32}
    assert kernel.asm["ttir"].lstrip().startswith(("module", "builtin.module"))
    assert "tt.func public @add_kernel" in kernel.asm["ttir"]
    assert "define" in kernel.asm["llir"] and "ptx_kernel" in kernel.asm["llir"]
    ptx = kernel.asm["ptx"]
    assert ".target sm_90" in ptx and ".entry add_kernel" in ptx
    assert isinstance(kernel.asm["cubin"], bytes)


def test_ttgir_shows_blocked_layouts_and_target_attributes():
    ttgir = _add().asm["ttgir"]
    assert "#ttg.blocked<" in ttgir
    assert "sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]" in ttgir
    assert '"ttg.num-warps" = 4' in ttgir and "cuda:90" in ttgir


def test_reduction_ttgir_shows_a_slice_layout():
    ttgir = _compiled(test_ops.reduce_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                      {"M": 32, "N": 64, "AXIS": 1, "OP": "sum"}).asm["ttgir"]
    assert "#ttg.blocked<" in ttgir and "#ttg.slice<" in ttgir


@pytest.mark.parametrize("num_warps", [1, 2, 4, 8, 16, 32])
def test_num_warps_sets_the_block_size(num_warps):
    kernel = _add(num_warps=num_warps)
    assert kernel.metadata["num_warps"] == num_warps
    threads = re.search(r"\.(?:maxntid|reqntid)\s+(\d+)", kernel.asm["ptx"])
    assert threads is not None, "no .maxntid / .reqntid in the PTX"
    assert int(threads.group(1)) == 32 * num_warps
    assert f'"ttg.num-warps" = {num_warps}' in kernel.asm["ttgir"]


@pytest.mark.parametrize("maxnreg", [None, 42, 128])
def test_maxnreg_is_the_kernels_register_limit(maxnreg):
    """``maxnreg`` reaches the PTX as the entry's ``.maxnreg`` (Triton's test_maxnreg looks)."""
    from naiad.compiler.compiler import ASTSource
    from .conftest import TARGET

    source = ASTSource(add_kernel, ADD_SIG, {"BLOCK": 256}, {})
    ptx = naiad.compile(source, target=TARGET, options={"maxnreg": maxnreg}).asm["ptx"]
    found = re.search(r"\.visible \.entry [^{;]*\.maxnreg (\d+)", ptx)
    assert (found and int(found.group(1))) == (maxnreg or None)


@pytest.mark.parametrize("num_warps", [0, 3, 6, 64, -4])
def test_bad_num_warps_is_a_clear_error(num_warps):
    with pytest.raises(NaiadError, match=rf"num_warps={num_warps}: .*power of two from 1 to 32"):
        compile_cuda(add_kernel, ADD_SIG, {"BLOCK": 256}, num_warps=num_warps)


def test_binary_is_a_cubin_when_ptxas_is_installed():
    kernel = _add()
    cubin = kernel.asm["cubin"]
    if ptxas_path() is None:
        assert kernel.metadata["binary_format"] == "ptx"
        assert cubin.rstrip(b"\0").decode() == kernel.asm["ptx"]
    else:
        assert kernel.metadata["binary_format"] == "cubin"
        assert cubin[:4] == b"\x7fELF", "ptxas did not write an ELF cubin"


@needs_ptxas
def test_without_ptxas_the_binary_is_the_ptx(monkeypatch):
    from naiad.backends.cuda import toolchain

    monkeypatch.setattr(toolchain, "find_ptxas", lambda: None)
    kernel = compile_cuda(add_kernel, ADD_SIG, {"BLOCK": 128})
    assert kernel.metadata["binary_format"] == "ptx"
    assert kernel.asm["cubin"] == kernel.asm["ptx"].encode() + b"\0"


@needs_ptxas
def test_cubin_names_the_kernel_for_sm90():
    cubin = _compiled(softmax_kernel if libdevice_path() else row_sum_kernel,
                      SOFTMAX_SIG if libdevice_path() else ROW_SUM_SIG,
                      {"BLOCK": 1024} if libdevice_path() else {"N": 1000, "BLOCK": 1024}
                      ).asm["cubin"]
    assert cubin[:4] == b"\x7fELF"
    assert (b"softmax_kernel" if libdevice_path() else b"row_sum_kernel") in cubin


def test_debug_barrier_compiles_to_bar_sync():
    kernel = _compiled(barrier_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 128})
    assert "bar.sync" in kernel.asm["ptx"]


@naiad.jit
def _asm_max(a, b):
    return tl.inline_asm_elementwise("max.s32 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.int32,
                                     is_pure=True, pack=1)


@naiad.jit
def unsupported_kernel(x_ptr, b_ptr, out_ptr, WHAT: tl.constexpr):
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + offs)
    if WHAT == "asm_in_combine":
        tl.store(out_ptr, tl.reduce(x.to(tl.int32), 0, _asm_max).to(tl.float32))


#: What the GPU lowering does not support yet -> what its error must name.
UNSUPPORTED = {"asm_in_combine": "tl.inline_asm_elementwise inside a combine function"}


@pytest.mark.parametrize("what", list(UNSUPPORTED))
def test_unsupported_op_is_an_error_naming_it(what):
    """An op the GPU lowering lacks is a Naiad error that names it and the kernel, not a crash."""
    from naiad.compiler.compiler import UnsupportedByBackend

    with pytest.raises(UnsupportedByBackend, match=re.escape(UNSUPPORTED[what])) as error:
        compile_cuda(unsupported_kernel, {"x_ptr": "*fp32", "b_ptr": "*bf16", "out_ptr": "*fp32"},
                     {"WHAT": what})
    message = str(error.value)
    assert "kernel 'unsupported_kernel' cannot be compiled by the cuda backend yet" in message
    assert "fix: run it on another backend" in message and "bug in Naiad" not in message


# -- every kernel of test_ops.py -----------------------------------------------------------------------------
def _case_params():
    for case in test_ops.COMPILE_CASES:
        marks = [needs_libdevice] if case.libdevice else []
        if case.xfail:
            marks.append(pytest.mark.xfail(strict=True, reason=case.xfail))
        yield pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", list(_case_params()))
def test_ops_kernels_compile(case):
    """Each compiles to PTX (and a cubin where ptxas is found), and O3 did not copy an aligned
    barrier into divergent code: a GPU would hang on it (every thread must reach the same
    ``bar.sync``)."""
    spec = (case.fn, case.signature, case.constexprs, None, case.num_warps)
    kernel = _compiled(*spec)
    ptx = kernel.asm["ptx"]
    assert f".entry {case.fn.__name__}" in ptx
    assert not re.search(r"\.extern\s+\.func", ptx), "an unresolved external function"
    if ptxas_path() is not None:
        assert kernel.asm["cubin"][:4] == b"\x7fELF"
    before, after = _barriers_before_o3(*spec), len(_ALIGNED_BARRIER.findall(ptx))
    assert before is not None, "the LLVM IR before O3 was not seen"
    assert after <= before, (f"{after} aligned barriers in the PTX for {before} in the LLVM IR: O3 "
                             f"copied bar.sync into branches, which hangs on a GPU")


def test_every_kernel_of_test_ops_is_compiled():
    kernels = {name for name, value in vars(test_ops).items()
               if isinstance(value, naiad.runtime.jit.JITFunction) and not name.startswith("_")}
    compiled = {case.fn.__name__ for case in test_ops.COMPILE_CASES}
    assert kernels - compiled == set(), "kernels of test_ops.py missing from COMPILE_CASES"
    assert len({case.id for case in test_ops.COMPILE_CASES}) == len(test_ops.COMPILE_CASES)


def test_shared_memory_regions_are_16_byte_aligned():
    """Two values reduced together across warps (an fp16 max and its int32 index) get regions
    one after the other: the second must start aligned, or the GPU faults (misaligned address,
    seen with Triton's test_reduce1d argmax cases)."""
    from naiad.backends.cuda.hooks import NVPTXHooks
    from naiad.codegen.gpu.kernel import GPUKernel

    kernel = GPUKernel(None, NVPTXHooks(), 4)
    assert kernel.shared_regions([2 * 4 * 3, 4 * 4 * 3, 1]) == [0, 32, 80]
    assert kernel.shared_bytes == 96


@naiad.jit
def argmax_fp16(x_ptr, out_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(out_ptr, tl.argmax(x, axis=0))


def test_a_mixed_type_reduction_across_warps_compiles():
    kernel = _compiled(argmax_fp16, {"x_ptr": "*fp16", "out_ptr": "*i32"}, {"N": 1024})
    assert kernel.metadata["shared"] % 16 == 0 and "shfl.sync.bfly" in kernel.asm["ptx"]


@naiad.jit
def mul_add_kernel(data):
    ptrs = data + tl.arange(0, 128)
    tl.store(ptrs, tl.load(ptrs) * 1.5 + 1.0)


@pytest.mark.parametrize("fusion", [True, False])
def test_enable_fp_fusion_decides_whether_multiply_adds_become_fma(fusion):
    from naiad.backends.compiler import GPUTarget
    from naiad.compiler.compiler import ASTSource

    kernel = naiad.compile(ASTSource(mul_add_kernel, {"data": "*fp32"}, {}),
                           target=GPUTarget("cuda", 90, 32), options={"enable_fp_fusion": fusion})
    ptx = _ptx_body(kernel)
    assert bool(re.search(r"\bfma\.rn\.f32", ptx)) is fusion
    assert bool(re.search(r"\bmul\.rn\.f32", ptx)) is not fusion      # .rn: ptxas keeps them apart
    assert kernel.metadata["enable_fp_fusion"] is fusion


def test_default_fp_fusion_knob_sets_the_option_default():
    from naiad import knobs
    from naiad.backends.compiler import GPUTarget
    from naiad.compiler.compiler import ASTSource

    source = ASTSource(mul_add_kernel, {"data": "*fp32"}, {})
    with knobs.language.scope():
        knobs.language.default_fp_fusion = False
        plain = naiad.compile(source, target=GPUTarget("cuda", 90, 32))
        chosen = naiad.compile(source, target=GPUTarget("cuda", 90, 32),
                               options={"enable_fp_fusion": True})
    assert "fma.rn.f32" not in _ptx_body(plain) and plain.metadata["enable_fp_fusion"] is False
    assert "fma.rn.f32" in _ptx_body(chosen)           # an explicit option wins over the knob


_COMPILE_SCALE_FOR_SM90 = """
import sys
sys.path.insert(0, {tests!r})
import naiad
from naiad import knobs
from naiad.backends.compiler import GPUTarget
from naiad.compiler.compiler import ASTSource
from jit_helpers import SCALE_SIGNATURE, scale

hits = []
knobs.compilation.listener = lambda src, metadata, times, hit: hits.append(hit)
kernel = naiad.compile(ASTSource(scale, SCALE_SIGNATURE, {{"BLOCK": 256}}), target=GPUTarget("cuda", 90, 32))
print(hits[0], "naiad.codegen.gpu" in sys.modules, "xdsl.dialects.builtin" in sys.modules, len(kernel.asm["ptx"]))
"""


def test_a_kernel_from_the_cache_imports_no_compiler(tmp_path):
    """A process whose kernels are all in the cache does not import the lowering or xDSL
    (~0.15 s of its first launch): each stage imports what it runs."""
    import os
    import subprocess
    import sys

    code = _COMPILE_SCALE_FOR_SM90.format(tests=os.path.dirname(os.path.dirname(__file__)))
    env = dict(os.environ, NAIAD_CACHE_DIR=str(tmp_path))

    def run() -> list[str]:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    hit, lowering, xdsl, ptx = run()
    assert (hit, lowering, xdsl) == ("False", "True", "True") and int(ptx) > 0
    hit, lowering, xdsl, ptx_again = run()
    assert (hit, lowering, xdsl) == ("True", "False", "False") and ptx_again == ptx


@pytest.mark.parametrize("op, instruction", [("sqrt", "sqrt.approx.ftz.f32"), ("rsqrt", "rsqrt.approx.ftz.f32"),
                                             ("exp", "ex2.approx.f32"), ("sqrt_rn", "sqrt.rn.f32")])
def test_approximate_math_is_triton_s_instruction(op, instruction):
    """Triton 3.6's PTX for fp32 ``tl.sqrt`` / ``tl.rsqrt`` flushes subnormal inputs (``.ftz``);
    without it ptxas scales subnormals around each MUFU (72 SASS instructions against 48 for an
    element-wise sqrt).  ``tl.exp`` keeps subnormal results, as Triton's; ``sqrt_rn`` is IEEE."""
    ptx = compile_cuda(test_ops.unary_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                       {"OP": op, "BLOCK": 256}).asm["ptx"]
    assert instruction in ptx
