"""Programs are built by a worker process: a build error names the kernel with the device's log,
a runtime that crashes takes only the worker down, and binaries are kept on disk."""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad_opencl import builder as builder_module
from naiad_opencl.builder import BuildError, Builder

pytestmark = pytest.mark.usefixtures("opencl")

#: A SPIR-V header of a version no runtime knows (99.0), and nothing else.
SPIRV_OF_VERSION_99 = struct.pack("<5I", 0x07230203, 0x00630000, 0, 8, 0)


@naiad.jit
def copy_kernel(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


def _device():
    from naiad_opencl import runtime

    return runtime.devices()[0]


def test_a_program_the_device_refuses_is_an_error_with_its_log():
    with pytest.raises(BuildError, match=r"could not build kernel 'broken' from its SPIR-V; the build log says"):
        Builder().device_binary("broken", SPIRV_OF_VERSION_99, 0, _device())


def test_a_crashing_runtime_takes_only_the_worker_down(monkeypatch, tmp_path):
    # compiled before Popen is replaced: emitting SPIR-V starts a worker process of its own
    spv = naiad.compile(copy_source(), target=target()).asm["spv"]
    real_popen = subprocess.Popen
    crashing = [sys.executable, "-c", "import os, sys; sys.stdin.buffer.read(12); os.abort()"]
    monkeypatch.setattr(builder_module.subprocess, "Popen",
                        lambda args, **kw: real_popen(crashing, **kw))
    b = Builder()
    with pytest.raises(BuildError, match=r"crashed \(exit status -6\) while building kernel 'copy_kernel': "
                       r"a bug of the runtime, not of the kernel; its SPIR-V is saved as .*copy_kernel"
                       r".failed.spv -- fix: update the runtime"):
        b.device_binary("copy_kernel", spv, 0, _device())
    monkeypatch.setattr(builder_module.subprocess, "Popen", real_popen)
    assert b.device_binary("copy_kernel", spv, 0, _device())          # a new worker builds it


def test_a_build_that_hangs_is_stopped_after_the_time_limit(monkeypatch, tmp_path):
    monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path))          # nothing built yet
    spv = naiad.compile(copy_source(), target=target()).asm["spv"]
    real_popen = subprocess.Popen
    hanging = [sys.executable, "-c", "import time; time.sleep(600)"]
    monkeypatch.setattr(builder_module.subprocess, "Popen",
                        lambda args, **kw: real_popen(hanging, **kw))
    monkeypatch.setenv("NAIAD_OPENCL_BUILD_TIMEOUT", "0.5")
    with pytest.raises(BuildError, match=r"took more than 0.5 s \(NAIAD_OPENCL_BUILD_TIMEOUT\) and was "
                       r"stopped while building kernel 'copy_kernel'"):
        Builder().device_binary("copy_kernel", spv, 0, _device())


@pytest.mark.parametrize("value", ["soon", "0", "-3"])
def test_a_bad_build_time_limit_is_an_error(monkeypatch, value):
    monkeypatch.setenv("NAIAD_OPENCL_BUILD_TIMEOUT", value)
    with pytest.raises(BuildError, match=rf"NAIAD_OPENCL_BUILD_TIMEOUT='{value}' is not a positive number"):
        Builder().device_binary("copy_kernel", SPIRV_OF_VERSION_99, 0, _device())


def test_binaries_are_built_once_and_kept(monkeypatch):
    b = Builder()
    spv = naiad.compile(copy_source(), target=target()).asm["spv"]
    first = b.device_binary("copy_kernel", spv, 0, _device())
    monkeypatch.setattr(builder_module.subprocess, "Popen", None)      # no worker may start now
    assert Builder().device_binary("copy_kernel", spv, 0, _device()) == first


def test_launches_run_the_binary_the_worker_built():
    x = np.arange(300, dtype=np.float32)
    out = np.zeros_like(x)
    copy_kernel[(2,)](x, out, 300, BLOCK=256)
    np.testing.assert_array_equal(out, x)


def copy_source():
    from naiad.compiler.compiler import ASTSource

    return ASTSource(copy_kernel, {"x": "*fp32", "out": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 256}, {})


def target():
    from naiad.backends.compiler import GPUTarget

    return GPUTarget("opencl", "intel-cpu", 16)
