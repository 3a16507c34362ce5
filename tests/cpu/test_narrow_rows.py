"""Blocks whose rows are narrower than a vector ([64, 8], [32, 4]), where the CPU backend's
chunks are a row each (`KernelLowering.row_lanes`): values against numpy over row widths, masks
along both axes, broadcasts both ways, a loop-carried Welford accumulator (Inductor's batch-norm
statistics of channels-last data) and transposed stores."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def channel_stats(x_ptr, mean_ptr, m2_ptr, positions, C: tl.constexpr, XBLOCK: tl.constexpr,
                  RBLOCK: tl.constexpr):
    """Per-channel mean and sum of squared deviations of channels-last [positions, C] data, by
    Welford's updates: [RBLOCK, XBLOCK] blocks, consecutive along the channels."""
    channel = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    cmask = channel < C
    mean = tl.zeros([RBLOCK, XBLOCK], tl.float32)
    m2 = tl.zeros([RBLOCK, XBLOCK], tl.float32)
    weight = tl.zeros([RBLOCK, XBLOCK], tl.float32)
    for start in range(0, positions, RBLOCK):
        rows = start + tl.arange(0, RBLOCK)[:, None]
        mask = (rows < positions) & cmask
        x = tl.load(x_ptr + rows * C + channel, mask, other=0.0)
        new_weight = weight + 1.0
        delta = x - mean
        new_mean = mean + delta / new_weight
        new_m2 = m2 + delta * (x - new_mean)
        mean = tl.where(mask, new_mean, mean)
        m2 = tl.where(mask, new_m2, m2)
        weight = tl.where(mask, new_weight, weight)
    total = tl.sum(weight, 0)
    out_mean = tl.sum(mean * weight, 0) / tl.maximum(total, 1.0)
    out_m2 = tl.sum(m2 + weight * (mean - out_mean[None, :]) * (mean - out_mean[None, :]), 0)
    channels = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(mean_ptr + channels, out_mean, channels < C)
    tl.store(m2_ptr + channels, out_m2, channels < C)


@pytest.mark.parametrize("xblock", [4, 8, 16])
@pytest.mark.parametrize("positions, channels", [(2048, 64), (1000, 24), (37, 6)])
def test_channel_statistics_match_numpy(xblock, positions, channels):
    rng = np.random.default_rng(positions + channels)
    x = rng.standard_normal((positions, channels)).astype(np.float32) * 3 + 1
    mean, m2 = np.empty(channels, np.float32), np.empty(channels, np.float32)
    channel_stats[(naiad.cdiv(channels, xblock),)](x, mean, m2, positions, C=channels,
                                                   XBLOCK=xblock, RBLOCK=64)
    xd = x.astype(np.float64)
    np.testing.assert_allclose(mean, xd.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m2, ((xd - xd.mean(0)) ** 2).sum(0), rtol=1e-4)


@naiad.jit
def rows_and_columns(x_ptr, row_ptr, col_ptr, out_ptr, out_t_ptr, R, C, BR: tl.constexpr,
                     BC: tl.constexpr):
    """``out = x * row[None, :] + col[:, None]`` and its transpose, over [BR, BC] blocks."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    c = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    mask = (r < R) & (c < C)
    x = tl.load(x_ptr + r * C + c, mask, other=0.0)
    row = tl.load(row_ptr + c, c < C, other=0.0)
    col = tl.load(col_ptr + r, r < R, other=0.0)
    y = x * row + col
    tl.store(out_ptr + r * C + c, y, mask)
    tl.store(out_t_ptr + tl.trans(c) * R + tl.trans(r), tl.trans(y), tl.trans(mask))


@pytest.mark.parametrize("br, bc", [(64, 8), (32, 4), (16, 4), (64, 16), (8, 2)])
@pytest.mark.parametrize("rows, cols", [(64, 16), (50, 13), (7, 3)])
def test_row_and_column_broadcasts_match_numpy(br, bc, rows, cols):
    rng = np.random.default_rng(br * bc + rows)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    row, col = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(rows).astype(np.float32)
    out, out_t = np.full((rows, cols), np.nan, np.float32), np.full((cols, rows), np.nan, np.float32)
    rows_and_columns[(naiad.cdiv(rows, br), naiad.cdiv(cols, bc))](x, row, col, out, out_t, rows, cols,
                                                                   BR=br, BC=bc)
    want = x * row[None, :] + col[:, None]
    np.testing.assert_allclose(out, want, rtol=1e-6)
    np.testing.assert_allclose(out_t, want.T, rtol=1e-6)
