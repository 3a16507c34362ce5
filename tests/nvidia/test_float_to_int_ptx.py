"""fp32 -> 32-bit integer conversions are one ``cvt.rzi`` (PTX clamps float-to-integer
conversions to the destination's range and gives 0 for NaN from ``.f32`` to 32 bits), not
LLVM's ``fptosi.sat`` with its compares and selects around it; from fp64 or to 64 bits, where
PTX gives ``1 << 63`` for NaN, the NaN test stays.  Values on the GPU against numpy's
saturating reference: NaN, infinities, out of range, fractions of both signs."""

from __future__ import annotations

import re

import numpy as np
import pytest

import naiad
import naiad.language as tl

from .conftest import compile_cuda

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def to_integers(X, I32, U32, I64, U64, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    tl.store(I32 + offs, x.to(tl.int32), mask=mask)
    tl.store(U32 + offs, x.to(tl.uint32), mask=mask)
    tl.store(I64 + offs, x.to(tl.int64), mask=mask)
    tl.store(U64 + offs, x.to(tl.uint64), mask=mask)


def _ptx(source: str) -> str:
    signature = {"X": f"*{source}", "I32": "*i32", "U32": "*u32", "I64": "*i64", "U64": "*u64", "n": "i32"}
    return compile_cuda(to_integers, signature, {"BLOCK": 128}, num_warps=4).asm["ptx"]


@pytest.mark.parametrize("source", ["fp32", "fp16"])
def test_fp32_to_32_bits_is_one_cvt_without_a_nan_test(source):
    ptx = _ptx(source)
    signed, unsigned = (len(re.findall(rf"cvt\.rzi\.{t}32\.f32", ptx)) for t in "su")
    assert signed == unsigned >= 1
    assert not re.findall(r"selp\.b32", ptx)          # no clamping or NaN select of 32-bit results
    assert re.findall(r"selp\.b64", ptx)              # the 64-bit ones keep theirs


def test_fp64_conversions_keep_their_nan_test():
    assert re.findall(r"setp\.(?:nan|num)\.f64", _ptx("fp64"))


def _saturated(x: np.ndarray, dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.array([0 if np.isnan(v) else info.max if v >= info.max else info.min if v <= info.min
                     else int(v) for v in x.astype(np.float64)], dtype=dtype)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("source", ["float32", "float64", "float16"])
def test_saturating_conversions_against_numpy(gpu, source):
    torch = gpu
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.9, -1.9, 2**31, -2**31 - 4096.0,
                  2**32 + 2**20, 3e9, -3e9, 1e19, 2e19, -1e19, 123456.7, -7.25], dtype=source)
    outs = [torch.zeros(x.size, device="cuda", dtype=t) for t in (torch.int32, torch.uint32, torch.int64, torch.uint64)]
    to_integers[(1,)](torch.from_numpy(x).cuda(), *outs, x.size, BLOCK=128)
    for out, dtype in zip(outs, (np.int32, np.uint32, np.int64, np.uint64)):
        np.testing.assert_array_equal(out.cpu().numpy(), _saturated(x, dtype), err_msg=str(dtype))
