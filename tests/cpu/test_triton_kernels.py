"""Kernels written for Triton (``import triton``) run unmodified on Naiad's CPU backend through
naiad.compat, on numpy arrays and torch CPU tensors."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

import naiad
import naiad.compat

pytestmark = pytest.mark.shipped_backends


@pytest.fixture
def attention_module():
    naiad.compat.enable()
    try:
        yield importlib.import_module("tests.cpu.triton_kernels.attention")
    finally:
        sys.modules.pop("tests.cpu.triton_kernels.attention", None)
        naiad.compat.disable()


def _attention_reference(q, k, v, scale):
    scores = (q @ k.T) * scale
    scores -= scores.max(axis=1, keepdims=True)
    p = np.exp(scores)
    return (p / p.sum(axis=1, keepdims=True)) @ v


@pytest.mark.parametrize("n_ctx", [64, 100])
def test_fused_attention_numpy(attention_module, n_ctx):
    rng = np.random.default_rng(n_ctx)
    q, k, v = (rng.standard_normal((n_ctx, 32), dtype=np.float32) for _ in range(3))
    out = np.zeros_like(q)
    scale = 1 / np.sqrt(32)
    attention_module.attention_fwd[(naiad.cdiv(n_ctx, 32),)](
        q, k, v, out, 32, 32, 32, 32, n_ctx, scale, BLOCK_M=32, BLOCK_N=32, HEAD_DIM=32)
    np.testing.assert_allclose(out, _attention_reference(q, k, v, scale), atol=2e-5)


def test_fused_attention_torch(attention_module):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    q, k, v = (torch.randn(96, 16) for _ in range(3))
    out = torch.empty_like(q)
    attention_module.attention_fwd[(3,)](q, k, v, out, 16, 16, 16, 16, 96, 0.25,
                                         BLOCK_M=32, BLOCK_N=32, HEAD_DIM=16)
    expected = torch.softmax((q @ k.T) * 0.25, dim=1) @ v
    assert torch.allclose(out, expected, atol=2e-5)
