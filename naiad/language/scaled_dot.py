"""``tl.dot_scaled``: the product of two blocks in OCP microscaling (MX) formats.

Naiad has no native microscaled matrix instruction on any backend, so this is the software
emulation Triton itself uses where the hardware lacks one: each operand is decoded to fp32,
multiplied by its block scales, and an ordinary ``tl.dot`` with an fp32 accumulator takes the
product of the scaled operands rounded to a 16-bit type (`compute_type`): bf16, exact for every
format but fp16, or fp16 where an operand is fp16 -- Triton's own compute types, so the results
are Triton's and GPUs run the dot on tensor cores.  Every step is an existing language
operation, so every backend runs it with no new lowering rule.

The encodings, as Triton reads them:

* ``"e2m1"`` (fp4): two values per ``uint8``, the first in the low nibble, packed along K
  (``lhs_k_pack`` / ``rhs_k_pack`` False: along M for ``lhs``, N for ``rhs``).  Values
  0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
* ``"e4m3"`` / ``"e5m2"``: fp8 (``tl.float8e4nv`` / ``tl.float8e5``), or ``uint8`` holding
  their bits.
* ``"bf16"`` / ``"fp16"``: those types, or ``uint16`` holding their bits.
* a scale is ``uint8`` e8m0: byte ``s`` means ``2**(s - 127)``.  As in Triton's emulation and
  interpreter, ``s = 0`` gives 0 (the byte is placed in fp32's exponent field) and ``s = 0xFF``
  gives NaN; ``fast_math=True`` skips that NaN check, leaving 0xFF as infinity, as Triton's does.
  One scale covers ``group`` consecutive elements along K (``group`` = K / the scale's last
  dimension, 16 or 32); ``lhs_scale`` is ``[M, K // group]`` and ``rhs_scale`` ``[N, K // group]``
  (not transposed); ``None`` means no scaling.
"""

from __future__ import annotations

from typing import Any

from naiad.language import dtypes as tl

#: format -> (its float type or None for packed fp4, the unsigned type that may hold its bits)
FORMATS = {
    "e2m1": (None, tl.uint8),
    "e4m3": (tl.float8e4nv, tl.uint8),
    "e5m2": (tl.float8e5, tl.uint8),
    "bf16": (tl.bfloat16, tl.uint16),
    "fp16": (tl.float16, tl.uint16),
}
GROUP_SIZES = (32, 16)
_HALF_BITS = 0x3F000000       # 0.5 in fp32: fp4's only subnormal magnitude
_FP4_REBIAS = (127 - 1) << 23  # fp4's exponent bias is 1, fp32's 127


def dot_scaled(sem: Any, lhs: Any, lhs_scale: Any, lhs_format: Any, rhs: Any, rhs_scale: Any,
               rhs_format: Any, acc: Any, fast_math: bool, lhs_k_pack: bool, rhs_k_pack: bool,
               out_dtype: Any) -> Any:
    """Emit ``lhs_scaled @ rhs_scaled (+ acc)`` through ``sem`` (a `Semantic`); fp32 result."""
    if out_dtype != tl.float32:
        raise ValueError(f"tl.dot_scaled: out_dtype must be tl.float32, not {out_dtype} -- fix: "
                         f"convert the fp32 result with .to(...)")
    for name, value in (("lhs", lhs), ("rhs", rhs)):
        if not (hasattr(value, "type") and value.type.is_block() and len(value.shape) in (2, 3)):
            raise TypeError(f"tl.dot_scaled: {name} must be a 2-D (or 3-D batched) block, got "
                            f"{getattr(value, 'type', value)!r} -- fix: pass a loaded block")
    if len(lhs.shape) != len(rhs.shape):
        raise ValueError(f"tl.dot_scaled: lhs and rhs must both be 2-D or both 3-D, got shapes "
                         f"{lhs.shape} and {rhs.shape} -- fix: reshape one to the other's rank")
    for name, fmt, k_pack in (("lhs", lhs_format, lhs_k_pack), ("rhs", rhs_format, rhs_k_pack)):
        if not k_pack and fmt != "e2m1":
            raise ValueError(f"tl.dot_scaled: {name}_k_pack=False is for packed e2m1 operands, "
                             f"not {fmt!r} -- fix: leave {name}_k_pack=True")
    a = _decode(sem, lhs, lhs_format, "lhs", pack_axis=-1 if lhs_k_pack else -2)
    b = _decode(sem, rhs, rhs_format, "rhs", pack_axis=-2 if rhs_k_pack else -1)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"tl.dot_scaled: lhs holds K = {a.shape[-1]} values per row and rhs "
                         f"K = {b.shape[-2]} per column ({lhs_format} {lhs.shape} and {rhs_format} "
                         f"{rhs.shape}) -- fix: an e2m1 block packed along K is half as wide")
    a = _apply_scale(sem, a, lhs_scale, "lhs", fast_math, transposed=False)
    b = _apply_scale(sem, b, rhs_scale, "rhs", fast_math, transposed=True)
    compute = compute_type(lhs_format, rhs_format)
    a, b = sem.cast(a, compute), sem.cast(b, compute)
    return sem.dot(a, b, acc, None, None, tl.float32)


def compute_type(lhs_format: str, rhs_format: str) -> Any:
    """The type both scaled operands are rounded to for the dot, as in Triton's emulation: fp16
    when either operand is fp16 (a scaled value outside fp16's range becomes infinity or zero
    there, as in Triton), else bf16 -- exact: e2m1, e4m3 and e5m2 values have 3 or fewer
    mantissa bits, and bf16 has fp32's exponent range for any e8m0 scale."""
    return tl.float16 if "fp16" in (lhs_format, rhs_format) else tl.bfloat16


def _decode(sem: Any, value: Any, fmt: Any, name: str, pack_axis: int) -> Any:
    """The operand's values as fp32 (fp4 unpacked along ``pack_axis``)."""
    if fmt not in FORMATS:
        raise ValueError(f"tl.dot_scaled: unknown {name}_format {fmt!r} -- fix: use one of "
                         f"{', '.join(repr(f) for f in FORMATS)}")
    float_type, bits_type = FORMATS[fmt]
    allowed = [bits_type] if float_type is None else [float_type, bits_type]
    if value.dtype not in allowed:
        raise TypeError(f"tl.dot_scaled: {name} in format {fmt!r} must be "
                        f"{' or '.join(str(t) for t in allowed)}, got {value.dtype} -- fix: pass "
                        + ("two fp4 codes per byte (uint8)" if float_type is None else
                           f"{float_type} values or their bits as {bits_type}")
                        + f", or name the format {name} holds in {name}_format")
    if float_type is None:
        return _unpack_fp4(sem, value, pack_axis)
    return sem.cast(sem.cast(value, float_type, bitcast=True), tl.float32)


def _unpack_fp4(sem: Any, packed: Any, axis: int) -> Any:
    """Both nibbles of each byte decoded, the low one first, interleaved along ``axis``."""
    rank = len(packed.shape)
    axis %= rank
    byte = sem.cast(packed, tl.int32)
    low = _fp4_to_fp32(sem, sem.binary("and", byte, 0xF))
    high = _fp4_to_fp32(sem, sem.binary("shr", byte, 4))
    pairs = sem.join(low, high)                      # [..., 2]: the pair on a new last axis
    if axis != rank - 1:                             # move the pair axis right after ``axis``
        order = list(range(axis + 1)) + [rank] + list(range(axis + 1, rank))
        pairs = sem.permute(pairs, order)
    shape = list(packed.shape)
    shape[axis] *= 2
    return sem.reshape(pairs, shape, False)


def _fp4_to_fp32(sem: Any, nibble: Any) -> Any:
    """e2m1 bits (int32 0..15) as fp32: the exponent and mantissa move into fp32's fields and
    are rebiased; the subnormal magnitude (code 1) is 0.5 and code 0 is zero."""
    magnitude = sem.binary("and", nibble, 0x7)
    normal = sem.binary("add", sem.binary("shl", magnitude, 22), _FP4_REBIAS)
    small = sem.where(sem.binary("eq", magnitude, 1), _HALF_BITS, 0)
    bits = sem.where(sem.binary("ge", magnitude, 2), normal, small)
    sign = sem.binary("shl", sem.binary("and", nibble, 0x8), 28)
    return sem.cast(sem.binary("or", bits, sign), tl.float32, bitcast=True)


def _apply_scale(sem: Any, value: Any, scale: Any, name: str, fast_math: bool,
                 transposed: bool) -> Any:
    """``value`` (fp32, ``[..., rows, K]``, or ``[..., K, cols]`` when ``transposed``) times its
    e8m0 scales ``[..., rows, K // group]``, each repeated over its group along K."""
    if scale is None:
        return value
    shape = list(value.shape)
    if transposed:
        shape[-2], shape[-1] = shape[-1], shape[-2]
    k = shape[-1]
    if not (hasattr(scale, "type") and scale.dtype == tl.uint8 and scale.type.is_block()):
        raise TypeError(f"tl.dot_scaled: {name}_scale must be a uint8 block of e8m0 exponents "
                        f"(or None), got {getattr(scale, 'type', scale)!r} -- fix: load the "
                        f"scales as uint8")
    groups = scale.shape[-1]
    if scale.shape[:-1] != shape[:-1] or k % groups or k // groups not in GROUP_SIZES:
        rows = "N" if transposed else "M"
        expected = " or ".join(str(shape[:-1] + [k // g]) for g in GROUP_SIZES if k % g == 0)
        raise ValueError(f"tl.dot_scaled: {name}_scale has shape {scale.shape} but must be "
                         f"{expected or 'one scale per 16 or 32 values along K'} for K = {k} "
                         f"-- fix: give one scale per 32 (or 16) values along K, as "
                         f"[{rows}, K // 32]" + (" (rhs_scale is not transposed)" if transposed
                                                  else ""))
    exponent = sem.cast(scale, tl.int32)
    factor = sem.cast(sem.binary("shl", exponent, 23), tl.float32, bitcast=True)
    if not fast_math:
        factor = sem.where(sem.binary("eq", exponent, 0xFF), float("nan"), factor)
    factor = sem.expand_dims(factor, len(shape))          # [..., rows, groups, 1]
    factor = sem.broadcast_to(factor, shape[:-1] + [groups, k // groups])
    factor = sem.reshape(factor, shape, False)
    if transposed:
        order = list(range(len(shape) - 2)) + [len(shape) - 1, len(shape) - 2]
        factor = sem.permute(factor, order)
    return sem.binary("mul", value, factor)
