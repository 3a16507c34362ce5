"""The cuda backend against torch, op by op, on CUDA tensors (GPU only; skipped without one).

Every supported op of the shared GPU lowering (`naiad.codegen.gpu`) for every dtype it takes:
element-wise arithmetic, comparisons, selects, casts (fp8 included), math through libdevice,
masks and edge sizes, 2-D tiles with broadcasting, shapes through shared memory, reductions,
scans, atomics under contention, control flow, the FMA dot, program ids, scalar arguments and
64-bit addressing.  Integers must match exactly; floats within their precision.

`COMPILE_CASES` lists a specialization of every kernel here (and of each dtype family): the CI
test `test_compile.py::test_ops_kernels_compile` compiles them all to PTX without a GPU.
"""

import dataclasses
import math

import pytest

import naiad
import naiad.language as tl
from naiad.language.extra import libdevice

try:
    import torch
except ImportError:          # the compile-only tests import this module's kernels without torch
    torch = None

pytestmark = [pytest.mark.shipped_backends, pytest.mark.usefixtures("gpu")]


# -- what the compile test compiles ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Case:
    """One specialization of a kernel of this module, for `test_compile.py`."""

    id: str
    fn: object
    signature: dict
    constexprs: dict
    num_warps: int = 4
    #: The kernel calls libdevice (exp, log, sin...): skipped where no libdevice is installed.
    libdevice: bool = False
    #: A known bug of its code (the reason): test_compile.py expects it to fail, strictly.
    xfail: str | None = None


COMPILE_CASES: list[Case] = []


def compile_case(id, fn, signature, constexprs=None, num_warps=4, libdevice=False, xfail=None):
    COMPILE_CASES.append(Case(id, fn, dict(signature), dict(constexprs or {}), num_warps, libdevice,
                              xfail))


# -- dtypes and data -------------------------------------------------------------------------------
#: torch dtype name -> Triton type string.
TRITON = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
          "int32": "i32", "int8": "i8", "int64": "i64", "uint8": "u8", "int16": "i16",
          "bool": "i1", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}
FLOATS = ["float32", "float16", "bfloat16"]
INTS = ["int32", "int8", "int64", "uint8"]
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ["bool"]


def dt(name):
    return getattr(torch, name)


def ptr(name):
    return "*" + TRITON[name]


def is_float(name):
    return name.startswith(("float", "bfloat"))


def rand(name, shape, low=-100, high=100, seed=0):
    """Random CUDA data of dtype ``name``: floats uniform in [low, high), integers in
    [low, high] clipped to the type, booleans half true."""
    g = torch.Generator().manual_seed(seed)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if name == "bool":
        return (torch.rand(shape, generator=g) < 0.5).cuda()
    if is_float(name):
        data = torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low
        return data.to(torch.float32).to(dt(name)).cuda()
    info = torch.iinfo(dt(name))
    lo, hi = max(low, info.min), min(high, info.max)
    return torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64).to(dt(name)).cuda()


def assert_same(out, ref, rtol=None, atol=None, what=""):
    """Integers and booleans exactly; floats within ``rtol``/``atol`` (torch's defaults for
    the dtype when not given)."""
    assert out.dtype == ref.dtype, f"{what}: dtype {out.dtype} != {ref.dtype}"
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    if out.dtype.is_floating_point:
        if rtol is None:
            torch.testing.assert_close(out, ref, equal_nan=True, msg=lambda m: f"{what}: {m}")
        else:
            torch.testing.assert_close(out, ref, rtol=rtol, atol=atol, equal_nan=True,
                                       msg=lambda m: f"{what}: {m}")
        return
    if not torch.equal(out, ref):
        bad = (out != ref).nonzero()
        first = tuple(bad[0].tolist())
        raise AssertionError(f"{what}: {len(bad)} of {out.numel()} elements differ; first at "
                             f"{first}: got {out[first].item()}, expected {ref[first].item()}")


# == element-wise ==================================================================================
@naiad.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    if OP == "add":
        r = x + y
    elif OP == "sub":
        r = x - y
    elif OP == "mul":
        r = x * y
    elif OP == "truediv":
        r = x / y
    elif OP == "floordiv":
        r = x // y
    elif OP == "mod":
        r = x % y
    elif OP == "and":
        r = x & y
    elif OP == "or":
        r = x | y
    elif OP == "xor":
        r = x ^ y
    elif OP == "shl":
        r = x << y
    elif OP == "shr":
        r = x >> y
    elif OP == "minimum":
        r = tl.minimum(x, y)
    else:
        r = tl.maximum(x, y)
    tl.store(out_ptr + offs, r, mask=m)


def _binary_ops(name):
    if name == "bool":
        return ["and", "or", "xor"]
    ops = ["add", "sub", "mul", "minimum", "maximum"]
    if is_float(name):
        return ops + ["truediv", "mod"]
    return ops + ["floordiv", "mod", "and", "or", "xor", "shl", "shr"]


BINARY = [(name, op) for name in ALL for op in _binary_ops(name)]


def _binary_inputs(name, op, n):
    x = rand(name, n, seed=1)
    if op in ("shl", "shr"):
        bits = torch.iinfo(dt(name)).bits
        return x, rand(name, n, 0, bits - 1, seed=2)
    if op in ("floordiv", "mod", "truediv"):
        y = rand(name, n, 1, 20, seed=2)
        if name != "uint8":             # negative divisors too
            sign = rand("bool", n, seed=3)
            y = torch.where(sign, y, -y) if name != "int8" else torch.where(sign, y, (-y.int()).to(y.dtype))
        return x, y
    return x, rand(name, n, seed=2)


def _binary_reference(name, op, x, y):
    if op == "floordiv":
        return torch.div(x, y, rounding_mode="trunc")        # C division, as Triton's //
    if op == "mod":
        return torch.fmod(x, y)                              # C remainder, as Triton's %
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "truediv": torch.div,
            "and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor,
            "shl": torch.bitwise_left_shift, "shr": torch.bitwise_right_shift,
            "minimum": torch.minimum, "maximum": torch.maximum}[op](x, y)


@pytest.mark.parametrize("name,op", BINARY, ids=[f"{n}-{o}" for n, o in BINARY])
def test_binary(name, op):
    n = 1000
    x, y = _binary_inputs(name, op, n)
    out = torch.empty_like(x)
    binary_kernel[(naiad.cdiv(n, 256),)](x, y, out, n, OP=op, BLOCK=256)
    ref = _binary_reference(name, op, x, y)
    tol = {"mod": (1e-4, 1e-4)}.get(op, (None, None)) if name == "float32" else (None, None)
    assert_same(out, ref, *tol, what=f"{name} {op}")


for _name in ALL:
    compile_case(f"binary-{_name}", binary_kernel, {"x_ptr": ptr(_name), "y_ptr": ptr(_name),
                 "out_ptr": ptr(_name), "n": "i32"}, {"OP": _binary_ops(_name)[-1], "BLOCK": 256})
compile_case("binary-int32-shr", binary_kernel, {"x_ptr": "*i32", "y_ptr": "*i32",
             "out_ptr": "*i32", "n": "i32"}, {"OP": "shr", "BLOCK": 256})
compile_case("binary-uint8-floordiv", binary_kernel, {"x_ptr": "*u8", "y_ptr": "*u8",
             "out_ptr": "*u8", "n": "i32"}, {"OP": "floordiv", "BLOCK": 256})


@naiad.jit
def compare_kernel(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    if OP == "lt":
        r = x < y
    elif OP == "le":
        r = x <= y
    elif OP == "gt":
        r = x > y
    elif OP == "ge":
        r = x >= y
    elif OP == "eq":
        r = x == y
    else:
        r = x != y
    tl.store(out_ptr + offs, r, mask=m)


COMPARE = [(name, op) for name in NUMERIC for op in ("lt", "le", "gt", "ge", "eq", "ne")]


@pytest.mark.parametrize("name,op", COMPARE, ids=[f"{n}-{o}" for n, o in COMPARE])
def test_compare(name, op):
    n = 777
    x = rand(name, n, seed=1)
    y = torch.where(rand("bool", n, seed=4), x, rand(name, n, seed=2))     # equal half the time
    out = torch.empty(n, dtype=torch.bool, device="cuda")
    compare_kernel[(naiad.cdiv(n, 128),)](x, y, out, n, OP=op, BLOCK=128)
    ref = {"lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge, "eq": torch.eq,
           "ne": torch.ne}[op](x, y)
    assert_same(out, ref, what=f"{name} {op}")


for _name in NUMERIC:
    compile_case(f"compare-{_name}", compare_kernel, {"x_ptr": ptr(_name), "y_ptr": ptr(_name),
                 "out_ptr": "*i1", "n": "i32"}, {"OP": "lt", "BLOCK": 128})


@naiad.jit
def where_kernel(c_ptr, x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    c = tl.load(c_ptr + offs, mask=m)
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.where(c, x, y), mask=m)


@pytest.mark.parametrize("name", ALL)
def test_where(name):
    n = 1000
    c, x, y = rand("bool", n, seed=3), rand(name, n, seed=1), rand(name, n, seed=2)
    out = torch.empty_like(x)
    where_kernel[(naiad.cdiv(n, 512),)](c, x, y, out, n, BLOCK=512)
    assert_same(out, torch.where(c, x, y), what=name)


for _name in ("float32", "bfloat16", "int8", "bool"):
    compile_case(f"where-{_name}", where_kernel, {"c_ptr": "*i1", "x_ptr": ptr(_name),
                 "y_ptr": ptr(_name), "out_ptr": ptr(_name), "n": "i32"}, {"BLOCK": 512})


@naiad.jit
def unary_kernel(x_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1)
    if OP == "neg":
        r = -x
    elif OP == "invert":
        r = ~x
    elif OP == "abs":
        r = tl.abs(x)
    elif OP == "exp":
        r = tl.exp(x)
    elif OP == "log":
        r = tl.log(x)
    elif OP == "sin":
        r = tl.sin(x)
    elif OP == "cos":
        r = tl.cos(x)
    elif OP == "sqrt":
        r = tl.sqrt(x)
    elif OP == "rsqrt":
        r = tl.rsqrt(x)
    elif OP == "exp2":
        r = tl.exp2(x)
    elif OP == "log2":
        r = tl.log2(x)
    elif OP == "floor":
        r = tl.floor(x)
    elif OP == "ceil":
        r = tl.ceil(x)
    elif OP == "erf":
        r = tl.math.erf(x)
    elif OP == "tanh":
        r = libdevice.tanh(x)
    elif OP == "sqrt_rn":
        r = tl.math.sqrt_rn(x)
    elif OP == "div_rn":
        r = tl.math.div_rn(x, x + 3.0)
    elif OP == "fma":
        r = tl.math.fma(x, x, x)
    else:
        r = libdevice.expm1(x)
    tl.store(out_ptr + offs, r, mask=m)


#: op -> (domain low, high, reference, needs libdevice)
MATH = {
    "exp": (-10, 10, lambda x: torch.exp(x), True),
    "log": (0.01, 100, lambda x: torch.log(x), True),
    "sin": (-10, 10, lambda x: torch.sin(x), True),
    "cos": (-10, 10, lambda x: torch.cos(x), True),
    "sqrt": (0, 100, lambda x: torch.sqrt(x), False),
    "rsqrt": (0.01, 100, lambda x: torch.rsqrt(x), False),
    "exp2": (-10, 10, lambda x: torch.exp2(x), True),
    "log2": (0.01, 100, lambda x: torch.log2(x), True),
    "abs": (-100, 100, lambda x: torch.abs(x), False),
    "floor": (-100, 100, lambda x: torch.floor(x), False),
    "ceil": (-100, 100, lambda x: torch.ceil(x), False),
    "erf": (-3, 3, lambda x: torch.erf(x), True),
    "tanh": (-5, 5, lambda x: torch.tanh(x), True),
    "expm1": (-3, 3, lambda x: torch.expm1(x), True),
    "sqrt_rn": (0, 100, lambda x: torch.sqrt(x), False),
    "div_rn": (0, 100, lambda x: x / (x.float() + 3.0).double(), False),
    "fma": (-10, 10, lambda x: torch.addcmul(x, x, x), False),
}
#: fp32 functions Triton computes with PTX's approximate instructions (ex2.approx, sqrt.approx,
#: rsqrt.approx), and those that must be correctly rounded.
APPROXIMATE = {"exp", "exp2", "sqrt", "rsqrt"}
EXACT = {"abs", "floor", "ceil", "sqrt_rn", "div_rn", "fma"}
MATH_CASES = [(name, op) for op in MATH for name in ("float32", "float64")
              if name == "float32" or op in ("exp", "log", "sin", "sqrt", "floor", "tanh")]


@pytest.mark.parametrize("name,op", MATH_CASES, ids=[f"{n}-{o}" for n, o in MATH_CASES])
def test_math(name, op):
    low, high, reference, _ = MATH[op]
    n = 1000
    x = rand(name, n, low, high, seed=5)
    out = torch.empty_like(x)
    unary_kernel[(naiad.cdiv(n, 256),)](x, out, n, OP=op, BLOCK=256)
    ref = reference(x.double()).to(x.dtype)
    if name == "float64":
        tol = (1e-13, 1e-13)
    elif op in APPROXIMATE:
        tol = (1e-5, 1e-6)
    elif op in EXACT:
        tol = (0, 0)
    else:
        tol = (2e-6, 1e-6)
    assert_same(out, ref, *tol, what=f"{name} {op}")


for _op, (_lo, _hi, _ref, _lib) in MATH.items():
    compile_case(f"math-float32-{_op}", unary_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32",
                 "n": "i32"}, {"OP": _op, "BLOCK": 256}, libdevice=_lib)
compile_case("math-float64-exp", unary_kernel, {"x_ptr": "*fp64", "out_ptr": "*fp64", "n": "i32"},
             {"OP": "exp", "BLOCK": 256}, libdevice=True)

UNARY = [(name, op) for name in ALL for op in ("neg", "invert", "abs")
         if not (op == "invert" and is_float(name)) and not (op == "neg" and name in ("bool", "uint8"))
         and not (op == "abs" and name == "bool")]


@pytest.mark.parametrize("name,op", UNARY, ids=[f"{n}-{o}" for n, o in UNARY])
def test_unary(name, op):
    n = 500
    x = rand(name, n, seed=6)
    out = torch.empty_like(x)
    unary_kernel[(naiad.cdiv(n, 128),)](x, out, n, OP=op, BLOCK=128)
    ref = {"neg": torch.neg, "invert": torch.bitwise_not, "abs": torch.abs}[op](x)
    assert_same(out, ref, what=f"{name} {op}")


for _name, _op in (("float16", "neg"), ("bfloat16", "abs"), ("int8", "invert"), ("bool", "invert"),
                   ("int64", "abs")):
    compile_case(f"unary-{_name}-{_op}", unary_kernel, {"x_ptr": ptr(_name), "out_ptr": ptr(_name),
                 "n": "i32"}, {"OP": _op, "BLOCK": 128})


# == casts =========================================================================================
@naiad.jit
def cast_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=m)


CASTS = [(src, dst) for src in ALL for dst in ALL if src != dst]


def _cast_input(src, dst, n):
    signed = src not in ("uint8", "bool") and dst not in ("uint8", "bool")
    low = -100 if signed else 0
    high = 100 if dst in ("int8", "uint8") or src in ("int8", "uint8") else 1000
    if src == "uint8":
        low, high = 0, 255
    x = rand(src, n, low, high, seed=7)
    if is_float(src):      # exact zeros too (-> False), and values that round both ways
        x = torch.where(rand("bool", n, seed=8), x, torch.zeros_like(x))
    return x


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{s}-to-{d}" for s, d in CASTS])
def test_cast(src, dst):
    n = 1000
    x = _cast_input(src, dst, n)
    out = torch.empty(n, dtype=dt(dst), device="cuda")
    cast_kernel[(naiad.cdiv(n, 256),)](x, out, n, BLOCK=256)
    assert_same(out, x.to(dt(dst)), what=f"{src} -> {dst}")


FP8 = ["float8_e4m3fn", "float8_e5m2"]
FP8_CASTS = [(src, f8) for f8 in FP8 for src in FLOATS] + [(f8, dst) for f8 in FP8 for dst in FLOATS]


@pytest.mark.parametrize("src,dst", FP8_CASTS, ids=[f"{s}-to-{d}" for s, d in FP8_CASTS])
def test_cast_fp8(src, dst):
    if not all(hasattr(torch, name) for name in FP8):
        pytest.skip("this torch has no float8 dtypes")
    n = 1000
    if src in FP8:      # every fp8 value but NaNs, through float32
        bits = torch.arange(256, dtype=torch.int32).to(torch.uint8)
        x = bits.view(dt(src)).cuda()
        x = x[~torch.isnan(x.float()) & ~torch.isinf(x.float())]
    else:               # inside the fp8 range; small values (subnormals) too
        limit = 400 if dst == "float8_e4m3fn" else 50000
        x = rand(src, n, -limit, limit, seed=9)
        x = torch.where(rand("bool", n, seed=10), x, x / 1024)
    out = torch.empty(x.shape, dtype=dt(dst), device="cuda")
    cast_kernel[(naiad.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    ref = x.to(dt(dst))
    assert_same(out.float(), ref.float(), 0, 0, what=f"{src} -> {dst}")


for _src, _dst in (("float32", "int8"), ("float16", "bfloat16"), ("bfloat16", "float32"),
                   ("int64", "float16"), ("uint8", "float32"), ("int8", "uint8"),
                   ("int32", "int64"), ("float32", "bool"), ("bool", "float32"),
                   ("float32", "float8_e4m3fn"), ("float8_e5m2", "float16"),
                   ("bfloat16", "float8_e5m2"), ("float8_e4m3fn", "float32")):
    compile_case(f"cast-{_src}-to-{_dst}", cast_kernel, {"x_ptr": ptr(_src), "out_ptr": ptr(_dst),
                 "n": "i32"}, {"BLOCK": 256})


# == masks, edge sizes, 2-D tiles, shapes ==========================================================
@naiad.jit
def affine_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x * 2.0 + 1.0, mask=m)


BLOCKS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


@pytest.mark.parametrize("n", [1, 3, 1000, 4096 * 3 + 17])
@pytest.mark.parametrize("block", BLOCKS)
def test_edge_sizes(block, n):
    x = rand("float32", n, seed=11)
    out = torch.full((n + 64,), -5.0, device="cuda")      # what is past n must stay untouched
    affine_kernel[(naiad.cdiv(n, block),)](x, out, n, BLOCK=block)
    assert_same(out[:n], x * 2 + 1, what=f"n={n} BLOCK={block}")
    assert (out[n:] == -5.0).all(), "the kernel wrote past n"


@pytest.mark.parametrize("num_warps", [1, 2, 8, 16, 32])
def test_edge_num_warps(num_warps):
    n = 5000
    x = rand("float32", n, seed=11)
    out = torch.zeros(n, device="cuda")
    affine_kernel[(naiad.cdiv(n, 128),)](x, out, n, BLOCK=128, num_warps=num_warps)
    assert_same(out, x * 2 + 1, what=f"num_warps={num_warps}")


def test_many_programs():
    n = 1 << 22                     # 131072 programs of 32: more than 65535 along x
    x = rand("float32", n, seed=12)
    out = torch.empty_like(x)
    affine_kernel[(naiad.cdiv(n, 32),)](x, out, n, BLOCK=32)
    assert_same(out, x * 2 + 1)


def test_unaligned_views():
    """Views that start 1 element in (not 16-byte aligned) get scalar accesses and stay right."""
    n = 999
    base = rand("float32", n + 1, seed=13)
    out = torch.zeros(n + 1, device="cuda")
    affine_kernel[(naiad.cdiv(n, 256),)](base[1:], out[1:], n, BLOCK=256)
    assert_same(out[1:], base[1:] * 2 + 1)
    assert out[0].item() == 0


for _block in (1, 4, 4096):
    compile_case(f"affine-BLOCK{_block}", affine_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32",
                 "n": "i32"}, {"BLOCK": _block})
compile_case("affine-n1-warps1", affine_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
             {"n": 1, "BLOCK": 64}, num_warps=1)


@naiad.jit
def other_kernel(x_ptr, out_ptr, n, OTHER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=OTHER)
    tl.store(out_ptr + offs, x)


@pytest.mark.parametrize("name,other", [("float32", -7.5), ("int32", -7), ("float16", 3.0),
                                        ("int8", 5), ("bool", True)])
def test_masked_load_other(name, other):
    n, block = 37, 64
    x = rand(name, n, seed=14)
    out = torch.empty(block, dtype=dt(name), device="cuda")
    other_kernel[(1,)](x, out, n, OTHER=other, BLOCK=block)
    ref = torch.cat([x, torch.full((block - n,), other, dtype=dt(name), device="cuda")])
    assert_same(out, ref, what=name)


compile_case("other-float32", other_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
             {"OTHER": -7.5, "BLOCK": 64})


@naiad.jit
def broadcast_2d_kernel(x_ptr, row_ptr, col_ptr, out_ptr, M, N, stride_xm, stride_om,
                        BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :], mask=mask, other=0.0)
    row = tl.load(row_ptr + rn, mask=rn < N, other=0.0)
    col = tl.load(col_ptr + rm, mask=rm < M, other=0.0)
    out = x * row[None, :] + col[:, None]
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :], out, mask=mask)


TILES = [(16, 64), (64, 16), (1, 128), (128, 1), (32, 32), (8, 256)]


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("bm,bn", TILES, ids=[f"{m}x{n}" for m, n in TILES])
def test_broadcast_2d(bm, bn, num_warps):
    M, N = 100, 70
    x = rand("float32", (M, 80), seed=15)[:, :N]        # a row stride that is not N
    row, col = rand("float32", N, seed=16), rand("float32", M, seed=17)
    out = torch.zeros(M, N, device="cuda")
    grid = (naiad.cdiv(M, bm), naiad.cdiv(N, bn))
    broadcast_2d_kernel[grid](x, row, col, out, M, N, x.stride(0), out.stride(0), BM=bm, BN=bn,
                              num_warps=num_warps)
    assert_same(out, x * row[None, :] + col[:, None])


for _bm, _bn in TILES[:3]:
    compile_case(f"broadcast2d-{_bm}x{_bn}", broadcast_2d_kernel,
                 {"x_ptr": "*fp32", "row_ptr": "*fp32", "col_ptr": "*fp32", "out_ptr": "*fp32",
                  "M": "i32", "N": "i32", "stride_xm": "i32", "stride_om": "i32"},
                 {"BM": _bm, "BN": _bn})


@naiad.jit
def outer_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M))
    b = tl.load(b_ptr + tl.arange(0, N))
    prod = tl.expand_dims(a, 1) * tl.expand_dims(b, 0)              # [M, N]
    diff = tl.broadcast_to(tl.expand_dims(a, 1), (M, N)) - tl.expand_dims(b, 0)
    offs = tl.expand_dims(tl.arange(0, M), 1) * N + tl.expand_dims(tl.arange(0, N), 0)
    tl.store(out_ptr + offs, prod + diff)


@pytest.mark.parametrize("m,n", [(32, 32), (4, 128), (128, 4), (1, 64)])
def test_expand_dims(m, n):
    a, b = rand("float32", m, seed=18), rand("float32", n, seed=19)
    out = torch.empty(m, n, device="cuda")
    outer_kernel[(1,)](a, b, out, M=m, N=n)
    assert_same(out, a[:, None] * b[None, :] + (a[:, None] - b[None, :]))


compile_case("outer", outer_kernel, {"a_ptr": "*fp32", "b_ptr": "*fp32", "out_ptr": "*fp32"},
             {"M": 32, "N": 32})


@naiad.jit
def shape_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, OP: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :])
    if OP == "trans":
        t = tl.trans(x)                                          # [N, M]
        tl.store(out_ptr + rn[:, None] * M + rm[None, :], t)
    elif OP == "permute":
        t = tl.permute(x, (1, 0))
        tl.store(out_ptr + rn[:, None] * M + rm[None, :], t)
    elif OP == "reshape":
        r = tl.reshape(x, (N, M))                                # the same row-major order
        tl.store(out_ptr + rn[:, None] * M + rm[None, :], r + 1)
    elif OP == "flatten":
        r = tl.reshape(x, (M * N,))
        tl.store(out_ptr + tl.arange(0, M * N), r * 2)
    else:                        # a transpose used in arithmetic with a tensor of its layout
        t = tl.trans(x)
        y = tl.load(x_ptr + rn[:, None] * M + rm[None, :])       # x's memory read as [N, M]
        tl.store(out_ptr + rn[:, None] * M + rm[None, :], t + y)


SHAPES = [(16, 32), (64, 8), (32, 32), (1, 64), (128, 128)]
SHAPE_OPS = ["trans", "permute", "reshape", "flatten", "trans_add"]


SHAPE_CASES = ([("float32", shape, op) for shape in SHAPES for op in SHAPE_OPS]
               + [(name, (16, 32), op) for name in ("float16", "int8") for op in SHAPE_OPS])


@pytest.mark.parametrize("name,shape,op", SHAPE_CASES,
                         ids=[f"{n}-{s[0]}x{s[1]}-{o}" for n, s, o in SHAPE_CASES])
def test_shapes(name, shape, op):
    m, n = shape
    x = rand(name, (m, n), -50, 50, seed=20)
    out = torch.empty(m * n, dtype=x.dtype, device="cuda")
    shape_kernel[(1,)](x, out, M=m, N=n, OP=op)
    ref = {"trans": lambda: x.t(), "permute": lambda: x.t(), "reshape": lambda: x.reshape(n, m) + 1,
           "flatten": lambda: x.reshape(-1) * 2,
           "trans_add": lambda: x.t() + x.reshape(n, m)}[op]().reshape(-1)
    assert_same(out, ref, what=op)


for _op in SHAPE_OPS:
    compile_case(f"shape-{_op}", shape_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                 {"M": 16, "N": 32, "OP": _op})


@naiad.jit
def permute_3d_kernel(x_ptr, out_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    ra = tl.arange(0, A)[:, None, None]
    rb = tl.arange(0, B)[None, :, None]
    rc = tl.arange(0, C)[None, None, :]
    x = tl.load(x_ptr + ra * B * C + rb * C + rc)
    y = tl.permute(x, (2, 0, 1))                                  # [C, A, B]
    oc = tl.arange(0, C)[:, None, None]
    oa = tl.arange(0, A)[None, :, None]
    ob = tl.arange(0, B)[None, None, :]
    tl.store(out_ptr + oc * A * B + oa * B + ob, y + tl.sum(x, axis=2)[None, :, :])


def test_permute_3d():
    a, b, c = 2, 8, 16
    x = rand("float32", (a, b, c), seed=21)
    out = torch.empty(c, a, b, device="cuda")
    permute_3d_kernel[(1,)](x, out, A=a, B=b, C=c)
    assert_same(out, x.permute(2, 0, 1) + x.sum(2)[None], 1e-5, 1e-4)


compile_case("permute3d", permute_3d_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
             {"A": 2, "B": 8, "C": 16})


# == reductions and scans ==========================================================================
@naiad.jit
def _reduce_op(x, AXIS: tl.constexpr, OP: tl.constexpr):
    if OP == "sum":
        r = tl.sum(x, axis=AXIS)
    elif OP == "max":
        r = tl.max(x, axis=AXIS)
    elif OP == "min":
        r = tl.min(x, axis=AXIS)
    elif OP == "argmax":
        r = tl.argmax(x, axis=AXIS)
    else:
        r = tl.argmin(x, axis=AXIS)
    return r


@naiad.jit
def reduce_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
                  OP: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :])
    if AXIS == 0:
        tl.store(out_ptr + rn, _reduce_op(x, 0, OP))
    elif AXIS == 1:
        tl.store(out_ptr + rm, _reduce_op(x, 1, OP))
    else:                                            # everything, to a scalar
        tl.store(out_ptr, _reduce_op(tl.reshape(x, (M * N,)), 0, OP))


REDUCE_OPS = ["sum", "max", "min", "argmax", "argmin"]
REDUCE = ([("float32", op, axis, (32, 64), 4) for op in REDUCE_OPS for axis in (0, 1, -1)]
          + [("int32", op, axis, (32, 64), 4) for op in REDUCE_OPS for axis in (0, 1, -1)]
          + [("float32", op, axis, (32, 64), w) for op in ("sum", "max", "argmax")
             for axis in (0, 1, -1) for w in (1, 8)]
          + [("float32", "sum", axis, shape, w) for shape in ((1, 256), (256, 2), (128, 128), (2, 8))
             for axis in (0, 1) for w in (1, 4)]
          + [("int8", "sum", axis, (16, 32), 4) for axis in (0, 1, -1)]
          + [("float16", op, 1, (16, 64), 4) for op in ("max", "argmin")])


def _reduce_reference(x, op, axis):
    if axis == -1:
        x, axis = x.reshape(-1), 0
    if op == "sum":
        if x.dtype == torch.int8:                   # Triton sums small ints as int32
            return x.sum(axis, dtype=torch.int32)
        return x.double().sum(axis).to(x.dtype) if x.is_floating_point() else x.sum(axis, dtype=x.dtype)
    if op in ("max", "min"):
        return getattr(torch, f"a{op}")(x, axis)
    return getattr(torch, op)(x, axis).to(torch.int32)


@pytest.mark.parametrize("name,op,axis,shape,num_warps", REDUCE,
                         ids=[f"{n}-{o}-axis{a}-{s[0]}x{s[1]}-w{w}" for n, o, a, s, w in REDUCE])
def test_reduce(name, op, axis, shape, num_warps):
    m, n = shape
    if name == "int32":          # distinct values: the arg-reductions have one answer
        x = (torch.randperm(m * n, generator=torch.Generator().manual_seed(22)) - m * n // 2)
        x = x.to(torch.int32).reshape(m, n).cuda()
    else:
        x = rand(name, shape, -10, 10, seed=22)
    ref = _reduce_reference(x, op, axis)
    out = torch.empty(ref.shape, dtype=ref.dtype, device="cuda")
    reduce_kernel[(1,)](x, out, M=m, N=n, AXIS=axis, OP=op, num_warps=num_warps)
    tol = (1e-5, 1e-4) if op == "sum" and name == "float32" else (None, None)
    assert_same(out, ref, *tol, what=f"{op} axis {axis}")


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_arg_reduction_ties_take_the_first_index(op, axis):
    import numpy as np

    x = rand("int32", (16, 32), 0, 2, seed=23)
    out_shape = {0: (32,), 1: (16,), -1: ()}[axis]
    out = torch.empty(out_shape, dtype=torch.int32, device="cuda")
    reduce_kernel[(1,)](x, out, M=16, N=32, AXIS=axis, OP=op)
    data = x.cpu().numpy()
    ref = getattr(np, op)(data.reshape(-1) if axis == -1 else data, axis=0 if axis == -1 else axis)
    np.testing.assert_array_equal(out.cpu().numpy(), ref.astype(np.int32))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_arg_reductions_skip_nan(op, axis, num_warps):
    """NaN is a missing value (as for tl.max): numpy's nanargmax/nanargmin, whatever the order
    the warps combine in; ties (small integers) still take the first index."""
    import numpy as np

    data = np.random.default_rng(25).integers(0, 4, (16, 32)).astype(np.float32)
    data[np.random.default_rng(26).random((16, 32)) < 0.3] = np.nan
    data[:, 0] = np.nan                      # a NaN first in every row and column ...
    data[0, :] = np.nan
    data[1, 0] = data[0, 1] = 2.0            # ... but no row or column of NaN alone
    out_shape = {0: (32,), 1: (16,), -1: ()}[axis]
    out = torch.empty(out_shape, dtype=torch.int32, device="cuda")
    reduce_kernel[(1,)](torch.from_numpy(data).cuda(), out, M=16, N=32, AXIS=axis, OP=op,
                        num_warps=num_warps)
    ref = getattr(np, f"nan{op}")(data.reshape(-1) if axis == -1 else data, axis=0 if axis == -1 else axis)
    np.testing.assert_array_equal(out.cpu().numpy(), ref.astype(np.int32))


for _name, _op, _axis, _warps in (("float32", "sum", 1, 4), ("float32", "max", 0, 8),
                                  ("int32", "argmax", 1, 4), ("float32", "argmin", -1, 1),
                                  ("int8", "sum", 0, 4), ("float16", "max", 1, 4)):
    _out = {"argmax": "*i32", "argmin": "*i32"}.get(_op, "*i32" if _name == "int8" else ptr(_name))
    compile_case(f"reduce-{_name}-{_op}-axis{_axis}-w{_warps}", reduce_kernel,
                 {"x_ptr": ptr(_name), "out_ptr": _out},
                 {"M": 32, "N": 64, "AXIS": _axis, "OP": _op}, num_warps=_warps)


@naiad.jit
def reduce_1d_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    s = tl.sum(x, axis=0)
    mx = tl.max(tl.where(offs < n, x, float("-inf")), axis=0)
    tl.store(out_ptr, s)
    tl.store(out_ptr + 1, mx)
    tl.store(out_ptr + 2 + offs, x - mx / s, mask=offs < n)     # scalars broadcast back


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("n,block", [(1, 1), (1, 32), (31, 32), (1000, 1024), (4096, 4096)])
def test_reduce_1d_to_scalar(n, block, num_warps):
    x = rand("float32", n, 0.5, 1.5, seed=24)
    out = torch.zeros(n + 2, device="cuda")
    reduce_1d_kernel[(1,)](x, out, n, BLOCK=block, num_warps=num_warps)
    s, mx = x.double().sum().float(), x.max()
    assert_same(out[0], s, 1e-5, 1e-4, what="sum")
    assert_same(out[1], mx, what="max")
    assert_same(out[2:], x - out[1] / out[0], what="broadcast back")


compile_case("reduce1d", reduce_1d_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
             {"BLOCK": 1024})


@naiad.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=float("-inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride + offs, out, mask=mask)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
@pytest.mark.parametrize("n_cols,block", [(781, 1024), (128, 128), (3, 4)])
def test_softmax(n_cols, block, num_warps):
    x = rand("float32", (37, n_cols), -5, 5, seed=25)
    out = torch.empty_like(x)
    softmax_kernel[(37,)](x, out, n_cols, x.stride(0), BLOCK=block, num_warps=num_warps)
    assert_same(out, torch.softmax(x, dim=1), 1e-5, 1e-6)


compile_case("softmax", softmax_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32",
             "stride": "i32"}, {"BLOCK": 1024}, libdevice=True)


@naiad.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@naiad.jit
def scan_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
                OP: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    if OP == "cumsum":
        r = tl.cumsum(x, axis=AXIS, reverse=REVERSE)
    elif OP == "cumprod":
        r = tl.cumprod(x, axis=AXIS, reverse=REVERSE)
    else:
        r = tl.associative_scan(x, AXIS, _max_combine, reverse=REVERSE)
    tl.store(out_ptr + offs, r)


#: (dtype, op, axis, reverse, shape, num_warps): shapes whose scanned dimension covers the
#: layout's tile (scanned in registers and shuffles) and shapes it does not (through shared
#: memory), tile repetitions, layouts wider than the tensor, reverse scans.
SCANS = ([(name, op, axis, False, (16, 32), 4) for name in ("float32", "int32")
          for op in ("cumsum", "cumprod") for axis in (0, 1)]
         + [("float32", "cumsum", axis, True, (16, 32), 4) for axis in (0, 1)]
         + [("int32", "cumprod", 1, True, (16, 32), 4)]
         + [("int32", "cumsum", 1, False, (1, 1024), 4), ("int32", "cumsum", 0, False, (256, 2), 4),
            ("int32", "cumsum", 1, False, (1, 4096), 4), ("int32", "cumsum", 1, False, (64, 256), 8),
            ("int32", "cumsum", 0, False, (4, 256), 4), ("int32", "cumsum", 0, False, (512, 4), 8),
            ("int32", "cumsum", 0, False, (2, 8), 4), ("int32", "cumsum", 1, False, (2, 8), 4),
            ("int32", "cumsum", 1, False, (32, 64), 1), ("float32", "cumsum", 0, False, (128, 16), 2)]
         + [("float32", "cummax", axis, rev, (16, 32), 4) for axis in (0, 1) for rev in (False, True)]
         + [("int32", "cummax", 1, False, (8, 512), 8)]
         + [("int32", "cumsum", axis, True, shape, warps)        # reversed, each step mirrored
            for axis, shape, warps in ((1, (1, 1024), 4), (1, (1, 4096), 4), (1, (64, 256), 8),
                                       (0, (512, 4), 8), (1, (2, 8), 4), (1, (32, 64), 1),
                                       (0, (128, 16), 2))]
         + [("float32", "cumprod", 1, True, (4, 1024), 4), ("int32", "cummax", 1, True, (8, 512), 8)])


def _scan_reference(x, op, axis, reverse):
    src = x.flip(axis) if reverse else x
    if op == "cummax":
        ref = torch.cummax(src, axis).values
    else:
        fn = torch.cumsum if op == "cumsum" else torch.cumprod
        ref = fn(src.double(), axis) if x.is_floating_point() else fn(src, axis, dtype=x.dtype)
    return (ref.flip(axis) if reverse else ref).to(x.dtype)


@pytest.mark.parametrize("name,op,axis,reverse,shape,num_warps", SCANS,
                         ids=[f"{n}-{o}-axis{a}{'-rev' if r else ''}-{s[0]}x{s[1]}-w{w}"
                              for n, o, a, r, s, w in SCANS])
def test_scan(name, op, axis, reverse, shape, num_warps):
    if op == "cumprod":
        x = rand(name, shape, 0.9, 1.1, seed=26) if name == "float32" else rand(name, shape, -1, 2, seed=26)
    else:
        x = rand(name, shape, -1, 1, seed=26) if name == "float32" else rand(name, shape, seed=26)
    out = torch.empty_like(x)
    scan_kernel[(1,)](x, out, M=shape[0], N=shape[1], AXIS=axis, OP=op, REVERSE=reverse,
                      num_warps=num_warps)
    assert_same(out, _scan_reference(x, op, axis, reverse), 1e-5, 1e-4,
                what=f"{op} axis {axis}{' reversed' if reverse else ''}")


for _name, _op, _axis, _rev in (("float32", "cumsum", 0, False), ("int32", "cumprod", 1, False),
                                ("float32", "cumsum", 1, True), ("float32", "cummax", 0, False)):
    compile_case(f"scan-{_name}-{_op}-axis{_axis}{'-rev' if _rev else ''}", scan_kernel,
                 {"x_ptr": ptr(_name), "out_ptr": ptr(_name)},
                 {"M": 16, "N": 32, "AXIS": _axis, "OP": _op, "REVERSE": _rev})


@naiad.jit
def atomic_add_kernel(values_ptr, acc_ptr, counter_ptr, olds_ptr, n, SLOTS: tl.constexpr,
                      BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(values_ptr + offs, mask=m)
    slot = offs % SLOTS
    tl.atomic_add(acc_ptr + slot, v, mask=m)
    one = tl.full((BLOCK,), 1, tl.int32)
    tl.store(olds_ptr + offs, tl.atomic_add(counter_ptr + slot, one, mask=m), mask=m)


@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("block", [16, 128, 1024])      # 16: fewer elements than threads
@pytest.mark.parametrize("name", ["float32", "int32", "float16"])
def test_atomic_add_collisions(name, block, num_warps):
    slots, n = 8, 64 * 128 - 13
    if name == "float32":       # halves: exact in any order of addition
        values = (rand("int32", n, -64, 64, seed=27) / 2).float()
    elif name == "float16":     # 0 or 1: every partial sum (< 2048) is exact in fp16
        values = rand("int32", n, 0, 1, seed=27).half()
    else:
        values = rand("int32", n, -1000, 1000, seed=27)
    acc = torch.zeros(slots, dtype=values.dtype, device="cuda")
    counter = torch.zeros(slots, dtype=torch.int32, device="cuda")
    olds = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    atomic_add_kernel[(naiad.cdiv(n, block),)](values, acc, counter, olds, n, SLOTS=slots,
                                               BLOCK=block, num_warps=num_warps)
    slot = torch.arange(n, device="cuda") % slots
    ref = torch.zeros(slots, dtype=torch.float64, device="cuda").index_add_(0, slot, values.double())
    assert_same(acc, ref.to(values.dtype), 0, 0, what="sums")
    assert_same(counter, torch.bincount(slot, minlength=slots).int(), what="counts")
    for s in range(slots):      # an atomic add of 1 hands out each count 0 .. k-1 once
        seen = olds[slot == s].sort().values
        assert_same(seen, torch.arange(seen.numel(), dtype=torch.int32, device="cuda"),
                    what=f"olds of slot {s}")


@naiad.jit
def atomic_minmax_kernel(values_ptr, mx_ptr, mn_ptr, n, SLOTS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(values_ptr + offs, mask=m)
    tl.atomic_max(mx_ptr + offs % SLOTS, v, mask=m)
    tl.atomic_min(mn_ptr + offs % SLOTS, v, mask=m)


@pytest.mark.parametrize("name", ["float32", "int32", "int64"])
def test_atomic_max_min(name):
    slots, n = 16, 5000
    values = rand(name, n, -10**6, 10**6, seed=28)
    start = rand(name, slots, -10, 10, seed=29)
    mx, mn = start.clone(), start.clone()
    atomic_minmax_kernel[(naiad.cdiv(n, 256),)](values, mx, mn, n, SLOTS=slots, BLOCK=256)
    slot = torch.arange(n, device="cuda") % slots
    ref_max = start.scatter_reduce(0, slot, values, "amax", include_self=True)
    ref_min = start.scatter_reduce(0, slot, values, "amin", include_self=True)
    assert_same(mx, ref_max, what="max")
    assert_same(mn, ref_min, what="min")


@naiad.jit
def atomic_xchg_kernel(values_ptr, target_ptr, olds_ptr, n, SLOTS: tl.constexpr,
                       BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(values_ptr + offs, mask=m)
    tl.store(olds_ptr + offs, tl.atomic_xchg(target_ptr + offs % SLOTS, v, mask=m), mask=m)


@pytest.mark.parametrize("name", ["int32", "float32", "int64"])
def test_atomic_xchg(name):
    slots, n = 4, 3000
    values = rand(name, n, -10**5, 10**5, seed=30)
    start = rand(name, slots, -10, 10, seed=31)
    target = start.clone()
    olds = torch.empty_like(values)
    atomic_xchg_kernel[(naiad.cdiv(n, 128),)](values, target, olds, n, SLOTS=slots, BLOCK=128)
    slot = torch.arange(n, device="cuda") % slots
    for s in range(slots):      # the values read plus the one left = the values written plus the start
        seen = torch.cat([olds[slot == s], target[s:s + 1]]).sort().values
        written = torch.cat([values[slot == s], start[s:s + 1]]).sort().values
        assert_same(seen, written, what=f"slot {s}")


@naiad.jit
def atomic_cas_first_kernel(slots_ptr, wins_ptr, SLOTS: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, SLOTS)
    mine = tl.full((SLOTS,), 1, tl.int32) + pid
    old = tl.atomic_cas(slots_ptr + offs, tl.zeros((SLOTS,), tl.int32), mine)
    tl.atomic_add(wins_ptr + offs, (old == 0).to(tl.int32))


@pytest.mark.parametrize("slots", [4, 256])
def test_atomic_cas_first_writer_wins(slots):
    programs = 500
    target = torch.zeros(slots, dtype=torch.int32, device="cuda")
    wins = torch.zeros(slots, dtype=torch.int32, device="cuda")
    atomic_cas_first_kernel[(programs,)](target, wins, SLOTS=slots)
    assert (wins == 1).all(), f"winners per slot: {wins.tolist()}"
    assert ((target >= 1) & (target <= programs)).all()


@naiad.jit
def ticket_kernel(tickets_ptr, order_ptr, last_ptr):
    pid = tl.program_id(0)
    ticket = tl.atomic_add(tickets_ptr, 1)              # a scalar atomic: once per program
    tl.store(order_ptr + pid, ticket)
    tl.atomic_max(last_ptr, ticket)


@pytest.mark.parametrize("num_warps", [1, 4])
def test_scalar_atomic_counter(num_warps):
    programs = 3000
    tickets = torch.zeros(1, dtype=torch.int32, device="cuda")
    last = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    order = torch.full((programs,), -1, dtype=torch.int32, device="cuda")
    ticket_kernel[(programs,)](tickets, order, last, num_warps=num_warps)
    assert tickets.item() == programs and last.item() == programs - 1
    assert_same(order.sort().values, torch.arange(programs, dtype=torch.int32, device="cuda"),
                what="each ticket handed out once")


@naiad.jit
def spin_lock_kernel(lock_ptr, count_ptr, tickets_ptr, order_ptr):
    pid = tl.program_id(0)
    ticket = tl.atomic_add(tickets_ptr, 1)             # a scalar atomic: one per program
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    count = tl.load(count_ptr)                          # the critical section
    tl.store(count_ptr, count + 1)
    tl.store(order_ptr + pid, count)
    tl.atomic_xchg(lock_ptr, 0)                         # release
    tl.store(order_ptr + tl.num_programs(0) + pid, ticket)


def test_atomic_cas_spin_lock_and_scalar_counter():
    programs = 256
    lock = torch.zeros(1, dtype=torch.int32, device="cuda")
    count = torch.zeros(1, dtype=torch.int32, device="cuda")
    tickets = torch.zeros(1, dtype=torch.int32, device="cuda")
    order = torch.full((2 * programs,), -1, dtype=torch.int32, device="cuda")
    spin_lock_kernel[(programs,)](lock, count, tickets, order)
    expected = torch.arange(programs, dtype=torch.int32, device="cuda")
    assert count.item() == programs and lock.item() == 0 and tickets.item() == programs
    assert_same(order[:programs].sort().values, expected, what="counts seen in the lock")
    assert_same(order[programs:].sort().values, expected, what="tickets")


compile_case("atomic-ticket", ticket_kernel, {"tickets_ptr": "*i32", "order_ptr": "*i32",
             "last_ptr": "*i32"}, {})
compile_case("atomic-add-float16", atomic_add_kernel, {"values_ptr": "*fp16", "acc_ptr": "*fp16",
             "counter_ptr": "*i32", "olds_ptr": "*i32", "n": "i32"}, {"SLOTS": 8, "BLOCK": 128})
compile_case("atomic-add-float32", atomic_add_kernel, {"values_ptr": "*fp32", "acc_ptr": "*fp32",
             "counter_ptr": "*i32", "olds_ptr": "*i32", "n": "i32"}, {"SLOTS": 8, "BLOCK": 16})
compile_case("atomic-minmax-float32", atomic_minmax_kernel, {"values_ptr": "*fp32", "mx_ptr": "*fp32",
             "mn_ptr": "*fp32", "n": "i32"}, {"SLOTS": 16, "BLOCK": 256})
compile_case("atomic-minmax-int64", atomic_minmax_kernel, {"values_ptr": "*i64", "mx_ptr": "*i64",
             "mn_ptr": "*i64", "n": "i32"}, {"SLOTS": 16, "BLOCK": 256})
compile_case("atomic-xchg-float32", atomic_xchg_kernel, {"values_ptr": "*fp32", "target_ptr": "*fp32",
             "olds_ptr": "*fp32", "n": "i32"}, {"SLOTS": 4, "BLOCK": 128})
compile_case("atomic-cas-first", atomic_cas_first_kernel, {"slots_ptr": "*i32", "wins_ptr": "*i32"},
             {"SLOTS": 4})
compile_case("atomic-cas-first-256", atomic_cas_first_kernel, {"slots_ptr": "*i32",
             "wins_ptr": "*i32"}, {"SLOTS": 256})
compile_case("atomic-spin-lock", spin_lock_kernel, {"lock_ptr": "*i32", "count_ptr": "*i32",
             "tickets_ptr": "*i32", "order_ptr": "*i32"}, {})


# == control flow ==================================================================================
@naiad.jit
def for_kernel(x_ptr, sum_ptr, max_ptr, red_ptr, K, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < N
    acc = tl.zeros((BLOCK,), tl.float32)
    mx = tl.full((BLOCK,), float("-inf"), tl.float32)
    weighted = tl.zeros((BLOCK,), tl.float32)
    for k in range(0, K):
        v = tl.load(x_ptr + k * N + offs, mask=m, other=0.0)
        acc += v
        mx = tl.maximum(mx, v)
        weighted = weighted * 0.5 + v + tl.sum(v, axis=0)    # a reduction inside the loop
    tl.store(sum_ptr + offs, acc, mask=m)
    tl.store(max_ptr + offs, mx, mask=m)
    tl.store(red_ptr + offs, weighted, mask=m)


@pytest.mark.parametrize("k", [0, 1, 7])
def test_for_loop(k):
    n, block = 100, 128
    x = rand("float32", (max(k, 1), n), -4, 4, seed=32)
    outs = [torch.full((n,), 9.0, device="cuda") for _ in range(3)]
    for_kernel[(1,)](x, *outs, k, n, BLOCK=block)
    data = x[:k]
    ref_sum = data.sum(0) if k else torch.zeros(n, device="cuda")
    ref_max = data.max(0).values if k else torch.full((n,), float("-inf"), device="cuda")
    weighted = torch.zeros(n, dtype=torch.float64, device="cuda")
    for i in range(k):
        v = x[i].double()
        weighted = weighted * 0.5 + v + v.sum()
    assert_same(outs[0], ref_sum, 1e-5, 1e-5, what="sum")
    assert_same(outs[1], ref_max, what="max")
    assert_same(outs[2], weighted.float(), 1e-5, 1e-4, what="with a reduction")


@naiad.jit
def for_step_kernel(x_ptr, out_ptr, start, stop, BLOCK: tl.constexpr, STEP: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    w = tl.zeros((BLOCK,), tl.float32)
    for k in range(start, stop, STEP):
        w = w * 0.5 + tl.load(x_ptr + k * BLOCK + offs)
    tl.store(out_ptr + offs, w)


@pytest.mark.parametrize("start,stop,step", [(0, 9, 2), (2, 10, 3), (5, 5, 1),
                                             (8, -1, -2),
                                             (9, 2, -1)])
def test_for_loop_steps(start, stop, step):
    block = 64
    x = rand("float32", (10, block), -1, 1, seed=40)
    out = torch.full((block,), 9.0, device="cuda")
    for_step_kernel[(1,)](x, out, start, stop, BLOCK=block, STEP=step)
    ref = torch.zeros(block, dtype=torch.float64, device="cuda")
    for k in range(start, stop, step):
        ref = ref * 0.5 + x[k].double()
    assert_same(out, ref.float(), 1e-6, 1e-6, what=f"range({start}, {stop}, {step})")


@naiad.jit
def while_kernel(x_ptr, out_ptr, steps_ptr, iters, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs)
    i = 0
    acc = v
    while i < iters:                      # a runtime bound
        acc = acc * 0.5 + 1.0
        i += 1
    halvings = 0
    while tl.max(tl.abs(v), axis=0) > 1.0:      # a condition from a reduction
        v = v / 2.0
        halvings += 1
    tl.store(out_ptr + offs, acc)
    tl.store(out_ptr + BLOCK + offs, v)
    tl.store(steps_ptr, halvings)


def test_while_loops():
    block, iters = 256, 5
    x = rand("float32", block, -1000, 1000, seed=33)
    out = torch.empty(2 * block, device="cuda")
    steps = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    while_kernel[(1,)](x, out, steps, iters, BLOCK=block)
    acc = x.double()
    for _ in range(iters):
        acc = acc * 0.5 + 1
    halvings, top = 0, x.abs().max().item()
    while top > 1.0:
        top, halvings = top / 2, halvings + 1
    assert steps.item() == halvings
    assert_same(out[:block], acc.float(), what="runtime bound")
    assert_same(out[block:], x / 2 ** halvings, what="reduction condition")


@naiad.jit
def if_kernel(x_ptr, out_ptr, mode, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if mode > 0:                          # a runtime scalar picks the tensor
        r = x * 2.0
    else:
        r = x - 1.0
    if pid % 2 == 0:                      # a per-program branch with a reduction inside
        r = r + tl.sum(x, axis=0)
    tl.store(out_ptr + offs, r)


@pytest.mark.parametrize("mode", [-3, 0, 5])
def test_if_with_tensor_results(mode):
    block, programs = 128, 6
    x = rand("float32", block * programs, -1, 1, seed=34)
    out = torch.empty_like(x)
    if_kernel[(programs,)](x, out, mode, BLOCK=block)
    rows = x.reshape(programs, block)
    ref = rows * 2 if mode > 0 else rows - 1
    ref = ref + torch.where(torch.arange(programs, device="cuda")[:, None] % 2 == 0,
                            rows.sum(1, keepdim=True), 0)
    assert_same(out, ref.reshape(-1), 1e-5, 1e-5)


compile_case("for", for_kernel, {"x_ptr": "*fp32", "sum_ptr": "*fp32", "max_ptr": "*fp32",
             "red_ptr": "*fp32", "K": "i32", "N": "i32"}, {"BLOCK": 128})
compile_case("for-negative-step", for_step_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32",
             "start": "i32", "stop": "i32"}, {"BLOCK": 64, "STEP": -2})
compile_case("while", while_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "steps_ptr": "*i32",
             "iters": "i32"}, {"BLOCK": 256})
compile_case("if", if_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "mode": "i32"}, {"BLOCK": 128})


@naiad.jit(noinline=True)
def _scaled_rows(x, scale):
    return x * scale + tl.sum(x, axis=1)[:, None]


@naiad.jit
def noinline_assume_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    tl.assume(n > 0)                        # a fact for LLVM, no code
    rows = tl.arange(0, 8)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    m = (cols < n) & (rows < 8)
    x = tl.load(x_ptr + rows * n + cols, mask=m, other=0.0)
    tl.store(out_ptr + rows * n + cols, _scaled_rows(x, scale), mask=m)


compile_case("noinline-assume", noinline_assume_kernel,
             {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "scale": "fp32"}, {"BLOCK": 64})


@pytest.mark.parametrize("n", [1, 50, 64])
def test_noinline_function_and_assume(n):
    """A ``noinline`` device function gives the same values as an inlined one (the cuda backend
    inlines it: its lowering has no calls); ``tl.assume`` changes nothing."""
    x = rand("float32", (8, n), -4, 4, seed=35)
    out = torch.full((8, n), 9.0, device="cuda")
    noinline_assume_kernel[(1,)](x, out, n, 1.5, BLOCK=64)
    assert_same(out, x * 1.5 + x.sum(1, keepdim=True), 1e-5, 1e-5)


# == dot ===========================================================================================
@naiad.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
               HAS_ACC: tl.constexpr, PRECISION: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    if HAS_ACC:
        acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        r = tl.dot(a, b, acc, input_precision=PRECISION)
    else:
        r = tl.dot(a, b, input_precision=PRECISION)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], r)


DOT_SHAPES = [(16, 16, 16), (32, 64, 32), (64, 64, 64)]
DOT = ([(name, shape, acc, None) for name in ("float32", "float16", "int8")
        for shape in DOT_SHAPES for acc in (False, True)]
       + [("float32", shape, True, "ieee") for shape in DOT_SHAPES]
       + [("bfloat16", (32, 32, 32), True, None)])


@pytest.mark.parametrize("name,shape,has_acc,precision", DOT,
                         ids=[f"{n}-{s[0]}x{s[1]}x{s[2]}{'-acc' if a else ''}{'-' + p if p else ''}"
                              for n, s, a, p in DOT])
def test_dot(name, shape, has_acc, precision):
    m, n, k = shape
    integer = name == "int8"
    a = rand(name, (m, k), -1 if not integer else -100, 1 if not integer else 100, seed=35)
    b = rand(name, (k, n), -1 if not integer else -100, 1 if not integer else 100, seed=36)
    acc_type = torch.int32 if integer else torch.float32
    c = rand("int32" if integer else "float32", (m, n), -1000 if integer else -1,
             1000 if integer else 1, seed=37).to(acc_type)
    out = torch.empty(m, n, dtype=acc_type, device="cuda")
    dot_kernel[(1,)](a, b, c, out, M=m, N=n, K=k, HAS_ACC=has_acc, PRECISION=precision)
    if integer:
        ref = (a.cpu().long() @ b.cpu().long()).int().cuda() + (c if has_acc else 0)
        assert_same(out, ref)
        return
    ref = (a.double() @ b.double() + (c.double() if has_acc else 0)).float()
    # tf32 (the default precision for fp32) keeps 10 bits of mantissa per product
    tol = (1e-2, 2e-2) if name == "float32" and precision is None else (1e-4, 1e-4)
    assert_same(out, ref, *tol)


@naiad.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Triton's tutorial matmul: tiles of C, a loop over K with masked loads."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + ks[None, :],
                    mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + rn[None, :],
                    mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("name", ["float16", "float32"])
def test_matmul_tiles(name):
    M, N, K = 100, 70, 50
    a = rand(name, (M, K), -1, 1, seed=38)
    b = rand(name, (K, N), -1, 1, seed=39)
    c = torch.empty(M, N, dtype=a.dtype, device="cuda")
    grid = (naiad.cdiv(M, 32), naiad.cdiv(N, 32))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), BM=32, BN=32, BK=16)
    ref = (a.double() @ b.double()).to(a.dtype)
    assert_same(c, ref, 2e-2, 2e-2)


for _name, _acc in (("float32", True), ("float16", False), ("int8", True)):
    _acc_ptr = "*i32" if _name == "int8" else "*fp32"
    compile_case(f"dot-{_name}{'-acc' if _acc else ''}", dot_kernel,
                 {"a_ptr": ptr(_name), "b_ptr": ptr(_name), "c_ptr": _acc_ptr, "out_ptr": _acc_ptr},
                 {"M": 32, "N": 64, "K": 32, "HAS_ACC": _acc, "PRECISION": None})
compile_case("dot-float32-ieee-64", dot_kernel, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32",
             "out_ptr": "*fp32"}, {"M": 64, "N": 64, "K": 64, "HAS_ACC": True, "PRECISION": "ieee"})
compile_case("matmul-float16", matmul_kernel, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16",
             "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32", "stride_bk": "i32",
             "stride_cm": "i32"}, {"BM": 32, "BN": 32, "BK": 16})


# == program ids, arguments, addressing ============================================================
@naiad.jit
def program_id_kernel(out_ptr):
    p0, p1, p2 = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    n0, n1, n2 = tl.num_programs(0), tl.num_programs(1), tl.num_programs(2)
    base = out_ptr + ((p2 * n1 + p1) * n0 + p0) * 6
    tl.store(base + 0, p0)
    tl.store(base + 1, p1)
    tl.store(base + 2, p2)
    tl.store(base + 3, n0)
    tl.store(base + 4, n1)
    tl.store(base + 5, n2)


@pytest.mark.parametrize("grid", [(3, 4, 5), (1, 1, 1), (70000, 1, 1), (2, 300, 2)])
def test_program_id_and_num_programs(grid):
    g0, g1, g2 = grid
    out = torch.full((g2, g1, g0, 6), -1, dtype=torch.int32, device="cuda")
    program_id_kernel[grid](out)
    p2, p1, p0 = torch.meshgrid(*(torch.arange(g, dtype=torch.int32, device="cuda")
                                  for g in (g2, g1, g0)), indexing="ij")
    full = lambda v: torch.full_like(p0, v)          # noqa: E731
    ref = torch.stack([p0, p1, p2, full(g0), full(g1), full(g2)], dim=-1)
    assert_same(out, ref)


@naiad.jit
def scalar_args_kernel(out_i32, out_i64, out_f32, out_bool, out_f16, i, j, f, b, h: tl.float16):
    tl.store(out_i32, i * 3 + 1)
    tl.store(out_i64, j + 1)
    tl.store(out_f32, f * 0.5)
    tl.store(out_bool, b)
    tl.store(out_f16, h * 2)
    vec = tl.arange(0, 64)                  # and broadcast into tensors
    tl.store(out_i32 + 1 + vec, vec + i)
    tl.store(out_f32 + 1 + vec, vec.to(tl.float32) * f)


@pytest.mark.parametrize("i,j,f,b,h", [(7, 2**40 + 5, 3.25, True, 1.5),
                                       (-2**31, -2**62, -0.0, False, -65504.0),
                                       (2**31 - 1, 2**31, 1e30, True, 0.000061035)])
def test_scalar_arguments(i, j, f, b, h):
    out_i32 = torch.zeros(65, dtype=torch.int32, device="cuda")
    out_i64 = torch.zeros(1, dtype=torch.int64, device="cuda")
    out_f32 = torch.zeros(65, dtype=torch.float32, device="cuda")
    out_bool = torch.tensor([not b], device="cuda")
    out_f16 = torch.zeros(1, dtype=torch.float16, device="cuda")
    scalar_args_kernel[(1,)](out_i32, out_i64, out_f32, out_bool, out_f16, i, j, f, b, h)
    vec = torch.arange(64, device="cuda")
    assert_same(out_i32[0], torch.tensor(i * 3 + 1, dtype=torch.int64).to(torch.int32).cuda(),
                what="i32")
    assert out_i64.item() == j + 1
    assert out_f32[0].item() == torch.tensor(f * 0.5, dtype=torch.float32).item()
    assert out_bool.item() is b
    assert out_f16.item() == torch.tensor(h, dtype=torch.float16).item() * 2 or \
        (abs(h) > 60000 and math.isinf(out_f16.item()))
    assert_same(out_i32[1:], (vec + i).to(torch.int32), what="i32 vector")
    assert_same(out_f32[1:], vec.float() * torch.tensor(f, dtype=torch.float32).item(),
                what="f32 vector")


compile_case("program-id", program_id_kernel, {"out_ptr": "*i32"}, {})
compile_case("scalar-args", scalar_args_kernel, {"out_i32": "*i32", "out_i64": "*i64",
             "out_f32": "*fp32", "out_bool": "*i1", "out_f16": "*fp16", "i": "i32", "j": "i64",
             "f": "fp32", "b": "u1", "h": "fp16"}, {})


@naiad.jit
def offset_kernel(x_ptr, out_ptr, start, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + offs))


@naiad.jit
def offset_i64_kernel(x_ptr, out_ptr, row, stride, BLOCK: tl.constexpr):
    base = row.to(tl.int64) * stride                  # past 2**31 elements
    offs = base + tl.arange(0, BLOCK).to(tl.int64)
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + offs))


def _big(dtype, numel):
    try:
        return torch.zeros(numel, dtype=dtype, device="cuda")
    except torch.cuda.OutOfMemoryError:
        pytest.skip(f"cannot allocate {numel} elements of {dtype} on this GPU")


def test_int32_offsets_past_2gb_of_bytes():
    """An i32 element offset (2**29 + i) scaled to bytes goes past 2**31: the address must be
    computed in 64 bits."""
    start, block = 2**29 + 16, 1024
    x = _big(torch.float32, start + block)
    x[start:] = torch.arange(block, dtype=torch.float32, device="cuda") + 0.5
    out = torch.empty(block, device="cuda")
    offset_kernel[(1,)](x, out, start, BLOCK=block)
    assert_same(out, x[start:])
    del x


def test_int64_offsets():
    row, stride, block = 3, 2**30 + 64, 256             # element 3 * 2**30 + 192 of an int8 array
    x = _big(torch.int8, row * stride + block)
    x[row * stride:] = (torch.arange(block, device="cuda") % 101).to(torch.int8)
    out = torch.empty(block, dtype=torch.int8, device="cuda")
    offset_i64_kernel[(1,)](x, out, row, stride, BLOCK=block)
    assert_same(out, x[row * stride:])
    del x


compile_case("offset-i32", offset_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "start": "i32"},
             {"BLOCK": 1024})
compile_case("offset-i64", offset_i64_kernel, {"x_ptr": "*i8", "out_ptr": "*i8", "row": "i32",
             "stride": "i64"}, {"BLOCK": 256})


@naiad.jit
def mul_add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 1.1 + 0.3, mask=mask)


compile_case("mul-add", mul_add_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
             {"BLOCK": 1024})


@pytest.mark.parametrize("fusion", [True, False])
def test_multiply_add_rounds_once_with_fp_fusion_and_twice_without(fusion):
    n = 4096
    x = rand("float32", (n,), 0.5, 2.0, seed=41)
    out = torch.empty_like(x)
    mul_add_kernel[(naiad.cdiv(n, 1024),)](x, out, n, BLOCK=1024, enable_fp_fusion=fusion)
    a, b, c = x.double(), torch.tensor(1.1, dtype=torch.float32).double(), torch.tensor(0.3).float().double()
    fused = (a * b + c).float()                          # exact in float64, rounded once
    separate = (x * torch.tensor(1.1, dtype=torch.float32)).float() + torch.tensor(0.3).float()
    assert not torch.equal(fused, separate)              # the data tells the two apart
    assert torch.equal(out, fused if fusion else separate)
