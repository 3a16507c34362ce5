"""Launches read tensors outside torch's function modes (`naiad.runtime.torch_modes`): under
``torch.set_default_device`` each tensor read went through the mode's Python hook and a small
launch took 3.5x as long.  The reads must not reach a mode; the user's own code (grid
functions) still runs under it; results stay right."""

import numpy as np
import pytest

import naiad
from jit_helpers import scaled_add

torch = pytest.importorskip("torch")
from torch.overrides import TorchFunctionMode  # noqa: E402

pytestmark = pytest.mark.shipped_backends


class Recording(TorchFunctionMode):
    """Records the name of every torch function that reaches it."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("n", [1, 100, 1024, 3000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_warm_launch_reads_nothing_through_a_mode(n, dtype):
    x = (torch.arange(n) % 7).to(dtype)
    y = (torch.arange(n) % 5).to(dtype)
    out = torch.zeros(n, dtype=dtype)
    grid = (naiad.cdiv(n, 128),)
    scaled_add[grid](x, y, out, n, 3, BLOCK=128)          # compiled outside the mode
    out.zero_()
    with Recording() as mode:
        scaled_add[grid](x, y, out, n, 3, BLOCK=128)
    assert mode.seen == []
    expected = x.numpy().astype(np.float64) * 3 + y.numpy()
    np.testing.assert_allclose(out.numpy().astype(np.float64), expected)


def test_grid_functions_still_run_under_the_mode():
    n = 1000
    x, y, out = torch.ones(n), torch.full((n,), 2.0), torch.empty(n)
    scaled_add[(8,)](x, y, out, n, 1.0, BLOCK=128)

    def grid(meta):
        torch.zeros(1)                  # the user's own torch call: the mode sees it
        return (naiad.cdiv(meta["n"], meta["BLOCK"]),)

    with Recording() as mode:
        scaled_add[grid](x, y, out, n, 0.5, BLOCK=128)
    assert mode.seen == ["zeros"]
    np.testing.assert_allclose(out.numpy(), np.full(n, 2.5, np.float32))


def test_compiled_kernel_run_reads_nothing_through_a_mode():
    """The launcher convention Inductor calls (``CompiledKernel.run``)."""
    n = 300
    x, y, out = torch.arange(n, dtype=torch.float32), torch.ones(n), torch.zeros(n)
    kernel = scaled_add[(3,)](x, y, out, n, 2.0, BLOCK=128)
    out.zero_()
    with Recording() as mode:
        kernel.run(3, 1, 1, 0, kernel.function, kernel.packed_metadata, None, None, None,
                   x, y, out, n, 2.0)
    assert mode.seen == []
    np.testing.assert_allclose(out.numpy(), np.arange(n) * 2.0 + 1)


def test_set_default_device_launch_is_right():
    with torch.device("cpu"):
        x = torch.linspace(-1, 1, 777)
        y = torch.linspace(2, 3, 777)
        out = torch.empty(777)
        scaled_add[(7,)](x, y, out, 777, -2.0, BLOCK=128)
        scaled_add[(7,)](x, y, out, 777, -2.0, BLOCK=128)
    np.testing.assert_allclose(out.numpy(), x.numpy() * -2 + y.numpy(), rtol=1e-6)
