"""tl.atomic_poll on the CPU: true once the flag holds the expected value, false when the timeout
passes first (after at least one load, even for a timeout of 0), and Triton's argument checks."""

from __future__ import annotations

import time

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.compiler.errors import CompilationError

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def poll_with_timeout(flag, out, expected, timeout_ns, SEM: tl.constexpr):
    tl.store(out, tl.atomic_poll(flag, expected, sem=SEM, timeout_ns=timeout_ns))


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.uint64])
@pytest.mark.parametrize("sem", ["acquire", "relaxed"])
@pytest.mark.parametrize("initial,matched", [(7, True), (0, False)])
def test_poll_with_a_zero_timeout_loads_once(dtype, sem, initial, matched):
    flag, out = np.full(1, initial, dtype), np.zeros(1, np.bool_)
    poll_with_timeout[(1,)](flag, out, 7, 0, SEM=sem)
    assert out[0] == matched


def test_poll_gives_up_after_the_timeout():
    flag, out = np.zeros(1, np.int32), np.ones(1, np.bool_)
    start = time.perf_counter()
    poll_with_timeout[(1,)](flag, out, 1, 20_000_000, SEM="acquire")     # 20 ms
    assert not out[0]
    assert time.perf_counter() - start >= 0.02


@naiad.jit
def poll_without_timeout(flag, out):
    tl.store(out, flag.atomic_poll(3))


def test_poll_without_timeout_returns_once_the_value_is_there():
    flag, out = np.full(1, 3, np.int64), np.zeros(1, np.bool_)
    poll_without_timeout[(1,)](flag, out)
    assert out[0]
    assert "tt.atomic_poll acquire, gpu" in poll_without_timeout.warmup(flag, out, grid=(1,)).asm["ttir"]


@naiad.jit
def poll_block_of_pointers(flag, out):
    tl.atomic_poll(flag + tl.arange(0, 2), 1)


@naiad.jit
def poll_float_flag(flag, out):
    tl.atomic_poll(flag, 1)


@naiad.jit
def poll_release(flag, out):
    tl.atomic_poll(flag, 1, sem="release")


@naiad.jit
def poll_negative_timeout(flag, out):
    tl.atomic_poll(flag, 1, timeout_ns=-1)


@pytest.mark.parametrize("kernel,dtype,message", [
    (poll_block_of_pointers, np.int32, "tl.atomic_poll polls one scalar"),
    (poll_float_flag, np.float32, "tl.atomic_poll polls 16/32/64-bit integers, not fp32"),
    (poll_release, np.int32, "sem must be 'acquire' or 'relaxed', not 'release'"),
    (poll_negative_timeout, np.int32, "timeout_ns must be non-negative, got -1"),
])
def test_poll_errors(kernel, dtype, message):
    with pytest.raises(CompilationError, match=message.replace("(", r"\(")):
        kernel[(1,)](np.zeros(1, dtype), np.zeros(1, np.bool_))
