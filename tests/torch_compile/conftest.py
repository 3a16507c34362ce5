"""torch.compile with Naiad as Inductor's Triton: the compatibility layer is enabled before
torch's compiler is imported (Inductor decides once, at import, whether Triton exists), and
Inductor generates Triton kernels for the CPU (``cpu_backend = "triton"``), compiled in this
process (``compile_threads = 1``: the worker test starts its own).  The tensors are made on
`DEVICE` (torch's default device), so the same suite serves Naiad's cuda backend on a GPU.

The main test run leaves this folder to `tests/test_torch_compile.py`, which runs it in a
process of its own: ``python -m pytest tests/torch_compile`` runs it directly.
"""

from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")

import naiad.compat  # noqa: E402

if "torch._dynamo" in sys.modules and not naiad.compat.is_enabled():
    pytest.exit("tests/torch_compile must run in a process where torch._dynamo is not imported "
                "before naiad.compat.enable() -- run `python -m pytest tests/torch_compile` on its own",
                returncode=4)
naiad.compat.enable()

import torch._dynamo  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402

inductor_config.cpu_backend = "triton"
inductor_config.compile_threads = 1

#: Where the suite's tensors live: ``cpu`` (Naiad's cpu backend), or ``cuda`` with
#: ``NAIAD_TORCH_COMPILE_DEVICE=cuda`` on a machine with an NVIDIA GPU (Naiad's cuda backend).
DEVICE = os.environ.get("NAIAD_TORCH_COMPILE_DEVICE", "cpu")
if DEVICE != "cpu" and not torch.cuda.is_available():
    pytest.exit(f"NAIAD_TORCH_COMPILE_DEVICE={DEVICE}: torch sees no such device", returncode=4)
torch.set_default_device(DEVICE)


def pytest_collection_modifyitems(config, items):
    """Every test here compiles for Naiad's own cpu backend (tests/conftest.py hides it from
    tests not marked so)."""
    for item in items:
        if "torch_compile" in item.path.parts:
            item.add_marker(pytest.mark.shipped_backends)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Each test traces anew (a graph compiled by an earlier test is not reused)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
