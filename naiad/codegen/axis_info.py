"""Axis information: what is known, per dimension, about the integers and pointers in a tensor.

For each value and dimension (Triton's AxisInfo): *contiguity* -- runs of this many elements
along the dimension are consecutive integers (addresses one element apart); *divisibility* --
the first element of each run is a multiple of this (bytes, for pointers); *constancy* -- runs
of this many elements are equal.  Runs start at positions along the dimension that are
multiples of their length.  Unknown values get (1, 1, 1); the hints `tl.multiple_of`,
`tl.max_contiguous` and `tl.max_constancy` replace what is derived.

Every backend decides its memory accesses from it: the GPU lowering moves 128 bits per
instruction where a thread's consecutive elements are one aligned run and the mask is constant
over them; the CPU lowering loads and stores a chunk of vector lanes as one vector where the
chunk lies in one run.  So it is target-neutral: it reads the IR and nothing of a target.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, TensorType
from xdsl.ir import SSAValue

from naiad.codegen.registry import registrar
from naiad.ir import arith, tt

#: Divisibility of zero (and the cap for everything): as large as an address could need.
_LARGE = 1 << 30


@dataclasses.dataclass(frozen=True)
class AxisInfo:
    contiguity: tuple[int, ...]
    divisibility: tuple[int, ...]
    constancy: tuple[int, ...]
    #: The value when it is a known integer constant (splat), else None.
    constant: int | None = None

    @staticmethod
    def unknown(rank: int) -> "AxisInfo":
        return AxisInfo((1,) * rank, (1,) * rank, (1,) * rank)


def _pow2_divisor(n: int) -> int:
    return _LARGE if n == 0 else min(_LARGE, n & -n)


def _shape(value: SSAValue) -> tuple[int, ...]:
    return tuple(value.type.get_shape()) if isinstance(value.type, TensorType) else ()


def analyze(func: Any, arguments: list[AxisInfo] | None = None) -> dict[SSAValue, AxisInfo]:
    """Axis information for the values of ``func`` (forward, in program order; a loop's
    carried values are what holds for their first value and for every value the body yields
    back, found by going through the body until that stops changing).

    A kernel's arguments are known by their ``tt.divisibility``; ``arguments`` gives instead
    what holds of the operands of a call of ``func`` (a backend that inlines calls as it
    lowers them analyzes the callee's body once per call)."""
    infos: dict[SSAValue, AxisInfo] = {}
    for i, arg in enumerate(func.body.block.args):
        if arguments is not None:
            infos[arg] = arguments[i]
            continue
        div = 1
        attrs = func.arg_attrs.data[i].data if func.arg_attrs is not None else {}
        if "tt.divisibility" in attrs:
            div = attrs["tt.divisibility"].value.data
        infos[arg] = AxisInfo((), (div,), ())
    _analyze_block(func.body.block, infos)
    return infos


def _analyze_block(block: Any, infos: dict[SSAValue, AxisInfo]) -> None:
    for op in block.ops:
        if isinstance(op, scf.ForOp):
            _analyze_loop(op, infos)
            continue
        for region in op.regions:
            for inner in region.blocks:
                _analyze_block(inner, infos)
        rule = _RULES.get(type(op))
        if not op.results:
            continue
        result = op.results[0]
        info = rule(op, lambda v: _get(infos, v), _shape(result)) if rule is not None else None
        info = _hinted(op, info, _shape(result))
        if info is not None:
            infos[result] = info


def _analyze_loop(op: scf.ForOp, infos: dict[SSAValue, AxisInfo]) -> None:
    lb, step = _get(infos, op.lb), _get(infos, op.step)
    args = op.body.block.args
    infos[args[0]] = AxisInfo((), (math.gcd(scalar_divisibility(lb), scalar_divisibility(step)),), ())
    carried = [_get(infos, init) for init in op.iter_args]
    for _ in range(4):                   # a few rounds settle every loop seen so far
        for arg, info in zip(args[1:], carried):
            infos[arg] = info
        _analyze_block(op.body.block, infos)
        yielded = [_get(infos, v) for v in op.body.block.last_op.operands]
        merged = [_meet(a, b) for a, b in zip(carried, yielded)]
        if merged == carried:
            break
        carried = merged
    else:                                # not settled: assume nothing of the carried values
        carried = [AxisInfo.unknown(len(c.contiguity)) for c in carried]
        for arg, info in zip(args[1:], carried):
            infos[arg] = info
        _analyze_block(op.body.block, infos)
    for result, info in zip(op.results, carried):
        infos[result] = info


def _meet(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """What holds of a value that may be either: the common part of each field."""
    if len(a.contiguity) != len(b.contiguity) or len(a.divisibility) != len(b.divisibility):
        return AxisInfo.unknown(len(a.contiguity))
    gcd = lambda x, y: tuple(math.gcd(p, q) for p, q in zip(x, y))  # noqa: E731
    return AxisInfo(gcd(a.contiguity, b.contiguity), gcd(a.divisibility, b.divisibility),
                    gcd(a.constancy, b.constancy), a.constant if a.constant == b.constant else None)


#: Hint attribute (``tl.multiple_of``, ``tl.max_contiguous``, ``tl.max_constancy``) -> the field
#: of `AxisInfo` it gives.
_HINTS = {"tt.divisibility": "divisibility", "tt.contiguity": "contiguity", "tt.constancy": "constancy"}


def _hinted(op: Any, info: AxisInfo | None, shape: tuple) -> AxisInfo | None:
    """``info`` with the programmer's hints on ``op`` in place of what was derived, as Triton
    takes them (a scalar has only a divisibility)."""
    hints = {field: tuple(op.attributes[name].get_values()) for name, field in _HINTS.items()
             if name in op.attributes and (shape or field == "divisibility")}
    if not hints:
        return info
    return dataclasses.replace(info or AxisInfo.unknown(len(shape)), **hints)


def _get(infos: dict[SSAValue, AxisInfo], value: SSAValue) -> AxisInfo:
    info = infos.get(value)
    if info is not None:
        return info
    return AxisInfo.unknown(len(_shape(value)))


def scalar_divisibility(info: AxisInfo) -> int:
    return info.divisibility[0] if info.divisibility else 1


def info_of(infos: dict[SSAValue, AxisInfo], value: SSAValue) -> AxisInfo:
    """What `analyze` found of ``value``; nothing known where the analysis did not reach it."""
    return infos.get(value) or AxisInfo.unknown(len(_shape(value)))


def innermost_dim(shape: tuple | list) -> int | None:
    """The last dimension longer than 1: the one that consecutive elements of the row-major
    order run along (dimensions of size 1 do not move it); None for a single element."""
    return next((d for d in reversed(range(len(shape))) if shape[d] > 1), None)


Rule = Callable[[Any, Callable[[SSAValue], AxisInfo], tuple], AxisInfo | None]
_RULES: dict[type, Rule] = {}
_rule = registrar(_RULES)


@_rule(arith.ConstantOp)
def _constant(op: Any, get: Callable, shape: tuple) -> AxisInfo | None:
    attr = op.value
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return AxisInfo((), (_pow2_divisor(value),), (), value)
    if not hasattr(attr, "get_values"):
        return None
    values = attr.get_values()
    if not values or len(set(values)) != 1 or not isinstance(values[0], int):
        return None
    value = values[0]
    return AxisInfo((1,) * len(shape), (_pow2_divisor(value),) * len(shape), shape, value)


@_rule(tt.MakeRangeOp)
def _make_range(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    return AxisInfo(shape, (_pow2_divisor(op.start.value.data),), (1,))


@_rule(tt.SplatOp)
def _splat(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    src = get(op.src)
    div = scalar_divisibility(src)
    return AxisInfo((1,) * len(shape), (div,) * len(shape), shape, src.constant)


@_rule(tt.ExpandDimsOp)
def _expand_dims(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """Along the new dimension every element is a run of its own, so its divisibility is what
    divides every element: a constant's own, else the gcd over the source's dimensions, 1 for
    any that holds consecutive values (as Triton's analysis).  ``tl.arange(0, 2)[:, None] +
    tl.arange(0, N)[None, :]`` starts its second row at 1: claiming the first row's alignment
    there made the CPU's four-wide atomic add compare-and-swap a misaligned address."""
    src = get(op.src)
    axis = op.axis.value.data
    ins = lambda t, v: t[:axis] + (v,) + t[axis:]      # noqa: E731
    if src.constant is not None:
        divisibility = _pow2_divisor(src.constant)
    else:
        divisibility = _LARGE
        for contiguity, divisor in zip(src.contiguity, src.divisibility):
            divisibility = math.gcd(divisibility, 1 if contiguity > 1 else divisor)
    return AxisInfo(ins(src.contiguity, 1), ins(src.divisibility, divisibility),
                    ins(src.constancy, 1), src.constant)


@_rule(tt.ReshapeOp)
def _reshape(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """Row-major data is unchanged, only the shape: the innermost dimension longer than 1 of
    the result holds consecutive elements of the source's innermost one (a row of either may
    span several of the other's, both being powers of two), so the runs along it keep their
    length up to the shorter of the two; a run cut shorter no longer starts where the
    divisibility was known.  Of the outer dimensions nothing is kept."""
    src, src_shape = get(op.src), _shape(op.src)
    rank = len(shape)
    inner, src_inner = innermost_dim(shape), innermost_dim(src_shape)
    if inner is None or src_inner is None:
        return AxisInfo.unknown(rank)
    contiguity = math.gcd(src.contiguity[src_inner], shape[inner])
    divisibility = src.divisibility[src_inner] if contiguity == src.contiguity[src_inner] else 1
    constancy = math.gcd(src.constancy[src_inner], shape[inner])
    put = lambda value: tuple(value if d == inner else 1 for d in range(rank))  # noqa: E731
    return AxisInfo(put(contiguity), put(divisibility), put(constancy), src.constant)


@_rule(tt.TransOp)
def _trans(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """The source's facts, dimension by dimension, in the result's order (a transposed mask or
    pointer tensor keeps its runs: a transposing store moves 16 bytes at a time)."""
    src = get(op.src)
    order = list(op.order.get_values())
    pick = lambda t: tuple(t[i] for i in order)      # noqa: E731
    return AxisInfo(pick(src.contiguity), pick(src.divisibility), pick(src.constancy), src.constant)


@_rule(tt.BroadcastOp)
def _broadcast(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    src = get(op.src)
    src_shape = _shape(op.src)
    constancy = tuple(shape[d] if src_shape[d] == 1 and shape[d] != 1 else src.constancy[d]
                      for d in range(len(shape)))
    return AxisInfo(src.contiguity, src.divisibility, constancy, src.constant)


def _binary(op: Any, get: Callable) -> tuple[AxisInfo, AxisInfo]:
    return get(op.operands[0]), get(op.operands[1])


@_rule(arith.AddiOp, tt.AddPtrOp)
def _add(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    a, b = _binary(op, get)
    scale = 1
    if isinstance(op, tt.AddPtrOp):
        pointee = _pointee_bytes(op.operands[0])
        scale = pointee
        b = AxisInfo(b.contiguity, tuple(min(_LARGE, d * scale) for d in b.divisibility), b.constancy,
                     None if b.constant is None else b.constant * scale)
    rank = len(shape)
    if rank == 0:
        constant = a.constant + b.constant if a.constant is not None and b.constant is not None else None
        return AxisInfo((), (math.gcd(scalar_divisibility(a), scalar_divisibility(b)),), (), constant)
    contiguity = tuple(max(math.gcd(a.contiguity[d], b.constancy[d]), math.gcd(a.constancy[d], b.contiguity[d]))
                       for d in range(rank))
    divisibility = tuple(math.gcd(a.divisibility[d], b.divisibility[d]) for d in range(rank))
    constancy = tuple(math.gcd(a.constancy[d], b.constancy[d]) for d in range(rank))
    return AxisInfo(contiguity, divisibility, constancy)


@_rule(arith.SubiOp)
def _sub(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """``a - b``: contiguous where ``a`` is and ``b`` is constant (a mask bound ``K - k * BK``
    keeps the divisibility both sides share)."""
    a, b = _binary(op, get)
    rank = len(shape)
    if rank == 0:
        constant = a.constant - b.constant if a.constant is not None and b.constant is not None else None
        return AxisInfo((), (math.gcd(scalar_divisibility(a), scalar_divisibility(b)),), (), constant)
    return AxisInfo(tuple(math.gcd(a.contiguity[d], b.constancy[d]) for d in range(rank)),
                    tuple(math.gcd(a.divisibility[d], b.divisibility[d]) for d in range(rank)),
                    tuple(math.gcd(a.constancy[d], b.constancy[d]) for d in range(rank)))


def _pointee_bytes(value: SSAValue) -> int:
    from naiad.codegen import llvm_types as lt

    pointee = lt.element(value.type).pointee_type
    try:
        return lt.byte_size(lt.scalar(pointee))
    except TypeError:
        return 1


@_rule(arith.MuliOp)
def _mul(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    a, b = _binary(op, get)
    rank = len(shape)
    if rank == 0:
        constant = a.constant * b.constant if a.constant is not None and b.constant is not None else None
        div = min(_LARGE, scalar_divisibility(a) * scalar_divisibility(b))
        return AxisInfo((), (div,), (), constant)
    contiguity = tuple(a.contiguity[d] if b.constant == 1 else (b.contiguity[d] if a.constant == 1 else 1)
                       for d in range(rank))
    divisibility = tuple(min(_LARGE, a.divisibility[d] * b.divisibility[d]) for d in range(rank))
    constancy = tuple(math.gcd(a.constancy[d], b.constancy[d]) for d in range(rank))
    return AxisInfo(contiguity, divisibility, constancy)


@_rule(arith.RemSIOp, arith.RemUIOp)
def _rem(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """``a % n`` (``offs % M``, wrapping a tile's rows)."""
    return _remainder(*_binary(op, get), shape)


def _remainder(a: AxisInfo, b: AxisInfo, shape: tuple) -> AxisInfo:
    """``a % b``: a run of ``a`` that starts at a multiple of ``g`` stays contiguous for ``g``
    elements when a splat ``b`` is a multiple of ``g``."""
    rank = len(shape)
    if rank == 0:
        return AxisInfo((), (math.gcd(scalar_divisibility(a), scalar_divisibility(b)),), ())
    contiguity = tuple(math.gcd(a.contiguity[d], math.gcd(a.divisibility[d], b.divisibility[d]))
                       if b.constancy[d] >= shape[d] else 1 for d in range(rank))
    return AxisInfo(contiguity, tuple(math.gcd(a.divisibility[d], b.divisibility[d]) for d in range(rank)),
                    tuple(math.gcd(a.constancy[d], b.constancy[d]) for d in range(rank)))


@_rule(arith.CmpiOp)
def _cmp(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """A comparison is constant where both sides are; ``range < n`` also over the aligned runs
    of a contiguous range against a splat with the same alignment (a mask ``offs < n``)."""
    a, b = _binary(op, get)
    rank = len(shape)
    if rank == 0:
        return AxisInfo((), (1,), ())
    constancy = []
    for d in range(rank):
        c = math.gcd(a.constancy[d], b.constancy[d])
        if b.constancy[d] >= shape[d] and a.contiguity[d] > 1:
            c = max(c, math.gcd(a.contiguity[d], math.gcd(a.divisibility[d], b.divisibility[d])))
        constancy.append(c)
    return AxisInfo((1,) * rank, (1,) * rank, tuple(constancy))


@_rule(arith.AndIOp, arith.OrIOp)
def _logic(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """``a & (2**k - 1)`` is ``a % 2**k`` (index arithmetic on non-negative values, as
    ``>>`` for ``//``); otherwise equal where both operands are."""
    a, b = _binary(op, get)
    rank = len(shape)
    low_bits = isinstance(op, arith.AndIOp) and b.constant is not None and b.constant > 0 and \
        b.constant & (b.constant + 1) == 0
    if low_bits:
        n = b.constant + 1
        return _remainder(a, AxisInfo(b.contiguity, tuple(min(_LARGE, n) for _ in b.divisibility),
                                      b.constancy, n), shape)
    return AxisInfo((1,) * rank, (1,) * rank, tuple(math.gcd(a.constancy[d], b.constancy[d])
                                                    for d in range(rank)))


@_rule(arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp)
def _same(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    return get(op.operands[0])


@_rule(tt.GetProgramIdOp)
def _pid(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    return AxisInfo((), (1,), ())



@_rule(arith.DivSIOp, arith.DivUIOp)
def _div(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """``a // n`` (Inductor's ``x1 = xindex // 512``)."""
    return _quotient(*_binary(op, get), shape)


@_rule(arith.ShRSIOp, arith.ShRUIOp)
def _shift_right(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """``a >> k`` for a splat ``k`` is ``a // 2**k``."""
    a, b = _binary(op, get)
    rank = len(shape)
    if b.constant is None or not 0 <= b.constant < 62:
        return AxisInfo((1,) * rank, (1,) * rank, tuple(math.gcd(a.constancy[d], b.constancy[d])
                                                         for d in range(rank)))
    power = 1 << b.constant
    return _quotient(a, AxisInfo(b.contiguity, tuple(min(_LARGE, power) for _ in b.divisibility),
                                 b.constancy, power), shape)


def _quotient(a: AxisInfo, b: AxisInfo, shape: tuple) -> AxisInfo:
    """``a // b``: equal over each aligned piece of a run of ``a`` whose length divides a splat
    ``b`` (index arithmetic is on non-negative values, as Triton's analysis takes it); a
    multiple of ``D / n`` where every element of ``a`` is a multiple of ``D`` and the splat
    ``n`` divides ``D``."""
    rank = len(shape)
    n = b.constant if b.constant is not None and b.constant > 0 else None
    if rank == 0:
        if a.constant is not None and n and a.constant >= 0:
            return AxisInfo((), (_pow2_divisor(a.constant // n),), (), a.constant // n)
        div = scalar_divisibility(a)
        return AxisInfo((), (div // n if n and div % n == 0 else 1,), ())
    contiguity, divisibility, constancy = [], [], []
    for d in range(rank):
        c = math.gcd(a.constancy[d], b.constancy[d])
        if b.constancy[d] >= shape[d] and a.contiguity[d] > 1:
            c = max(c, math.gcd(a.contiguity[d], math.gcd(a.divisibility[d], b.divisibility[d])))
        constancy.append(c)
        contiguity.append(a.contiguity[d] if n == 1 else 1)
        exact = n is not None and a.contiguity[d] == 1 and a.divisibility[d] % n == 0
        divisibility.append(a.divisibility[d] // n if exact else 1)
    return AxisInfo(tuple(contiguity), tuple(divisibility), tuple(constancy))


@_rule(arith.ShLIOp)
def _shift_left(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """``a << k`` for a splat ``k``: ``a * 2**k``."""
    a, b = _binary(op, get)
    rank = len(shape)
    scale = 1 << b.constant if b.constant is not None and 0 <= b.constant < 31 else None
    if rank == 0:
        divisible = min(_LARGE, scalar_divisibility(a) * scale) if scale else 1
        return AxisInfo((), (divisible,), (), a.constant * scale if scale and a.constant is not None
                        else None)
    divisibility = tuple(min(_LARGE, a.divisibility[d] * scale) if scale else 1 for d in range(rank))
    return AxisInfo(tuple(a.contiguity[d] if scale == 1 else 1 for d in range(rank)), divisibility,
                    tuple(math.gcd(a.constancy[d], b.constancy[d]) for d in range(rank)))


@_rule(arith.MaxSIOp, arith.MaxUIOp, arith.MinSIOp, arith.MinUIOp, arith.XOrIOp)
def _equal_where_both_are(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """max, min, xor: equal where both operands are; a multiple of every power of two that
    divides both."""
    a, b = _binary(op, get)
    rank = len(shape)
    divisibility = tuple(math.gcd(x, y) for x, y in zip(a.divisibility or (1,), b.divisibility or (1,)))
    if rank == 0:
        return AxisInfo((), divisibility[:1], ())
    return AxisInfo((1,) * rank, divisibility, tuple(math.gcd(a.constancy[d], b.constancy[d]) for d in range(rank)))


@_rule(arith.SelectOp)
def _select(op: Any, get: Callable, shape: tuple) -> AxisInfo:
    """``where(c, x, y)``: over a run where ``c`` is constant the result is a run of ``x`` or of
    ``y``, so it keeps what both have there (Inductor's ``where(i < 0, i + n, i)``)."""
    c, x, y = (get(v) for v in op.operands)
    rank = len(shape)
    if rank == 0:
        return AxisInfo((), (math.gcd(scalar_divisibility(x), scalar_divisibility(y)),), ())
    cond = c.constancy if len(c.constancy) == rank else (_LARGE,) * rank       # a scalar condition
    return AxisInfo(tuple(math.gcd(math.gcd(x.contiguity[d], y.contiguity[d]), cond[d]) for d in range(rank)),
                    tuple(math.gcd(x.divisibility[d], y.divisibility[d]) for d in range(rank)),
                    tuple(math.gcd(math.gcd(x.constancy[d], y.constancy[d]), cond[d]) for d in range(rank)))


@_rule(tt.LoadOp)
def _load(op: Any, get: Callable, shape: tuple) -> AxisInfo | None:
    """Loads from equal addresses (under an equal mask, with an equal ``other``) are equal: an
    index loaded once per row (an embedding's token id) is constant along the row."""
    rank = len(shape)
    if not isinstance(op.ptr.type, TensorType):            # a scalar or a block pointer
        return None
    constancy = get(op.ptr).constancy
    for extra in (op.mask, op.other):
        if extra is not None:
            constancy = tuple(math.gcd(p, q) for p, q in zip(constancy, get(extra).constancy))
    return AxisInfo((1,) * rank, (1,) * rank, constancy)
