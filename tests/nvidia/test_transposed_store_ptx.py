"""A transposing store's PTX: with the axis information carried through ``tl.trans`` the
stores move 16 bytes a thread (as Triton's), not one element each (16 ``st.global.b16`` a
thread for a 64 x 64 bf16 tile before; SASS 368 -> 208 instructions); values on the GPU
against numpy."""

from __future__ import annotations

import re

import numpy as np
import pytest

import naiad
from tests.cpu.test_transposed_stores import transpose_kernel

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends

SIGNATURE = {"Out": "*bf16", "In": "*bf16", "M": "i32", "N": "i32", "stride_in": "i32", "stride_out": "i32"}


def test_a_transposing_store_moves_16_bytes_at_a_time():
    aligned = {name: [["tt.divisibility", 16]] for name in SIGNATURE}
    ptx = compile_cuda(transpose_kernel, SIGNATURE, {"BM": 64, "BN": 64}, aligned, num_warps=4).asm["ptx"]
    stores = re.findall(r"st\.global\.(\S+)", ptx)
    assert stores and set(stores) == {"v4.b32"}


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("m, n", [(128, 192), (100, 37)])
def test_transposed_tiles_on_the_gpu(gpu, m, n):
    torch = gpu
    x = torch.randn((m, n), device="cuda", dtype=torch.bfloat16)
    out = torch.zeros((n, m), device="cuda", dtype=torch.bfloat16)
    transpose_kernel[(naiad.cdiv(m, 64), naiad.cdiv(n, 64))](out, x, m, n, n, m, BM=64, BN=64)
    np.testing.assert_array_equal(out.float().cpu().numpy(), x.float().cpu().numpy().T)
