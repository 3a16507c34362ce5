"""What an op does besides computing its results: the one place the passes ask.

Every pass that removes, merges or moves ops (canonicalize, CSE, DCE, LICM, reorder-broadcast)
decides through `effect_of` and `is_speculatable` here, so a new op with unusual semantics
needs one table entry, not a change in five passes.

xDSL's traits (`Pure`, `NoMemoryEffect`, `MemoryReadEffect`, `RecursiveMemoryEffect`, ...)
answer for most ops.  `EXPLICIT_EFFECTS` covers the ops whose traits are missing or wrong for
TTIR: a volatile `tt.load` must stay even when unused; `tt.extern_elementwise` and
`tt.elementwise_inline_asm` are pure only when their ``pure`` property says so; xDSL leaves
`arith.remui` (and our `arith.remf`) without any effect trait; a `tt.call` may do anything.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from xdsl.ir import Operation, SSAValue
from xdsl.traits import (
    ConditionallySpeculatable,
    IsTerminator,
    MemoryEffectKind,
    RecursiveMemoryEffect,
    RecursivelySpeculatable,
    SymbolOpInterface,
    get_effects,
)

from naiad.ir import arith, tt
from naiad.passes.constants import splat_value


class Effect(enum.IntEnum):
    """How much an op touches the world, in increasing order of caution."""

    NONE = 0
    """Pure: may be removed when unused, merged with an equal op, moved."""
    READ = 1
    """Reads memory: may be removed when unused; merged only with no write in between;
    never moved across a write (so never hoisted out of a loop here)."""
    WRITE = 2
    """Writes memory, or unknown: never removed, merged or moved."""


def _load_effect(op: tt.LoadOp) -> Effect:
    return Effect.WRITE if op.isVolatile.value.data else Effect.READ


def _pure_if_marked(op: Operation) -> Effect:
    return Effect.NONE if op.pure.value.data else Effect.WRITE


EXPLICIT_EFFECTS: dict[type[Operation], Callable[[Operation], Effect]] = {
    tt.LoadOp: _load_effect,
    tt.ExternElementwiseOp: _pure_if_marked,
    tt.ElementwiseInlineAsmOp: _pure_if_marked,
    tt.CallOp: lambda op: Effect.WRITE,
    arith.RemUIOp: lambda op: Effect.NONE,
    arith.RemFOp: lambda op: Effect.NONE,
}
"""Ops whose xDSL traits do not describe them correctly, and what they really do."""


def _from_traits(op: Operation) -> Effect:
    effects = get_effects(op)
    if effects is None:
        return Effect.WRITE
    if all(e.kind == MemoryEffectKind.READ for e in effects):
        return Effect.READ if effects else Effect.NONE
    return Effect.WRITE


def effect_of(op: Operation) -> Effect:
    """The strongest effect of `op`, including the ops nested in its regions when its
    effects are those of its body (scf.for, scf.if, scf.while)."""
    explicit = EXPLICIT_EFFECTS.get(type(op))
    if explicit is not None:
        return explicit(op)
    if op.has_trait(RecursiveMemoryEffect):
        nested = (effect_of(child) for r in op.regions for b in r.blocks for child in b.ops)
        return max(nested, default=Effect.NONE)
    return _from_traits(op)


def is_pure(op: Operation) -> bool:
    return effect_of(op) is Effect.NONE


def _nonzero_divisor(op: Operation) -> bool:
    divisor = splat_value(op.rhs)
    return divisor is not None and divisor != 0


def _safe_signed_divisor(op: Operation) -> bool:
    """No division by zero and no ``INT_MIN / -1`` overflow, whatever the dividend."""
    divisor = splat_value(op.rhs)
    return divisor is not None and divisor not in (0, -1)


EXPLICIT_SPECULATION: dict[type[Operation], Callable[[Operation], bool]] = {
    arith.DivUIOp: _nonzero_divisor,
    arith.RemUIOp: _nonzero_divisor,
    arith.CeilDivUIOp: _nonzero_divisor,
    arith.DivSIOp: _safe_signed_divisor,
    arith.RemSIOp: _safe_signed_divisor,
    arith.CeilDivSIOp: _safe_signed_divisor,
    arith.FloorDivSIOp: _safe_signed_divisor,
    arith.RemFOp: lambda op: True,
    tt.ExternElementwiseOp: lambda op: bool(op.pure.value.data),
}
"""Whether executing an op where the program would not have is harmless.  xDSL marks the
signed divisions `Pure` (always speculatable), but they are undefined for a zero divisor."""


def is_speculatable(op: Operation) -> bool:
    """True when running `op` on a path where it did not run cannot fault or be undefined."""
    explicit = EXPLICIT_SPECULATION.get(type(op))
    if explicit is not None:
        return explicit(op)
    trait = op.get_trait(ConditionallySpeculatable)
    if isinstance(trait, RecursivelySpeculatable):  # decided here, with the table above
        return all(is_speculatable(c) for r in op.regions for b in r.blocks for c in b.ops)
    return trait is not None and trait.is_speculatable(op)


def is_removable_when_unused(op: Operation) -> bool:
    """An op whose results nobody uses and whose only effect is reading memory (or none)
    can go; terminators and symbols (functions) never go here."""
    if op.has_trait(IsTerminator) or op.has_trait(SymbolOpInterface):
        return False
    return effect_of(op) <= Effect.READ


def is_unused(op: Operation) -> bool:
    return all(not result.uses for result in op.results)


def defined_outside(value: SSAValue, op: Operation) -> bool:
    """True when `value` is not defined by `op` or anywhere inside its regions."""
    return not op.is_ancestor(value.owner)
