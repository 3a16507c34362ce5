"""Run Triton's own language tests against Naiad and compare with Triton's interpreter.

    python conformance/run.py --tests DIR [--device cpu|cuda] [--suite core ...] [-n 2]

``DIR`` is an extracted upstream tree (see README.md: ``python/test`` and ``python/tutorials`` of
one commit).  The runner keeps its own virtual environment (``--venv``, default
``.conformance/venv`` in the repository), installs Naiad there in editable mode with the test
dependencies, and installs a small ``triton`` alias package that makes ``import triton`` load
Naiad's compatibility layer in every process of that venv (pytest-xdist workers and the tests'
subprocesses included).  It refuses to put the alias next to a real Triton.

Each suite's junit XML goes to ``--out`` (default ``.conformance/results``); the summary gives,
per test group, passed/skipped/failed, and with ``--baseline`` (a junit XML from Triton's
interpreter on the same tree) the cases the interpreter passes that Naiad does not.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent

#: suite -> (folder under the tree, pytest arguments).  "core" is the issue's measure:
#: test_core's interpreter-marked cases plus the neighbours upstream runs the same way.
SUITES = {
    "core": ("python/test/unit", ["-m", "interpreter", "language/test_core.py", "language/test_standard.py",
                                  "language/test_random.py", "language/test_tuple.py",
                                  "language/test_subprocess.py", "runtime/test_launch.py"]),
    "block_pointer": ("python/test/unit", ["language/test_block_pointer.py"]),
    "tensor_descriptor": ("python/test/unit", ["language/test_tensor_descriptor.py"]),
    "attention": ("python/tutorials", ["06-fused-attention.py::test_op"]),
}

#: Tutorials run unmodified as scripts (their benchmarks run at import, so pytest cannot collect
#: them without running them): each passes when it exits with status 0.
TUTORIALS = ["01-vector-add.py", "02-fused-softmax.py", "03-matrix-multiplication.py",
             "04-low-memory-dropout.py", "05-layer-norm.py", "08-grouped-gemm.py"]

TEST_REQUIREMENTS = ["torch==2.13.0", "pytest<10", "pytest-xdist", "pytest-timeout", "scipy", "tabulate",
                     "numpy<2.3"]

ALIAS_INIT = '''"""Installed by Naiad's conformance harness (conformance/run.py): in this environment
`import triton` loads Naiad's Triton compatibility layer.  Delete this folder to undo."""
__naiad_compat__ = True
import naiad.compat
naiad.compat.enable()
'''


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def ensure_venv(venv: Path) -> Path:
    """Create (once) the harness's venv with Naiad (editable), test dependencies and the alias."""
    python = venv_python(venv)
    stamp = venv / "naiad-conformance.ok"
    if not stamp.exists():
        print(f"[conformance] building {venv} (once)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", str(REPO), *TEST_REQUIREMENTS],
                       check=True)
        stamp.write_text("ok\n")
    install_alias(python)
    return python


def alias_dir(out: Path) -> Path:
    """For ``--python``: the alias package in a folder of the harness's own, put first on the
    test processes' ``PYTHONPATH`` -- it shadows an installed Triton in those processes only
    (a GPU machine has one: its tests then run against Naiad, its install stays as it was)."""
    folder = out / "alias"
    (folder / "triton").mkdir(parents=True, exist_ok=True)
    (folder / "triton" / "__init__.py").write_text(ALIAS_INIT)
    return folder


def install_alias(python: Path) -> None:
    target = site_packages(python) / "triton"
    init = target / "__init__.py"
    if target.exists() and not (init.exists() and "conformance harness" in init.read_text()):
        raise SystemExit(f"[conformance] a real Triton is installed in {target.parent}; the harness will "
                         f"not shadow it -- fix: use a venv without triton (--venv)")
    target.mkdir(exist_ok=True)
    init.write_text(ALIAS_INIT)


def run_suite(python: Path, tree: Path, suite: str, args: argparse.Namespace) -> Path:
    folder, selection = SUITES[suite]
    junit = args.out / f"{suite}-{_label(args)}.xml"
    ini = args.out / "pytest.ini"          # the tree's own conftest rules, wherever it lies
    ini.write_text("[pytest]\n")
    cmd = [str(python), "-m", "pytest", "-c", str(ini), f"--rootdir={tree / 'python'}",
           "-p", "no:cacheprovider", "-p", "plugin", "-q", "--tb=line",
           f"--device={args.device}", f"--timeout={args.timeout}", f"--junitxml={junit}", *selection]
    if args.workers > 1:
        cmd += ["-n", str(args.workers)]
    cmd += args.pytest_args
    env = dict(os.environ, PYTHONPATH=test_path(args))
    env.pop("TRITON_INTERPRET", None)                 # Mode B: native compilation
    if args.device == "cuda" or args.backend:
        env["NAIAD_DEFAULT_BACKEND"] = args.backend or "cuda"
    print(f"[conformance] {suite}: {' '.join(cmd)}  (in {tree / folder})", flush=True)
    start = time.time()
    subprocess.run(cmd, cwd=tree / folder, env=env)
    print(f"[conformance] {suite}: {time.time() - start:.0f} s", flush=True)
    return junit


def _label(args: argparse.Namespace) -> str:
    """What a run is named by: the backend given with ``--backend``, else the device."""
    return args.backend or args.device


def test_path(args: argparse.Namespace) -> str:
    """PYTHONPATH of the test processes: the plugin's folder; with ``--python``, also the alias
    folder and Naiad's checkout (that interpreter has Naiad's dependencies, not Naiad)."""
    parts = [str(HERE)]
    if args.python is not None:
        parts = [str(alias_dir(args.out)), str(REPO)] + parts
    return os.pathsep.join(parts + [os.environ.get("PYTHONPATH", "")])


def run_tutorials(python: Path, tree: Path, args: argparse.Namespace) -> dict[str, str]:
    """Run each tutorial script; its output goes to ``<out>/tutorial-<name>.log``."""
    results = {}
    env = dict(os.environ, PYTHONPATH=test_path(args))
    env.pop("TRITON_INTERPRET", None)
    for script in TUTORIALS:
        log = args.out / f"tutorial-{Path(script).stem}.log"
        start = time.time()
        with open(log, "w") as f:
            try:
                code = subprocess.run([str(python), script], cwd=tree / "python/tutorials", env=env, stdout=f,
                                      stderr=subprocess.STDOUT, timeout=args.tutorial_timeout).returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        results[f"tutorials::{script}"] = "passed" if code == 0 else "failed"
        print(f"[conformance] {script}: {'ok' if code == 0 else f'FAILED ({code})'} in "
              f"{time.time() - start:.0f} s, log {log}", flush=True)
    return results


def read_junit(path: Path) -> dict[str, str]:
    """test id (file::name[params]) -> passed / skipped / failed."""
    results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped" and outcome == "passed":
                outcome = "skipped"
        results[f"{module}::{case.get('name')}"] = outcome
    return results


def summarize(results: dict[str, str], baseline: dict[str, str] | None) -> str:
    groups: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for test, outcome in results.items():
        groups[test.split("[")[0]][outcome] += 1
        if baseline is not None and baseline.get(test) == "passed" and outcome != "passed":
            groups[test.split("[")[0]]["regressed"] += 1
    lines = [f"| group | passed | skipped | failed | interpreter passes, Naiad not |", "|---|---|---|---|---|"]
    total = collections.Counter()
    for group in sorted(groups):
        c = groups[group]
        total.update(c)
        lines.append(f"| {group} | {c['passed']} | {c['skipped']} | {c['failed']} | {c['regressed']} |")
    lines.append(f"| **total** | {total['passed']} | {total['skipped']} | {total['failed']} | "
                 f"{total['regressed']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=Path, required=True, help="extracted upstream tree (README.md)")
    parser.add_argument("--suite", action="append", choices=sorted([*SUITES, "tutorials"]),
                        help="default: core")
    parser.add_argument("--tutorial-timeout", type=int, default=1800, help="seconds per tutorial script")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--backend", help="run on this backend (NAIAD_DEFAULT_BACKEND), with the "
                        "device's tensors: e.g. --backend opencl, on host tensors")
    parser.add_argument("--venv", type=Path, default=REPO / ".conformance" / "venv")
    parser.add_argument("--python", type=Path, help="run with this interpreter (its packages must "
                        "include the test dependencies and Naiad's; e.g. a GPU machine without "
                        "internet) instead of building the venv; Triton there is left installed")
    parser.add_argument("--out", type=Path, default=REPO / ".conformance" / "results")
    parser.add_argument("--baseline", type=Path, help="junit XML of Triton's interpreter on the same tree")
    parser.add_argument("-n", "--workers", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=300, help="seconds per test case")
    parser.add_argument("--report-only", action="store_true", help="summarize the last run's XML again")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest after '--'")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    python = None if args.report_only else args.python or ensure_venv(args.venv)
    baseline = read_junit(args.baseline) if args.baseline else None
    for suite in args.suite or ["core"]:
        if suite == "tutorials":
            if args.report_only:
                continue
            results = run_tutorials(python, args.tests.resolve(), args)
        else:
            junit = args.out / f"{suite}-{_label(args)}.xml" if args.report_only else \
                run_suite(python, args.tests.resolve(), suite, args)
            results = read_junit(junit)
        print(f"\n## {suite} on {_label(args)}\n")
        print(summarize(results, baseline if suite == "core" else None))
        if baseline is not None and suite == "core":
            missing = sorted(t for t, o in results.items() if baseline.get(t) == "passed" and o != "passed")
            (args.out / f"{suite}-{_label(args)}-regressions.txt").write_text("\n".join(missing) + "\n")
            print(f"\n{len(missing)} cases pass on Triton's interpreter and not on Naiad: "
                  f"{args.out / f'{suite}-{_label(args)}-regressions.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
