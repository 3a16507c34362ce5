"""``tl.math``: element-wise math, as Triton's (dtype checks and all).

Most functions accept fp32 and fp64 only, as in Triton: compute in fp32 and convert back
(``tl.exp(x.to(tl.float32))``).  Each one is a builtin that checks its dtype and emits one
``math`` / ``arith`` / ``tt`` operation.
"""

from __future__ import annotations

from typing import Any

from naiad.language import core
from naiad.language.core import builtin, tensor

_FLOAT = ("fp32", "fp64")


def _t(x: Any) -> tensor:
    return core._t(x)


def _check(name: str, x: tensor, allowed: tuple[str, ...]) -> None:
    if x.dtype.name not in allowed:
        raise ValueError(f"Expected dtype {list(allowed)} but got {x.dtype.name} in tl.{name} -- "
                         f"fix: convert with .to(tl.float32) first")


def _unary(name: str, allowed: tuple[str, ...] | None = _FLOAT):
    def fn(x: Any) -> tensor:
        x = _t(x)
        if allowed is not None:
            _check(name, x, allowed)
        return core.current_semantic().unary_math(name, x, None)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Element-wise {name} of x ({', '.join(allowed or ('any float',))})."
    return builtin(fn)


exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log")
log2 = _unary("log2")
cos = _unary("cos")
sin = _unary("sin")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
erf = _unary("erf")
floor = _unary("floor")
ceil = _unary("ceil")


@builtin
def abs(x: Any) -> tensor:
    x = _t(x)
    semantic = core.current_semantic()
    if x.dtype.is_int_unsigned() or x.dtype.is_bool():
        return x
    if x.dtype.is_int():
        return semantic.unary_math("abs_i", x, None)
    if x.dtype.is_fp8():
        bits = core.get_int_dtype(8, False)
        magnitude = semantic.binary("and", semantic.bitcast(x, bits), 0x7F)
        return semantic.bitcast(magnitude, x.dtype)
    return semantic.unary_math("abs_f", x, None)


@builtin
def fdiv(x: Any, y: Any, ieee_rounding: Any = False) -> tensor:
    x, y = _t(x), _t(y)
    if not (x.dtype.is_floating() and y.dtype.is_floating()):
        raise TypeError(f"both operands of tl.fdiv must be floats, got {x.dtype} and {y.dtype} -- "
                        f"fix: convert them with .to(tl.float32), or use / which does that")
    if core._unwrap(ieee_rounding):
        return div_rn(x, y)
    return core.current_semantic().binary("truediv", x, y)


@builtin
def div_rn(x: Any, y: Any) -> tensor:
    x, y = _t(x), _t(y)
    _check("div_rn", x, ("fp32",))
    return core.current_semantic().precise("div", x, y)


@builtin
def sqrt_rn(x: Any) -> tensor:
    x = _t(x)
    _check("sqrt_rn", x, ("fp32",))
    return core.current_semantic().precise("sqrt", x)


@builtin
def fma(x: Any, y: Any, z: Any) -> tensor:
    return core.current_semantic().fma(_t(x), _t(y), _t(z))


@builtin
def umulhi(x: Any, y: Any) -> tensor:
    x, y = _t(x), _t(y)
    _check("umulhi", x, ("int32", "uint32", "int64", "uint64"))
    return core.current_semantic().mulhi(x, y)


maximum = core.maximum
minimum = core.minimum
clamp = core.clamp
