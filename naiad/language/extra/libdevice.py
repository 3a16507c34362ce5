"""``libdevice``: the math library every backend provides (``from triton.language.extra import libdevice``).

Triton ships this module as empty stubs and each backend re-implements ~200 functions in its own
module.  Here each function is a `naiad.language.extern.extern_elementwise` call on the C math
library's name for it (``expf`` for fp32, ``exp`` for fp64; ``__naiad_<name>`` for the few with
no C equivalent), so one module serves every backend: the CPU backend calls libm or an LLVM
intrinsic, the CUDA backend links NVIDIA's ``__nv_<name>``.  A backend may still replace the
whole module through ``BaseBackend.get_module_map`` under this module's name.
"""

from __future__ import annotations

from naiad.language import core
from naiad.language.extern import extern, extern_elementwise

_F32, _F64, _I32, _I64, _U32, _U64 = (core.float32, core.float64, core.int32, core.int64,
                                      core.uint32, core.uint64)

#: Every function's table: name -> {argument dtypes: (symbol, result dtype)}.  What a backend
#: must resolve: C math names and Naiad's ``__naiad_`` ones.
SIGNATURES: dict[str, dict] = {}


def _float_table(c_name: str, arity: int, ret32=None, ret64=None) -> dict:
    """fp32 -> ``<c_name>f``, fp64 -> ``<c_name>``, as the C library names them."""
    return {(_F32,) * arity: (c_name + "f", ret32 or _F32), (_F64,) * arity: (c_name, ret64 or _F64)}


def _define(name: str, arity: int, table: dict, as_dtype: core.dtype | None = None) -> None:
    """``libdevice.<name>``; ``as_dtype``: its result converted, as Triton's ``isnan`` returns
    ``int1`` where the library function returns ``int32``."""
    params = [f"arg{i}" for i in range(arity)]

    def fn(*args):
        if len(args) != arity:
            raise TypeError(f"libdevice.{name} takes {arity} argument(s), got {len(args)}")
        result = extern_elementwise("libdevice", "", list(args), table, True)
        return result if as_dtype is None else core.cast(result, as_dtype)

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    fn.__doc__ = f"libdevice.{name}({', '.join(params)}): element-wise, for " + \
        ", ".join("(" + ", ".join(str(t) for t in row) + ")" for row in table)
    globals()[name] = extern(fn)
    SIGNATURES[name] = table


_UNARY_FLOAT = ("exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt",
                "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
                "acosh", "atanh", "erf", "erfc", "tgamma", "lgamma", "floor", "ceil", "trunc",
                "round", "rint", "nearbyint", "j0", "j1", "y0", "y1")
_BINARY_FLOAT = ("pow", "atan2", "fmod", "remainder", "hypot", "copysign", "fmin", "fmax", "fdim",
                 "nextafter")
# Functions with no C library equivalent: backends implement ``__naiad_<name>[f]``.
_UNARY_NAIAD = ("rsqrt", "rcp", "erfinv", "erfcinv", "erfcx", "normcdf", "normcdfinv", "sinpi",
                "cospi", "sqrt_rn", "fast_exp", "fast_log", "rcbrt", "cyl_bessel_i0",
                "cyl_bessel_i1")
_BINARY_NAIAD = ("div_rn", "div_rz", "div_rd", "div_ru", "add_rn", "add_rz", "add_rd", "add_ru",
                 "mul_rn", "mul_rz", "mul_rd", "mul_ru", "rhypot")

for _name in _UNARY_FLOAT:
    _define(_name, 1, _float_table(_name, 1))
for _name in _BINARY_FLOAT:
    _define(_name, 2, _float_table(_name, 2))
for _name in _UNARY_NAIAD:
    _define(_name, 1, _float_table("__naiad_" + _name, 1))
for _name in _BINARY_NAIAD:
    _define(_name, 2, _float_table("__naiad_" + _name, 2))

_define("fma", 3, _float_table("fma", 3))
for _rounding in ("rn", "rz", "rd", "ru"):
    _define(f"fma_{_rounding}", 3, _float_table(f"__naiad_fma_{_rounding}", 3))
_define("abs", 1, {(_I32,): ("abs", _I32), (_I64,): ("llabs", _I64),
                   (_F32,): ("fabsf", _F32), (_F64,): ("fabs", _F64)})
_define("isnan", 1, _float_table("__naiad_isnan", 1, _I32, _I32), core.int1)
_define("isinf", 1, _float_table("__naiad_isinf", 1, _I32, _I32), core.int1)
_define("isfinited", 1, {(_F64,): ("__naiad_isfinite", _I32)})
_define("finitef", 1, {(_F32,): ("__naiad_isfinitef", _I32)}, core.int1)
_define("signbit", 1, _float_table("__naiad_signbit", 1, _I32, _I32))
_define("ldexp", 2, {(_F32, _I32): ("ldexpf", _F32), (_F64, _I32): ("ldexp", _F64)})
_define("pown", 2, {(_F32, _I32): ("__naiad_pownf", _F32), (_F64, _I32): ("__naiad_pown", _F64)})
# Rounded to nearest even, as int64; saturating, NaN -> 0 (NVIDIA's cvt.rni; C's llrint leaves
# both unspecified).
_define("llrint", 1, _float_table("__naiad_llrint", 1, _I64, _I64))
# fp32 only, as in Triton.
_define("saturatef", 1, {(_F32,): ("__naiad_saturatef", _F32)})
_define("fast_dividef", 2, {(_F32, _F32): ("__naiad_fast_dividef", _F32)})
_define("fast_tanhf", 1, {(_F32,): ("__naiad_fast_tanhf", _F32)})
_define("ilogb", 1, _float_table("ilogb", 1, _I32, _I32))
_define("logb", 1, _float_table("logb", 1))
_define("clz", 1, {(_I32,): ("__naiad_clz", _I32), (_I64,): ("__naiad_clzll", _I32)})
_define("popc", 1, {(_I32,): ("__naiad_popc", _I32), (_I64,): ("__naiad_popcll", _I32)})
_define("brev", 1, {(_I32,): ("__naiad_brev", _I32), (_I64,): ("__naiad_brevll", _I64)})
_define("ffs", 1, {(_I32,): ("__naiad_ffs", _I32), (_I64,): ("__naiad_ffsll", _I32)})
_define("mulhi", 2, {(_I32, _I32): ("__naiad_mulhi", _I32), (_U32, _U32): ("__naiad_umulhi", _U32),
                     (_I64, _I64): ("__naiad_mul64hi", _I64), (_U64, _U64): ("__naiad_umul64hi", _U64)})
_define("float_as_int", 1, {(_F32,): ("__naiad_float_as_int", _I32)})
_define("int_as_float", 1, {(_I32,): ("__naiad_int_as_float", _F32)})
_define("double_as_longlong", 1, {(_F64,): ("__naiad_double_as_longlong", _I64)})
_define("longlong_as_double", 1, {(_I64,): ("__naiad_longlong_as_double", _F64)})

del _name, _rounding
