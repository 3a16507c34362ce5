"""The hip backend compiles without an AMD GPU or ROCm: every stage of `naiad compile --target
hip:<arch>`, the code object's ELF, and checks on the ISA that fail on a wrong lowering (no
128-bit accesses, a reduction without cross-lane moves, spills, the wrong wavefront)."""

from __future__ import annotations

import re
import struct

import pytest

import naiad
import naiad.language as tl
from naiad.language.extra import libdevice
from naiad.backends.compiler import GPUTarget
from naiad.compiler.compiler import ASTSource
from naiad.errors import NaiadError
from naiad.tools import cli
from tests.nvidia import test_ops

pytestmark = pytest.mark.shipped_backends

ARCHS = {"gfx90a": 64, "gfx942": 64, "gfx950": 64, "gfx1100": 32, "gfx1200": 32}


@naiad.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)


@naiad.jit
def row_sum(x, out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + row * n + offs, mask=offs < n, other=0.0)
    tl.store(out + row, tl.sum(v, axis=0))


@naiad.jit
def bessel_kernel(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, libdevice.j0(tl.load(x + offs)))


def _compile(fn, signature, constexprs, arch="gfx942", attrs=None, **options):
    return naiad.compile(ASTSource(fn, signature, constexprs, attrs or {}),
                         target=GPUTarget("hip", arch, ARCHS.get(arch, 64)), options=options)


ALIGNED = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]],
           (2,): [["tt.divisibility", 16]], (3,): [["tt.divisibility", 16]]}


def _directive(isa: str, name: str) -> int:
    found = re.search(rf"\.{name}\s+(\d+)", isa)
    assert found, f".{name} not in the ISA"
    return int(found.group(1))


@pytest.mark.parametrize("arch", ARCHS)
def test_an_add_moves_128_bits_per_access(arch):
    isa = _compile(add_kernel, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"},
                   {"BLOCK": 1024}, arch, ALIGNED).asm["amdgcn"]
    loads = len(re.findall(r"global_load_(dwordx4|b128) ", isa))        # CDNA / RDNA spellings
    stores = len(re.findall(r"global_store_(dwordx4|b128) ", isa))
    assert stores >= 1 and loads == 2 * stores
    assert not re.search(r"global_(load|store)_(dword|b32) ", isa)
    assert _directive(isa, "amdhsa_private_segment_fixed_size") == 0        # no scratch


@pytest.mark.parametrize("arch", ARCHS)
def test_a_reduction_moves_values_across_lanes_and_waves(arch):
    kernel = _compile(row_sum, {"x": "*fp32", "out": "*fp32", "n": "i32"}, {"BLOCK": 1024}, arch,
                      num_warps=4)
    isa = kernel.asm["amdgcn"]
    lanes = ARCHS[arch]
    # a butterfly inside a wave: each lane ^ 1, 2, 4... move, as LLVM's assembler prints it
    butterfly = (["quad_perm:[1,0,3,2]", "quad_perm:[2,3,0,1]", "swizzle(SWAP,4)", "swizzle(SWAP,8)",
                  "swizzle(SWAP,16)", "ds_bpermute_b32"] if lanes == 64 else
                 ["row_xmask:1", "row_xmask:2", "row_xmask:4", "row_xmask:8", "v_permlanex16_b32"])
    for move in butterfly:
        assert move in isa, move
    if lanes == 32:                            # lane i of each row of 16 reads lane i of the other
        assert "0x76543210" in isa and "0xfedcba98" in isa
    assert "s_barrier" in isa and re.search(r"ds_(write|store)_b32", isa)   # then across the waves
    assert 0 < _directive(isa, "amdhsa_group_segment_fixed_size") <= 65536
    assert kernel.metadata.shared == _directive(isa, "amdhsa_group_segment_fixed_size")
    assert _directive(isa, "amdhsa_private_segment_fixed_size") == 0
    assert (re.search(r"\.amdhsa_wavefront_size32\s+1", isa) is not None) == (lanes == 32)


def test_the_code_object_is_an_amd_hsa_elf():
    hsaco = _compile(add_kernel, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"},
                     {"BLOCK": 256}).asm["hsaco"]
    assert hsaco[:4] == b"\x7fELF" and hsaco[4] == 2                     # 64-bit
    assert hsaco[7] == 64                                               # ELFOSABI_AMDGPU_HSA
    e_type, e_machine = struct.unpack_from("<HH", hsaco, 16)
    assert (e_type, e_machine) == (3, 224)                              # ET_DYN, EM_AMDGPU
    assert b"amdhsa.kernels" in hsaco and b"add_kernel" in hsaco


def test_naiad_compile_writes_every_stage(tmp_path):
    source = tmp_path / "kernels.py"
    source.write_text("import naiad\nimport naiad.language as tl\n\n\n@naiad.jit\n"
                      "def scale(x, out, n, BLOCK: tl.constexpr):\n"
                      "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                      "    tl.store(out + offs, tl.load(x + offs, mask=offs < n) * 2.0, mask=offs < n)\n")
    out = tmp_path / "out"
    assert cli.main(["compile", str(source), "--kernel-name", "scale", "--signature",
                     "*fp32:16,*fp32:16,i32,256", "--target", "hip:gfx942", "--out-dir", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == ["scale.amdgcn", "scale.hsaco", "scale.json", "scale.llir", "scale.ttgir", "scale.ttir"]
    assert '"warp_size": 64' in (out / "scale.json").read_text()
    assert "amdgpu_kernel" in (out / "scale.llir").read_text()


@pytest.mark.parametrize("case", test_ops.COMPILE_CASES, ids=lambda c: c.id)
def test_every_cuda_test_kernel_compiles_for_gfx942(case):
    """tests/nvidia's kernels: each compiles to a code object, or names the math function the
    backend does not have yet."""
    try:
        kernel = _compile(case.fn, case.signature, case.constexprs, num_warps=case.num_warps)
    except NaiadError as error:
        assert re.search(r"(math function \w+|double-precision \w+) is not available on the hip "
                         r"backend yet", str(error)), str(error)
        assert case.id in MISSING_MATH
        return
    assert case.id not in MISSING_MATH
    assert kernel.asm["hsaco"][:4] == b"\x7fELF"


#: tests/nvidia cases whose math the backend has no implementation of yet.
MISSING_MATH: set[str] = set()


def test_a_missing_math_function_is_named_with_the_kernel(monkeypatch):
    """Every libdevice function has Naiad's own now; one taken away (as a function added to
    libdevice later would be) is refused naming the kernel and the function."""
    from naiad.codegen.mathlib import bessel_jy

    monkeypatch.delitem(bessel_jy.FUNCTIONS, "j0f")
    with pytest.raises(NaiadError, match="kernel 'bessel_kernel' cannot be compiled by the hip backend "
                                         "yet .*math function j0f? is not available on the hip backend"):
        _compile(bessel_kernel, {"x": "*fp32", "out": "*fp32"}, {"BLOCK": 64})
    monkeypatch.undo()
    assert _compile(bessel_kernel, {"x": "*fp32", "out": "*fp32"}, {"BLOCK": 64}).asm["hsaco"][:4] == b"\x7fELF"


def test_bad_targets_and_options_say_what_to_do():
    with pytest.raises(NaiadError, match="hip target 'sm90': an AMD GPU architecture is named "
                                         "gfx<number>"):
        _compile(add_kernel, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"}, {"BLOCK": 64}, "sm90")
    with pytest.raises(NaiadError, match="matrix_instr_nonkdim=8: the hip backend's MFMA instructions "
                                         "are 32 or 16 wide -- fix: pass 32, 16, or 0"):
        _compile(add_kernel, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"}, {"BLOCK": 64},
                 matrix_instr_nonkdim=8)
    with pytest.raises(NaiadError, match="num_warps=32: the hip backend needs a power of two with at "
                                         "most 1024 threads per block"):
        _compile(add_kernel, {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"}, {"BLOCK": 64},
                 num_warps=32)


def test_without_a_linker_the_error_says_how_to_get_one(monkeypatch):
    from naiad.backends.hip import linker

    monkeypatch.setattr(linker, "find_lld", lambda: None)
    with pytest.raises(NaiadError, match="linking the AMD code object needs ld.lld, and none was "
                                         "found -- fix: pip install 'naiad\\[hip\\]'"):
        linker.link(b"\x7fELF", "k")


def test_the_backend_is_listed_inactive_with_its_reason(capsys):
    assert cli.main(["backends"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^hip\s+in-tree\s+\S+\s+3\s+no", out, re.M)
    assert "hip (in-tree" in out and "compiling with --target hip:<gfx arch> works" in out


@naiad.jit
def scale(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs) * 2.0)


def test_an_edited_llir_calling_a_library_intrinsic_is_an_error_not_a_crash(tmp_path, monkeypatch):
    """LLVM's AMDGPU code generator stops the process on ``llvm.sin.f64`` ("no libcall
    available"); an overridden ``.llir`` with one gets an error naming the kernel."""
    from naiad.compiler import cache

    monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NAIAD_OVERRIDE_DIR", str(tmp_path / "override"))
    cache._managers.clear()
    signature = {"x": "*fp64", "out": "*fp64"}
    original = _compile(scale, signature, {"BLOCK": 64})
    edited = original.asm["llir"] + (
        "\ndeclare double @llvm.sin.f64(double)\n"
        "define double @helper(double %v) {\n  %r = call double @llvm.sin.f64(double %v)\n  ret double %r\n}\n")
    folder = tmp_path / "override" / original.hash
    folder.mkdir(parents=True)
    (folder / "scale.llir").write_text(edited)
    monkeypatch.setenv("NAIAD_KERNEL_OVERRIDE", "1")
    with pytest.raises(NaiadError, match=r"kernel 'scale': its LLVM IR calls llvm.sin on doubles, .* "
                                         r"-- fix: use tl.sin"):
        _compile(scale, signature, {"BLOCK": 64})
