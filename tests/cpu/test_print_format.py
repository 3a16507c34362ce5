"""device_print's output format is Triton's GPU printf format, line for line: ``pid (x, y, z)
idx (i, j) prefix: value``, each index padded to its dimension's digits, prefixes normalised to
end in ": ", hex integers zero-padded to the type's width, hex floats as %a, pointers in hex."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def print_1d(X, BLOCK: tl.constexpr, HEX: tl.constexpr):
    tl.device_print("x ", tl.load(X + tl.arange(0, BLOCK)), hex=HEX)


@naiad.jit
def print_2d(X, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.device_print("", x)


@naiad.jit
def print_two(X, BLOCK: tl.constexpr):
    x = tl.load(X + tl.arange(0, BLOCK))
    print("", x, x + 1)


@naiad.jit
def print_scalar_and_text(X):
    print("x:", tl.load(X))
    print("no arg")


@naiad.jit
def print_pointer(X, BLOCK: tl.constexpr):
    tl.device_print("ptr", X + tl.arange(0, BLOCK))


@naiad.jit
def print_static(X, BLOCK: tl.constexpr):
    tl.static_print("", tl.load(X + tl.arange(0, BLOCK)))


def lines(capfd):
    return [line for line in capfd.readouterr().out.splitlines() if line]


def test_1d_indices_are_padded_to_the_last_index(capfd):
    x = np.arange(16, dtype=np.int32) - 3
    print_1d[(2,)](x, BLOCK=16, HEX=False)
    out = lines(capfd)
    assert sorted(out) == sorted(f"pid ({p}, 0, 0) idx ({i:2}) x: {i - 3}" for p in range(2) for i in range(16))


@pytest.mark.parametrize("dtype, digits", [(np.int16, 4), (np.int32, 8), (np.int64, 16), (np.uint8, 2)])
def test_hex_integers_are_zero_padded_to_the_type(capfd, dtype, digits):
    x = np.array([0, 1, 255, -1 if np.issubdtype(dtype, np.signedinteger) else 7], dtype=dtype)
    print_1d[(1,)](x, BLOCK=4, HEX=True)
    width = np.dtype(dtype).itemsize * 8
    assert lines(capfd) == [f"pid (0, 0, 0) idx ({i}) x: 0x{int(v) & ((1 << width) - 1):0{digits}x}"
                            for i, v in enumerate(x)]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_hex_floats_are_exact(capfd, dtype):
    x = np.array([1.0, 0.1, -1.5, np.inf], dtype=dtype)
    print_1d[(1,)](x, BLOCK=4, HEX=True)
    values = [float.fromhex(line.rsplit(" ", 1)[1]) for line in lines(capfd)]
    assert values == [float(v) for v in x]


def test_2d_indices_and_empty_prefix(capfd):
    x = np.arange(4 * 32, dtype=np.int32)
    print_2d[(1,)](x, M=4, N=32)
    assert sorted(lines(capfd)) == sorted(f"pid (0, 0, 0) idx ({i}, {j:2}): {i * 32 + j}"
                                          for i in range(4) for j in range(32))


def test_several_operands_are_numbered(capfd):
    x = np.arange(2, dtype=np.int32)
    print_two[(1,)](x, BLOCK=2)
    assert sorted(lines(capfd)) == sorted([f"pid (0, 0, 0) idx ({i}): (operand 0) {i}" for i in range(2)] +
                                          [f"pid (0, 0, 0) idx ({i}): (operand 1) {i + 1}" for i in range(2)])


def test_scalar_and_text_only_prints(capfd):
    print_scalar_and_text[(1,)](np.array([2.5], dtype=np.float32))
    assert lines(capfd) == ["pid (0, 0, 0) idx () x: 2.500000", "pid (0, 0, 0) no arg"]


def test_pointers_print_in_hex(capfd):
    x = np.zeros(2, dtype=np.int32)
    print_pointer[(1,)](x, BLOCK=2)
    assert lines(capfd) == [f"pid (0, 0, 0) idx ({i}) ptr: 0x{x.ctypes.data + 4 * i:x}" for i in range(2)]


def test_static_print_shows_dtype_and_shape(capfd):
    print_static[(1,)](np.zeros(8, dtype=np.int32), BLOCK=8)
    assert " int32[constexpr[8]]" in lines(capfd)
