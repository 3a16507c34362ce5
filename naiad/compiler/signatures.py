"""A specialization as the compiler takes it: Triton's ``(signature, constexprs, attrs)``.

Imports nothing of the compiler's own (no xDSL): a launch whose kernel is in the on-disk cache
needs these and no compiler (xDSL's dialects cost most of a cold start).
"""

from __future__ import annotations

from typing import Any

#: The attribute a parameter specialized as divisible by 16 gets (Triton's ``tt.divisibility``).
DIVISIBILITY = (("tt.divisibility", 16),)


def describe(fn: Any, specialization: list) -> tuple[dict, dict, dict]:
    """Triton's ``(signature, constexprs, attrs)`` of a kernel function's specialization
    (`naiad.runtime.jit.JITFunction.specialization`)."""
    signature, constexprs, attrs = {}, {}, {}
    for p, (ty, key) in zip(fn.params, specialization):
        signature[p.name] = ty
        path = (p.num,) if isinstance(ty, tuple) or isinstance(key, tuple) else p.name
        _record(ty, key, path, constexprs, attrs)
    return signature, constexprs, attrs


def _record(ty: Any, key: Any, where: Any, constexprs: dict, attrs: dict) -> None:
    """Note a constexpr value or a divisibility attribute; tuple elements and a descriptor's
    parts by their path."""
    if isinstance(ty, tuple):
        for i, (t, k) in enumerate(zip(ty, key)):
            _record(t, k, (*where, i), constexprs, attrs)
    elif ty == "constexpr":
        constexprs[where] = key
    elif isinstance(key, tuple):            # a tensor descriptor: a key per runtime part
        for i, k in enumerate(key):
            if k == "D":
                attrs[(*where, i)] = list(DIVISIBILITY)
    elif key == "D":
        attrs[where] = list(DIVISIBILITY)
