"""Compiling for an OpenCL target needs no device: the stages and the SPIR-V they make."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import naiad
from naiad.backends.compiler import GPUTarget
from naiad.compiler.compiler import ASTSource
from naiad.errors import NaiadError
from test_kernels import softmax_kernel

TARGET = GPUTarget("opencl", "intel-cpu", 16)
SPIRV_MAGIC = 0x07230203


SIGNATURE = {"out": "*fp32", "x": "*fp32", "n": "i32", "BLOCK": "constexpr"}


def _compile(options=None, target=TARGET):
    return naiad.compile(ASTSource(softmax_kernel, SIGNATURE, {"BLOCK": 1024}, {}), target=target,
                         options=options or {})


def test_every_stage_is_kept_and_the_binary_is_spirv():
    kernel = _compile()
    assert list(kernel.asm) == ["ttir", "ttgir", "llir", "spv"]
    spv = kernel.asm["spv"]
    assert struct.unpack("<I", spv[:4])[0] == SPIRV_MAGIC
    assert 'ttg.target = "opencl:intel-cpu"' in kernel.asm["ttgir"]
    assert '"ttg.threads-per-warp" = 16' in kernel.asm["ttgir"]


def test_the_kernel_is_a_spir_kernel_of_the_sub_group_size():
    llir = _compile({"num_warps": 8}).asm["llir"]
    assert "define spir_kernel void @softmax_kernel" in llir
    assert "!intel_reqd_sub_group_size" in llir and "!{i32 16}" in llir
    assert "_Z21sub_group_shuffle_xorij" in llir                    # the reductions' lanes
    assert "_Z7barrierj" in llir                                    # ... and warps


@pytest.mark.parametrize("lanes", [8, 32])
def test_threads_per_warp_sizes_the_sub_groups_and_the_layouts(lanes):
    kernel = _compile({"threads_per_warp": lanes})
    assert f"!{{i32 {lanes}}}" in kernel.asm["llir"]
    assert f'"ttg.threads-per-warp" = {lanes}' in kernel.asm["ttgir"]
    assert kernel.metadata["threads_per_warp"] == lanes


def test_shared_memory_is_a_sized_local_array():
    kernel = _compile({"num_warps": 4})
    shared = kernel.metadata["shared"]
    assert shared > 0
    assert f"addrspace(3) global [{shared} x i8]" in kernel.asm["llir"]


@pytest.mark.parametrize("option, value", [("num_warps", 3), ("threads_per_warp", 12)])
def test_a_warp_count_or_size_that_is_not_a_power_of_two_is_refused(option, value):
    with pytest.raises(NaiadError, match=rf"{option}={value}: the opencl backend needs a power of two"):
        _compile({option: value})


def test_the_cli_compiles_for_a_named_device_with_none_present(tmp_path):
    source = tmp_path / "kernels.py"
    source.write_text(
        "import naiad\nimport naiad.language as tl\n\n"
        "@naiad.jit\ndef add(x, y, out, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    m = offs < n\n"
        "    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "naiad.tools.cli", "compile", str(source),
                           "--kernel-name", "add", "--signature", "*fp32:16,*fp32:16,*fp32:16,i32,256",
                           "--target", "opencl:intel-cpu:16", "--out-dir", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert struct.unpack("<I", (out / "add.spv").read_bytes()[:4])[0] == SPIRV_MAGIC
    assert json.loads((out / "add.json").read_text())["target"]["backend"] == "opencl"


def test_a_module_gives_the_same_spirv_however_many_came_before():
    """LLVM's SPIR-V back end (llvmlite 0.50) keeps module analysis in static maps holding the
    addresses of earlier modules' objects: emitted after others were freed, a module came out
    with ids defined twice, which Intel's runtime crashed on.  `naiad_opencl.spirv` emits each
    module in a process forked from a worker that emitted nothing; every emission of the same
    optimized module is then the same binary (in one process, about one in five differed)."""
    from naiad_opencl.spirv import emit_spirv

    texts = [naiad.compile(ASTSource(softmax_kernel, SIGNATURE, {"BLOCK": block}, {}), target=TARGET).asm["llir"]
             for block in (64, 256, 1024)]
    first = [emit_spirv(text) for text in texts]
    for _ in range(15):
        assert [emit_spirv(text) for text in texts] == first


def test_emitting_re_runs_nothing_of_the_users_script(tmp_path):
    """The emissions' processes are forks of a worker started with ``-m``: a script that
    compiles kernels at its top level (no ``if __name__ == "__main__"``) runs once."""
    script = tmp_path / "user_script.py"
    script.write_text(
        "import naiad\n"
        "from naiad.backends.compiler import GPUTarget\n"
        "from naiad.compiler.compiler import ASTSource\n"
        "from test_kernels import softmax_kernel\n"
        "print('ran', flush=True)\n"
        "sig = {'out': '*fp32', 'x': '*fp32', 'n': 'i32', 'BLOCK': 'constexpr'}\n"
        "naiad.compile(ASTSource(softmax_kernel, sig, {'BLOCK': 128}, {}),\n"
        "              target=GPUTarget('opencl', 'intel-cpu', 16))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path]),
           "NAIAD_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ran") == 1
