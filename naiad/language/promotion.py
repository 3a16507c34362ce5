"""Triton's typing rules for operators and conversions, as pure functions over dtypes.

The rules are those of ``triton/language/semantic.py`` in Triton 3.8: what its
``computation_type_impl``, ``integer_promote_impl``, ``to_tensor_type``,
``binary_op_type_checking_impl``, the operator methods and ``cast``/``bitcast`` decide,
restated so the type checker can answer without building IR.  Where Triton's documentation
(``triton-semantics.rst``) and its code disagree, the code wins, because that is what
kernels observe; each such place is marked below.

Operands are given as *dtypes* (tensor operands: a scalar type or a block type, whose
element type is used) or as *Python numbers* (``bool``/``int``/``float`` literals and
constexprs, which Triton calls scalars and types with `literal_type`).

Division and remainder (decides the lowering; see `division_semantics`):

* ``a / b`` is always a float division: integers are converted to fp32 (even int64), and
  fp8/fp16/bf16 are computed in fp32; fp64 stays fp64.
* ``a // b`` exists for integers only and rounds towards zero, like C (``-7 // 2 == -3``),
  not towards minus infinity like Python.  Floats are rejected.
* ``a % b`` takes the sign of the dividend, like C's ``%`` and ``fmod`` (``-7 % 2 == -1``,
  ``-7.5 % 2.0 == -1.5``), not Python's sign-of-divisor result.  Floats are allowed.
* ``/``, ``//`` and ``%`` reject integers of different signedness.
* When *both* operands are compile-time constants, the operation runs in Python and
  Python's semantics apply instead (Triton documents this exception too).
"""

from __future__ import annotations

from typing import NamedTuple

from naiad.language.dtypes import (
    DTypeValueError,
    IncompatibleTypeError,
    _unwrap_constexpr,
    bfloat16,
    dtype,
    float16,
    float32,
    float64,
    get_int_dtype,
    int1,
    int32,
    int64,
    type_label,
    uint32,
    uint64,
)


class OpTypes(NamedTuple):
    """What a binary operator does with types: each operand is converted to ``lhs`` and
    ``rhs`` respectively (the same type, except for pointer arithmetic), and the
    operation produces ``result``."""

    lhs: dtype
    rhs: dtype
    result: dtype


# -- promotion --------------------------------------------------------------------------


def integer_promote(a: dtype, b: dtype) -> dtype:
    """Triton's ``integer_promote_impl``: C's usual arithmetic conversions on integer types.

    Same signedness: the wider type.  Mixed signedness: the unsigned type when it is at
    least as wide as the signed one (``int32, uint32 -> uint32``), else the signed type
    (``int32, uint16 -> int32``).  ``int1`` (bool) counts as a 1-bit unsigned integer, so it
    yields to every other integer type.
    """
    for ty in (a, b):
        if not ty.is_int():
            raise IncompatibleTypeError(f"integer promotion needs integer types, got {type_label(ty)}", ty)
    if a.int_signedness == b.int_signedness:
        return a if a.int_bitwidth > b.int_bitwidth else b
    unsigned, signed = (a, b) if a.is_int_unsigned() else (b, a)
    return unsigned if unsigned.int_bitwidth >= signed.int_bitwidth else signed


def computation_type(a: dtype, a_is_scalar: bool, b: dtype, b_is_scalar: bool,
                     div_or_mod: bool = False) -> dtype:
    """Triton's ``computation_type_impl``: the type a binary operator computes in.

    ``a``/``b`` are the operands' scalar types (a Python scalar's is `literal_type`);
    ``div_or_mod`` is set for ``/``, ``//`` and ``%``.  The rules, in order:

    0. A Python scalar of a kind (bool < integer < float) lower than or equal to the
       tensor's does not take part: ``int8_tensor + 1000 -> int8``, ``fp16_tensor * 2.0 ->
       fp16``.  A scalar of a higher kind takes part with its literal type:
       ``int16_tensor + 4.0 -> fp32``.
    1. fp64 with anything gives fp64.
    2. ``/``, ``//`` and ``%`` with any float give fp32: they do not exist natively below
       32 bits (Triton 3.8; up to 3.7 fp8 operands kept their fp8 type here).
    3. fp32 with anything gives fp32.
    4. fp16 with anything else (bf16 and fp8 included) gives fp16.
    5. bf16 with bf16 gives bf16; bf16 with anything else (integers too) gives fp32.
       Triton's documentation claims ``(int32, bfloat16) -> bfloat16``; its code gives fp32.
    6. Two fp8 operands give their type if equal, else fp16.  An fp8 with an integer is
       an error (Triton has no such conversion).
    7. Integers: `integer_promote`, except that ``/``, ``//`` and ``%`` reject mixed
       signedness, whose result would rarely be what was meant.
    """
    a, b = _numeric(a), _numeric(b)
    if a_is_scalar != b_is_scalar:
        scalar, tensor = (a, b) if a_is_scalar else (b, a)
        if scalar.kind() <= tensor.kind():
            a = b = tensor
    if a.is_floating() or b.is_floating():
        return _float_computation_type(a, b, div_or_mod)
    if div_or_mod and a.int_signedness != b.int_signedness:
        unsigned = a if a.is_int_unsigned() else b
        signed_twin = get_int_dtype(max(a.int_bitwidth, b.int_bitwidth, 8), signed=True)
        raise IncompatibleTypeError(
            f"Cannot use /, // or % with {type_label(a)} and {type_label(b)} because they have "
            f"different signedness; this is unlikely to give a useful answer. Cast one operand "
            f"to the other's signedness first, e.g. .to({type_label(signed_twin)}) on the "
            f"{type_label(unsigned)} operand.", a, b)
    return integer_promote(a, b)


def _float_computation_type(a: dtype, b: dtype, div_or_mod: bool) -> dtype:
    """Rules 1-6 of `computation_type`, for operand pairs with at least one float."""
    names = {a.name, b.name}
    if "fp64" in names:
        return float64
    if div_or_mod or "fp32" in names:
        return float32
    if "fp16" in names:
        return float16
    if names == {"bf16"}:
        return bfloat16
    if "bf16" in names:
        return float32
    if a.is_fp8() and b.is_fp8():
        return a if a == b else float16
    fp8, other = (a, b) if a.is_fp8() else (b, a)
    raise IncompatibleTypeError(
        f"cannot combine {type_label(a)} and {type_label(b)}: Triton does not convert between "
        f"{type_label(other)} and fp8 types implicitly. Convert the fp8 operand first, e.g. "
        f".to(tl.float16) on the {type_label(fp8)} operand.", a, b)


def _numeric(ty) -> dtype:
    """The scalar type of a tensor operand, which must be a number."""
    ty = _unwrap_constexpr(ty)
    if isinstance(ty, dtype) and (ty.scalar.is_int() or ty.scalar.is_floating()):
        return ty.scalar
    raise IncompatibleTypeError(f"{ty} is not a numeric type, so arithmetic promotion does not apply", ty)


# -- Python scalars ---------------------------------------------------------------------


def int_range(ty: dtype) -> tuple[int, int]:
    """The smallest and the largest value of the integer type ``ty``."""
    return ty.get_int_min_value(), ty.get_int_max_value()


_FP32_MIN_NORMAL = 2.0**-126
_FP32_MAX = (2 - 2**-23) * 2.0**127

# Integer literals take the first of these types whose range holds them.
_INT_LITERAL_TYPES = (int32, uint32, int64, uint64)


def literal_type(value) -> dtype:
    """Triton's ``to_tensor_type``: the dtype of a Python scalar used as a tensor operand.

    bool -> int1.  int -> the first of int32, uint32, int64, uint64 that holds it (so
    ``2**31`` is uint32 and ``-2**31 - 1`` is int64); beyond uint64 it is an error.
    float -> fp32 when it is 0, inf, nan or a normal fp32 magnitude, else fp64 (``1e300``,
    and also fp32-subnormal values such as ``1e-40``).
    """
    value = _unwrap_constexpr(value)
    if isinstance(value, bool):
        return int1
    if isinstance(value, int):
        for ty in _INT_LITERAL_TYPES:
            low, high = int_range(ty)
            if low <= value <= high:
                return ty
        raise DTypeValueError(f"Nonrepresentable integer {value}: integer literals must lie in "
                              f"[-2**63, 2**64 - 1], the range of tl.int64 and tl.uint64 together")
    if isinstance(value, float):
        magnitude = abs(value)
        if magnitude in (0.0, float("inf")) or value != value or _FP32_MIN_NORMAL <= magnitude <= _FP32_MAX:
            return float32
        return float64
    raise IncompatibleTypeError(f"cannot use {value!r} of type {type(value).__name__} as a tensor operand; "
                                f"only bool, int and float scalars convert to tensors")


def check_scalar_operand(value, ty: dtype) -> None:
    """The checks Triton's ``binary_op_type_checking_impl`` makes on a Python scalar operand
    once the computation type ``ty`` is known: an integer computation must be able to hold
    the scalar, and a negative scalar never meets an unsigned computation."""
    if not ty.is_int():
        return
    if value < 0 and ty.is_int_unsigned():
        raise DTypeValueError(f"Cannot perform a binary operation between an unsigned tensor "
                              f"({type_label(ty)}) and a negative scalar ({value}). Perform an explicit "
                              f"cast on one of them, e.g. .to(tl.int64) on the tensor.")
    low, high = int_range(ty)
    if not low <= value <= high:
        raise DTypeValueError(f"Scalar {value} is out of range for type {type_label(ty)} [{low}, {high}]; "
                              f"cast the tensor to a wider type first, e.g. .to(tl.int64).")


def _operand(x) -> tuple[dtype, object]:
    """(scalar type, Python value or None) of an operand given as a dtype or a number."""
    x = _unwrap_constexpr(x)
    if isinstance(x, dtype):
        return x.scalar, None
    return literal_type(x), x


def _promote(lhs, rhs, div_or_mod: bool) -> dtype:
    """The computation type of two operands, with Triton's checks on scalar operands."""
    (a, a_value), (b, b_value) = _operand(lhs), _operand(rhs)
    ty = computation_type(a, a_value is not None, b, b_value is not None, div_or_mod)
    for value in (a_value, b_value):
        if value is not None:
            check_scalar_operand(value, ty)
    return ty


# -- binary operators -------------------------------------------------------------------


def _same(ty: dtype, result: dtype | None = None) -> OpTypes:
    return OpTypes(ty, ty, ty if result is None else result)


def _arithmetic(op, lhs, rhs) -> OpTypes:
    """``+ - *`` (and ``tl.where``'s two values): the computation type."""
    return _same(_promote(lhs, rhs, div_or_mod=False))


def _truediv(op, lhs, rhs) -> OpTypes:
    """``/``: a float division.  Integer operands (after promotion, which rejects mixed
    signedness) are both converted to fp32, whatever their width."""
    ty = _promote(lhs, rhs, div_or_mod=True)
    return _same(float32 if ty.is_int() else ty)


def _floordiv(op, lhs, rhs) -> OpTypes:
    """``//``: integers only; rounds towards zero (see `division_semantics`)."""
    ty = _promote(lhs, rhs, div_or_mod=True)
    if ty.is_floating():
        raise IncompatibleTypeError(
            f"// is not defined for floating-point operands in Triton "
            f"({type_label(_operand(lhs)[0])} // {type_label(_operand(rhs)[0])} computes in "
            f"{type_label(ty)}); use tl.floor(a / b) for a float floor division, or cast both "
            f"operands to an integer type with .to(tl.int32).", ty)
    return _same(ty)


def _mod(op, lhs, rhs) -> OpTypes:
    """``%``: integers and floats; the result has the dividend's sign (see `division_semantics`)."""
    return _same(_promote(lhs, rhs, div_or_mod=True))


def _bitwise(op, lhs, rhs) -> OpTypes:
    """``& | ^ << >>``: the computation type, which must be an integer.

    Triton promotes first and checks afterwards, so ``int32_tensor & 1.0`` fails too
    (the float scalar makes the computation fp32).  Shifts promote both sides like any
    other bitwise operator: ``int8 << uint16`` computes in uint16.
    """
    ty = _promote(lhs, rhs, div_or_mod=False)
    if not ty.is_int():
        a, b = _operand(lhs)[0], _operand(rhs)[0]
        floating = a if a.is_floating() else b
        same_bits = get_int_dtype(floating.primitive_bitwidth, signed=True)
        raise IncompatibleTypeError(
            f"invalid operands of type {type_label(a)} and {type_label(b)} for {op}: bitwise operators "
            f"and shifts need integers. Convert the value with .to({type_label(same_bits)}), or reuse "
            f"its bits with .to({type_label(same_bits)}, bitcast=True).", a, b)
    return _same(ty)


def _comparison(op, lhs, rhs) -> OpTypes:
    """``== != < <= > >=``: compare in the computation type, produce int1.

    Unlike the other operators, Triton's comparison methods turn a Python scalar into a
    tensor of its `literal_type` before promoting, so the scalar rule does not apply and no
    range check is made: ``int8_tensor < 1`` compares in int32, ``fp16_tensor < 0.5`` in
    fp32, and ``uint32_tensor > -1`` compares in uint32, where -1 is 0xFFFFFFFF (C rules).
    """
    a, b = _operand(lhs)[0], _operand(rhs)[0]
    return _same(computation_type(a, False, b, False), int1)


_BINARY_RULES = {
    "+": _arithmetic, "-": _arithmetic, "*": _arithmetic,
    "/": _truediv, "//": _floordiv, "%": _mod,
    "&": _bitwise, "|": _bitwise, "^": _bitwise, "<<": _bitwise, ">>": _bitwise,
    "==": _comparison, "!=": _comparison, "<": _comparison,
    "<=": _comparison, ">": _comparison, ">=": _comparison,
}


def binary_op_types(op: str, lhs, rhs) -> OpTypes:
    """The types of ``lhs op rhs`` for a Python operator symbol, per Triton's rules.

    ``lhs``/``rhs`` are dtypes for tensor operands and Python numbers for scalars.  Raises
    IncompatibleTypeError for operands Triton rejects and DTypeValueError for scalars that
    do not fit.  See each rule's docstring in ``_BINARY_RULES``.
    """
    try:
        rule = _BINARY_RULES[op]
    except KeyError:
        raise DTypeValueError(f"unknown binary operator {op!r}; "
                              f"expected one of {' '.join(_BINARY_RULES)}") from None
    a, b = _operand(lhs)[0], _operand(rhs)[0]
    if a.is_ptr() or b.is_ptr():
        return _pointer_arithmetic(op, a, b)
    return rule(op, lhs, rhs)


def _pointer_arithmetic(op: str, a: dtype, b: dtype) -> OpTypes:
    """Triton allows ``ptr + int``, ``int + ptr`` and ``ptr - int``, giving the pointer type.

    The offset keeps its own type; the lowering widens unsigned offsets narrower than 64
    bits with a zero extension, because the address arithmetic treats offsets as signed.
    Any other operator, a float offset, and ``ptr +/- ptr`` are errors.
    """
    pair = f"{type_label(a)} and {type_label(b)}"
    if op not in ("+", "-") or (op == "-" and not a.is_ptr()):
        raise IncompatibleTypeError(
            f"invalid operands of type {pair} for {op}: the only operators on pointers are "
            f"ptr + int, int + ptr and ptr - int. To compute with an address, cast the pointer "
            f"with .to(tl.int64).", a, b)
    if a.is_ptr() and b.is_ptr():
        raise IncompatibleTypeError(
            f"invalid operands of type {pair} for {op}: two pointers cannot be "
            f"{'added' if op == '+' else 'subtracted'}; keep integer offsets and add them to one pointer.",
            a, b)
    pointer, offset = (a, b) if a.is_ptr() else (b, a)
    if not offset.is_int():
        raise IncompatibleTypeError(
            f"invalid operands of type {pair} for {op}: a pointer offset must be an integer; "
            f"convert it with .to(tl.int32).", a, b)
    return OpTypes(a, b, pointer)


def right_shift_is_arithmetic(lhs, rhs) -> bool:
    """Whether ``lhs >> rhs`` shifts in sign bits (arithmetic) or zeros (logical).

    Triton decides by the signedness of the tensor whose method runs, before promotion:
    the left operand for ``tensor >> x``, but the *shift amount* for ``scalar >> tensor``
    (``tensor.__rrshift__`` looks at its own dtype).  So ``int8 >> uint16`` is arithmetic
    although it computes in uint16, which gives the bits of an int16 shift.
    """
    lhs = _unwrap_constexpr(lhs)
    tensor = lhs if isinstance(lhs, dtype) else _unwrap_constexpr(rhs)
    return tensor.scalar.is_int_signed()


# The MLIR ``arith`` op for each division operator, by the kind of the computation type.
_DIVISION_OPS = {
    ("/", "float"): "arith.divf",
    ("//", "signed"): "arith.divsi",
    ("//", "unsigned"): "arith.divui",
    ("%", "signed"): "arith.remsi",
    ("%", "unsigned"): "arith.remui",
    ("%", "float"): "arith.remf",
}


def division_semantics(op: str, ty: dtype) -> str:
    """The MLIR ``arith`` operation that implements ``op`` (``/``, ``//`` or ``%``) on two
    operands already converted to ``ty`` (``binary_op_types(op, ...).lhs``).

    Triton lowers integer ``//`` to ``divsi``/``divui`` and ``%`` to ``remsi``/``remui``,
    and float ``%`` to ``remf`` (LLVM's ``frem``): division truncates towards zero and the
    remainder has the dividend's sign, as in C.  For signed operands
    ``-7 // 2 == -3``, ``7 // -2 == -3``, ``-7 % 2 == -1``, ``7 % -2 == 1``; for floats
    ``-7.5 % 2.0 == -1.5`` (``math.fmod``).  Python would give -4, -4, 1, -1 and 0.5.
    Division by zero is undefined for integers (no trap is promised) and gives inf/nan for
    floats.  ``int1`` counts as unsigned.  ``/`` never sees an integer type: it converts
    integers to fp32 first.
    """
    kind = "float" if ty.is_floating() else "signed" if ty.is_int_signed() else "unsigned"
    try:
        return _DIVISION_OPS[op, kind]
    except KeyError:
        raise IncompatibleTypeError(f"{op} has no lowering for operands of type {type_label(ty)}; "
                                    f"binary_op_types({op!r}, ...) gives the operand type to use",
                                    ty) from None


# -- unary operators --------------------------------------------------------------------


def unary_op_type(op: str, operand) -> dtype:
    """The result type of a unary operator on a tensor of type ``operand``.

    ``-x``: numbers keep their type (integers compute ``0 - x``, unsigned ones wrap);
    pointers are rejected.  ``~x``: integers only.  ``not x``: int1 only, since Triton
    bitcasts the operand to int1.  ``+x``: Triton's tensors have no ``__pos__``, so it is
    rejected on tensors.
    """
    ty = _unwrap_constexpr(operand).scalar
    rules = {  # op: (accepted, result type, what to do otherwise)
        "-": (ty.is_int() or ty.is_floating(), ty, "only numbers can be negated; for a pointer, "
                                                   "negate the offset instead"),
        "~": (ty.is_int(), ty, "~ needs an integer; to flip a float's bits, bitcast it to an "
                               "integer of the same width first"),
        "not": (ty.is_bool(), int1, "`not` needs a boolean (tl.int1); write x == 0 for a number"),
        "+": (False, ty, "unary + is not defined on Triton tensors; drop it"),
    }
    if op not in rules:
        raise DTypeValueError(f"unknown unary operator {op!r}; expected one of {' '.join(rules)}")
    accepted, result, advice = rules[op]
    if not accepted:
        raise IncompatibleTypeError(f"wrong type argument to unary {op} ({type_label(ty)}): {advice}.", ty)
    return result


# -- conversions (tensor.to / tl.cast) --------------------------------------------------

_ROUNDING_MODES = ("rtne", "rtz")


def check_cast(src: dtype, dst: dtype, *, bitcast: bool = False,
               fp_downcast_rounding: str | None = None) -> None:
    """Raise unless ``x.to(dst, fp_downcast_rounding=..., bitcast=...)`` is legal for a tensor
    of type ``src``; block types are judged by their element types.

    Value conversions (Triton's ``cast``): any integer or bool to and from any integer,
    bool or standard float (fp16, bf16, fp32, fp64); any float to and from any float,
    except that fp8 types never convert to or from integers, and fp8e4b15 converts only to
    and from fp16 and fp32 (the only conversions a backend provides for it, NVIDIA's).
    Pointers convert to pointers, to int64/uint64 (the address) and to int1 (non-null), and any
    integer converts to a pointer.  void converts to nothing.

    ``fp_downcast_rounding`` ("rtne", the default, or "rtz") may only be given for a
    conversion from a float to a narrower float.

    Bitcasts keep the bits, so both types need the same width; a bitcast involving a
    pointer is a value conversion, and the rounding argument is ignored, as in Triton.
    """
    src, dst = _unwrap_constexpr(src).scalar, _unwrap_constexpr(dst).scalar
    if src == dst:
        return
    if src.is_void() or dst.is_void():
        raise IncompatibleTypeError(f"cannot cast {type_label(src)} to {type_label(dst)}: tl.void has no "
                                    f"values to convert.", src, dst)
    if bitcast and not (src.is_ptr() or dst.is_ptr()):
        _check_bitcast(src, dst)
        return
    if fp_downcast_rounding is not None:
        _check_rounding(src, dst, fp_downcast_rounding)
    problem = _cast_problem(src, dst)
    if problem:
        raise IncompatibleTypeError(f"cannot cast {type_label(src)} to {type_label(dst)}: {problem}.",
                                    src, dst)


def cast_allowed(src: dtype, dst: dtype, *, bitcast: bool = False,
                 fp_downcast_rounding: str | None = None) -> bool:
    """Whether `check_cast` accepts the conversion."""
    try:
        check_cast(src, dst, bitcast=bitcast, fp_downcast_rounding=fp_downcast_rounding)
    except (IncompatibleTypeError, DTypeValueError):
        return False
    return True


def _category(ty: dtype) -> str:
    """The class of a (non-void) type for the conversion rules."""
    if ty.is_ptr():
        return "ptr"
    if ty.is_int():
        return "int"
    if ty.is_fp8e4b15():
        return "fp8e4b15"
    if ty.is_fp8():
        return "fp8"
    return "float"


def _cast_problem(src: dtype, dst: dtype) -> str | None:
    """Why Triton's ``cast`` has no conversion from ``src`` to ``dst`` (None: it has one)."""
    pair = (_category(src), _category(dst))
    if pair == ("ptr", "int") and dst.int_bitwidth not in (1, 64):
        return (f"a pointer converts only to 64-bit integers (its address) or tl.int1 (whether it is "
                f"non-null); use .to(tl.int64).to({type_label(dst)})")
    if "ptr" in pair and pair not in (("ptr", "ptr"), ("ptr", "int"), ("int", "ptr")):
        return "pointers convert only to and from integers and other pointers"
    if pair in (("int", "fp8"), ("int", "fp8e4b15")):
        return (f"fp8 types convert only to and from floating-point types; go through a float, "
                f"e.g. .to(tl.float16).to({type_label(dst)})")
    if pair in (("fp8", "int"), ("fp8e4b15", "int")):
        return (f"fp8 types convert only to and from floating-point types; go through a float, "
                f"e.g. .to(tl.float32).to({type_label(dst)})")
    if "fp8e4b15" in pair and not {src.name, dst.name} & {"fp16", "fp32"}:
        return "tl.float8e4b15 converts only to and from tl.float16 and tl.float32; go through tl.float16"
    return None


def _check_bitcast(src: dtype, dst: dtype) -> None:
    if src.primitive_bitwidth != dst.primitive_bitwidth:
        twin = get_int_dtype(src.primitive_bitwidth, signed=True)
        raise IncompatibleTypeError(
            f"Cannot bitcast {type_label(src)} ({src.primitive_bitwidth} bits) to {type_label(dst)} "
            f"({dst.primitive_bitwidth} bits): a bitcast keeps the bits, so both types need the same "
            f"width. Bitcast to a {src.primitive_bitwidth}-bit type such as {type_label(twin)}, or "
            f"convert the value with .to({type_label(dst)}) without bitcast=True.", src, dst)


def _check_rounding(src: dtype, dst: dtype, rounding: str) -> None:
    if rounding not in _ROUNDING_MODES:
        raise DTypeValueError(f"Invalid rounding mode: {rounding!r}. Supported rounding modes are "
                              f"'rtne' (round to nearest, ties to even; the default) and 'rtz' "
                              f"(round towards zero).")
    if not (src.is_floating() and dst.is_floating() and dst.primitive_bitwidth < src.primitive_bitwidth):
        raise DTypeValueError(f"fp_downcast_rounding should be set only for truncating fp conversions. "
                              f"Source scalar type is {src} and destination type is {dst}; "
                              f"drop fp_downcast_rounding for this conversion.")
