"""torch.compile of operations through Naiad's CPU backend: every result equals eager
PyTorch's (within the dtype's tolerance).  Shapes are not multiples of any block size, so every
kernel runs masked edges; 1-D, 2-D and 3-D inputs, reductions over each axis.

Ops of one kind are compiled in groups, one graph per group (Inductor fuses a group's ops over
the same inputs into one kernel with several outputs): the suite compiles a few dozen graphs,
not hundreds, and a failure names the op."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def _float(shape, dtype=torch.float32, low=-3.0, high=3.0):
    return (torch.rand(shape) * (high - low) + low).to(dtype)


def _positive(shape, dtype=torch.float32):
    return _float(shape, dtype, 0.05, 4.0)


def _int(shape, dtype=torch.int32, low=-100, high=100):
    return torch.randint(low, high, shape, dtype=dtype)


#: Tolerances by result dtype: Naiad's math and libm differ in the last bits, and the compiled
#: kernel computes 16-bit data in fp32, rounding once (`check`'s ``reference_in_float``).
TOLERANCE = {torch.float32: (1.3e-5, 1e-5), torch.float64: (1e-10, 1e-12),
             torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3)}


def _tuple(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def check(fn, *inputs, names=None, rtol=None, atol=None, dynamic=False, reference_in_float=False):
    """``torch.compile(fn)(*inputs)`` equals ``fn(*inputs)``, output by output (``names`` says
    which op made each).  With ``reference_in_float`` the reference is ``fn`` on the inputs
    widened to fp32, its results rounded to their dtypes: what Inductor computes for 16-bit
    data (eager rounds after every op)."""
    want = _tuple(fn(*inputs))
    if reference_in_float:
        wide = _tuple(fn(*(x.float() if x.is_floating_point() else x for x in inputs)))
        want = tuple(w.to(e.dtype) for w, e in zip(wide, want))
    got = _tuple(torch.compile(fn, dynamic=dynamic)(*inputs))
    assert len(got) == len(want)
    for i, (w, g) in enumerate(zip(want, got)):
        r, a = TOLERANCE.get(w.dtype, (0, 0))
        torch.testing.assert_close(g, w, rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
                                   equal_nan=True, msg=lambda m: f"{names[i] if names else i}: {m}")


def groups(table: dict, size: int) -> list[tuple[str, ...]]:
    names = sorted(table)
    return [tuple(names[i:i + size]) for i in range(0, len(names), size)]


# -- pointwise ------------------------------------------------------------------------------------
#: name -> (op, whether it needs positive input)
UNARY = {
    "neg": (torch.neg, False), "abs": (torch.abs, False), "exp": (torch.exp, False),
    "exp2": (torch.exp2, False), "expm1": (torch.expm1, False), "log": (torch.log, True),
    "log2": (torch.log2, True), "log1p": (torch.log1p, True), "sqrt": (torch.sqrt, True),
    "rsqrt": (torch.rsqrt, True), "sin": (torch.sin, False), "cos": (torch.cos, False),
    "tan": (lambda x: torch.tan(x * 0.4), False), "tanh": (torch.tanh, False),
    "sigmoid": (torch.sigmoid, False), "erf": (torch.erf, False), "erfc": (torch.erfc, False),
    "atan": (torch.atan, False), "asinh": (torch.asinh, False), "floor": (torch.floor, False),
    "ceil": (torch.ceil, False), "round": (lambda x: torch.round(x * 10), False),
    "trunc": (torch.trunc, False), "sign": (torch.sign, False), "reciprocal": (torch.reciprocal, True),
    "relu": (torch.relu, False), "gelu": (F.gelu, False),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), False), "silu": (F.silu, False),
    "softplus": (F.softplus, False), "mish": (F.mish, False), "elu": (F.elu, False),
    "hardswish": (F.hardswish, False), "lgamma": (torch.lgamma, True),
    "nan_to_num": (lambda x: torch.nan_to_num(torch.log(x)), False),
    "erfinv": (lambda x: torch.erfinv(torch.tanh(x)), False), "i0": (torch.special.i0, False),
    "ndtri": (lambda x: torch.special.ndtri(torch.sigmoid(x)), False),
}


@pytest.mark.parametrize("names", groups(UNARY, 7), ids="-".join)
def test_unary(names):
    real, positive = _float((37, 130)), _positive((37, 130))

    def ops(real, positive):
        return tuple(UNARY[n][0](positive if UNARY[n][1] else real) for n in names)

    check(ops, real, positive, names=names, rtol=3e-5, atol=3e-5)


BINARY = {
    "add_mul": lambda a, b: a * 2.5 + b, "sub_div": lambda a, b: (a - b) / (b.abs() + 1),
    "pow": lambda a, b: torch.pow(a.abs() + 0.1, b), "pow_scalar": lambda a, b: torch.pow(a.abs(), 3.5),
    "atan2": torch.atan2, "maximum": torch.maximum, "minimum": torch.minimum,
    "where": lambda a, b: torch.where(a > b, a, b * 2),
    "clamp": lambda a, b: torch.clamp(a, min=-0.5, max=0.7) + torch.clamp(b, max=a),
    "fmod": lambda a, b: torch.fmod(a, b + 3.5), "remainder": lambda a, b: torch.remainder(a, b + 3.5),
    "hypot": torch.hypot, "lerp": lambda a, b: torch.lerp(a, b, 0.3), "copysign": torch.copysign,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16],
                         ids=str)
@pytest.mark.parametrize("names", groups(BINARY, 7), ids="-".join)
def test_binary(names, dtype):
    a, b = _float((37, 130), dtype), _float((37, 130), dtype)
    check(lambda a, b: tuple(BINARY[n](a, b) for n in names), a, b, names=names,
          reference_in_float=dtype in (torch.float16, torch.bfloat16))


def test_broadcasting_operands():
    check(lambda a, b, c: a * b + c, _float((7, 1, 33)), _float((1, 9, 33)), _float((33,)))


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.uint8], ids=str)
def test_integer_arithmetic(dtype):
    low = 0 if dtype == torch.uint8 else -100
    a, b = _int((37, 130), dtype, low, 100), _int((37, 130), dtype, 1, 100)
    check(lambda a, b: ((a * 3 + b) // b - a % b + (a >> 1) - (a & b) + (a | 1) ^ b,
                        torch.maximum(a, b), a.to(torch.float32) / b), a, b)


def test_bool_logic():
    a, b = _float((37, 130)), _float((37, 130))
    check(lambda a, b: ((((a > 0) & (b < 0)) | (a > 1)) ^ (b == 0.5),
                        torch.logical_not(a > b).to(torch.float32) + (a != b).sum(-1, keepdim=True)), a, b)


def test_casts():
    """Each cast gives eager's value exactly (float to int truncates, to fp16/bf16 rounds to
    nearest even; the results are stored in their own dtype, which no fusion can skip)."""
    kinds = [torch.float16, torch.bfloat16, torch.int32, torch.int8, torch.bool, torch.float64]
    x = _float((37, 130), low=-20, high=200)
    check(lambda x: tuple(x.clamp(-100, 100).to(k) for k in kinds) + (x.clamp(0, 200).to(torch.uint8),),
          x, names=[str(k) for k in kinds] + ["torch.uint8"], rtol=0, atol=0)


# -- reductions -----------------------------------------------------------------------------------
REDUCTIONS = {
    "sum": lambda x, d: x.sum(d), "mean": lambda x, d: x.mean(d), "amax": lambda x, d: x.amax(d),
    "amin": lambda x, d: x.amin(d), "prod": lambda x, d: (x * 0.1 + 1).prod(d),
    "var_mean": lambda x, d: torch.var_mean(x, d)[0], "std": lambda x, d: x.std(d),
    "argmax": lambda x, d: x.argmax(d), "argmin": lambda x, d: x.argmin(d),
    "max_with_index": lambda x, d: x.max(d)[1], "logsumexp": lambda x, d: torch.logsumexp(x, d),
    "norm": lambda x, d: torch.linalg.vector_norm(x, dim=d), "any": lambda x, d: (x > 2.9).any(d),
    "all": lambda x, d: (x > -2.9).all(d), "count": lambda x, d: (x > 0).sum(d),
}


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("shape", [(37, 130), (4, 9, 33)], ids=str)
@pytest.mark.parametrize("names", groups(REDUCTIONS, 8), ids="-".join)
def test_reductions(names, shape, dim):
    check(lambda x: tuple(REDUCTIONS[n](x, dim) for n in names), _float(shape), names=names,
          rtol=1e-4, atol=1e-4)


def test_long_rows_and_whole_tensors():
    check(lambda x: (x.sum(-1), x.amax(-1), x.sum(), x.mean()), _float((3, 20000)), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_reductions_of_16_bit_data(dtype):
    x = _float((37, 130), dtype)
    check(lambda x: (x.float().sum(-1), x.amax(0), torch.softmax(x, -1)), x, rtol=2e-2, atol=2e-2)


# -- normalizations, softmax ------------------------------------------------------------------------
def test_softmax_and_normalizations():
    x, w, b = _float((8, 12, 30)), _float((30,)), _float((30,))
    check(lambda x: (torch.softmax(x, -1), torch.log_softmax(x, 0), F.layer_norm(x, (30,), w, b),
                     F.group_norm(x, 4), F.rms_norm(x, (30,), w)), x, rtol=1e-4, atol=1e-5)


# -- scans, sorting ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1])
def test_scans(dim):
    x = _float((37, 130))
    check(lambda x: (torch.cumsum(x, dim), torch.cumprod(x * 0.05 + 1, dim), torch.cummax(x, dim)[0],
                     torch.logcumsumexp(x, dim)), x, rtol=1e-4, atol=1e-4)
    check(lambda x: torch.cumsum(x, dim), _int((9, 333)))


def test_sort_argsort_topk():
    x = _float((13, 64))
    check(lambda x: (*torch.sort(x, -1), torch.sort(x, 0, descending=True).values,
                     torch.argsort(x, dim=-1, stable=True), *torch.topk(x, 5, -1)), x)


# -- indexing ---------------------------------------------------------------------------------------
def test_gather_index_select_embedding():
    x, table = _float((37, 130)), _float((100, 24))
    i, ids = torch.randint(0, 130, (37, 20)), torch.randint(0, 100, (7, 11))
    check(lambda x, i, t, ids: (torch.gather(x, 1, i) * 2, x[i[:, 0] % 37] + 1,
                                torch.index_select(x, 1, i[0]) - 1, F.embedding(ids, t) * 2,
                                t.masked_fill(t > 1, -1.0)), x, i, table, ids)


def test_scatter_and_index_put():
    x = _float((37, 130))
    i, rows = torch.randint(0, 130, (37, 20)), torch.randint(0, 37, (50,))
    check(lambda x, i, r: (torch.zeros(37, 130).scatter_add(1, i, x[:, :20]),
                           torch.zeros(37, 130).scatter(1, i, 1.0),
                           x.index_put((r,), torch.tensor(1.5), accumulate=True),
                           torch.zeros(37).index_add(0, r, torch.ones(50))), x, i, rows, rtol=1e-5, atol=1e-5)


def test_views_cat_pad_flip_pool():
    x, y, image = _float((37, 130)), _float((37, 130)), _float((2, 3, 17, 19))
    check(lambda x, y, im: (torch.cat([x, y * 2], 0).t().contiguous() + 1, torch.stack([x, y], -1).sum(-1),
                            F.pad(x, (3, 5, 1, 0), value=0.5) * 3, torch.flip(x, [1]) + torch.roll(x, 3, 0),
                            torch.tril(x) - torch.triu(x, 2), F.avg_pool2d(im, 3, 2), F.max_pool2d(im, 2)),
          x, y, image, rtol=1e-5, atol=1e-6)


# -- random numbers ---------------------------------------------------------------------------------
def test_random_numbers_have_their_distributions():
    def sample(x):
        return torch.rand_like(x), torch.randn_like(x), F.dropout(torch.ones_like(x), 0.25, training=True)

    uniform, normal, dropped = torch.compile(sample)(torch.empty(200_000))
    assert 0.0 <= uniform.min() and uniform.max() < 1.0 and abs(uniform.mean() - 0.5) < 0.01
    assert abs(normal.mean()) < 0.01 and abs(normal.std() - 1.0) < 0.01
    assert abs((dropped == 0).float().mean() - 0.25) < 0.01
    assert torch.all((dropped == 0) | (dropped == 1 / 0.75))


# -- dynamic shapes ---------------------------------------------------------------------------------
def test_dynamic_shapes_take_every_size():
    softmax_sum = torch.compile(lambda x: torch.softmax(x * 2, -1).sum(0), dynamic=True)
    pointwise = torch.compile(lambda a, b: torch.tanh(a) * b + 1, dynamic=True)
    for rows, cols in ((5, 7), (37, 130), (3, 1000)):
        x = _float((rows, cols))
        torch.testing.assert_close(softmax_sum(x), torch.softmax(x * 2, -1).sum(0), rtol=1e-5, atol=1e-5)
    for n in (1, 17, 4099):
        a, b = _float((n,)), _float((n,))
        torch.testing.assert_close(pointwise(a, b), torch.tanh(a) * b + 1, rtol=1.3e-6, atol=1e-5)
