"""Which tensor-core dots read a value, and along which of its dimensions they sum (IR queries
that the pipeliner and the lowering share).

A loaded tile may reach its dots directly or through a 2-D ``tt.trans`` (``k.T`` in attention's
forward; its backward reads Q and dO once directly and once transposed).  A transpose of a
tile in shared memory moves nothing: the dot reads the same bytes with the other dimension as
K.  So a reader is a dot with the dimension of the *value* that is K for it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from naiad.ir import tt


class Reader(NamedTuple):
    dot: tt.DotOp
    k_dim: int            # the dimension of the value the dot sums over
    transposed: bool      # through a tt.trans


def is_transpose(op: Any) -> bool:
    """Whether ``op`` swaps the two dimensions of a 2-D tensor."""
    return isinstance(op, tt.TransOp) and list(op.order.get_values()) == [1, 0]


def mma_version(dot: tt.DotOp) -> int | None:
    """The MMA version of a tensor-core dot's ``ttg.mma`` layout (2: mma.sync, 3: wgmma);
    None for a dot left on FMA."""
    text = dot.attributes.get("ttg.mma")
    if text is None:
        return None
    return 2 if "versionMajor = 2" in text.data else 3


def _operand_of_mma(use: Any) -> bool:
    return isinstance(use.operation, tt.DotOp) and use.index < 2 and mma_version(use.operation) is not None


def only_dots_read(value: Any) -> bool:
    """Whether every use of ``value`` is an operand of a tensor-core dot."""
    return all(_operand_of_mma(use) for use in value.uses)


def readers_of_use(use: Any) -> list[Reader] | None:
    """The tensor-core dots one use of a value stands for: the dot itself when the use is an
    operand of one, the dots reading a 2-D transpose when the use is that transpose and only
    such dots read it; None otherwise."""
    user = use.operation
    if is_transpose(user):
        if not only_dots_read(user.results[0]):
            return None
        # A (0) sums over its dimension 1, B (1) over 0; the transpose swaps them
        return [Reader(inner.operation, inner.index, True) for inner in user.results[0].uses]
    if _operand_of_mma(use):
        return [Reader(user, 1 - use.index, False)]
    return None


def readers(value: Any) -> list[Reader] | None:
    """Every tensor-core dot that reads ``value`` as an operand, directly or through a 2-D
    transpose; None when some use is anything else (the value is then needed in registers)."""
    found: list[Reader] = []
    for use in value.uses:
        of_use = readers_of_use(use)
        if of_use is None:
            return None
        found += of_use
    return found or None


def one_tile_serves(readers_: list[Reader], element_bytes: int) -> bool:
    """Whether one tile in shared memory can serve every reader: readers of one MMA version;
    where they sum over different dimensions or read through a transpose, wgmma (version 3)
    with 16-bit elements, whose tiles it reads either way."""
    versions = {mma_version(r.dot) for r in readers_}
    if len(versions) != 1:
        return False
    k_dims = {r.k_dim for r in readers_}
    if len(k_dims) == 1 and not any(r.transposed for r in readers_):
        return True
    return versions == {3} and (len(k_dims) == 1 or element_bytes == 2)
