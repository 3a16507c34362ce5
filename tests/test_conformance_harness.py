"""The conformance harness's own logic (conformance/run.py, conformance/plugin.py), without
Triton's tests: junit parsing, the per-group table with regressions against a baseline, the
alias package's refusal to shadow a real Triton, and the plugin's kernel-source templating."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path


import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"naiad_conformance_{name}", ROOT / "conformance" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run = _load("run")
plugin = _load("plugin")

JUNIT = textwrap.dedent("""\
    <testsuites><testsuite>
      <testcase classname="language.test_core" name="test_add[int8]"/>
      <testcase classname="language.test_core" name="test_add[int16]"><failure message="boom"/></testcase>
      <testcase classname="language.test_core" name="test_add[bf16]"><skipped message="no bf16"/></testcase>
      <testcase classname="language.test_core" name="test_dot[1]"><error message="setup"/></testcase>
    </testsuite></testsuites>""")


def test_junit_outcomes_per_case(tmp_path):
    path = tmp_path / "r.xml"
    path.write_text(JUNIT)
    assert run.read_junit(path) == {"test_core::test_add[int8]": "passed", "test_core::test_add[int16]": "failed",
                                    "test_core::test_add[bf16]": "skipped", "test_core::test_dot[1]": "failed"}


def test_summary_counts_groups_and_regressions_against_the_baseline():
    results = {"test_core::test_add[int8]": "passed", "test_core::test_add[int16]": "failed",
               "test_core::test_add[bf16]": "skipped", "test_core::test_dot[1]": "failed"}
    baseline = {"test_core::test_add[int16]": "passed", "test_core::test_add[bf16]": "skipped",
                "test_core::test_dot[1]": "failed"}
    table = run.summarize(results, baseline).splitlines()
    assert "| test_core::test_add | 1 | 1 | 1 | 1 |" in table
    assert "| test_core::test_dot | 0 | 0 | 1 | 0 |" in table
    assert table[-1] == "| **total** | 1 | 1 | 2 | 1 |"


def test_alias_is_written_once_and_never_over_a_real_triton(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "site_packages", lambda python: tmp_path)
    run.install_alias(Path(sys.executable))
    init = tmp_path / "triton" / "__init__.py"
    assert "naiad.compat.enable()" in init.read_text()
    run.install_alias(Path(sys.executable))            # rewriting its own alias is fine
    init.write_text("# the real Triton\n")
    with pytest.raises(SystemExit, match="a real Triton is installed"):
        run.install_alias(Path(sys.executable))


@pytest.mark.shipped_backends
def test_patch_kernel_edits_the_source_of_a_kernel():
    import naiad.compat

    naiad.compat.enable()
    try:
        scale_kernel = importlib.import_module("tests.cpu.triton_kernels.scale").scale_kernel
        patched = plugin._patch_kernel(scale_kernel, {"* 2": "* 3"})
        x = np.arange(8, dtype=np.float32)
        y = np.empty_like(x)
        patched[(1,)](x, y, BLOCK=8)
        np.testing.assert_array_equal(y, x * 3)
        assert "* 2" in scale_kernel.src and "* 3" in patched.src
    finally:
        sys.modules.pop("tests.cpu.triton_kernels.scale", None)
        naiad.compat.disable()


def test_gpu_only_cases_are_skipped_with_a_reason_off_the_gpu():
    assert all(reason for reason in plugin.GPU_ONLY.values())
    assert "test_zero_strided_tensors" in plugin.GPU_ONLY


def test_an_existing_interpreter_gets_the_alias_on_its_path_only(tmp_path):
    """``--python``: no venv, no change to that interpreter's packages; the test processes see
    the alias first, then Naiad's checkout, then the plugin."""
    args = run.argparse.Namespace(python=Path(sys.executable), out=tmp_path)
    parts = run.test_path(args).split(run.os.pathsep)
    assert parts[0] == str(tmp_path / "alias") and parts[1] == str(run.REPO) and parts[2] == str(run.HERE)
    assert "naiad.compat.enable()" in (tmp_path / "alias" / "triton" / "__init__.py").read_text()
    without = run.test_path(run.argparse.Namespace(python=None, out=tmp_path)).split(run.os.pathsep)
    assert without[0] == str(run.HERE)
