"""``naiad compile``: ahead-of-time compilation with Triton's signature syntax.  Every stage file
and the JSON metadata are written; the written object runs (loaded through the CPU driver)
and matches numpy; divisibility and constexpr entries reach the TTIR; bad command lines give
one clear line naming the argument, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from naiad.backends.selection import driver_for
from naiad.backends.discovery import registry
from naiad.tools import cli
from plugin_fixtures import subprocess_env

pytestmark = pytest.mark.shipped_backends

KERNELS = textwrap.dedent("""\
    import naiad
    import naiad.language as tl

    @naiad.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)
    """)
SIGNATURE = "*fp32:16,*fp32:16,*fp32:16,i32,256"


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def test_every_stage_and_the_metadata_are_written_and_the_object_runs(kernel_file, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["compile", str(kernel_file), "--kernel-name", "add", "--signature", SIGNATURE,
                     "--target", "cpu", "--out-dir", str(out), "--timings"]) == 0
    assert {p.name for p in out.iterdir()} == {"add.ttir", "add.ttgir", "add.llir", "add.obj", "add.json"}
    printed = capsys.readouterr().out
    assert "compiled add for cpu:" in printed
    assert "from the on-disk cache" in printed or all(f"{stage} " in printed.splitlines()[0]
                                                      for stage in ("ttir", "ttgir", "llir", "obj"))
    meta = json.loads((out / "add.json").read_text())
    assert meta["stages"] == ["ttir", "ttgir", "llir", "obj"] and meta["target"]["backend"] == "cpu"
    ttir = (out / "add.ttir").read_text()
    assert "tt.divisibility = 16" in ttir and "256" in ttir        # the hint and the constexpr
    # Load the written object through the CPU driver and launch it.
    driver = driver_for(registry["cpu"])
    module, function, *_ = driver.load_binary("add", (out / "add.obj").read_bytes(), meta["metadata"], 0)
    launcher = driver.make_launcher([tuple(s) for s in meta["signature"]], meta["metadata"])
    x, y = np.arange(1000, dtype=np.float32), np.ones(1000, dtype=np.float32)
    z = np.zeros_like(x)
    launcher(4, 1, 1, 0, function, None, None, None, None, x, y, z, 1000, 256)
    np.testing.assert_array_equal(z, x + y)
    del module          # the loaded code lives as long as the module object


def test_equal_to_one_entries_become_constants(kernel_file, tmp_path):
    out = tmp_path / "one"
    assert cli.main(["compile", str(kernel_file), "--kernel-name", "add", "--signature",
                     "*fp32,*fp32,*fp32,i32:1,256", "--out-dir", str(out)]) == 0
    ttir = (out / "add.ttir").read_text()
    assert "tt.divisibility" not in ttir and "%arg3" not in ttir


@pytest.mark.parametrize("argv, message", [
    (["--kernel-name", "sub", "--signature", SIGNATURE], "defines no @jit function 'sub'; it defines: add"),
    (["--kernel-name", "add", "--signature", "*fp32,*fp32"], "--signature has 2 entries but add has 5 parameters"),
    (["--kernel-name", "add", "--signature", "*fp32,*fp32,*fp32,i32,i32"],
     "parameter 'BLOCK' is a tl.constexpr: give its value"),
    (["--kernel-name", "add", "--signature", "*fp32,*fp32,*fp32,q7,256"], "'q7' is not a type string"),
    (["--kernel-name", "add", "--signature", "*fp32,*fp32,*fp32,i32:8,256"], "after ':' write 16"),
    (["--kernel-name", "add", "--signature", SIGNATURE, "--target", "nosuch"], "no backend named 'nosuch'"),
    (["--kernel-name", "add", "--signature", SIGNATURE, "--target", "nosuch:90"], "backends compile for"),
    (["--kernel-name", "add", "--signature", SIGNATURE, "--target", "cpu:aarch64-generic"],
     "cannot compile for CPU 'aarch64-generic' on this machine"),
])
def test_bad_command_lines_name_the_argument(kernel_file, tmp_path, capsys, argv, message):
    assert cli.main(["compile", str(kernel_file), "--out-dir", str(tmp_path / "x"), *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("naiad compile: ") and message in err and "Traceback" not in err


def test_console_script_in_a_fresh_process(kernel_file, tmp_path):
    result = subprocess.run([sys.executable, "-m", "naiad", "compile", str(kernel_file), "--kernel-name", "add",
                             "--signature", SIGNATURE, "--out-dir", str(tmp_path / "o")],
                            env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "o" / "add.obj").stat().st_size > 0


@pytest.mark.parametrize("text,expected", [
    ("cpu:x86_64-znver1", ("cpu", "x86_64-znver1", 1)),     # the CPU backend's default_warp_size
    ("cpu:x86_64-znver1:4", ("cpu", "x86_64-znver1", 4)),
    ("nosuchbackend:90", ("nosuchbackend", 90, 32)),         # unknown backends: Triton's 32
])
def test_target_strings_take_the_backends_warp_size(text, expected):
    from naiad.tools.aot import parse_target

    target = parse_target(text)
    assert (target.backend, target.arch, target.warp_size) == expected


def test_a_plugin_target_writes_its_own_stages(kernel_file, tmp_path, plugin, capsys):
    """A plugin backend (the toy fixture) compiles ahead of time through the same command: its
    stages, written with the codec it declared, and its target in the metadata."""
    out = tmp_path / "toy-out"
    assert cli.main(["compile", str(kernel_file), "--kernel-name", "add", "--signature", SIGNATURE,
                     "--target", "toy:v1", "--out-dir", str(out), "--timings"]) == 0
    assert {p.name for p in out.iterdir()} == {"add.ttir", "add.toyasm", "add.toybin", "add.json"}
    assert "compiled add for toy:v1" in capsys.readouterr().out
    meta = json.loads((out / "add.json").read_text())
    assert meta["stages"] == ["ttir", "toyasm", "toybin"]
    assert (meta["target"]["backend"], meta["target"]["arch"], meta["target"]["warp_size"]) == ("toy", "v1", 32)
    ttir = (out / "add.ttir").read_text()
    assert (out / "add.toyasm").read_text() == f"toyasm({ttir})"
    assert (out / "add.toybin").read_bytes() == f"toybin(toyasm({ttir}))".encode()


def test_cuda_target_compiles_without_a_gpu(kernel_file, tmp_path):
    """Ahead-of-time compilation for an NVIDIA GPU on a machine with none: PTX always, a cubin
    when ptxas is installed (the cuda extra), otherwise the PTX the driver would compile."""
    from naiad.backends.cuda.driver import CUDADriver
    from naiad.backends.cuda.toolchain import find_ptxas

    if CUDADriver.is_active():
        pytest.skip("this test is about machines without a GPU")
    out = tmp_path / "cuda-out"
    assert cli.main(["compile", str(kernel_file), "--kernel-name", "add", "--signature",
                     "*fp32:16,*fp32:16,*fp32:16,i32:16,256", "--target", "cuda:90",
                     "--out-dir", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {"add.ttir", "add.ttgir", "add.llir", "add.ptx",
                                               "add.cubin", "add.json"}
    ptx = (out / "add.ptx").read_text()
    assert ".target sm_90" in ptx and "ld.global.v4" in ptx    # aligned, n % 16 == 0: 128-bit
    cubin = (out / "add.cubin").read_bytes()
    if find_ptxas() is not None:
        assert cubin[:4] == b"\x7fELF"
    else:
        assert cubin.rstrip(b"\0").decode() == ptx
    meta = json.loads((out / "add.json").read_text())
    assert meta["target"] == {"backend": "cuda", "arch": 90, "warp_size": 32}
    assert meta["metadata"]["num_warps"] == 4
