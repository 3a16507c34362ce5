"""Distributed layouts: which thread of a program holds which elements of a tensor.

A program runs on ``num_warps`` warps of ``warp_size`` threads, and each tensor is spread over
them by a layout, as in Triton's TTGIR:

- `Blocked`: each thread holds ``size_per_thread[d]`` consecutive elements along each dimension,
  the threads of a warp tile ``threads_per_warp``, the warps tile ``warps_per_cta``; the tile
  repeats over larger tensors and wraps (threads share elements) over smaller ones.  ``order``
  lists dimensions fastest first (threads are numbered along ``order[0]`` first).
- `Slice`: a tensor with dimension ``dim`` of a `Blocked` parent removed (a reduction's result):
  each thread holds the projections of its parent elements, so ``expand_dims`` back to the
  parent is free.

A thread's elements are enumerated at compile time (`elements`): each is a per-dimension pair
(repetition, offset inside the thread's block), and its coordinate is
``(rep * tile + thread_base + offset) % size`` where only ``thread_base`` depends on the
thread (`thread_bases`).  Two tensors of the same layout and shape hold the same elements in
the same order, so element-wise ops pair values by position.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Sequence


@dataclasses.dataclass(frozen=True)
class Blocked:
    size_per_thread: tuple[int, ...]
    threads_per_warp: tuple[int, ...]
    warps_per_cta: tuple[int, ...]
    order: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.order)

    def tile(self, d: int) -> int:
        """Elements one pass of the whole program covers along dimension ``d``."""
        return self.size_per_thread[d] * self.threads_per_warp[d] * self.warps_per_cta[d]

    def __str__(self) -> str:
        return (f"#ttg.blocked<{{sizePerThread = {list(self.size_per_thread)}, threadsPerWarp = "
                f"{list(self.threads_per_warp)}, warpsPerCTA = {list(self.warps_per_cta)}, "
                f"order = {list(self.order)}}}>")


@dataclasses.dataclass(frozen=True)
class Slice:
    dim: int
    parent: "Blocked | Slice"

    @property
    def rank(self) -> int:
        return self.parent.rank - 1

    def __str__(self) -> str:
        return f"#ttg.slice<{{dim = {self.dim}, parent = {self.parent}}}>"


@dataclasses.dataclass(frozen=True)
class Linear:
    """A distributed layout for one tensor shape, given by where each bit of an element's
    register index, of the lane and of the warp moves it (Triton's linear layouts): an element
    sits at the sum of the ``registers`` bases of its register index's set bits, plus the
    ``lanes`` and ``warps`` bases of its thread's.  Each base is a power of two along one
    dimension (or zero: threads or registers that repeat elements), and no two bases of one
    dimension share a bit, so the sum equals Triton's XOR.  A backend's own layouts (tensor-core
    accumulators and operands) give one with ``linear(shape)``; the shared lowering handles them
    all through it.  A thread's elements are its register indices, in order."""

    shape: tuple[int, ...]
    registers: tuple[tuple[int, ...], ...]
    lanes: tuple[tuple[int, ...], ...]
    warps: tuple[tuple[int, ...], ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    def offsets(self) -> list[tuple[int, ...]]:
        """The compile-time part of each element's coordinate, by register index."""
        result = [tuple(0 for _ in self.shape)]
        for base in self.registers:
            result += [tuple(o + b for o, b in zip(offset, base)) for offset in result]
        return result



def linear_bases(shape: Sequence[int], bases: Sequence[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
    """``bases`` for a tensor of ``shape``: components at or past a dimension's size wrap to
    nothing (the elements repeat, as layouts larger than their tensor do)."""
    return tuple(tuple(b if b < size else 0 for b, size in zip(base, shape)) for base in bases)


def make_linear(shape: Sequence[int], registers: Sequence[tuple[int, ...]],
                lanes: Sequence[tuple[int, ...]], warps: Sequence[tuple[int, ...]]) -> Linear:
    """A `Linear` layout of ``shape`` from bases that may be larger than it (they wrap); a
    register base that wraps to zero is dropped (a register holds each element once)."""
    shape = tuple(shape)
    kept = [b for b in linear_bases(shape, registers) if any(b)]
    return Linear(shape, tuple(kept), linear_bases(shape, lanes), linear_bases(shape, warps))


def linear_of(layout: "Layout", shape: Sequence[int]) -> Linear | None:
    """The `Linear` form of a layout that has one (a backend's own layouts and slices of
    them); None for `Blocked` layouts and their slices, which the lowering handles directly."""
    if isinstance(layout, Blocked):
        return None
    return _linear_of(layout, tuple(shape))


@functools.lru_cache(maxsize=4096)
def _linear_of(layout: "Layout", shape: tuple[int, ...]) -> Linear | None:
    if isinstance(layout, Linear):
        return layout
    if isinstance(layout, Slice):
        full = list(shape)
        full.insert(layout.dim, 1)
        parent = linear_of(layout.parent, full)
        if parent is None:
            return None

        def drop(bases: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
            return [base[:layout.dim] + base[layout.dim + 1:] for base in bases]

        return make_linear(shape, drop(parent.registers), drop(parent.lanes), drop(parent.warps))
    make = getattr(layout, "linear", None)
    return make(tuple(shape)) if make is not None else None


def equivalent(a: "Layout", b: "Layout", shape: Sequence[int]) -> bool:
    """Whether ``a`` and ``b`` put every element of a tensor of ``shape`` in the same register
    of the same thread, so that converting between them moves nothing: equal layouts, or ones
    whose `Linear` forms agree -- e.g. the row slices of two tensor-core accumulators that
    differ only in their instruction's N (attention's row maximum of one dot scaling the
    other's accumulator)."""
    if a == b:
        return True
    linear = linear_of(a, shape)
    return linear is not None and linear == linear_of(b, shape)


Layout = Any
"""`Blocked`, `Slice`, `Linear`, or a backend's layout object that has ``linear(shape)``."""

#: TTGIR text prefix ("#ttg.nvidia_mma") -> the function that reads such a layout back: the
#: backends that define layouts register theirs (`register_layout`).
PARSERS: dict[str, Any] = {}


def register_layout(prefix: str, parse: Any) -> None:
    """Let `parse_layout` read layouts whose text starts with ``prefix``."""
    PARSERS[prefix] = parse


def parse_layout(text: str) -> Layout:
    """A layout from its TTGIR text (as a backend's TTGIR stage writes it on an op)."""
    for prefix, parse in PARSERS.items():
        if text.startswith(prefix):
            return parse(text)
    raise ValueError(f"no layout parser for {text!r} (known: {', '.join(PARSERS) or 'none'})")


def default_blocked(shape: Sequence[int], num_warps: int, warp_size: int = 32,
                    vector: int = 4, order: Sequence[int] | None = None) -> Blocked:
    """The layout a tensor of ``shape`` starts with (Triton's default, coalescing the last
    dimension, or ``order[0]`` when given): ``vector`` consecutive elements per thread along
    it, then the threads of a warp along it and on through ``order``, then the warps from the
    slowest dimension on; what is left over repeats (threads or warps sharing elements)."""
    rank = len(shape)
    order = tuple(order) if order is not None else tuple(range(rank - 1, -1, -1))
    spt = [1] * rank
    spt[order[0]] = max(1, min(vector, shape[order[0]]))
    tpw = [1] * rank
    lanes = warp_size
    for d in order:
        room = max(1, shape[d] // spt[d])
        take = min(lanes, _pow2_floor(room))
        tpw[d] = take
        lanes //= take
    tpw[order[0]] *= lanes                         # more lanes than elements: they share
    wpc = [1] * rank
    warps = num_warps
    for d in reversed(order):
        room = max(1, shape[d] // (spt[d] * tpw[d]))
        take = min(warps, _pow2_floor(room))
        wpc[d] = take
        warps //= take
    wpc[order[-1]] *= warps
    return Blocked(tuple(spt), tuple(tpw), tuple(wpc), order)


def transposed(layout: Layout, shape: Sequence[int]) -> Layout | None:
    """The layout under which a thread's registers of a 2-D tensor of ``shape`` in ``layout``,
    in the same order, are the elements of its transpose: a ``tt.trans`` that moves no data.
    Blocked layouts swap their dimensions (a thread's elements still run along the same
    memory); layouts with a `Linear` form swap their bases; None for slices of blocked ones."""
    if len(shape) != 2:
        return None
    if isinstance(layout, Blocked):
        return Blocked(layout.size_per_thread[::-1], layout.threads_per_warp[::-1],
                       layout.warps_per_cta[::-1], tuple(1 - d for d in layout.order))
    linear = linear_of(layout, shape)
    if linear is None:
        return None

    def swap(bases: Sequence[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
        return tuple(base[::-1] for base in bases)

    return Linear(tuple(shape)[::-1], swap(linear.registers), swap(linear.lanes), swap(linear.warps))


def widest_access(contiguity: int, divisibility: int, mask_constancy: int | None, nbytes: int) -> int:
    """How many consecutive elements of ``nbytes`` one access may move, by the axis information
    of its pointers along the dimension it runs (their run of consecutive addresses and the
    bytes the first one is a multiple of) and of its mask (its run of equal values): at most
    128 bits, a power of two.  The layouts give each thread as many (Triton's coalescing), and
    an access moves as many of a thread's consecutive elements at once."""
    width = min(contiguity, max(1, divisibility // nbytes), max(1, 16 // nbytes))
    if mask_constancy is not None:
        width = min(width, mask_constancy)
    return _pow2_floor(max(1, width))


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def blocked_of(layout: Layout) -> tuple[Blocked, tuple[int, ...]]:
    """The blocked layout under ``layout`` and the parent dimensions that were sliced away
    (for layouts blocked at the root: see `linear_of` for the others)."""
    removed: list[int] = []
    while isinstance(layout, Slice):
        # dims of the child map to parent dims skipping `dim`; record in parent numbering
        removed = [d + (d >= layout.dim) for d in removed] + [layout.dim]
        layout = layout.parent
    return layout, tuple(sorted(removed))


def parent_shape(layout: Layout, shape: Sequence[int]) -> tuple[int, ...]:
    """``shape`` in the dimensions of the blocked layout under ``layout`` (size 1 where sliced);
    ``shape`` itself for layouts with a `Linear` form."""
    if linear_of(layout, shape) is not None:
        return tuple(shape)
    blocked, removed = blocked_of(layout)
    full, it = [], iter(shape)
    for d in range(blocked.rank):
        full.append(1 if d in removed else next(it))
    return tuple(full)


def per_thread(blocked: Blocked, full_shape: Sequence[int], d: int) -> tuple[int, int]:
    """(repetitions, elements per repetition) a thread holds along dimension ``d``."""
    size, spt = full_shape[d], blocked.size_per_thread[d]
    if size <= spt:
        return 1, size
    return max(1, size // blocked.tile(d)), spt


def elements(layout: Layout, shape: Sequence[int]) -> list[tuple[tuple[int, int], ...]]:
    """A thread's elements, in order: per dimension of the blocked parent, (rep, offset); for a
    layout with a `Linear` form, per dimension (0, offset) of each register."""
    linear = linear_of(layout, shape)
    if linear is not None:
        return [tuple((0, o) for o in offset) for offset in linear.offsets()]
    blocked, removed = blocked_of(layout)
    full = parent_shape(layout, shape)
    ranges = []
    for d in range(blocked.rank):
        reps, count = (1, 1) if d in removed else per_thread(blocked, full, d)
        ranges.append([(r, e) for r in range(reps) for e in range(count)])
    # the fastest dimension varies fastest, so a thread's consecutive elements stay together
    result: list[tuple[tuple[int, int], ...]] = [()]
    for d in reversed(blocked.order):
        result = [prefix + ((d, item),) for prefix in result for item in ranges[d]]
    return [tuple(item for _, item in sorted(element)) for element in result]


def run_length(layout: Layout, shape: Sequence[int], dim: int) -> int:
    """How many consecutive elements along ``dim`` one thread holds in consecutive places of
    its element list: what one vector access may move."""
    if not shape:
        return 1
    linear = linear_of(layout, shape)
    if linear is not None:
        run = 1
        for base in linear.registers:
            if base[dim] != run or any(b for d, b in enumerate(base) if d != dim):
                break
            run *= 2
        return min(run, shape[dim])
    blocked, removed = blocked_of(layout)
    full_dim = [d for d in range(blocked.rank) if d not in removed][dim]
    if blocked.order[0] != full_dim:
        return 1
    return max(1, min(blocked.size_per_thread[full_dim], shape[dim]))


def element_count(layout: Layout, shape: Sequence[int]) -> int:
    return len(elements(layout, shape))


def thread_runs(layout: Layout, shape: Sequence[int]) -> tuple[list[tuple[int, ...]], list[int]] | None:
    """Each element's compile-time offset from its thread's first coordinate (per dimension of
    ``shape``), and per dimension the smallest step between two threads' coordinates (the
    dimension's size where one thread holds it all); so a thread's elements whose offsets agree
    but for their low bits lie within one aligned run of that many, and the thread's part and the
    offsets share no bit (`GPUKernel.split_coordinates`).  None for a layout wider than its
    tensor (its elements wrap) or a shape off powers of two."""
    if any(size & (size - 1) for size in shape):
        return None
    linear = linear_of(layout, shape)
    if linear is not None:
        steps = [min([v[d] for v in (*linear.lanes, *linear.warps) if v[d]], default=size)
                 for d, size in enumerate(shape)]
        return linear.offsets(), steps
    blocked, removed = blocked_of(layout)
    full = parent_shape(layout, shape)
    kept = [d for d in range(blocked.rank) if d not in removed]
    if any(blocked.tile(d) > full[d] for d in kept):
        return None
    steps = [blocked.size_per_thread[d] if blocked.threads_per_warp[d] * blocked.warps_per_cta[d] > 1 else full[d]
             for d in kept]
    offsets = [constant_offsets(layout, shape, element) for element in elements(layout, shape)]
    return [tuple(offset[d] for d in kept) for offset in offsets], steps


def constant_offsets(layout: Layout, shape: Sequence[int], element: tuple) -> tuple[int, ...]:
    """The compile-time part of an element's coordinate per parent dimension: rep*tile + offset."""
    if linear_of(layout, shape) is not None:
        return tuple(e for _, e in element)
    blocked, _ = blocked_of(layout)
    return tuple(rep * blocked.tile(d) + e for d, (rep, e) in enumerate(element))


def thread_bits(layout: Layout, shape: Sequence[int]) -> tuple[int, ...] | None:
    """The bits the thread's part of each coordinate may set (`GPUKernel.split_coordinates`
    splits a coordinate so): what an address of a swizzled tile can leave to immediates
    (`SwizzledTile.addresses`).  None for a layout whose thread parts are not sums of
    powers of two."""
    linear = linear_of(layout, shape)
    if linear is not None:
        bits = [0] * linear.rank
        for base in (*linear.lanes, *linear.warps):
            for d, step in enumerate(base):
                bits[d] |= step
        return tuple(bits)
    blocked, removed = blocked_of(layout)
    sizes = (*blocked.size_per_thread, *blocked.threads_per_warp, *blocked.warps_per_cta)
    if any(n & (n - 1) for n in sizes):
        return None
    return tuple((blocked.tile(d) - 1) & ~(blocked.size_per_thread[d] - 1)
                 for d in range(blocked.rank) if d not in removed)


def distinct_threads(blocked: Blocked, full_shape: Sequence[int], d: int) -> tuple[int, int]:
    """How many lanes and warps along ``d`` hold different elements (the rest repeat them)."""
    size, spt = full_shape[d], blocked.size_per_thread[d]
    lanes = min(blocked.threads_per_warp[d], max(1, math.ceil(size / spt)))
    warps = min(blocked.warps_per_cta[d], max(1, math.ceil(size / (spt * blocked.threads_per_warp[d]))))
    return lanes, warps


def repeated_threads(blocked: Blocked, shape: Sequence[int]) -> int:
    """How many threads hold each element of a tensor of ``shape`` in ``blocked`` (1: none
    repeat another's): the lanes and warps a layout spends on dimensions too small for them."""
    total = 1
    for d in range(blocked.rank):
        lanes, warps = distinct_threads(blocked, shape, d)
        total *= (blocked.threads_per_warp[d] // lanes) * (blocked.warps_per_cta[d] // warps)
    return total
