"""Launch-path fuzz: random argument kinds thrown at one kernel.  Every launch either runs
correctly (its output equals numpy's) or raises a Naiad error naming the kernel -- a
`LaunchError` for what the launch cannot take, a `CompilationError` where the argument makes
the kernel ill-typed (a scalar where it adds to a pointer) -- never a wrong result, never a
crash, never a change to memory it must not write.

Each draw picks a kind for every argument, the grid and the keywords; the kinds say whether
the launch is valid and what it must compute.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.compiler.errors import CompilationError
from naiad.errors import LaunchError

pytestmark = pytest.mark.shipped_backends

N = 40            # elements of every array
BLOCK = 16


@naiad.jit
def scaled_copy(x, out, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * scale, mask=mask)


def _pick(rng: random.Random, **weights: float) -> str:
    """One of the keyword names, drawn with the given weights."""
    return rng.choices(list(weights), list(weights.values()))[0]


class Case:
    """One draw: the launch's arguments, and what the launch must do with them."""

    def __init__(self):
        self.args: dict = {}
        self.keywords: dict = {}
        self.grid = None
        self.programs = 0              # how many programs a valid grid runs
        self.launch_error: list[str] = []
        self.compile_error: list[str] = []
        self.frozen: list[tuple[np.ndarray, bytes]] = []    # arrays the launch must not change

    def refuse(self, why: str) -> None:
        self.launch_error.append(why)


def _x(case: Case, rng: random.Random, values: np.ndarray) -> None:
    kind = _pick(rng, f32=4, f64=2, int32=2, read_only=2, interface=2, big_endian=0.5,
                 numpy_scalar=0.5, python_float=0.5)
    if kind in ("f32", "read_only"):
        x = values.copy()
        if kind == "read_only":
            x.flags.writeable = False            # an input: allowed
    elif kind == "f64":
        x = values.astype(np.float64)
    elif kind == "int32":
        x = (np.abs(values) * 100).astype(np.int32)     # >= 0: int32 * uint32 is unsigned
    elif kind == "big_endian":
        x = values.astype(np.dtype(np.float32).newbyteorder())
        case.refuse("x: byte order")
    elif kind == "interface":
        x = _Interface(values.copy())
    else:
        x = np.float32(values[0]) if kind == "numpy_scalar" else float(values[0])
        case.compile_error.append("x: a scalar where the kernel adds to a pointer")
    case.args["x"] = x


class _Interface:
    """An array known only by ``__array_interface__``."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


def _out(case: Case, rng: random.Random) -> None:
    kind = _pick(rng, f32=17, read_only=1, frombuffer=1, big_endian=1)
    if kind == "f32":
        out = np.full(N, -7.0, np.float32)
    elif kind == "read_only":
        out = np.full(N, -7.0, np.float32)
        out.flags.writeable = False
        case.refuse("out: read-only")
    elif kind == "frombuffer":
        out = np.frombuffer(np.full(N, -7.0, np.float32).tobytes(), np.float32)
        case.refuse("out: read-only bytes")
    else:
        out = np.full(N, -7.0, np.dtype(np.float32).newbyteorder())
        case.refuse("out: byte order")
    if not out.flags.writeable:
        case.frozen.append((out, out.tobytes()))
    case.args["out"] = out


INTEGERS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _n(case: Case, rng: random.Random) -> None:
    count = rng.randrange(0, N + 1)
    kind = _pick(rng, int=3, numpy_int=4, float=1, numpy_float32=1, bool=0.5, zero_d_array=0.5,
                 complex=0.5)
    if kind == "int":
        n = count
    elif kind == "numpy_int":
        n = rng.choice(INTEGERS)(count)
    elif kind == "float":
        n = count + 0.5            # offs < 12.5: the first 13 elements
    elif kind == "numpy_float32":
        n = np.float32(count)
    elif kind == "bool":
        n = bool(count % 2)
    elif kind == "zero_d_array":
        n = np.array(count)
        case.compile_error.append("n: an array where the kernel compares with an int")
    else:
        n = np.complex64(count)
        case.refuse("n: complex")
    case.args["n"] = n


SCALES = [lambda r: r.uniform(-4, 4), lambda r: r.randrange(-5, 6), lambda r: np.float32(r.uniform(-4, 4)),
          lambda r: np.float64(r.uniform(-4, 4)), lambda r: np.float16(r.choice([0.5, -1.5, 3.0])),
          lambda r: np.int8(r.randrange(-5, 6)), lambda r: np.uint8(r.randrange(0, 6)),
          lambda r: np.int64(r.randrange(-5, 6)), lambda r: np.uint32(r.randrange(0, 6)),
          lambda r: np.bool_(r.random() < 0.5), lambda r: True]


def _scale(case: Case, rng: random.Random) -> None:
    if rng.random() < 0.05:
        case.args["scale"] = rng.choice([np.complex128(1), "2.0", np.datetime64("2026-01-01")])
        case.refuse("scale: not a kernel scalar")
        return
    case.args["scale"] = rng.choice(SCALES)(rng)


def _grid(case: Case, rng: random.Random) -> None:
    needed = -(-N // BLOCK)
    kind = _pick(rng, tuple=6, list=2, callable=2, numpy=2, **{"2d": 1, "3d": 1}, zero=1, more=1,
                 negative=0.5, huge=0.5, float=0.5, bare_int=0.5, callable_int=0.5, empty=0.5,
                 four=0.5, string=0.5)
    good = {"tuple": ((needed,), needed), "list": ([needed], needed),
            "callable": (lambda meta: (naiad.cdiv(N, meta["BLOCK"]),), needed),
            "numpy": ((np.int64(needed),), needed), "2d": ((needed, 1), needed),
            "3d": ((needed, 1, 1), needed), "zero": ((0,), 0), "more": ((needed + 2,), needed + 2)}
    bad = {"negative": (-needed,), "huge": (2**31,), "float": (float(needed),), "bare_int": needed,
           "callable_int": lambda meta: needed, "empty": (), "four": (1, 1, 1, 1), "string": "4"}
    if kind in good:
        case.grid, case.programs = good[kind]
    else:
        case.grid = bad[kind]
        case.refuse(f"grid: {kind}")


def _keywords(case: Case, rng: random.Random) -> None:
    kind = _pick(rng, block=6, numpy_block=2, option=2, stray=1)
    case.keywords["BLOCK"] = np.int64(BLOCK) if kind == "numpy_block" else BLOCK
    if kind == "stray":
        case.keywords[rng.choice(["BLOK", "block", "scale_", "num_warp"])] = 4
        case.refuse("a stray keyword")
    elif kind == "option":
        case.keywords["num_warps"] = rng.choice([1, 4, 8])


def _draw(rng: random.Random, values: np.ndarray) -> Case:
    case = Case()
    _x(case, rng, values)
    _out(case, rng)
    _n(case, rng)
    _scale(case, rng)
    _grid(case, rng)
    _keywords(case, rng)
    return case


def _expected(case: Case, values: np.ndarray) -> np.ndarray:
    """What a valid launch leaves in ``out``: x * scale where offs < n, -7 elsewhere."""
    x = case.args["x"]
    x = np.asarray(x.array if isinstance(x, _Interface) else x, np.float64)
    n, scale = case.args["n"], case.args["scale"]
    covered = min(case.programs * BLOCK, N)
    offs = np.arange(N)
    mask = (offs < float(n)) & (offs < covered)
    return np.where(mask, x * float(scale), -7.0)


def test_every_launch_runs_correctly_or_is_refused():
    """Each draw is launched three times, the output restored in between: the first launch
    prepares it, the second compiles its native variant, the third runs natively
    (`naiad.runtime.native_entry`), and all three must end alike."""
    rng = random.Random(14)
    values = np.random.default_rng(14).uniform(-3, 3, N).astype(np.float32)
    outcomes = {"ran": 0, "LaunchError": 0, "CompilationError": 0}
    for trial in range(400):
        case = _draw(rng, values)
        out = case.args.get("out")
        initial = out.copy() if isinstance(out, np.ndarray) and out.flags.writeable else None
        for repeat in range(3):
            if initial is not None:
                out[...] = initial
            _launch_and_check(trial, case, values, outcomes)
        for array, before in case.frozen:
            assert array.tobytes() == before, (trial, "a read-only array was written")
    assert all(count > 60 for count in outcomes.values()), outcomes


def _launch_and_check(trial: int, case, values, outcomes: dict) -> None:
    arguments = dict(case.args)
    try:
        scaled_copy[case.grid](arguments.pop("x"), arguments.pop("out"), **arguments, **case.keywords)
    except (LaunchError, CompilationError) as e:
        kind = "LaunchError" if isinstance(e, LaunchError) else "CompilationError"
        assert "scaled_copy" in str(e), (trial, str(e))
        reasons = case.launch_error if kind == "LaunchError" else case.compile_error
        assert reasons, (trial, case.args, case.grid, case.keywords, str(e))
        outcomes[kind] += 1
    else:
        assert not case.launch_error and not case.compile_error, \
            (trial, case.launch_error, case.compile_error, case.args, case.grid)
        np.testing.assert_allclose(case.args["out"], _expected(case, values), rtol=2e-6, atol=1e-6,
                                   err_msg=f"trial {trial}: {case.args} grid {case.grid}")
        outcomes["ran"] += 1
