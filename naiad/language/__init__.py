"""The kernel language: ``import naiad.language as tl``, the same surface as ``triton.language``.

Values and builtins live in `naiad.language.core`, element-wise math in `naiad.language.math`,
the functions written in the language itself (reductions, softmax, sort) in
`naiad.language.standard`.  Backend-specific libraries are ``naiad.language.extra.<backend>``.
Importing this package does not import the compiler (xDSL, llvmlite).
"""

import builtins as _builtins

from naiad.language import math, random
from naiad.language.core import *  # noqa: F401,F403
from naiad.language.core import (PropagateNan, TRITON_MAX_TENSOR_NUMEL, advance, arange,
                                 associative_scan, assume, atomic_add, atomic_and, atomic_cas,
                                 atomic_max, atomic_min, atomic_or, atomic_xchg, atomic_xor,
                                 broadcast, broadcast_to, builtin, cast, cat, clamp, constexpr,
                                 debug_barrier, device_assert, device_print, dot, dot_scaled, dtype,
                                 expand_dims, full, full_like, get_int_dtype,
                                 inline_asm_elementwise, interleave, join, load, logical_and,
                                 logical_or, make_block_ptr, max_constancy,
                                 max_contiguous, maximum, minimum, multiple_of, num_programs,
                                 permute, program_id, range, reduce, reshape, split, static_assert,
                                 static_print, static_range, store, tensor, trans, view, where,
                                 zeros, zeros_like)
from naiad.language.tensor_descriptor import (load_tensor_descriptor, make_tensor_descriptor,
                                              store_tensor_descriptor, tensor_descriptor,
                                              tensor_descriptor_type)
from naiad.language.math import (abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log,
                                 log2, rsqrt, sin, sqrt, sqrt_rn, umulhi)
from naiad.language.standard import (argmax, argmin, bitonic_merge, cdiv, cumprod, cumsum, flip, item,
                                     max, min, ravel, reduce_or, sigmoid, softmax, sort, sum,
                                     swizzle2d, topk, xor_sum)
from naiad.language.random import (pair_uniform_to_normal, philox, philox_impl, rand, rand4x,
                                   randint, randint4x, randn, randn4x, uint_to_uniform_float)
from naiad.language.core import constexpr_function

#: Kernels hold tuples as Python tuples, so Triton's ``tl.tuple((a, b))`` is the builtin tuple.
tuple = _builtins.tuple
