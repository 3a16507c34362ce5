"""``triton.tools.mxfp`` under compat (naiad/compat/mxfp.py): E2M1 and E8M0 encodings checked
against the OCP MX tables written out by hand."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from naiad.compat.mxfp import MXFP4Tensor, MXScaleTensor  # noqa: E402

#: code -> value of every E2M1 code (sign bit 3, exponent bits 2-1, mantissa bit 0).
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def test_e2m1_decodes_every_code_and_encodes_it_back():
    codes = MXFP4Tensor(size=(16,))
    codes.data = torch.arange(16, dtype=torch.uint8)
    values = codes.to(torch.float32)
    assert values.tolist() == E2M1
    assert [math.copysign(1, v) for v in values.tolist()] == [1] * 8 + [-1] * 8   # -0.0 kept
    assert torch.equal(MXFP4Tensor(values).data, codes.data)


@pytest.mark.parametrize("value, expected", [
    (0.25, 0.0), (0.75, 1.0), (1.25, 1.0), (1.75, 2.0), (2.5, 2.0), (3.5, 4.0), (5.0, 4.0),
    (0.3, 0.5), (5.1, 6.0), (7.0, 6.0), (-7.0, -6.0), (float("inf"), 6.0), (float("-inf"), -6.0),
])
def test_e2m1_rounds_to_nearest_ties_to_even_and_saturates(value, expected):
    assert MXFP4Tensor(torch.tensor([value])).to(torch.float32).item() == expected


@pytest.mark.parametrize("shape, dim", [((6, 4), 0), ((3, 5), 1), ((2, 3, 7), 2)])
def test_packing_puts_even_elements_in_the_low_nibble(shape, dim):
    tensor = MXFP4Tensor(size=shape).random()
    packed = tensor.to_packed_tensor(dim)
    first = tensor.data.select(dim, 0)
    assert torch.equal(packed.select(dim, 0) & 0xF, first)
    if shape[dim] > 1:
        assert torch.equal(packed.select(dim, 0) >> 4, tensor.data.select(dim, 1))
    assert packed.shape[dim] == (shape[dim] + 1) // 2
    assert torch.equal(tensor.unpack_packed_tensor(packed, dim, shape), tensor.data)
    with pytest.raises(AssertionError):
        tensor.to_packed_tensor(len(shape))


def test_e8m0_scales():
    scales = MXScaleTensor(torch.tensor([1.0, 3.0, 0.25, 0.0, -2.0, float("nan"), float("inf"),
                                         2.0 ** 127, 2.0 ** -140]))
    assert scales.data.tolist() == [127, 128, 125, 255, 255, 255, 255, 254, 0]
    decoded = scales.to(torch.float32)
    assert decoded[:3].tolist() == [1.0, 2.0, 0.25] and torch.isnan(decoded[3:7]).all()
    drawn = MXScaleTensor(size=(500,)).random(low=0.5, high=4.0).data
    assert drawn.min() >= 126 and drawn.max() <= 129
    with pytest.raises(ValueError, match="low"):
        MXScaleTensor(size=(2,)).random(low=8.0, high=1.0)
