"""Reductions and scans over every axis of 1-D, 2-D and 3-D tiles, with masked loads, against
numpy.  A tile is read from an array of the tile's shape, of which only a corner (the first
``valid`` elements of each dimension) is inside the mask; masked-off elements are replaced by
each operation's neutral value, as a kernel author would."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .reference import assert_close, bf16_round, to_kernel



@naiad.jit
def _sum_and_max(a0, a1, b0, b1):
    return a0 + b0, tl.maximum(a1, b1)


@naiad.jit
def _load_3d(x, valid, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    """The (A, B, C) tile of ``x`` and its mask: the first valid[d] elements along dim d."""
    ia = tl.arange(0, A)[:, None, None]
    ib = tl.arange(0, B)[None, :, None]
    ic = tl.arange(0, C)[None, None, :]
    va, vb, vc = tl.load(valid), tl.load(valid + 1), tl.load(valid + 2)
    mask = (ia < va) & (ib < vb) & (ic < vc)
    offs = ia * (B * C) + ib * C + ic
    return tl.load(x + offs, mask=mask, other=0), mask, offs


@naiad.jit
def _load_tile(x, valid, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, RANK: tl.constexpr):
    """`_load_3d`'s values, mask and offsets as a rank-RANK tile (its trailing dims)."""
    v, mask, offs = _load_3d(x, valid, A, B, C)
    if RANK == 1:
        v, mask, offs = tl.reshape(v, (C,)), tl.reshape(mask, (C,)), tl.reshape(offs, (C,))
    elif RANK == 2:
        v, mask, offs = tl.reshape(v, (B, C)), tl.reshape(mask, (B, C)), tl.reshape(offs, (B, C))
    return v, mask, offs


@naiad.jit
def reduce_kernel(x, valid, total, biggest, smallest, argmax, argmin, xor, pair_sum, pair_max,
                  centered, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                  RANK: tl.constexpr, AXIS: tl.constexpr, OUT: tl.constexpr, INT: tl.constexpr):
    """Reductions of a rank-RANK tile (the trailing dims of an (A, B, C) load) along AXIS."""
    v, mask, offs = _load_tile(x, valid, A, B, C, RANK)
    if INT:
        low, high = -1000, 1000
    else:
        low, high = -float("inf"), float("inf")
    out = tl.arange(0, OUT)
    tl.store(total + out, tl.reshape(tl.sum(v, axis=AXIS), (OUT,)))
    tl.store(biggest + out, tl.reshape(tl.max(tl.where(mask, v, low), axis=AXIS), (OUT,)))
    tl.store(smallest + out, tl.reshape(tl.min(tl.where(mask, v, high), axis=AXIS), (OUT,)))
    tl.store(argmax + out, tl.reshape(tl.argmax(tl.where(mask, v, low), axis=AXIS), (OUT,)))
    tl.store(argmin + out, tl.reshape(tl.argmin(tl.where(mask, v, high), axis=AXIS), (OUT,)))
    if INT:
        tl.store(xor + out, tl.reshape(tl.xor_sum(v, axis=AXIS), (OUT,)))
    s, mx = tl.reduce((v, tl.where(mask, v, low)), AXIS, _sum_and_max)
    tl.store(pair_sum + out, tl.reshape(s, (OUT,)))
    tl.store(pair_max + out, tl.reshape(mx, (OUT,)))
    # keep_dims: broadcast the reduced values back against the tile
    peak = tl.max(tl.where(mask, v, low), axis=AXIS, keep_dims=True)
    tl.store(centered + offs, tl.where(mask, v - peak, 0), mask=mask)


_CASES = [(1, None), (1, 0), (2, None), (2, 0), (2, 1), (3, None), (3, 0), (3, 1), (3, 2)]
_TILE = (4, 8, 16)


def _masked(x: np.ndarray, valid: tuple[int, ...]) -> np.ndarray:
    mask = np.zeros(x.shape, bool)
    mask[tuple(slice(0, v) for v in valid)] = True
    return mask


def _case(rank: int, dtype: str, rng: np.random.Generator, low: float, high: float):
    """A tile of the given rank (as the trailing dims of a 3-D load), and its mask."""
    shape3 = (1,) * (3 - rank) + _TILE[3 - rank:]
    if dtype == "int32":
        x = rng.integers(low, high, shape3).astype(dtype)
    else:
        x = rng.uniform(low, high, shape3).astype(dtype)
    valid3 = (1,) * (3 - rank) + (3, 5, 11)[3 - rank:]
    mask = _masked(x, valid3)
    return x, valid3, mask, shape3


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("rank,axis", _CASES)
def test_reductions(dtype, rank, axis):
    rng = np.random.default_rng(rank * 10 + (axis or 0))
    x, valid3, mask3, shape3 = _case(rank, dtype, rng, -100, 100)
    tile, mask = x.reshape(shape3[3 - rank:]), mask3.reshape(shape3[3 - rank:])
    out_count = 1 if axis is None else tile.size // tile.shape[axis]
    outs = [np.zeros(out_count, dtype if k not in (3, 4) else np.int32) for k in range(8)]
    outs.append(np.zeros(shape3, dtype))
    reduce_kernel[(1,)](x, np.array(valid3, np.int32), *outs, A=shape3[0], B=shape3[1], C=shape3[2],
                        RANK=rank, AXIS=axis, OUT=out_count, INT=dtype == "int32")
    low, high = (-1000, 1000) if dtype == "int32" else (-np.inf, np.inf)
    zeroed = np.where(mask, tile, 0).astype(dtype)
    lows, highs = np.where(mask, tile, low).astype(dtype), np.where(mask, tile, high).astype(dtype)
    flat = (lambda a: a.reshape(-1)) if axis is None else (lambda a: a)
    ax = 0 if axis is None else axis
    expected = [(zeroed.sum(axis=axis, dtype=dtype), dtype), (lows.max(axis=axis), dtype),
                (highs.min(axis=axis), dtype), (np.argmax(flat(lows), axis=ax), "int32"),
                (np.argmin(flat(highs), axis=ax), "int32"), (None, dtype),
                (zeroed.sum(axis=axis, dtype=dtype), dtype), (lows.max(axis=axis), dtype)]
    if dtype == "int32":
        expected[5] = (np.bitwise_xor.reduce(zeroed, axis=axis), dtype)
    labels = "sum max min argmax argmin xor_sum reduce-pair-sum reduce-pair-max".split()
    for out, (value, name), label in zip(outs, expected, labels):
        if value is None:
            continue
        try:
            assert_close(out, np.reshape(value, -1).astype(name), name, rtol=1e-5, atol=1e-5)
        except AssertionError as e:
            raise AssertionError(f"{label} over axis {axis} of a rank-{rank} tile: {e}") from None
    centered = outs[8].reshape(tile.shape)
    peak = lows.max(axis=axis, keepdims=True)
    np.testing.assert_array_equal(centered[mask], (tile - peak)[mask])


@naiad.jit
def narrow_reduce_kernel(x, total, biggest, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0)
    tl.store(total, tl.sum(v, axis=0))
    tl.store(biggest, tl.max(v, axis=0))


@naiad.jit
def scalar_total_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, OP: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    if OP == "sum":
        tl.store(out_ptr, tl.sum(x, axis=0))
    else:
        tl.store(out_ptr, tl.max(x, axis=0))


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("num_warps", [1, 2, 4])
@pytest.mark.parametrize("block", [16, 32, 64, 128, 256])
def test_scalar_results_of_small_reductions(op, num_warps, block):
    """A 1-D reduction to a scalar that one thread stores, for blocks smaller than the program's
    threads (their elements replicated) and larger: every thread's part must reach the result
    (on one OpenCL runtime the stored value once missed the other lanes')."""
    x = np.random.default_rng(block).integers(-50, 50, block).astype(np.float32)
    out = np.zeros(1, np.float32)
    scalar_total_kernel[(1,)](x, out, BLOCK=block, OP=op, num_warps=num_warps)
    np.testing.assert_array_equal(out, [x.sum() if op == "sum" else x.max()])


@pytest.mark.parametrize("name,sum_type,max_type", [("int8", "int32", "int32"), ("uint8", "uint32", "int32"),
                                                    ("float16", "float16", "float32"),
                                                    ("bfloat16", "bfloat16", "float32")])
def test_narrow_types_accumulate_as_triton_does(name, sum_type, max_type):
    """Integers narrower than 32 bits are summed in 32 bits; max of fp16/bf16 runs in fp32."""
    rng = np.random.default_rng(7)
    n = 100
    if name in ("int8", "uint8"):
        x = rng.integers(0 if name == "uint8" else -128, 127, n).astype(name)
    else:
        x = rng.uniform(0, 4, n).astype(np.float32)
        x = bf16_round(x) if name == "bfloat16" else x.astype(name)
    total = np.zeros(1, "float32" if sum_type == "bfloat16" else sum_type)
    biggest = np.zeros(1, max_type)
    narrow_reduce_kernel[(1,)](to_kernel(x, name), total, biggest, n, BLOCK=128)
    if name in ("int8", "uint8"):
        assert total[0] == x.astype(sum_type).sum()
    else:
        np.testing.assert_allclose(total[0], x.astype(np.float64).sum(), rtol=2e-2)
    assert biggest[0] == x.astype(np.float64).max()


@naiad.jit
def _cummax(a, b):
    return tl.maximum(a, b)


@naiad.jit
def scan_kernel(x, valid, csum, cprod, cmax, rsum, rprod, A: tl.constexpr, B: tl.constexpr,
                C: tl.constexpr, RANK: tl.constexpr, AXIS: tl.constexpr):
    v, mask, offs = _load_tile(x, valid, A, B, C, RANK)
    ones = tl.where(mask, v, 1)
    tl.store(csum + offs, tl.cumsum(v, axis=AXIS))
    tl.store(cprod + offs, tl.cumprod(ones, axis=AXIS))
    tl.store(cmax + offs, tl.associative_scan(v, AXIS, _cummax))
    tl.store(rsum + offs, tl.cumsum(v, axis=AXIS, reverse=True))
    tl.store(rprod + offs, tl.associative_scan(ones, AXIS, _mul, reverse=True))


@naiad.jit
def _mul(a, b):
    return a * b


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("rank,axis", [c for c in _CASES if c[1] is not None])
def test_scans(dtype, rank, axis):
    rng = np.random.default_rng(rank * 10 + axis)
    x, valid3, mask3, shape3 = _case(rank, dtype, rng, -3, 4)
    if dtype == "float32":        # products stay near 1
        x = (np.sign(x) + (x == 0)) * rng.uniform(0.8, 1.2, shape3).astype(dtype)
    tile, mask = x.reshape(shape3[3 - rank:]), mask3.reshape(shape3[3 - rank:])
    outs = [np.zeros(shape3, dtype) for _ in range(5)]
    scan_kernel[(1,)](x, np.array(valid3, np.int32), *outs, A=shape3[0], B=shape3[1], C=shape3[2],
                      RANK=rank, AXIS=axis)
    zeroed, ones = np.where(mask, tile, 0).astype(dtype), np.where(mask, tile, 1).astype(dtype)

    def rev(fn, a):
        return np.flip(fn(np.flip(a, axis), axis=axis, dtype=dtype), axis)

    expected = [np.cumsum(zeroed, axis=axis, dtype=dtype), np.cumprod(ones, axis=axis, dtype=dtype),
                np.maximum.accumulate(zeroed, axis=axis), rev(np.cumsum, zeroed), rev(np.cumprod, ones)]
    labels = "cumsum cumprod cummax reverse-cumsum reverse-cumprod".split()
    for out, value, label in zip(outs, expected, labels):
        try:
            assert_close(out.reshape(tile.shape), value, dtype, rtol=1e-5, atol=1e-5)
        except AssertionError as e:
            raise AssertionError(f"{label} along axis {axis} of a rank-{rank} tile: {e}") from None


@naiad.jit
def narrow_scan_kernel(x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.cumsum(tl.load(x + offs), axis=0))


@pytest.mark.parametrize("name,out_type", [("int8", "int32"), ("bfloat16", "float32")])
def test_narrow_cumsum_promotes(name, out_type):
    rng = np.random.default_rng(8)
    x = rng.integers(-100, 100, 64).astype(name) if name == "int8" else bf16_round(rng.uniform(0, 1, 64))
    out = np.zeros(64, out_type)
    narrow_scan_kernel[(1,)](to_kernel(x, name), out, BLOCK=64)
    np.testing.assert_allclose(out, np.cumsum(x.astype(out_type)), rtol=1e-5)


@naiad.jit
def arg_nan_kernel(x, out_max, out_min, N: tl.constexpr, TIE_LEFT: tl.constexpr):
    v = tl.load(x + tl.arange(0, N))
    tl.store(out_max, tl.argmax(v, axis=0, tie_break_left=TIE_LEFT))
    tl.store(out_min, tl.argmin(v, axis=0, tie_break_left=TIE_LEFT))


@pytest.mark.parametrize("tie_left", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_arg_reductions_skip_nan_wherever_it_is(seed, tie_left):
    """NaN is a missing value (as for tl.max): numpy's nanargmax/nanargmin for every NaN
    placement, so that the answer does not hang on the order the combine runs in."""
    rng = np.random.default_rng(seed)
    x = rng.permutation(np.arange(16, dtype=np.float32))
    x[rng.random(16) < 0.5] = np.nan
    x[rng.integers(0, 16)] = 100.0
    x[rng.integers(0, 16)] = -100.0
    out_max, out_min = np.zeros(1, np.int32), np.zeros(1, np.int32)
    arg_nan_kernel[(1,)](x, out_max, out_min, N=16, TIE_LEFT=tie_left)
    assert (out_max[0], out_min[0]) == (np.nanargmax(x), np.nanargmin(x)), x


@naiad.jit
def _larger_by_branch(a, b):
    if a > b:
        return a
    return b


@naiad.jit
def branchy_reduce_kernel(x, out, BLOCK: tl.constexpr):
    tl.store(out, tl.reduce(tl.load(x + tl.arange(0, BLOCK)), 0, _larger_by_branch))


def test_a_combine_function_with_control_flow_is_a_clear_error():
    """A compile error (the CPU lowering names the source line) or the backend's unsupported
    feature (a GPU lowering's, naming the stage); either way the kernel and what is missing."""
    from naiad.errors import NaiadError

    x, out = np.arange(16, dtype=np.float32), np.zeros(1, np.float32)
    with pytest.raises(NaiadError) as info:
        branchy_reduce_kernel[(1,)](x, out, BLOCK=16)
    message = str(info.value)
    assert "branchy_reduce_kernel" in message
    assert "scf.if in a reduction's or scan's combine function is not supported yet (only " \
           "element-wise operations are)" in message
