"""Triton's tutorial 08 on the CPU (`naiad.tools.gallery.grouped_matmul`): problems of different
shapes, their addresses read from an int64 array and cast to pointers in the kernel, a fixed
number of programs walking every problem's tiles.  Checked against numpy in fp32, over edge
shapes (one element, sizes off the block, K shorter than a block) and more or fewer programs
than tiles."""

from __future__ import annotations

import numpy as np
import pytest

from naiad.tools import gallery

pytestmark = pytest.mark.shipped_backends


@pytest.mark.parametrize("programs", [1, 3, 16, 64])
@pytest.mark.parametrize("shapes", [
    [(64, 64, 64)],
    [(1, 1, 1), (33, 17, 5), (70, 130, 96)],
    [(32, 32, 32), (31, 33, 65), (2, 100, 40), (100, 2, 3)],
], ids=["one", "edges", "mixed"])
def test_grouped_matmul_matches_numpy(shapes, programs):
    rng = np.random.default_rng(len(shapes) * 100 + programs)
    a_list = [rng.standard_normal((m, k)).astype(np.float16) for m, n, k in shapes]
    b_list = [rng.standard_normal((k, n)).astype(np.float16) for m, n, k in shapes]
    c_list = gallery.grouped_matmul(a_list, b_list, programs=programs)
    for a, b, c in zip(a_list, b_list, c_list):
        want = a.astype(np.float32) @ b.astype(np.float32)
        assert c.shape == want.shape and c.dtype == np.float16
        np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_an_empty_group_launches_and_writes_nothing():
    assert gallery.grouped_matmul([], []) == []
