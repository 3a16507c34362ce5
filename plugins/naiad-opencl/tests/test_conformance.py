"""Naiad's portable conformance suite (``naiad conformance --backend opencl``) on an OpenCL
device: every case passes (the backend lists no expected failures).

Here a sample of it, 3 cases of each test function (``--sample 3``, 168 of 449 cases): Intel's
runtime builds each SPIR-V program for 0.1-1 s, and the whole suite took 5-9 minutes of a CI
run on 2 cores.  The whole suite's run is recorded in Naiad's docs/CONFORMANCE.md
(``naiad conformance --backend opencl``)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.usefixtures("opencl")
def test_the_portable_suite_passes():
    done = subprocess.run([sys.executable, "-m", "naiad", "conformance", "--backend", "opencl",
                           "--sample", "3", "--", "-q"], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
