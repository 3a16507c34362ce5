"""The part of the language written in the language itself: reductions, scans, softmax, sort, topk.

These are kernel functions (`kernel_function.library`), so they go through the same code generator as user kernels and
get inlined; behaviour (result dtypes, tie-breaking, the bfloat16 promotion) follows Triton's.
"""

from __future__ import annotations

from naiad.language import core
from naiad.language import math
from naiad.language.core import constexpr_function
from naiad.language.kernel_function import library


@constexpr_function
def _log2(n):
    return n.bit_length() - 1


@constexpr_function
def _is_power_of_two(n):
    return n > 0 and n & (n - 1) == 0


@constexpr_function
def _sum_dtype(in_dtype, dtype):
    """Integers narrower than 32 bits are summed in 32 bits of the same signedness (bool
    counts as unsigned, so a sum of booleans is a uint32 count, as in Triton)."""
    if dtype is not None:
        return dtype
    if in_dtype.is_int() and in_dtype.int_bitwidth < 32:
        return core.uint32 if in_dtype.is_int_unsigned() else core.int32
    return None


@constexpr_function
def _widen_for_minmax(in_dtype):
    """Min/max of types narrower than 32 bits run in fp32 / int32, as Triton's do."""
    if in_dtype.primitive_bitwidth < 32:
        return core.float32 if in_dtype.is_floating() else core.int32
    return None


@library
def cdiv(x, div):
    return (x + div - 1) // div


@library
def sigmoid(x):
    return 1 / (1 + math.exp(-x))


@library
def softmax(x, dim=None, keep_dims=False, ieee_rounding=False):
    axis: core.constexpr = 0 if dim is None else dim
    shifted = x - max(x, axis, keep_dims=keep_dims)
    numerator = math.exp(shifted)
    return math.fdiv(numerator, sum(numerator, axis, keep_dims=keep_dims), ieee_rounding)


@library
def ravel(x, can_reorder=False):
    return core.reshape(x, [x.numel], can_reorder=can_reorder)


@library
def swizzle2d(i, j, size_i, size_j, size_g):
    linear = i * size_j + j
    group_size = size_g * size_j
    first_row = (linear // group_size) * size_g
    rows_in_group = core.minimum(size_i - first_row, size_g)
    within = linear % group_size
    return first_row + within % rows_in_group, within // rows_in_group


@library
def _add(a, b):
    return a + b


@library
def _mul(a, b):
    return a * b


@library
def _xor(a, b):
    return a ^ b


@library
def _or(a, b):
    return a | b


@library
def _maximum(a, b):
    return core.maximum(a, b)


@library
def _minimum(a, b):
    return core.minimum(a, b)


@library
def _argmax_left(v1, i1, v2, i2):
    """NaN counts as missing (below every number, as `max` ignores it): the result must not
    depend on the order a backend combines in (a GPU combines as a tree)."""
    nan1, nan2 = v1 != v1, v2 != v2
    tie = ((v1 == v2) | (nan1 & nan2)) & (i1 < i2)
    take_first = (v1 > v2) | (nan2 & (v1 == v1)) | tie
    return core.where(take_first, v1, v2), core.where(take_first, i1, i2)


@library
def _argmax_fast(v1, i1, v2, i2):
    take_first = (v1 > v2) | ((v2 != v2) & (v1 == v1))
    return core.where(take_first, v1, v2), core.where(take_first, i1, i2)


@library
def _argmin_left(v1, i1, v2, i2):
    """NaN counts as missing, as in `_argmax_left`."""
    nan1, nan2 = v1 != v1, v2 != v2
    tie = ((v1 == v2) | (nan1 & nan2)) & (i1 < i2)
    take_first = (v1 < v2) | (nan2 & (v1 == v1)) | tie
    return core.where(take_first, v1, v2), core.where(take_first, i1, i2)


@library
def _argmin_fast(v1, i1, v2, i2):
    take_first = (v1 < v2) | ((v2 != v2) & (v1 == v1))
    return core.where(take_first, v1, v2), core.where(take_first, i1, i2)


@library
def _promote_bf16(x):
    if x.dtype == core.bfloat16:
        return x.to(core.float32)
    return x


@library
def _with_indices(input, axis, combine_fn, keep_dims):
    """Reduce (value, index) pairs; the index runs along ``axis`` (all elements if None)."""
    if axis is None:
        flat = core.reshape(input, [input.numel], can_reorder=True)
        indices = core.arange(0, input.numel)
        value, index = core.reduce((flat, indices), 0, combine_fn)
        if keep_dims:
            value = core.reshape(value, [1] * len(input.shape))
            index = core.reshape(index, [1] * len(input.shape))
        return value, index
    else:
        indices = core.arange(0, input.shape[axis])
        for i in core.static_range(axis):
            indices = core.expand_dims(indices, 0)
        for i in core.static_range(axis + 1, len(input.shape)):
            indices = core.expand_dims(indices, i)
        indices = core.broadcast_to(indices, input.shape)
        return core.reduce((input, indices), axis, combine_fn, keep_dims=keep_dims)


@library
def _extreme(input, axis, return_indices, tie_break_left, keep_dims, combine: core.constexpr,
             with_left: core.constexpr, with_fast: core.constexpr):
    """tl.max and tl.min: the reduction, or (value, index) pairs with Triton's tie-breaking."""
    input = _promote_bf16(input)
    if return_indices:
        if tie_break_left:
            return _with_indices(input, axis, with_left, keep_dims)
        else:
            return _with_indices(input, axis, with_fast, keep_dims)
    else:
        wide: core.constexpr = _widen_for_minmax(input.dtype)
        if wide is not None:
            input = input.to(wide)
        return core.reduce(input, axis, combine, keep_dims=keep_dims)


@library
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    return _extreme(input, axis, return_indices, return_indices_tie_break_left, keep_dims,
                    _maximum, _argmax_left, _argmax_fast)


@library
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    return _extreme(input, axis, return_indices, return_indices_tie_break_left, keep_dims,
                    _minimum, _argmin_left, _argmin_fast)


@library
def argmax(input, axis, tie_break_left=True, keep_dims=False):
    value, index = max(input, axis, return_indices=True, return_indices_tie_break_left=tie_break_left,
                       keep_dims=keep_dims)
    return index


@library
def argmin(input, axis, tie_break_left=True, keep_dims=False):
    value, index = min(input, axis, return_indices=True, return_indices_tie_break_left=tie_break_left,
                       keep_dims=keep_dims)
    return index


@library
def sum(input, axis=None, keep_dims=False, dtype: core.constexpr = None):
    out: core.constexpr = _sum_dtype(input.dtype, dtype)
    if out is not None:
        input = input.to(out)
    return core.reduce(input, axis, _add, keep_dims=keep_dims)


@library
def xor_sum(input, axis=None, keep_dims=False):
    core.static_assert(input.dtype.is_int(), "xor_sum is only defined for integers")
    return core.reduce(input, axis, _xor, keep_dims=keep_dims)


@library
def reduce_or(input, axis, keep_dims=False):
    core.static_assert(input.dtype.is_int(), "reduce_or is only defined for integers")
    return core.reduce(input, axis, _or, keep_dims=keep_dims)


@library
def _first(a, b):
    return a


@library
def item(input):
    """The element of a one-element tensor as a scalar (Triton's ``x.item()``; a scalar stays
    as it is).  A reduction over one element is that element, whatever its dtype."""
    if len(input.shape) == 0:
        return input
    core.static_assert(input.numel == 1, "item() needs a tensor with exactly one element")
    return core.reduce(input, None, _first)


@library
def cumsum(input, axis=0, reverse=False, dtype: core.constexpr = None):
    input = _promote_bf16(input)
    out: core.constexpr = _sum_dtype(input.dtype, dtype)
    if out is not None:
        input = input.to(out)
    return core.associative_scan(input, axis, _add, reverse)


@library
def cumprod(input, axis=0, reverse=False):
    input = _promote_bf16(input)
    return core.associative_scan(input, axis, _mul, reverse)


@constexpr_function
def _axis_or_last(dim, rank):
    """``dim`` made non-negative, the last axis when it is None."""
    axis = rank - 1 if dim is None else dim
    return axis + rank if axis < 0 else axis


@library
def flip(x, dim=None):
    """Reverse ``x`` along ``dim``: XOR-swaps over a (2, 2, ..., 2) view of that dimension."""
    axis: core.constexpr = _axis_or_last(dim, len(x.shape))
    core.static_assert(_is_power_of_two(x.shape[axis]), "flip needs a power-of-two dimension")
    steps: core.constexpr = _log2(x.shape[axis])
    int_type: core.constexpr = core.get_int_dtype(x.dtype.primitive_bitwidth, True)
    y = core.reshape(x.to(int_type, bitcast=True), x.shape[:axis] + [2] * steps + x.shape[axis + 1:])
    for i in core.static_range(steps):
        y = y ^ xor_sum(y, axis + i, True)
    return core.reshape(y, x.shape).to(x.dtype, bitcast=True)


@library
def _half_indicator(rank: core.constexpr, j: core.constexpr):
    """0 for the lower and 1 for the upper half along hypercube dimension j (from the inside)."""
    ar = core.arange(0, 2)
    return core.reshape(ar, [1] * (rank - j - 1) + [2] + [1] * j)


@library
def _compare_swap(x, flip_mask, i: core.constexpr):
    rank: core.constexpr = _log2(x.numel)
    int_type: core.constexpr = core.get_int_dtype(x.dtype.primitive_bitwidth, True)
    as_int = x.to(int_type, bitcast=True)
    partner = (as_int ^ xor_sum(as_int, rank - 1 - i, True)).to(x.dtype, bitcast=True)
    upper = _half_indicator(rank, i)
    return core.where((x > partner) != (flip_mask ^ upper), partner, x)


@library
def _bitonic_merge(x, stage: core.constexpr, order: core.constexpr):
    """order 0: ascending, 1: descending, 2: alternating between neighbouring groups."""
    if order == 2:
        flip_mask = _half_indicator(_log2(x.numel), stage)
    else:
        flip_mask = order
    for i in core.static_range(stage):
        x = _compare_swap(x, flip_mask, stage - 1 - i)
    return x


@library
def _check_last_axis(x, axis: core.constexpr):
    core.static_assert(axis == len(x.shape) - 1,
                       "sort, topk and bitonic_merge work only along the last dimension: "
                       "permute the tensor so that dimension comes last (tl.permute / .T)")
    core.static_assert(_is_power_of_two(x.shape[axis]),
                       "sort, topk and bitonic_merge need a power-of-two size along the last dimension")


@library
def _best_of_pair(h, j: core.constexpr, descending: core.constexpr):
    """Halve a hypercube whose runs of 2**j elements alternate ascending/descending: the
    element-wise max (min) of each run and its neighbour is one bitonic run that holds the
    pair's 2**j largest (smallest) elements (the half-cleaner of bitonic top-k)."""
    axis: core.constexpr = _log2(h.numel) - 1 - j
    if descending:
        return core.reduce(h, axis, _maximum)
    else:
        return core.reduce(h, axis, _minimum)


@library
def _sort_top_k(x, k: core.constexpr, dim: core.constexpr, descending: core.constexpr):
    """Bitonic sort of the last dimension; with ``k``, sort runs of k only and then halve the
    candidates until k remain (bitonic top-k), so the result's last dimension is k.

    The elements keep x's dtype (Triton's topk widens 16-bit values to 32 bits on the way;
    the values are the same)."""
    axis: core.constexpr = _axis_or_last(dim, len(x.shape))
    _check_last_axis(x, axis)
    if k is not None:
        core.static_assert(k > 0, "topk: k must be greater than 0")
        core.static_assert(_is_power_of_two(k), "topk: k must be a power of two")
        core.static_assert(k <= x.shape[axis], "topk: k must not exceed the size of the selected dimension")
    log_n: core.constexpr = _log2(x.shape[axis])
    log_k: core.constexpr = log_n if k is None else _log2(k)
    if log_k == 0:
        # One element per row: nothing to sort, or a plain max/min (a hypercube would be 0-d).
        if log_n == 0:
            return x
        elif descending:
            return core.reduce(x, axis, _maximum, keep_dims=True)
        else:
            return core.reduce(x, axis, _minimum, keep_dims=True)
    else:
        h = core.reshape(x, [2] * _log2(x.numel))
        for i in core.static_range(1, log_k + 1):
            h = _bitonic_merge(h, i, 2 if i < log_n else descending)
        for i in core.static_range(log_k + 1, log_n + 1):
            h = _best_of_pair(h, log_k, descending)
            h = _bitonic_merge(h, log_k, 2 if i < log_n else descending)
        return core.reshape(h, x.shape[:axis] + [2 ** log_k])


@library
def sort(x, dim: core.constexpr = None, descending: core.constexpr = 0):
    """Bitonic sort along the last dimension."""
    return _sort_top_k(x, None, dim, descending)


@library
def topk(x, k: core.constexpr, dim: core.constexpr = None, descending: core.constexpr = True):
    """The k largest (``descending``) or smallest elements along the last dimension, sorted
    largest (smallest) first; k is a power of two no larger than that dimension."""
    return _sort_top_k(x, k, dim, descending)


@library
def bitonic_merge(x, dim: core.constexpr = None, descending: core.constexpr = 0):
    """Sort a last dimension that is already bitonic (rises then falls, or the reverse) with
    one bitonic merge: log2(n) compare-and-swap rounds instead of a full sort."""
    axis: core.constexpr = _axis_or_last(dim, len(x.shape))
    _check_last_axis(x, axis)
    log_n: core.constexpr = _log2(x.shape[axis])
    if log_n == 0:
        return x
    else:
        h = core.reshape(x, [2] * _log2(x.numel))
        return core.reshape(_bitonic_merge(h, log_n, descending), x.shape)
