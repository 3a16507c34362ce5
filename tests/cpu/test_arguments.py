"""What the CPU backend accepts as kernel arguments: numpy arrays, torch CPU tensors, anything with
``__array_interface__`` or DLPack, views with offsets, and Python scalars as Triton passes them."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def axpy(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


class ArrayInterfaceOnly:
    """An object that is an array only through ``__array_interface__``."""

    def __init__(self, array):
        self._array = array
        self.__array_interface__ = array.__array_interface__


class DLPackOnly:
    """An object that is an array only through DLPack."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def _inputs(n=1000):
    rng = np.random.default_rng(1)
    return rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)


@pytest.mark.parametrize("wrap", [lambda a: a, ArrayInterfaceOnly, DLPackOnly],
                         ids=["numpy", "array_interface", "dlpack"])
def test_host_array_kinds(wrap):
    x, y = _inputs()
    out = np.zeros_like(x)
    axpy[(naiad.cdiv(x.size, 256),)](wrap(x), wrap(y), wrap(out), 2.5, x.size, BLOCK=256)
    np.testing.assert_allclose(out, 2.5 * x + y, rtol=1e-6)


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    x, y = (torch.from_numpy(a) for a in _inputs())
    out = torch.empty_like(x)
    axpy[(naiad.cdiv(x.numel(), 256),)](x, y, out, -1.0, x.numel(), BLOCK=256)
    assert torch.allclose(out, -x + y)


def test_views_with_an_offset_and_integer_scalars():
    x, y = _inputs(2000)
    out = np.zeros(2000, np.float32)
    axpy[(4,)](x[1000:], y[1000:], out[1000:], 3, 1000, BLOCK=256)      # int a: promoted
    np.testing.assert_allclose(out[1000:], 3 * x[1000:] + y[1000:], rtol=1e-6)
    assert not out[:1000].any()


def test_unsupported_argument_is_a_clear_error():
    x, y = _inputs(4)
    with pytest.raises(TypeError, match="argument 'a'.*cannot pass an object of type str"):
        axpy[(1,)](x, y, x, "2", 4, BLOCK=4)
