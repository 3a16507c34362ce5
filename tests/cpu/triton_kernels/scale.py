"""A one-line kernel written for Triton (imports ``triton``), for the conformance harness's
source-templating test.  Test input; not product code."""

import triton
import triton.language as tl


@triton.jit
def scale_kernel(X, Y, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs) * 2)
