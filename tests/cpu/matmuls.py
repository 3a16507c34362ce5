"""Operands, results and the check shared by the CPU backend's tests of ``tl.dot`` kernels."""

from __future__ import annotations

import numpy as np
import torch


def operands(dtype, shape, rng):
    """A random torch tensor of ``shape``: int8 over its whole range, else normal values in
    ``dtype`` ("float32", "bfloat16", ...)."""
    if dtype == "int8":
        return torch.from_numpy(rng.integers(-128, 128, shape).astype(np.int8))
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(getattr(torch, dtype))


def result(dtype, m, n):
    """Where an ``m x n`` product goes, filled with what no product gives: int32 -7 for int8
    operands, NaN (fp32) otherwise."""
    return torch.full((m, n), -7, dtype=torch.int32) if dtype == "int8" else torch.full((m, n), float("nan"))


def check_product(c, a, b):
    """``c`` against ``a @ b`` summed in float64: exactly for int32 results."""
    want = a.double().numpy() @ b.double().numpy()
    if c.dtype == torch.int32:
        np.testing.assert_array_equal(c.numpy(), want.astype(np.int64))
    else:
        np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-3)
