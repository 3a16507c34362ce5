"""Naiad's portable conformance suite: the language tests every backend runs.

The modules here (``test_*.py``) are differential tests against numpy -- arithmetic over every
dtype, reductions and scans, loads and stores with masks, control flow, dots, atomics, random
numbers, tuples, edge sizes -- written once, on host arrays (numpy).  They launch kernels the
ordinary way, so the backend is the one selected by name: `run` sets ``NAIAD_DEFAULT_BACKEND``;
a backend whose kernels take only device memory gets the arrays staged through its device
(`naiad.testing.conformance.staging`).

A backend states what it cannot do yet in its compiler class's
``conformance_expected_failures`` (`naiad.backends.compiler.BaseBackend`): test-id patterns
(``fnmatch``, e.g. ``"test_dot.py::test_dot[int8*"``) with the reason for each.  The list is
strict (`naiad.testing.conformance.expected`): a listed case that passes fails the run, and so
does a pattern that names no collected case, so every list stays true.

``naiad conformance --backend NAME`` runs the suite; Naiad's own test run collects it for the
default backend, cpu.
"""

from __future__ import annotations

import os
from typing import Sequence

from naiad.errors import NaiadError

#: The environment variable naming the backend under test (read by the suite's conftest).
BACKEND_VARIABLE = "NAIAD_CONFORMANCE_BACKEND"
#: The environment variable holding K of a sampled run (`naiad.testing.conformance.sample`).
SAMPLE_VARIABLE = "NAIAD_CONFORMANCE_SAMPLE"


def suite_dir() -> str:
    """The folder of the suite's test modules (inside the installed package)."""
    return os.path.dirname(os.path.abspath(__file__))


def run(backend: str, pytest_args: Sequence[str] = (), sample: int = 0) -> int:
    """Run the suite on ``backend`` with pytest (extra ``pytest_args``: ``-k``, ``-x``, ``-q``...)
    and return pytest's exit status (0: every case passed or failed as listed).  ``sample`` > 0
    runs at most that many cases of each test function (`naiad.testing.conformance.sample`)."""
    from naiad.testing.conformance.expected import backend_list

    try:
        import pytest
    except ImportError:
        raise NaiadError("naiad conformance needs pytest -- fix: pip install pytest") from None
    if sample < 0:
        raise NaiadError(f"--sample {sample} is not a number of cases -- fix: give the number of cases "
                         f"to run of each test function (1 or more), or 0 for all of them")
    backend_list(backend)             # the backend exists, loads, and its list is well formed
    os.environ[BACKEND_VARIABLE] = backend
    os.environ[SAMPLE_VARIABLE] = str(sample)
    os.environ["NAIAD_DEFAULT_BACKEND"] = backend
    return int(pytest.main([suite_dir(), "-p", "no:cacheprovider", "--rootdir", suite_dir(),
                            *pytest_args]))
