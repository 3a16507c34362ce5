"""The runtime surface Triton code reaches for around a launch: pre-run hooks, compiled kernels
launched directly (``kernel[grid](*all_args)``), ``_init_handles`` / ``n_regs`` /
``metadata.shared`` for occupancy arithmetic, the driver's device properties and
``set_allocator`` -- checked on the CPU backend."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends.selection import active_driver
from naiad.errors import NaiadError
from naiad.runtime import allocation

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def add_two(a_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(a_ptr + offs, tl.load(a_ptr + offs, mask=mask) + 2, mask=mask)


@naiad.jit
def row_softmax(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(in_ptr + row * n_cols + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + offs, e / tl.sum(e, axis=0), mask=mask)


def test_pre_run_hook_runs_before_each_launch_with_the_launch_arguments():
    seen = []

    def zero_first(a, n, BLOCK):
        seen.append((n, BLOCK))
        a[:] = 0

    add_two.add_pre_run_hook(zero_first)
    try:
        a = np.ones(8, dtype=np.int32)
        add_two[(1,)](a, 5, BLOCK=8)
        np.testing.assert_array_equal(a, [2, 2, 2, 2, 2, 0, 0, 0])
        add_two.warmup(a, 5, BLOCK=8)          # compiling only: no hook
        assert seen == [(5, 8)]
    finally:
        add_two.pre_run_hooks.clear()


def test_pre_run_hook_must_be_callable():
    with pytest.raises(NaiadError, match="add_two.add_pre_run_hook: the hook must be callable"):
        add_two.add_pre_run_hook(42)


def test_compiled_kernel_launches_directly_with_every_parameter():
    x = np.random.default_rng(0).standard_normal((5, 100)).astype(np.float32)
    y = np.empty_like(x)
    kernel = row_softmax.warmup(y, x, 100, BLOCK=128, grid=(1,))
    kernel[(5,)](y, x, 100, 128)
    ref = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, ref / ref.sum(axis=1, keepdims=True), rtol=1e-5)
    with pytest.raises(NaiadError, match="takes all 4 parameters positionally, constexprs included; 3 given"):
        kernel[(5,)](y, x, 100)


def test_occupancy_figures_are_usable_in_tritons_formula():
    x = np.zeros((4, 1000), dtype=np.float32)
    kernel = row_softmax.warmup(np.empty_like(x), x, 1000, BLOCK=1024, grid=(1,))
    kernel._init_handles()
    props = active_driver().utils.get_device_properties(None)
    assert kernel.n_regs in (16, 32)
    # The row is materialized once and read three times: its 4 KiB buffer is the kernel's "shared".
    assert kernel.metadata.shared == kernel.metadata["shared"] >= 1024 * 4
    num_warps = 8
    occupancy = props["max_num_regs"] // (kernel.n_regs * props["warpSize"] * num_warps)
    occupancy = min(occupancy, props["max_shared_mem"] // kernel.metadata.shared)
    assert occupancy >= 1 and props["multiprocessor_count"] >= 1
    with pytest.raises(AttributeError, match="kernel metadata has no field 'nope'"):
        kernel.metadata.nope


def test_set_allocator_stores_the_allocator_and_the_default_refuses():
    with pytest.raises(NaiadError, match="needs 64 bytes of global scratch memory and no allocator is set"):
        allocation.get_allocator()(64, 16, None)
    naiad.set_allocator(lambda size, align, stream: np.empty(size, dtype=np.int8))
    try:
        assert allocation.get_allocator()(64, 16, None).nbytes == 64
    finally:
        naiad.set_allocator(allocation.NullAllocator())
    with pytest.raises(NaiadError, match="set_allocator needs a callable"):
        naiad.set_allocator("big")
