"""Launch checks on the GPU (issue 14): numpy scalars beside CUDA tensors are scalars (they
select no device), grids within CUDA's limits, misspelled keywords refused."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.errors import LaunchError

pytestmark = [pytest.mark.shipped_backends, pytest.mark.usefixtures("gpu")]


@naiad.jit
def scaled(x, out, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * scale, mask=mask)


@naiad.jit
def store_value(y, value):
    tl.store(y, value)


@naiad.jit
def count_programs(counter):
    tl.atomic_add(counter, 1)


@pytest.mark.parametrize("scale", [np.float64(0.5), np.float32(-2.0), np.int64(3), np.float16(1.5),
                                   np.uint8(4)], ids=lambda v: type(v).__name__)
def test_a_numpy_scalar_beside_cuda_tensors(gpu, scale):
    torch = gpu
    x = torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    for _ in range(2):
        scaled[(naiad.cdiv(1000, 256),)](x, out, np.int32(1000), scale, BLOCK=256)
        torch.testing.assert_close(out, x * float(scale))


@pytest.mark.parametrize("value, dtype", [
    (np.int64(2**40 + 3), "int64"), (np.int8(-7), "int8"), (np.uint16(65000), "int32"),
    (np.float16(0.75), "float16"), (np.bool_(True), "bool"), (np.float32(1.25), "float32")])
def test_numpy_scalars_are_stored_as_their_values(gpu, value, dtype):
    torch = gpu
    y = torch.zeros(1, dtype=getattr(torch, dtype), device="cuda")
    store_value[(1,)](y, value)
    assert y.item() == value.item()


def test_cuda_grid_limits(gpu):
    torch = gpu
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    with pytest.raises(LaunchError, match=r"count_programs: grid dimension 1 is 65536; this backend "
                                          r"runs 0 to 65535 programs along axis 1"):
        count_programs[(1, 65536)](counter)
    with pytest.raises(LaunchError, match="grid dimension 0 is -1"):
        count_programs[(-1,)](counter)
    count_programs[(3, 2, 2)](counter)
    count_programs[(0,)](counter)
    torch.cuda.synchronize()
    assert counter.item() == 12


def test_a_misspelled_keyword_is_refused_on_cuda(gpu):
    torch = gpu
    x = torch.ones(16, device="cuda")
    with pytest.raises(LaunchError, match=r"unknown keyword argument 'BLOK'.*nor an option of the "
                                          r"cuda backend -- fix: did you mean 'BLOCK'\?"):
        scaled[(1,)](x, x, 16, 1.0, BLOCK=16, BLOK=16)
