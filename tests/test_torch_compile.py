"""torch.compile on Naiad (tests/torch_compile), run in a process of its own: the suite enables
Naiad's Triton compatibility layer before torch's compiler is imported, which this process
cannot promise.  The failing cases are named in the assertion.  The suite is compilation
bound, and this process only waits for it: with pytest-xdist its files run on up to four
worker processes (two on CI's two cores: 252 -> 148 s)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

pytest.importorskip("torch")

SUITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_compile")


def test_the_torch_compile_suite_passes(tmp_path):
    report = tmp_path / "report.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NAIAD_", "TORCHINDUCTOR_"))}
    env.update(NAIAD_CACHE_DIR=str(tmp_path / "naiad"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:logging",
                           "-W", "ignore::DeprecationWarning", f"--junitxml={report}", *_workers(), SUITE],
                          capture_output=True, text=True, env=env, cwd=os.path.dirname(SUITE), timeout=1800)
    cases = ElementTree.parse(report).getroot().iter("testcase") if report.exists() else []
    failed = [f"{case.get('name')}: {(problem.get('message') or '').splitlines()[0][:300]}"
              for case in cases for problem in case if problem.tag in ("failure", "error")]
    assert done.returncode == 0 and not failed, "\n".join(failed) or done.stdout[-3000:] + done.stderr[-3000:]


def _workers() -> list[str]:
    """pytest-xdist's options for one worker per core (at most four), each file on one worker
    (its cases may share the file's module state); none where xdist is missing or one core."""
    try:
        import xdist  # noqa: F401
    except ImportError:
        return []
    cores = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    return ["-n", str(cores), "--dist", "loadfile"] if cores > 1 else []
