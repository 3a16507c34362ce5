"""The NVIDIA toolchain: finding ptxas and libdevice, their versions, PTX -> cubin.

Fake ptxas executables (shell scripts) stand in for NVIDIA's where a test needs one it can
control; where a real ptxas is installed, real PTX from llvmlite's NVPTX target is compiled too.
"""

from __future__ import annotations

import os
import re
import stat
import sys

import pytest

from naiad.backends.cuda import toolchain
from naiad.errors import NaiadError

posix_only = pytest.mark.skipif(os.name == "nt", reason="the fake ptxas is a shell script")

_VERSION_SCRIPT = """#!/bin/sh
if [ "$1" = "--version" ]; then
  echo "ptxas: NVIDIA (R) Ptx optimizing assembler"
  echo "Cuda compilation tools, release {release}, V{release}.88"
  exit 0
fi
"""
# Writes its arguments and the PTX it was given to the file after -o: what a test can check
# (with shell builtins only: the tests empty PATH).
_COMPILING_SCRIPT = _VERSION_SCRIPT + """out=""; prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  prev="$a"
done
echo "ARGS $*" > "$out"
for a in "$@"; do
  case "$a" in *.ptx) while IFS= read -r line; do echo "$line"; done < "$a" >> "$out";; esac
done
"""
_FAILING_SCRIPT = _VERSION_SCRIPT + """echo "ptxas fatal   : Unresolved extern function 'naiad_missing'" >&2
exit 255
"""
_SILENT_SCRIPT = _VERSION_SCRIPT + "exit 0\n"


def _write_tool(path, text: str, executable: bool = True) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    mode = path.stat().st_mode
    path.chmod(mode | stat.S_IXUSR if executable else mode & ~(stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    return str(path)


def fake_ptxas(folder, release: str = "13.0", script: str = _COMPILING_SCRIPT) -> str:
    return _write_tool(folder / "ptxas", script.format(release=release))


@pytest.fixture
def cuda_knobs():
    """``naiad.knobs.cuda``, looked up before `clean` empties ``sys.path`` (the lookup imports
    the backend, and with it ctypes, when this test runs first)."""
    from naiad import knobs

    return knobs.cuda


@pytest.fixture
def clean(tmp_path, monkeypatch):
    """No toolchain anywhere: no variables, an empty PATH, sys.path = [tmp/site], no
    /usr/local/cuda, and empty caches.  Returns tmp_path."""
    for name in ("NAIAD_PTXAS_PATH", "NAIAD_LIBDEVICE_PATH", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    monkeypatch.setattr(toolchain, "_STANDARD_ROOT", str(tmp_path / "no-cuda"))
    monkeypatch.setattr(toolchain, "_found", {})
    monkeypatch.setattr(toolchain, "_versions", {})
    return tmp_path


# -- finding ptxas -----------------------------------------------------------------------------
def test_no_ptxas_anywhere_is_none(clean):
    assert toolchain.find_ptxas() is None


@posix_only
def test_ptxas_search_order(clean, monkeypatch):
    knob = fake_ptxas(clean / "knob")
    wheel = fake_ptxas(clean / "site" / "nvidia" / "cu13" / "bin")
    home = fake_ptxas(clean / "home" / "bin")
    path = fake_ptxas(clean / "cuda-path" / "bin")
    monkeypatch.setenv("NAIAD_PTXAS_PATH", knob)
    monkeypatch.setenv("CUDA_HOME", str(clean / "home"))
    monkeypatch.setenv("CUDA_PATH", str(clean / "cuda-path"))
    assert toolchain.find_ptxas() == knob
    monkeypatch.delenv("NAIAD_PTXAS_PATH")
    assert toolchain.find_ptxas() == wheel
    monkeypatch.setattr(sys, "path", [str(clean / "elsewhere")])
    assert toolchain.find_ptxas() == home
    monkeypatch.delenv("CUDA_HOME")
    assert toolchain.find_ptxas() == path


@posix_only
def test_ptxas_from_the_standard_root_then_path(clean, monkeypatch):
    standard = fake_ptxas(clean / "no-cuda" / "bin")
    on_path = fake_ptxas(clean / "empty")
    assert toolchain.find_ptxas() == standard
    os.remove(standard)
    monkeypatch.setattr(toolchain, "_found", {})
    assert toolchain.find_ptxas() == on_path


@posix_only
def test_ptxas_wheel_layouts(clean):
    site = clean / "site" / "nvidia"
    other = fake_ptxas(site / "cuda_future" / "bin")
    assert toolchain.find_ptxas() == other                    # any nvidia/*/bin/ptxas
    toolchain._found.clear()
    nvcc = fake_ptxas(site / "cuda_nvcc" / "bin")
    assert toolchain.find_ptxas() == nvcc                     # the CUDA 12 wheel before others
    toolchain._found.clear()
    cu13 = fake_ptxas(site / "cu13" / "bin")
    assert toolchain.find_ptxas() == cu13                     # the CUDA 13 wheel first


@posix_only
def test_a_ptxas_that_is_not_executable_is_skipped(clean):
    _write_tool(clean / "site" / "nvidia" / "cu13" / "bin" / "ptxas", "#!/bin/sh\n", executable=False)
    assert toolchain.find_ptxas() is None


@posix_only
def test_the_search_is_remembered_per_environment(clean, monkeypatch):
    first = fake_ptxas(clean / "a" / "bin")
    second = fake_ptxas(clean / "b" / "bin")
    monkeypatch.setenv("CUDA_HOME", str(clean / "a"))
    assert toolchain.find_ptxas() == first
    os.remove(first)
    assert toolchain.find_ptxas() == first         # same environment: not searched again
    monkeypatch.setenv("CUDA_HOME", str(clean / "b"))
    assert toolchain.find_ptxas() == second        # another environment: searched again


def test_ptxas_variable_naming_nothing_is_an_error(clean, monkeypatch):
    monkeypatch.setenv("NAIAD_PTXAS_PATH", str(clean / "missing" / "ptxas"))
    with pytest.raises(NaiadError) as info:
        toolchain.find_ptxas()
    message = str(info.value)
    assert "NAIAD_PTXAS_PATH=" in message and "missing" in message
    assert "is not an executable file" in message
    assert "set it to the path of ptxas" in message and "or unset it" in message


@posix_only
def test_ptxas_variable_naming_a_plain_file_is_an_error(clean, monkeypatch):
    plain = _write_tool(clean / "ptxas", "not a program", executable=False)
    monkeypatch.setenv("NAIAD_PTXAS_PATH", plain)
    with pytest.raises(NaiadError, match="NAIAD_PTXAS_PATH=.* is not an executable file"):
        toolchain.find_ptxas()


@posix_only
@pytest.mark.shipped_backends
def test_ptxas_knob_set_from_code_wins(cuda_knobs, clean, monkeypatch):
    chosen = fake_ptxas(clean / "chosen")
    fake_ptxas(clean / "home" / "bin")
    monkeypatch.setenv("CUDA_HOME", str(clean / "home"))
    cuda_knobs.ptxas_path = chosen
    assert toolchain.find_ptxas() == chosen


# -- finding libdevice -------------------------------------------------------------------------
def _bitcode(path, size: int = 16) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"BC\xc0\xde" + bytes(size - 4))
    return str(path)


def test_libdevice_search_order(clean, monkeypatch):
    assert toolchain.find_libdevice() is None
    standard = _bitcode(clean / "no-cuda" / "nvvm" / "libdevice" / "libdevice.10.bc")
    toolchain._found.clear()                   # the same environment: the answer was remembered
    assert toolchain.find_libdevice() == standard
    path = _bitcode(clean / "cuda-path" / "nvvm" / "libdevice" / "libdevice.10.bc")
    monkeypatch.setenv("CUDA_PATH", str(clean / "cuda-path"))
    assert toolchain.find_libdevice() == path
    home = _bitcode(clean / "home" / "nvvm" / "libdevice" / "libdevice.10.bc")
    monkeypatch.setenv("CUDA_HOME", str(clean / "home"))
    assert toolchain.find_libdevice() == home
    wheel = _bitcode(clean / "wheel" / "nvidia" / "cu13" / "nvvm" / "libdevice" / "libdevice.10.bc")
    monkeypatch.setattr(sys, "path", [str(clean / "wheel")])
    assert toolchain.find_libdevice() == wheel
    knob = _bitcode(clean / "mine.bc")
    monkeypatch.setenv("NAIAD_LIBDEVICE_PATH", knob)
    assert toolchain.find_libdevice() == knob


def test_libdevice_wheel_layouts(clean):
    nvidia = clean / "site" / "nvidia"
    other = _bitcode(nvidia / "cuda_future" / "nvvm" / "libdevice" / "libdevice.11.bc")
    assert toolchain.find_libdevice() == other
    toolchain._found.clear()
    nvvm = _bitcode(nvidia / "nvvm" / "libdevice" / "libdevice.10.bc")
    assert toolchain.find_libdevice() == nvvm
    toolchain._found.clear()
    nvcc = _bitcode(nvidia / "cuda_nvcc" / "nvvm" / "libdevice" / "libdevice.10.bc")
    assert toolchain.find_libdevice() == nvcc
    toolchain._found.clear()
    cu13 = _bitcode(nvidia / "cu13" / "nvvm" / "libdevice" / "libdevice.10.bc")
    assert toolchain.find_libdevice() == cu13


def test_libdevice_variable_naming_nothing_is_an_error(clean, monkeypatch):
    monkeypatch.setenv("NAIAD_LIBDEVICE_PATH", str(clean / "nope.bc"))
    with pytest.raises(NaiadError) as info:
        toolchain.find_libdevice()
    message = str(info.value)
    assert "NAIAD_LIBDEVICE_PATH=" in message and "nope.bc" in message and "is not a file" in message
    assert "path of libdevice.10.bc" in message and "or unset it" in message


# -- versions and the cache key ----------------------------------------------------------------
@posix_only
def test_ptxas_version(clean):
    assert toolchain.ptxas_version(fake_ptxas(clean / "a", release="12.8")) == "12.8"
    assert toolchain.ptxas_version(fake_ptxas(clean / "b", release="13.1")) == "13.1"


@posix_only
def test_a_ptxas_without_a_version_is_an_error(clean):
    broken = _write_tool(clean / "ptxas", "#!/bin/sh\necho hello\n")
    with pytest.raises(toolchain.PTXASError) as info:
        toolchain.ptxas_version(broken)
    message = str(info.value)
    assert f"{broken} --version did not print a CUDA release" in message
    assert "'hello'" in message and "NAIAD_PTXAS_PATH" in message and "nvidia-cuda-nvcc" in message


@posix_only
def test_toolchain_hash_follows_ptxas_release_and_libdevice(clean, monkeypatch):
    ptxas = fake_ptxas(clean / "home" / "bin", release="12.8")
    libdevice = _bitcode(clean / "home" / "nvvm" / "libdevice" / "libdevice.10.bc", size=16)
    monkeypatch.setenv("CUDA_HOME", str(clean / "home"))
    first = toolchain.toolchain_hash()
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    assert toolchain.toolchain_hash() == first
    fake_ptxas(clean / "home" / "bin", release="13.0")
    os.utime(ptxas, ns=(1, 1))                     # a new file: its release is read again
    second = toolchain.toolchain_hash()
    assert second != first
    _bitcode(clean / "home" / "nvvm" / "libdevice" / "libdevice.10.bc", size=32)
    assert toolchain.toolchain_hash() != second
    assert libdevice == toolchain.find_libdevice()


def test_toolchain_hash_without_any_tool(clean):
    assert re.fullmatch(r"[0-9a-f]{64}", toolchain.toolchain_hash())


# -- PTX versions ------------------------------------------------------------------------------
def test_ptx_versions():
    assert toolchain.ptx_version_for(90) == 80
    assert toolchain.ptx_features(90) == "+ptx80"
    assert toolchain.ptx_version_for(80) == 70
    assert toolchain.ptx_version_for(100) == 86
    assert toolchain.ptx_version_for(120) == 87
    assert toolchain.ptx_version_for(91) == 80        # unlisted: the nearest listed below
    assert toolchain.ptx_version_for(130) == 90       # newer than listed: the newest LLVM writes


def test_ptx_version_for_an_old_gpu_is_an_error():
    with pytest.raises(NaiadError, match="sm_61 is not supported: the cuda backend needs compute "
                                         "capability 7.0 \\(Volta\\) or newer"):
        toolchain.ptx_version_for(61)


def _nvptx_machine(arch: int):
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    return llvm, target.create_target_machine(cpu=f"sm_{arch}", features=toolchain.ptx_features(arch))


_ADD_IR = """
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
define ptx_kernel void @add(ptr addrspace(1) %x, ptr addrspace(1) %out) {
  %i = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %p = getelementptr float, ptr addrspace(1) %x, i32 %i
  %v = load float, ptr addrspace(1) %p
  %w = fadd float %v, 1.0
  %q = getelementptr float, ptr addrspace(1) %out, i32 %i
  store float %w, ptr addrspace(1) %q
  ret void
}
"""


@pytest.mark.parametrize("arch", sorted(toolchain._PTX_VERSIONS))
def test_llvm_writes_each_listed_ptx_version(arch, capfd):
    llvm, machine = _nvptx_machine(arch)
    ptx = machine.emit_assembly(llvm.parse_assembly(_ADD_IR))
    version = toolchain.ptx_version_for(arch)
    assert f".version {version // 10}.{version % 10}" in ptx
    assert f".target sm_{arch}" in ptx
    assert "not a recognized feature" not in capfd.readouterr().err


# -- PTX -> cubin ------------------------------------------------------------------------------
@posix_only
def test_ptx_to_cubin_runs_ptxas_with_the_arch_options_and_ptx(clean):
    ptxas = fake_ptxas(clean / "bin")
    cubin = toolchain.ptx_to_cubin(".version 8.0\n// the kernel\n", 90, ptxas=ptxas, maxnreg=64).cubin
    args, ptx = cubin.decode().split("\n", 1)
    assert re.fullmatch(r"ARGS -arch=sm_90a -O3 -v --maxrregcount=64 \S+kernel\.ptx -o \S+out\.cubin", args)
    assert ptx == ".version 8.0\n// the kernel\n"
    plain = toolchain.ptx_to_cubin("x", 80, ptxas=ptxas, opt_level=0).cubin.decode()
    assert plain.startswith("ARGS -arch=sm_80 -O0 -v /") and "maxrregcount" not in plain


_REPORT = """ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for helper
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers
ptxas info    : Function properties for k
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 384 bytes cmem[0]
"""


@posix_only
@pytest.mark.parametrize("report, registers, spilled", [(_REPORT, 255, 20), ("", 0, 0)])
def test_ptx_to_cubin_reads_registers_and_spills_from_the_report(clean, report, registers, spilled):
    script = _COMPILING_SCRIPT + "".join(f"echo '{line}' >&2\n" for line in report.splitlines())
    assembled = toolchain.ptx_to_cubin("x", 90, ptxas=fake_ptxas(clean / "bin", script=script))
    assert (assembled.registers, assembled.spill_bytes) == (registers, spilled)
    assert assembled.cubin.startswith(b"ARGS -arch=sm_90a")


@posix_only
def test_ptxas_failure_shows_its_output_the_command_and_what_to_do(clean):
    ptxas = fake_ptxas(clean / "bin", release="12.4", script=_FAILING_SCRIPT)
    with pytest.raises(toolchain.PTXASError) as info:
        toolchain.ptx_to_cubin("bad", 86, ptxas=ptxas)
    message = str(info.value)
    assert isinstance(info.value, NaiadError)
    assert "ptxas failed (exit status 255) on the PTX for sm_86" in message
    assert "Unresolved extern function 'naiad_missing'" in message
    assert f"command: {ptxas} -arch=sm_86 -O3 " in message
    assert "release 12.4" in message and "NAIAD_PTXAS_PATH" in message
    assert "NAIAD_KERNEL_DUMP=1" in message


@posix_only
def test_ptxas_that_writes_no_cubin_is_an_error(clean):
    ptxas = fake_ptxas(clean / "bin", script=_SILENT_SCRIPT)
    with pytest.raises(toolchain.PTXASError, match="ptxas failed \\(exit status 0\\)"):
        toolchain.ptx_to_cubin("x", 90, ptxas=ptxas)


def test_ptxas_that_cannot_run_is_an_error(clean):
    missing = str(clean / "gone" / "ptxas")
    with pytest.raises(toolchain.PTXASError) as info:
        toolchain.ptx_to_cubin("x", 90, ptxas=missing)
    assert f"cannot run {missing} -arch=sm_90a" in str(info.value)
    assert "NAIAD_PTXAS_PATH" in str(info.value)


def _real_ptxas() -> str | None:
    toolchain._found.clear()
    return toolchain.find_ptxas()


@pytest.mark.parametrize("arch", [80, 90])
def test_real_ptxas_compiles_llvm_ptx(arch):
    ptxas = _real_ptxas()
    if ptxas is None:
        pytest.skip("no ptxas on this machine (pip install nvidia-cuda-nvcc)")
    llvm, machine = _nvptx_machine(arch)
    ptx = machine.emit_assembly(llvm.parse_assembly(_ADD_IR))
    assembled = toolchain.ptx_to_cubin(ptx, arch, ptxas=ptxas, maxnreg=32)
    assert assembled.cubin[:4] == b"\x7fELF"
    assert b"add" in assembled.cubin
    assert 0 < assembled.registers <= 32 and assembled.spill_bytes == 0
    assert re.fullmatch(r"\d+\.\d+", toolchain.ptxas_version(ptxas))


def test_real_ptxas_rejects_broken_ptx():
    ptxas = _real_ptxas()
    if ptxas is None:
        pytest.skip("no ptxas on this machine (pip install nvidia-cuda-nvcc)")
    with pytest.raises(toolchain.PTXASError) as info:
        toolchain.ptx_to_cubin(".version 8.0\n.target sm_90\n.address_size 64\nthis is not ptx\n",
                               90, ptxas=ptxas)
    message = str(info.value)
    assert "ptxas failed" in message and "kernel.ptx" in message and "syntax error" in message


# -- SASS (kernel.asm["sass"]) -------------------------------------------------------------------
_CUOBJDUMP_SCRIPT = """#!/bin/sh
echo "SASS OF $2 FROM $1"
while IFS= read -r line; do echo "$line"; done < "$2"
"""


def _cubin_kernel():
    from .conftest import compile_cuda
    from .test_ops import affine_kernel

    return compile_cuda(affine_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                        {"BLOCK": 128})


@pytest.fixture
def compiled():
    """A compiled cuda kernel (made before `clean` empties sys.path)."""
    return _cubin_kernel()


@posix_only
@pytest.mark.shipped_backends
def test_sass_is_the_cubin_through_cuobjdump(compiled, clean, monkeypatch):
    kernel = compiled
    kernel.asm["cubin"] = b"\x7fELF fake cubin\n"
    _write_tool(clean / "cuda" / "bin" / "cuobjdump", _CUOBJDUMP_SCRIPT)
    monkeypatch.setenv("CUDA_HOME", str(clean / "cuda"))
    sass = kernel.asm["sass"]
    assert sass.startswith("SASS OF ") and " FROM -sass\n" in sass and "fake cubin" in sass
    assert kernel.asm["sass"] is sass                      # made once
    with pytest.raises(KeyError):
        kernel.asm["no such view"]


@pytest.mark.shipped_backends
def test_sass_without_cuobjdump_says_what_to_install(compiled, clean):
    kernel = compiled
    kernel.asm["cubin"] = b"\x7fELF fake cubin\n"
    with pytest.raises(NaiadError, match=r"kernel.asm\['sass'\] needs NVIDIA's cuobjdump, which "
                                         r"was not found -- fix: pip install nvidia-cuda-cuobjdump"):
        kernel.asm["sass"]


@posix_only
@pytest.mark.shipped_backends
def test_sass_without_nvdisasm_says_what_to_install(compiled, clean, monkeypatch):
    """CUDA 13's cuobjdump wheel runs a disassembler that comes in a wheel of its own."""
    kernel = compiled
    kernel.asm["cubin"] = b"\x7fELF fake cubin\n"
    _write_tool(clean / "cuda" / "bin" / "cuobjdump",
                "#!/bin/sh\necho \"cuobjdump fatal   : Could not find executable file 'nvdisasm'\" >&2"
                "\nexit 1\n")
    monkeypatch.setenv("CUDA_HOME", str(clean / "cuda"))
    with pytest.raises(NaiadError, match=r"cuobjdump -sass failed \(exit status 1\): cuobjdump fatal"
                                         r".*'nvdisasm' -- fix: pip install nvidia-cuda-nvdisasm"):
        kernel.asm["sass"]


@pytest.mark.shipped_backends
def test_sass_of_a_ptx_binary_asks_for_ptxas(compiled, clean):
    kernel = compiled
    kernel.asm["cubin"] = b".version 8.0\n"
    with pytest.raises(NaiadError, match=r"needs a cubin, and this kernel's binary is its PTX"):
        kernel.asm["sass"]


@pytest.mark.shipped_backends
def test_real_sass_names_the_kernel():
    from naiad.backends.cuda.toolchain import _search_tool

    if _search_tool("cuobjdump") is None or toolchain.find_ptxas() is None:
        pytest.skip("needs cuobjdump (the CUDA toolkit) and ptxas")
    sass = _cubin_kernel().asm["sass"]
    assert "affine_kernel" in sass and re.search(r"\bF(MUL|FMA|ADD)\b", sass)
