"""``naiad backends``, ``naiad backends --check DIR`` and ``naiad demo``."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys

import pytest

from naiad import knobs
from naiad.backends.compiler import BACKEND_API_VERSION
from naiad.tools import cli

from plugin_fixtures import compiler_class_name, driver_class_name, subprocess_env, write_plugin

MISSING_DEP = "naiad_missing_dependency_xyz"


def _run(args, capsys):
    """Run the CLI in this process; return (exit code, stdout)."""
    code = cli.main(args)
    out, _ = capsys.readouterr()
    return code, out


def _line_of(out: str, *words: str) -> str:
    lines = [line for line in out.splitlines() if all(w in line for w in words)]
    assert len(lines) == 1, f"expected one line with {words} in:\n{out}"
    return lines[0]


def _table(out: str) -> str:
    """The table part of ``naiad backends`` output (before "Problems:")."""
    return out.split("\nProblems:\n", 1)[0]


def _problems_section(out: str) -> str:
    assert "\nProblems:\n" in out, out
    return out.split("\nProblems:\n", 1)[1]


def _good_and_broken(tmp_path):
    good = write_plugin(tmp_path / "good", "goodbe", device="cpu")
    broken = write_plugin(tmp_path / "broken", "brokenbe", compiler_extra=f"import {MISSING_DEP}\n")
    return good, broken


def _check_listing_output(out: str, good, broken) -> None:
    row = _line_of(_table(out), "goodbe", "plugin dir")
    assert os.path.abspath(good) in row
    cells = row.split()
    assert cells[0] == "goodbe"
    assert "yes" in cells
    assert str(BACKEND_API_VERSION) in cells
    assert "goodbe:v1" in row          # the target its driver reports
    problems = _problems_section(out)
    line = _line_of(problems, "brokenbe")
    assert os.path.abspath(broken) in line
    assert f"No module named '{MISSING_DEP}'" in line
    assert "goodbe" not in problems


# --------------------------------------------------------------------------------------------
# Subprocesses: the installed console script and python -m naiad
# --------------------------------------------------------------------------------------------

def _console_script() -> str:
    script = os.path.join(os.path.dirname(sys.executable), "naiad")
    try:
        importlib.metadata.distribution("naiad")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("naiad is imported from a source tree, not installed: no console script")
    assert os.path.isfile(script), f"the naiad console script is not installed next to {sys.executable}"
    return script


def test_naiad_backends_console_script(tmp_path):
    good, broken = _good_and_broken(tmp_path)
    env = subprocess_env(NAIAD_PLUGIN_DIRS=f"{good};{broken}")
    result = subprocess.run([_console_script(), "backends"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    _check_listing_output(result.stdout, good, broken)


def test_python_m_naiad_backends(tmp_path):
    good, broken = _good_and_broken(tmp_path)
    env = subprocess_env(NAIAD_PLUGIN_DIRS=f"{good};{broken}")
    result = subprocess.run([sys.executable, "-m", "naiad", "backends"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    _check_listing_output(result.stdout, good, broken)


def test_naiad_backends_check_of_a_good_dir_in_a_fresh_process(tmp_path):
    good = write_plugin(tmp_path / "good", "goodbe")
    result = subprocess.run([sys.executable, "-m", "naiad", "backends", "--check", str(good), "--strict"],
                            env=subprocess_env(), capture_output=True, text=True, timeout=60)
    assert "No problems found." in result.stdout, result.stdout
    assert "PROBLEM" not in result.stdout
    assert result.returncode == 0, result.stdout + result.stderr


HANG = "import threading\nthreading.Event().wait()   # never returns\n"


def test_naiad_backends_reports_a_backend_whose_import_hangs(tmp_path):
    good = write_plugin(tmp_path / "good", "goodbe", device="cpu")
    hangs = write_plugin(tmp_path / "hangs", "hangsbe", compiler_extra=HANG)
    env = subprocess_env(NAIAD_PLUGIN_DIRS=f"{good};{hangs}", NAIAD_BACKEND_IMPORT_TIMEOUT="1")
    result = subprocess.run([sys.executable, "-m", "naiad", "backends"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "yes" in _line_of(_table(result.stdout), "goodbe").split()
    assert "failed" in _line_of(_table(result.stdout), "hangsbe").split()
    line = _line_of(_problems_section(result.stdout), "hangsbe")
    assert "importing backend 'hangsbe' (naiad.backends.hangsbe) did not finish within 1 s" in line


def test_naiad_backends_check_of_a_dir_whose_import_hangs(tmp_path):
    hangs = write_plugin(tmp_path / "hangs", "hangsbe", driver_extra=HANG)
    env = subprocess_env(NAIAD_BACKEND_IMPORT_TIMEOUT="1")
    result = subprocess.run([sys.executable, "-m", "naiad", "backends", "--check", str(hangs)],
                            env=env, capture_output=True, text=True, timeout=60)
    assert "PROBLEM: importing backend 'hangsbe' (naiad.backends.hangsbe) did not finish within " \
           "1 s" in result.stdout, result.stdout + result.stderr


LAUNCH = """
import numpy as np, naiad, naiad.language as tl
@naiad.jit
def double(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)
x = np.arange(8, dtype=np.float32)
double[(1,)](x, 8, BLOCK=8)
print(x.tolist())
"""


@pytest.mark.shipped_backends
@pytest.mark.parametrize("declared", [True, False], ids=["declared_elsewhere", "undeclared"])
def test_a_numpy_launch_is_not_held_up_by_a_plugin_whose_import_hangs(tmp_path, declared):
    """A plugin that declares another device is never imported; one whose device types cannot
    be read from its driver.py is imported under the time limit, then skipped."""
    extra = {} if declared else dict(device=None, driver_extra="HangsbeDriver.device_types = ('x',)\n")
    hangs = write_plugin(tmp_path / "hangs", "hangsbe", compiler_extra=HANG, **extra)
    script = tmp_path / "launch.py"
    script.write_text(LAUNCH)
    env = subprocess_env(NAIAD_PLUGIN_DIRS=str(hangs), NAIAD_BACKEND_IMPORT_TIMEOUT="2")
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str([2.0 * i for i in range(8)])
    assert ("did not finish within 2 s" in result.stderr) is not declared


def test_python_m_naiad_demo_runs_the_gallery_on_the_cpu():
    result = subprocess.run([sys.executable, "-m", "naiad", "demo"], env=subprocess_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Running the gallery on the 'cpu' backend" in result.stdout
    for name in ("vector add", "softmax", "layernorm", "matmul", "dropout"):
        assert "  ok " in _line_of(result.stdout, name), result.stdout
    assert "5 of 5 kernels correct." in result.stdout


# --------------------------------------------------------------------------------------------
# naiad backends (in process)
# --------------------------------------------------------------------------------------------

def test_backends_lists_good_and_broken(tmp_path, monkeypatch, capsys):
    good, broken = _good_and_broken(tmp_path)
    monkeypatch.setenv("NAIAD_PLUGIN_DIRS", f"{good};{broken}")
    code, out = _run(["backends"], capsys)
    assert code == 0
    _check_listing_output(out, good, broken)
    assert "failed" in _line_of(_table(out), "brokenbe").split()


def test_backends_with_no_backend_prints_the_hint(capsys):
    code, out = _run(["backends"], capsys)
    assert code == 0
    assert "No backend found" in out
    assert "point NAIAD_PLUGIN_DIRS at a plugin directory" in out
    assert "docs/WRITING_A_BACKEND.md" in out


def test_backends_shows_why_a_backend_is_inactive(plugins, capsys):
    plugins.add("offbe", active=False, driver_methods={"why_inactive": """
        @classmethod
        def why_inactive(cls):
            return "libtoy.so.1 not found"
    """})
    code, out = _run(["backends"], capsys)
    assert code == 0
    assert "no" in _line_of(_table(out), "offbe", "plugin dir").split()
    assert "libtoy.so.1 not found" in _line_of(_problems_section(out), "offbe")


def test_backends_shows_skipped_dirs(plugins, capsys):
    root = plugins.add("toy", conf=False)
    code, out = _run(["backends"], capsys)
    assert code == 0
    assert "skipped" in out
    assert "name.conf is missing" in _problems_section(out)
    assert os.path.abspath(root) in _problems_section(out)


def test_backends_shows_shadowed_backend(plugins, capsys):
    plugins.add("toy", dirname="first")
    second = plugins.add("toy", dirname="second")
    code, out = _run(["backends"], capsys)
    assert code == 0
    line = _line_of(_problems_section(out), os.path.abspath(second))
    assert "shadowed" in line and "rename one of them" in line


def test_backends_reports_a_failing_get_current_target(plugins, capsys):
    plugins.add("toy", driver_methods={"get_current_target": """
        def get_current_target(self):
            raise RuntimeError("no device 0")
    """})
    code, out = _run(["backends"], capsys)
    assert code == 0
    assert "get_current_target failed: RuntimeError: no device 0" in _line_of(_table(out), "toy", "plugin dir")


def test_backends_shows_the_explicit_choice(plugins, capsys):
    plugins.add("toy")
    knobs.backends.default = "toy"
    code, out = _run(["backends"], capsys)
    assert code == 0
    assert "Chosen explicitly: toy" in out


# --------------------------------------------------------------------------------------------
# naiad backends --check DIR (in process)
# --------------------------------------------------------------------------------------------

def test_check_good_dir(plugins, capsys):
    root = plugins.make("goodbe")
    code, out = _run(["backends", "--check", str(root)], capsys)
    assert code == 0
    assert "No problems found." in out
    assert "PROBLEM" not in out
    assert f"compiler class {compiler_class_name('goodbe')}, driver class " \
           f"{driver_class_name('goodbe')}" in out
    assert "stages: ttir -> toyasm -> toybin" in out
    assert "naiad.language.extra.goodbe imports" in out
    assert "naiad.tools.extra.goodbe imports" in out
    code, _ = _run(["backends", "--check", str(root), "--strict"], capsys)
    assert code == 0


def test_check_good_dir_that_is_also_configured(plugins, capsys):
    root = plugins.add("goodbe")
    code, out = _run(["backends", "--check", str(root), "--strict"], capsys)
    assert code == 0
    assert "No problems found." in out


def test_check_inactive_driver_skips_compile_checks(plugins, capsys):
    root = plugins.make("offbe", active=False)
    code, out = _run(["backends", "--check", str(root), "--strict"], capsys)
    assert "driver is not active here" in out and "compile-side checks skipped" in out
    assert "No problems found." in out
    assert code == 0


def test_check_dir_shadowed_by_a_configured_dir(plugins, capsys):
    configured = plugins.add("toy", dirname="configured")
    candidate = plugins.make("toy", dirname="candidate")
    code, out = _run(["backends", "--check", str(candidate), "--strict"], capsys)
    assert code == 1
    problem = _line_of(out, "PROBLEM:")
    assert f"another plugin directory ({os.path.abspath(configured / 'backend')}) already provides " \
           f"'toy'" in problem
    assert "rename one of them" in out


_RAISING_IS_ACTIVE = """
    @classmethod
    def is_active(cls):
        raise RuntimeError("probe failed")
"""

BROKEN = {
    "missing_name_conf": (dict(conf=False),
                          "name.conf is missing", "create it containing the backend's name"),
    "invalid_name": (dict(conf="my-backend"),
                     "'my-backend', which is not a valid backend name", "use lowercase ASCII letters"),
    "reserved_name": (dict(conf="compiler"),
                      "'compiler', which is the name of one of Naiad's own modules", "choose another name"),
    "missing_driver": (dict(driver=False),
                       "driver.py is missing",
                       "create it with one concrete subclass of naiad.backends.driver.DriverBase"),
    "missing_compiler": (dict(compiler=False),
                         "compiler.py is missing",
                         "create it with one concrete subclass of naiad.backends.compiler.BaseBackend"),
    "abstract_method": (dict(compiler_methods={"pack_metadata": None}),
                        f"{compiler_class_name('toy')} leaves abstract: pack_metadata",
                        "define exactly one class deriving from BaseBackend"),
    "two_drivers": (dict(driver_extra=f"class Spare({driver_class_name('toy')}):\n    pass\n"),
                    "defines 2 concrete subclasses of DriverBase", "keep exactly one"),
    "import_error": (dict(compiler_extra=f"import {MISSING_DEP}\n"),
                     f"No module named '{MISSING_DEP}'", "fix the error above"),
    "error_at_import": (dict(driver_extra="raise RuntimeError('driver exploded')\n"),
                        "RuntimeError: driver exploded", "fix the error above"),
    "api_too_new": (dict(api_version=BACKEND_API_VERSION + 1),
                    f"written for backend API {BACKEND_API_VERSION + 1}", "upgrade naiad"),
    "api_too_old": (dict(api_version=0), "written for backend API 0", "upgrade the backend"),
    "api_missing": (dict(api_version=None), "does not declare api_version",
                    f"add the class attribute 'api_version = {BACKEND_API_VERSION}'"),
    "no_binary_ext": (dict(binary_ext=None), "does not declare binary_ext",
                      "add the class attribute 'binary_ext"),
    "no_device_types": (dict(device=None), "does not declare device_types",
                        "add the class attribute 'device_types"),
    "is_active_raises": (dict(driver_methods={"is_active": _RAISING_IS_ACTIVE}),
                         "is_active() raised RuntimeError: probe failed",
                         "is_active must return a bool and never raise"),
    "target_raises": (dict(driver_methods={"get_current_target": """
                           def get_current_target(self):
                               raise RuntimeError("no device 0")
                       """}),
                      "driver.get_current_target() raised RuntimeError: no device 0",
                      "return a naiad.backends.compiler.GPUTarget"),
    "target_not_a_gputarget": (dict(driver_methods={"get_current_target": """
                                    def get_current_target(self):
                                        return "toy:v1"
                                """}),
                               "driver.get_current_target() returned 'toy:v1'", "return a GPUTarget"),
    "rejects_own_target": (dict(compiler_methods={"supports_target": """
                               @staticmethod
                               def supports_target(target):
                                   return False
                           """}),
                           "the compiler failed on its own target: ValueError",
                           "supports_target(get_current_target()) must be true"),
    "first_stage_not_ttir": (dict(stages=("llir", "toybin")),
                             "the first stage is llir, not 'ttir'", "add a 'ttir' stage first"),
    "no_stages": (dict(stages=()), "the first stage is missing, not 'ttir'", "add a 'ttir' stage first"),
    "last_stage_not_binary_ext": (dict(stages=("ttir", "toyasm")),
                                  "the last stage is 'toyasm', but binary_ext is 'toybin'",
                                  "make binary_ext the name of the last stage"),
    "broken_language": (dict(language="raise ImportError('language broken')\n"),
                        "importing naiad.language.extra.toy failed: ImportError: language broken",
                        "fix the code in"),
    "broken_tools": (dict(tools="def oops(:\n"),
                     "importing naiad.tools.extra.toy failed: SyntaxError", "fix the code in"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_check_broken_dir(plugins, capsys, case):
    kwargs, problem, fix = BROKEN[case]
    root = plugins.make("toy", **kwargs)
    code, out = _run(["backends", "--check", str(root)], capsys)
    assert code == 0, out
    assert out.startswith(f"Checking plugin directory {root}\n")
    lines = out.splitlines()
    problem_lines = [i for i, line in enumerate(lines) if line.strip().startswith("PROBLEM:")]
    assert problem_lines, out
    matching = [i for i in problem_lines if problem in lines[i]]
    assert matching, f"no PROBLEM line mentions {problem!r}:\n{out}"
    fix_line = lines[matching[0] + 1]
    assert fix_line.strip().startswith("fix:") and fix in fix_line, out
    assert f"{len(problem_lines)} problem(s) found." in out
    assert "No problems found." not in out
    # --strict turns problems into exit status 1.
    code, out = _run(["backends", "--check", str(root), "--strict"], capsys)
    assert code == 1, out
    assert "PROBLEM:" in out


def test_check_reports_every_layout_problem(plugins, capsys):
    root = plugins.make("toy", conf=False, driver=False)
    code, out = _run(["backends", "--check", str(root)], capsys)
    assert code == 0
    assert "2 problem(s) found." in out
    assert "name.conf is missing" in out and "driver.py is missing" in out


def test_check_of_a_path_that_is_not_a_directory(tmp_path, capsys):
    code, out = _run(["backends", "--check", str(tmp_path / "nope"), "--strict"], capsys)
    assert code == 1
    assert "is not a directory" in _line_of(out, "PROBLEM:")


# --------------------------------------------------------------------------------------------
# naiad demo (in process)
# --------------------------------------------------------------------------------------------

def test_demo_without_a_runnable_backend_explains_why(plugins, capsys):
    plugins.add("toy", device="cpu", active=False)
    code, out = _run(["demo"], capsys)
    assert code == 1
    assert "No backend can run the gallery here" in out
    assert "no active backend runs on cpu memory" in out
    assert "toy" in _line_of(_table(out), "toy", "plugin dir")


def test_cli_requires_a_command(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([])
    assert info.value.code == 2
