"""The block-pointer rewrite (naiad/passes/block_pointers.py), checked where block pointers
already run natively: the CPU kernels of naiad/testing/conformance/test_memory.py give the same results with the
pass inserted into the CPU pipeline (through the stages-inspection hook), and their TTIR then
holds no block pointer."""

from __future__ import annotations

import pytest

from naiad.ir import print_module
from naiad.passes import run_passes
from naiad.passes.block_pointers import rewrite_block_pointers
from naiad.testing.conformance import test_memory

from .ttir import after_ttir_stage

pytestmark = pytest.mark.shipped_backends


@pytest.fixture
def rewritten():
    """Every kernel compiled in the test goes through the rewrite after the CPU's ttir stage."""
    seen = []

    def rewrite(module):
        if rewrite_block_pointers(module):
            run_passes(module, ("cse", "dce"))
            module.verify()
        seen.append(print_module(module))

    with after_ttir_stage("block-pointer-rewrite", rewrite):
        yield seen


@pytest.mark.parametrize("pad", ["zero", "nan"])
@pytest.mark.parametrize("transposed", [False, True])
def test_padded_block_loads(rewritten, pad, transposed):
    test_memory.block_copy_kernel.cache.clear()
    test_memory.test_block_pointer_load_pads_outside_the_view(pad, transposed)
    assert rewritten and all("make_tensor_ptr" not in text for text in rewritten)


def test_advance_in_a_loop_and_checked_store(rewritten):
    test_memory.block_advance_kernel.cache.clear()
    test_memory.test_block_pointer_advance_in_a_loop_and_boundary_checked_store()
    assert rewritten and all("make_tensor_ptr" not in t and "tt.advance" not in t for t in rewritten)
