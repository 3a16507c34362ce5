"""The kernel language's values and builtins: what ``tl.`` names inside a kernel.

`tensor` is a runtime value (a scalar or a block) wrapping an SSA value of the IR being built;
`constexpr` wraps a compile-time value.  Builtins (marked with `builtin`) run while a kernel is
being compiled: they unwrap constexprs, turn Python numbers into tensors and hand the work to the
*semantic* layer (`naiad.language.semantic.Semantic`), which applies Triton's typing rules and
emits IR.  The code generator makes its semantic object current with `semantic_scope`; calling a
builtin outside a kernel is an error that says so.
"""

from __future__ import annotations

import builtins as _builtins
import contextlib
import enum
import functools
import inspect
import operator
import threading
from typing import Any, Callable, Iterator, Sequence

from naiad.language.dtypes import (  # noqa: F401  (re-exported: tl.float32, tl.pointer_type, ...)
    TRITON_MAX_TENSOR_NUMEL, IncompatibleTypeError, block_type, bfloat16, const_pointer_type,
    dtype, float8e4b8, float8e4b15, float8e4nv, float8e5, float8e5b16, float16, float32,
    float64, function_type, int1, int8, int16, int32, int64, pi32_t,
    pointer_type, str_to_ty, tuple_type, uint8, uint16, uint32, uint64, void)

from naiad.language import dtypes as _dtypes

_state = threading.local()


class ConstexprFunction:
    """A plain Python function callable from kernels on compile-time values (`constexpr_function`).

    Inside a kernel its arguments are unwrapped constexprs and its result becomes a constexpr;
    outside a kernel it is the plain function.  A class of its own, with Triton's name, ``fn``
    and ``src``: code that re-emits a kernel's source with its helpers (torch's Inductor, for
    user-defined kernels) finds them by it, and the kernel's cache key covers their source.
    """

    __naiad_constexpr_function__ = True

    def __init__(self, fn: Callable):
        self.fn = fn
        functools.update_wrapper(self, fn)

    @property
    def src(self) -> str:
        """The function's source from its ``def`` line (decorators left out)."""
        import inspect
        import re
        import textwrap

        text = textwrap.dedent(inspect.getsource(self.fn))
        start = re.search(r"^def\s", text, re.MULTILINE)
        return text[start.start():] if start else text

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"ConstexprFunction({self.fn.__qualname__})"


def constexpr_function(fn: Callable) -> ConstexprFunction:
    """Mark a plain Python function as callable from kernels on compile-time values
    (`ConstexprFunction`)."""
    return ConstexprFunction(fn)


@constexpr_function
def get_int_dtype(bitwidth: int, signed: bool) -> dtype:
    """The integer dtype of that width and signedness; callable inside kernels."""
    return _dtypes.get_int_dtype(bitwidth, signed)


class PropagateNan(enum.Enum):
    """Whether tl.minimum / tl.maximum / tl.clamp return NaN when an operand is NaN."""

    NONE = 0
    ALL = 0xFFFF


def current_semantic() -> Any:
    semantic = getattr(_state, "semantic", None)
    if semantic is None:
        raise RuntimeError("this naiad.language function can only be called inside a @naiad.jit "
                           "kernel while it is being compiled")
    return semantic


@contextlib.contextmanager
def semantic_scope(semantic: Any) -> Iterator[None]:
    """Make ``semantic`` the target of builtins for the duration of one code generation."""
    outer = getattr(_state, "semantic", None)
    _state.semantic = semantic
    try:
        yield
    finally:
        _state.semantic = outer


def builtin(fn: Callable) -> Callable:
    """Mark a function as a compile-time builtin: the code generator calls it directly."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        current_semantic()
        return fn(*args, **kwargs)

    wrapper.__naiad_builtin__ = True  # type: ignore[attr-defined]
    return wrapper


def is_builtin(fn: Any) -> bool:
    """Naiad's builtins, and functions marked the way Triton marks its own
    (``__triton_builtin__ = True``: Inductor's ``triton_helpers`` defines such helpers)."""
    return getattr(fn, "__naiad_builtin__", False) is True or \
        getattr(fn, "__triton_builtin__", False) is True


def builtin_keywords(fn: Any) -> dict[str, Any]:
    """The keyword arguments a Triton-marked builtin is called with besides its own, as Triton
    passes them: ``_semantic`` (Triton >= 3.4) and ``_builder`` (before) when its signature
    names them, each the semantic object building the kernel.  Naiad's builtins take none:
    they find it with `current_semantic`."""
    if getattr(fn, "__naiad_builtin__", False) is True:
        return {}
    parameters = inspect.signature(fn).parameters
    return {name: current_semantic() for name in ("_semantic", "_builder") if name in parameters}


class constexpr:
    """A value known at compile time: ``BLOCK: tl.constexpr`` parameters, literals, globals."""

    def __init__(self, value: Any):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr[{self.value!r}]"

    def __hash__(self) -> int:
        return hash(self.value)

    def __eq__(self, other: Any) -> bool:
        return self.value == _unwrap(other)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __index__(self) -> int:
        return operator.index(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __float__(self) -> float:
        return float(self.value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.value(*args, **kwargs)


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, constexpr) else value


def _unwrap_if_constexpr(value: Any) -> Any:
    """Triton's name for unwrapping, which kernels call too (Inductor's helpers: ``DTYPE =
    tl.core._unwrap_if_constexpr(DTYPE)``): a constexpr's value, lists and tuples element by
    element, anything else (a tensor) as it is."""
    if isinstance(value, list):
        return [_unwrap_if_constexpr(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_unwrap_if_constexpr(v) for v in value)
    return _unwrap(value)


# Callable inside kernels on any value (the code generator passes it the values as they are)
# and outside them, as in Triton: a builtin without `builtin`'s check for a kernel.
_unwrap_if_constexpr.__naiad_builtin__ = True  # type: ignore[attr-defined]


def _unwrap_shape(shape: Any) -> list[int]:
    """A shape given as an int or a sequence of ints, all known at compile time."""
    shape = _unwrap(shape)
    dims = [shape] if isinstance(shape, int) else [_unwrap(s) for s in shape]
    if not all(isinstance(d, int) for d in dims):
        raise TypeError(f"shapes must be compile-time integers, got {dims} -- fix: use "
                        f"tl.constexpr values (literals, constexpr parameters) for every dimension")
    return dims


def _sem() -> Any:
    return current_semantic()


def _t(value: Any) -> "tensor":
    """A tensor from a tensor, a constexpr or a Python number."""
    return value if isinstance(value, tensor) else _sem().to_tensor(_unwrap(value))


class tensor:
    """A runtime value: ``type`` is a scalar `dtype` or a `block_type`."""

    def __init__(self, handle: Any, type: dtype):
        self.handle = handle
        self.type = type
        self.dtype = type.scalar
        self.shape = list(type.get_block_shapes()) if type.is_block() else []
        self.numel = type.numel if type.is_block() else 1

    def __repr__(self) -> str:
        return f"tensor<{self.type}>"

    def __str__(self) -> str:
        """What ``static_print`` shows, as Triton: ``int32[constexpr[128]]``."""
        return f"{self.dtype}[{', '.join(f'constexpr[{d}]' for d in self.shape)}]"

    def __bool__(self) -> bool:
        raise TypeError("the truth value of a runtime tensor is unknown at compile time -- fix: "
                        "use it in an 'if' condition directly, or compare explicitly")

    # arithmetic -----------------------------------------------------------------------
    def _binary(self, op: str, other: Any, reflected: bool = False) -> "tensor":
        other = _unwrap(other)
        lhs, rhs = (other, self) if reflected else (self, other)
        return _sem().binary(op, lhs, rhs)

    def __add__(self, o): return self._binary("add", o)
    def __radd__(self, o): return self._binary("add", o, True)
    def __sub__(self, o): return self._binary("sub", o)
    def __rsub__(self, o): return self._binary("sub", o, True)
    def __mul__(self, o): return self._binary("mul", o)
    def __rmul__(self, o): return self._binary("mul", o, True)
    def __truediv__(self, o): return self._binary("truediv", o)
    def __rtruediv__(self, o): return self._binary("truediv", o, True)
    def __floordiv__(self, o): return self._binary("floordiv", o)
    def __rfloordiv__(self, o): return self._binary("floordiv", o, True)
    def __mod__(self, o): return self._binary("mod", o)
    def __rmod__(self, o): return self._binary("mod", o, True)
    def __pow__(self, o): raise TypeError("'**' is not supported on tensors -- fix: use "
                                          "tl.exp2/tl.exp and tl.log, or repeated multiplication")
    __rpow__ = __pow__
    def __and__(self, o): return self._binary("and", o)
    def __rand__(self, o): return self._binary("and", o, True)
    def __or__(self, o): return self._binary("or", o)
    def __ror__(self, o): return self._binary("or", o, True)
    def __xor__(self, o): return self._binary("xor", o)
    def __rxor__(self, o): return self._binary("xor", o, True)
    def __lshift__(self, o): return self._binary("shl", o)
    def __rlshift__(self, o): return self._binary("shl", o, True)
    def __rshift__(self, o): return self._binary("shr", o)
    def __rrshift__(self, o): return self._binary("shr", o, True)
    def __matmul__(self, o): return dot(self, o)
    def __eq__(self, o): return self._binary("eq", o)  # type: ignore[override]
    def __ne__(self, o): return self._binary("ne", o)  # type: ignore[override]
    def __lt__(self, o): return self._binary("lt", o)
    def __le__(self, o): return self._binary("le", o)
    def __gt__(self, o): return self._binary("gt", o)
    def __ge__(self, o): return self._binary("ge", o)
    __hash__ = object.__hash__

    def __neg__(self): return _sem().neg(self)
    def __pos__(self): return _sem().pos(self)
    def __invert__(self): return _sem().invert(self)
    def __not__(self): return _sem().logical_not(self)

    # shape -------------------------------------------------------------------------------
    def __getitem__(self, index: Any) -> "tensor":
        return _sem().subscript(self, index)

    @property
    def T(self) -> "tensor":
        return trans(self)

    @property
    def ndim(self) -> int:
        return len(self.shape)


class aggregate_value:
    """A runtime value made of several runtime parts and a compile-time ``type`` (a tensor
    descriptor: a pointer, a shape and strides; `naiad.language.tensor_descriptor`).

    The code generator passes one through calls, returns, ``if`` and loops as its parts:
    `parts` lists them (tensors) and `with_parts` builds the same kind of value, of the same
    ``type``, from others (block arguments, results).
    """

    type: Any

    def parts(self) -> list:
        raise NotImplementedError

    def with_parts(self, parts: list) -> "aggregate_value":
        raise NotImplementedError


class _member:
    """``x.sum(...)`` is ``tl.sum(x, ...)``: a tensor method that is a language function.

    The method is looked up in ``naiad.language`` when used, because many of these functions
    are ``@jit`` code in `naiad.language.standard` that the code generator must call itself;
    the result is a ``functools.partial`` that the code generator unpacks.
    """

    def __init__(self, name: str):
        self.name = name

    def __get__(self, obj: Any, owner: type) -> Any:
        import naiad.language as tl

        fn = getattr(tl, self.name)
        return fn if obj is None else functools.partial(fn, obj)


#: Triton's ``_tensor_member_fn`` functions: each is also a method of `tensor`.
TENSOR_MEMBERS = (
    "broadcast_to", "trans", "permute", "split", "view", "reshape", "expand_dims", "cast",
    "store", "advance", "atomic_cas", "atomic_poll", "atomic_xchg", "atomic_add", "atomic_max",
    "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "reduce", "associative_scan", "cdiv",
    "sigmoid", "softmax", "ravel", "max", "min", "argmax", "argmin", "sum", "xor_sum", "reduce_or",
    "cumsum", "cumprod", "sort", "flip", "gather", "histogram", "exp", "exp2", "log", "log2",
    "cos", "sin", "sqrt", "sqrt_rn", "rsqrt", "abs", "erf", "floor", "ceil", "item",
    "logical_and", "logical_or")
for _name in TENSOR_MEMBERS:
    setattr(tensor, _name, _member(_name))
tensor.to = _member("cast")   # x.to(dtype, fp_downcast_rounding, bitcast)


class range:
    """``tl.range``: a runtime loop; the options are hints passed to the backends' pipelines."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None, num_stages: Any = None,
                 loop_unroll_factor: Any = None, disallow_acc_multi_buffer: Any = False,
                 flatten: Any = False, warp_specialize: Any = False, disable_licm: Any = False):
        if step is None:
            step = 1
        if arg2 is None:
            arg1, arg2 = 0, arg1
        self.start, self.end, self.step = arg1, arg2, step
        self.options = {"num_stages": _unwrap(num_stages),
                        "loop_unroll_factor": _unwrap(loop_unroll_factor),
                        "disallow_acc_multi_buffer": _unwrap(disallow_acc_multi_buffer),
                        "flatten": _unwrap(flatten), "warp_specialize": _unwrap(warp_specialize),
                        "disable_licm": _unwrap(disable_licm)}

    def attributes(self) -> dict[str, Any]:
        """The loop hints that were set, as ``tt.<name>`` attributes for the scf.for."""
        return {k: v for k, v in self.options.items() if v not in (None, False)}


class static_range:
    """``tl.static_range``: a loop unrolled at compile time; bounds must be constexprs."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None):
        values = [_unwrap(a) for a in (arg1, arg2, step)]
        if any(isinstance(v, tensor) for v in values):
            raise TypeError("tl.static_range needs compile-time bounds -- fix: use tl.range for "
                            "bounds known only at run time")
        start, end, step_ = values
        if end is None:
            start, end = 0, start
        self.start, self.end, self.step = int(start), int(end), int(1 if step_ is None else step_)


# -- programs, ranges and creation ----------------------------------------------------------
@builtin
def program_id(axis: Any) -> tensor:
    return _sem().program_id(_axis(axis, "program_id"))


@builtin
def num_programs(axis: Any) -> tensor:
    return _sem().num_programs(_axis(axis, "num_programs"))


def _axis(axis: Any, what: str) -> int:
    axis = _unwrap(axis)
    if axis not in (0, 1, 2):
        raise ValueError(f"{what} axis must be 0, 1, or 2 but got {axis!r}")
    return axis


@builtin
def arange(start: Any, end: Any) -> tensor:
    return _sem().arange(_unwrap(start), _unwrap(end))


@builtin
def full(shape: Any, value: Any, dtype: Any) -> tensor:
    return _sem().full(_unwrap_shape(shape), _unwrap(value), _unwrap(dtype))


@builtin
def zeros(shape: Any, dtype: Any) -> tensor:
    return _sem().full(_unwrap_shape(shape), 0, _unwrap(dtype))


@builtin
def zeros_like(input: tensor) -> tensor:
    return _sem().full(list(input.type.get_block_shapes()) if input.type.is_block() else [], 0,
                       input.dtype)


@builtin
def full_like(input: tensor, value: Any, dtype: Any = None) -> tensor:
    ty = input.dtype if dtype is None else _unwrap(dtype)
    return _sem().full(list(input.type.get_block_shapes()) if input.type.is_block() else [],
                       _unwrap(value), ty)


@builtin
def cast(input: Any, dtype: Any, fp_downcast_rounding: Any = None, bitcast: Any = False) -> tensor:
    return _sem().cast(_t(input), _unwrap(dtype), _unwrap(fp_downcast_rounding), bool(_unwrap(bitcast)))


# -- shape manipulation ------------------------------------------------------------------
@builtin
def broadcast(input: Any, other: Any) -> tuple[tensor, tensor]:
    return _sem().broadcast_pair(_t(input), _t(other))


@builtin
def broadcast_to(input: Any, *shape: Any) -> tensor:
    return _sem().broadcast_to(_t(input), _shape_args(shape))


def _shape_args(shape: Sequence[Any]) -> list[int]:
    if len(shape) == 1 and isinstance(_unwrap(shape[0]), (tuple, list)):
        return _unwrap_shape(shape[0])
    return _unwrap_shape(list(shape))


@builtin
def expand_dims(input: Any, axis: Any) -> tensor:
    """Insert size-1 dimensions; each axis counts in the result's dimensions (as Triton)."""
    axes = _unwrap(axis)
    axes = [_unwrap(a) for a in axes] if isinstance(axes, (tuple, list)) else [axes]
    result = _t(input)
    rank = len(result.shape) + len(axes)
    axes = [_wrap_axis(a, rank) for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"expand_dims received duplicate axes, normalized axes = {axes} -- fix: "
                         f"name each new dimension once")
    for a in sorted(axes):
        result = _sem().expand_dims(result, a)
    return result


def _wrap_axis(axis: Any, rank: int) -> int:
    """``axis`` counted from 0 (a negative one counts from the end), checked against ``rank``."""
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise ValueError(f"invalid axis {axis}. Expected {-rank} <= axis < {rank} -- fix: use an "
                         f"axis from {-rank} to {rank - 1}")
    return axis + rank if axis < 0 else axis


@builtin
def unsqueeze(input: Any, dim: Any) -> tensor:
    """Insert a size-1 dimension at ``dim`` (tl.expand_dims with one axis)."""
    return expand_dims(input, dim)


@builtin
def squeeze(input: tensor, dim: Any) -> tensor:
    """Remove the size-1 dimension ``dim``; the inverse of `unsqueeze`."""
    shape, dim = list(input.shape), _unwrap(dim)
    if not -len(shape) <= dim < len(shape) or shape[dim] != 1 or len(shape) < 2:
        raise ValueError(f"tl.squeeze({dim}) needs a dimension of size 1 in a tensor of rank >= 2, "
                         f"got shape {shape} -- fix: squeeze a dimension whose size is 1")
    del shape[dim]
    return _sem().reshape(input, shape, False)


@builtin
def reshape(input: tensor, *shape: Any, can_reorder: Any = False) -> tensor:
    return _sem().reshape(input, _shape_args(shape), bool(_unwrap(can_reorder)))


@builtin
def view(input: tensor, *shape: Any) -> tensor:
    return _sem().reshape(input, _shape_args(shape), True)


@builtin
def trans(input: tensor, *dims: Any) -> tensor:
    """Permute the dimensions; without ``dims``, swap the last two (a batched transpose)."""
    if dims:
        return _sem().permute(input, _shape_args(dims))
    rank = len(input.shape)
    if rank < 2:
        raise ValueError(f"tl.trans without dims swaps the last two dimensions, but the tensor has "
                         f"rank {rank} -- fix: transpose a tensor of rank 2 or more")
    return _sem().permute(input, list(_builtins.range(rank - 2)) + [rank - 1, rank - 2])


@builtin
def permute(input: tensor, *dims: Any) -> tensor:
    return _sem().permute(input, _shape_args(dims))


@builtin
def cat(input: Any, other: Any, can_reorder: Any = False, dim: Any = 0) -> tensor:
    """Concatenate along ``dim``, keeping the order of the elements (Triton now ignores
    ``can_reorder``, and so does Naiad)."""
    return _sem().cat(_t(input), _t(other), _unwrap(dim))


@builtin
def join(a: Any, b: Any) -> tensor:
    return _sem().join(_t(a), _t(b))


@builtin
def split(a: tensor) -> tuple[tensor, tensor]:
    return _sem().split(a)


@builtin
def gather(src: tensor, index: tensor, axis: Any) -> tensor:
    return _sem().gather(src, index, _unwrap(axis))


@builtin
def histogram(input: tensor, num_bins: Any, mask: Any = None) -> tensor:
    return _sem().histogram(input, int(_unwrap(num_bins)), _opt(mask))


@builtin
def interleave(a: Any, b: Any) -> tensor:
    """Interleave along the last dimension: ``join`` then merge its last two dimensions (two
    scalars join into the 2-element result directly)."""
    joined = _sem().join(_t(a), _t(b))
    shape = list(joined.type.get_block_shapes())
    if len(shape) == 1:
        return joined
    return _sem().reshape(joined, shape[:-2] + [shape[-2] * 2], False)


@builtin
def where(condition: Any, x: Any, y: Any) -> tensor:
    return _sem().where(_t(condition), _unwrap(x), _unwrap(y))


# -- memory ------------------------------------------------------------------------------------
@builtin
def load(pointer: tensor, mask: Any = None, other: Any = None, boundary_check: Any = (),
         padding_option: Any = "", cache_modifier: Any = "", eviction_policy: Any = "",
         volatile: Any = False) -> tensor:
    return _sem().load(pointer, _opt(mask), _opt(other), _unwrap(boundary_check),
                       _unwrap(padding_option), _unwrap(cache_modifier),
                       _unwrap(eviction_policy), bool(_unwrap(volatile)))


@builtin
def store(pointer: tensor, value: Any, mask: Any = None, boundary_check: Any = (),
          cache_modifier: Any = "", eviction_policy: Any = "") -> None:
    _sem().store(pointer, _t(value), _opt(mask), _unwrap(boundary_check),
                 _unwrap(cache_modifier), _unwrap(eviction_policy))


def _opt(value: Any) -> Any:
    value = _unwrap(value)
    return None if value is None else _t(value)


@builtin
def make_block_ptr(base: tensor, shape: Any, strides: Any, offsets: Any, block_shape: Any,
                   order: Any) -> tensor:
    return _sem().make_block_ptr(base, [_t(s) for s in _unwrap(shape)],
                                 [_t(s) for s in _unwrap(strides)],
                                 [_t(o) for o in _unwrap(offsets)], _unwrap_shape(block_shape),
                                 _unwrap_shape(order))


@builtin
def advance(base: tensor, offsets: Any) -> tensor:
    return _sem().advance(base, [_t(o) for o in _unwrap(offsets)])


def _atomic(op: str) -> Callable:
    def atomic(pointer: tensor, val: Any, mask: Any = None, sem: Any = None, scope: Any = None) -> tensor:
        return _sem().atomic_rmw(op, pointer, _t(val), _opt(mask), _unwrap(sem), _unwrap(scope))
    atomic.__name__ = f"atomic_{op}"
    atomic.__qualname__ = atomic.__name__
    return builtin(atomic)


atomic_add = _atomic("add")
atomic_max = _atomic("max")
atomic_min = _atomic("min")
atomic_and = _atomic("and")
atomic_or = _atomic("or")
atomic_xor = _atomic("xor")
atomic_xchg = _atomic("xchg")


@builtin
def atomic_cas(pointer: tensor, cmp: Any, val: Any, sem: Any = None, scope: Any = None) -> tensor:
    return _sem().atomic_cas(pointer, _t(cmp), _t(val), _unwrap(sem), _unwrap(scope))


@builtin
def atomic_poll(pointer: tensor, expected_value: Any, sem: Any = None, scope: Any = None,
                timeout_ns: Any = None) -> tensor:
    """Wait until ``*pointer == expected_value``; with ``timeout_ns``, give up after that many
    nanoseconds.  True if the value was seen."""
    return _sem().atomic_poll(pointer, _t(expected_value), _unwrap(sem), _unwrap(scope),
                              _unwrap(timeout_ns))


# -- arithmetic helpers ---------------------------------------------------------------------------
@builtin
def to_tensor(x: Any) -> tensor:
    """A Python number as a scalar tensor of its literal type (int32, fp32, ...)."""
    return _t(x)


def _arithmetic(op: str) -> Callable:
    def fn(x: Any, y: Any, sanitize_overflow: Any = True) -> tensor:
        return _sem().binary(op, _unwrap(x), _unwrap(y))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"``tl.{op}(x, y)``: the operator as a function (overflow wraps)."
    return builtin(fn)


add = _arithmetic("add")
sub = _arithmetic("sub")
mul = _arithmetic("mul")


@builtin
def minimum(x: Any, y: Any, propagate_nan: Any = None) -> tensor:
    return _sem().minmax("min", _t(x), _t(y), _unwrap(propagate_nan))


@builtin
def maximum(x: Any, y: Any, propagate_nan: Any = None) -> tensor:
    return _sem().minmax("max", _t(x), _t(y), _unwrap(propagate_nan))


@builtin
def clamp(x: Any, min: Any, max: Any, propagate_nan: Any = None) -> tensor:
    return _sem().clamp(_t(x), _t(min), _t(max), _unwrap(propagate_nan))


@builtin
def logical_and(a: Any, b: Any) -> tensor:
    return _sem().logical("and", _t(a), _t(b))


@builtin
def logical_or(a: Any, b: Any) -> tensor:
    return _sem().logical("or", _t(a), _t(b))


@builtin
def dot(input: tensor, other: tensor, acc: Any = None, input_precision: Any = None,
        allow_tf32: Any = None, max_num_imprecise_acc: Any = None, out_dtype: Any = None) -> tensor:
    precision = _unwrap(input_precision)
    if precision is None and _unwrap(allow_tf32) is not None:
        precision = "tf32" if _unwrap(allow_tf32) else "ieee"
    return _sem().dot(input, other, _opt(acc), precision, _unwrap(max_num_imprecise_acc),
                      _unwrap(out_dtype))


@builtin
def dot_scaled(lhs: tensor, lhs_scale: Any, lhs_format: Any, rhs: tensor, rhs_scale: Any,
               rhs_format: Any, acc: Any = None, fast_math: Any = False, lhs_k_pack: Any = True,
               rhs_k_pack: Any = True, out_dtype: Any = float32) -> tensor:
    """Microscaled (MX) matrix product, emulated in fp32: `naiad.language.scaled_dot`."""
    from naiad.language import scaled_dot
    return scaled_dot.dot_scaled(_sem(), lhs, _opt(lhs_scale), _unwrap(lhs_format), rhs,
                                 _opt(rhs_scale), _unwrap(rhs_format), _opt(acc),
                                 bool(_unwrap(fast_math)), bool(_unwrap(lhs_k_pack)),
                                 bool(_unwrap(rhs_k_pack)), _unwrap(out_dtype))


# -- reductions and scans ----------------------------------------------------------------------
@builtin
def reduce(input: Any, axis: Any, combine_fn: Any, keep_dims: Any = False) -> Any:
    input = _unwrap(input)
    inputs = tuple(input) if isinstance(input, tuple) else (input,)
    results = _sem().reduce([_t(i) for i in inputs], _unwrap(axis), _unwrap(combine_fn),
                            bool(_unwrap(keep_dims)))
    return results if isinstance(input, tuple) else results[0]


@builtin
def associative_scan(input: Any, axis: Any, combine_fn: Any, reverse: Any = False) -> Any:
    input = _unwrap(input)
    inputs = tuple(input) if isinstance(input, tuple) else (input,)
    results = _sem().scan([_t(i) for i in inputs], _unwrap(axis), _unwrap(combine_fn),
                          bool(_unwrap(reverse)))
    return results if isinstance(input, tuple) else results[0]


# -- debugging and hints ---------------------------------------------------------------------
@builtin
def static_assert(cond: Any, msg: Any = "") -> None:
    if isinstance(cond, tensor):
        raise TypeError("tl.static_assert needs a compile-time condition -- fix: use "
                        "tl.device_assert for runtime checks")
    if not _unwrap(cond):
        raise StaticAssertionError(f"static_assert failed: {_unwrap(msg)}")


class StaticAssertionError(AssertionError):
    """Raised by a failed tl.static_assert; the code generator reports it with the line."""


@builtin
def static_print(*values: Any, sep: str = " ", end: str = "\n", file: Any = None,
                 flush: bool = False) -> None:
    print(*[_unwrap(v) for v in values], sep=sep, end=end, file=file, flush=flush)


@builtin
def device_print(prefix: Any, *args: Any, hex: Any = False) -> None:
    _sem().device_print(str(_unwrap(prefix)), [_t(a) for a in args], bool(_unwrap(hex)))


@builtin
def device_assert(cond: Any, msg: Any = "", mask: Any = None) -> None:
    _sem().device_assert(_t(cond), str(_unwrap(msg)), _opt(mask))


@builtin
def multiple_of(input: tensor, values: Any) -> tensor:
    return _sem().hint(input, "tt.divisibility", _int_list(values))


@builtin
def max_contiguous(input: tensor, values: Any) -> tensor:
    return _sem().hint(input, "tt.contiguity", _int_list(values))


@builtin
def max_constancy(input: tensor, values: Any) -> tensor:
    return _sem().hint(input, "tt.constancy", _int_list(values))


def _int_list(values: Any) -> list[int]:
    values = _unwrap(values)
    return [int(_unwrap(v)) for v in values] if isinstance(values, (list, tuple)) else [int(values)]


@builtin
def assume(cond: Any) -> None:
    _sem().assume(_t(cond))


@builtin
def debug_barrier() -> None:
    _sem().debug_barrier()


@builtin
def inline_asm_elementwise(asm: Any, constraints: Any, args: Any, dtype: Any, is_pure: Any,
                           pack: Any) -> Any:
    return _sem().inline_asm(str(_unwrap(asm)), str(_unwrap(constraints)),
                             [_t(a) for a in _unwrap(args)], _unwrap(dtype),
                             bool(_unwrap(is_pure)), int(_unwrap(pack)))
