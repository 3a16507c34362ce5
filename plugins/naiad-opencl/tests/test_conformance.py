"""Naiad's portable conformance suite (``naiad conformance --backend opencl``) on an OpenCL
device: every case passes (the backend lists no expected failures)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.usefixtures("opencl")
def test_the_portable_suite_passes():
    done = subprocess.run([sys.executable, "-m", "naiad", "conformance", "--backend", "opencl", "--",
                           "-q"], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
