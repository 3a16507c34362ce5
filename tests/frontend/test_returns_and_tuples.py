"""Early returns, conditional expressions without a value, one-element conditions, bare
constexpr declarations and namedtuples: the TTIR they generate and the errors they give.

A runtime ``if`` holding a ``return`` ends the function in both branches (Triton's semantics):
each branch is followed by the rest of the function and yields what it returns, so every
function keeps one ``tt.return`` and only structured control flow.
"""

import warnings
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

import naiad.language as tl
from naiad.compiler.errors import CompilationError, UnsupportedLanguageConstruct
from naiad.compiler.frontend import ttir_for
from naiad.ir import parse_module, print_module
from naiad.runtime.jit import jit

_SOURCE = Path(__file__).read_text().splitlines()

F32, I32 = np.zeros(16, np.float32), np.zeros(16, np.int32)


def line_of(marker: str) -> int:
    """The line of this file that ends with ``# E:<marker>``."""
    (line,) = [i + 1 for i, text in enumerate(_SOURCE) if text.rstrip().endswith(f"# E:{marker}")]
    return line


def compile_ttir(kernel, *args, **kwargs):
    module = ttir_for(kernel, *args, **kwargs)
    module.verify()
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    return module


def ops(module, name: str) -> list:
    return [op for op in module.walk() if op.name == name]


def functions(module) -> dict:
    return {op.sym_name.data: op for op in ops(module, "tt.func")}


# -- early returns ----------------------------------------------------------------------------

@jit
def k_exit_early(Flag, Out):
    if tl.load(Flag) != 0:
        tl.store(Out, 0)
        return
    tl.store(Out, 1)
    tl.store(Out + 1, 2)


def test_a_kernel_may_return_inside_a_runtime_if():
    module = compile_ttir(k_exit_early, I32, I32)
    (if_op,) = ops(module, "scf.if")
    assert len(ops(module, "tt.return")) == 1
    then_stores = [op for op in if_op.true_region.walk() if op.name == "tt.store"]
    else_stores = [op for op in if_op.false_region.walk() if op.name == "tt.store"]
    assert (len(then_stores), len(else_stores)) == (1, 2)   # the code after the if: else only


@jit
def pick(x, flag):
    if flag > 0:
        return x + 1
    else:
        return x * 2


@jit
def k_calls_pick(X, flag):
    tl.store(X, pick(tl.load(X), flag))


def test_a_helper_returning_in_both_branches_yields_its_value():
    module = compile_ttir(k_calls_pick, F32, 5)
    helper = [f for name, f in functions(module).items() if name.startswith("pick")][0]
    (if_op,) = [op for op in helper.walk() if op.name == "scf.if"]
    assert [str(r.type) for r in if_op.results] == ["f32"]
    (ret,) = [op for op in helper.walk() if op.name == "tt.return"]
    assert ret.operands[0] is if_op.results[0]


@jit
def first_positive(X):
    for i in tl.static_range(3):
        if tl.load(X + i) > 0:
            return i
    return -1


@jit
def k_static_loop_return(X, Out):
    tl.store(Out, first_positive(X))


def test_a_return_inside_an_unrolled_loop_continues_with_the_next_iterations():
    module = compile_ttir(k_static_loop_return, I32, I32)
    helper = [f for name, f in functions(module).items() if name.startswith("first_positive")][0]
    counts = Counter(op.name for op in helper.walk())
    assert counts["scf.if"] == 3 and counts["tt.load"] == 3 and counts["tt.return"] == 1


@jit
def constant_pair(flag: tl.constexpr):
    if flag:
        return 4, None
    return 4, None


@jit
def k_compile_time_returns(X):
    tl.static_assert(constant_pair(True)[0] == 4)     # (assigning it to a name makes a tensor)
    tl.static_assert(constant_pair(False)[1] is None)
    tl.store(X, constant_pair(True)[0])


def test_compile_time_return_values_stay_compile_time():
    compile_ttir(k_compile_time_returns, I32)


@jit
def maybe_value(x):
    if x > 0:  # E:value_or_nothing
        return x
    tl.device_print("x", x)


@jit
def k_value_or_nothing(X):
    maybe_value(tl.load(X))


@jit
def int_or_float(x):
    if x > 0:  # E:int_or_float
        return x
    return 1.5


@jit
def k_int_or_float(X):
    tl.store(X, int_or_float(tl.load(X)))


@jit
def k_return_in_loop(X, n):
    for i in range(n):
        if tl.load(X + i) > 0:  # E:return_in_loop
            return
        tl.store(X + i, 1)


@jit
def k_value_from_kernel(X):
    if tl.load(X) > 0:
        return 1  # E:kernel_value
    tl.store(X, 1)


RETURN_ERRORS = [
    (k_value_or_nothing, (F32,), CompilationError, "value_or_nothing",
     ["returns a tensor of type fp32 on one path and nothing on another", "fix: return values"]),
    (k_int_or_float, (I32,), CompilationError, "int_or_float",
     ["returns a tensor of type int32 on one path and a tensor of type fp32 on another"]),
    (k_return_in_loop, (I32, 4), UnsupportedLanguageConstruct, "return_in_loop",
     ["'return' inside a runtime for/while loop is not supported", "fix: assign the result"]),
    (k_value_from_kernel, (I32,), CompilationError, "kernel_value",
     ["a kernel cannot return a value"]),
]


@pytest.mark.parametrize("kernel,args,error,marker,phrases", RETURN_ERRORS,
                         ids=[case[3] for case in RETURN_ERRORS])
def test_return_errors(kernel, args, error, marker, phrases):
    with pytest.raises(error) as info:
        ttir_for(kernel, *args)
    assert info.value.lineno == line_of(marker), str(info.value)
    for phrase in phrases:
        assert phrase in info.value.message, info.value.message


# -- conditional expressions and conditions ---------------------------------------------------------

@jit
def k_void_conditional(X, Y):
    tl.store(Y, tl.load(X)) if tl.program_id(0) == 0 else tl.store(Y, tl.load(X + 1))


def test_a_conditional_expression_of_two_calls_without_value_is_an_if_without_results():
    module = compile_ttir(k_void_conditional, F32, F32)
    (if_op,) = ops(module, "scf.if")
    assert len(if_op.results) == 0 and len(ops(module, "tt.store")) == 2


@jit
def k_half_void_conditional(X):
    y = tl.store(X, 1.0) if tl.program_id(0) == 0 else 2.0  # E:half_void


def test_a_conditional_expression_with_one_side_without_value_is_an_error():
    with pytest.raises(CompilationError) as info:
        ttir_for(k_half_void_conditional, F32)
    assert info.value.lineno == line_of("half_void")
    assert "one side of the conditional expression has no value" in info.value.message


@jit
def k_one_element_condition(X):
    flag = tl.load(X + tl.arange(0, 1)) > 0
    if flag:  # E:one_element
        tl.store(X, 0)
    if flag.item():
        tl.store(X + 1, 0)


def test_a_one_element_block_condition_becomes_its_element_with_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = compile_ttir(k_one_element_condition, I32)
    assert len(ops(module, "scf.if")) == 2
    calls = [op.callee.string_value() for op in ops(module, "tt.call")]
    assert len([c for c in calls if c.startswith("item")]) == 2
    (item,) = [f for name, f in functions(module).items() if name.startswith("item")]
    assert [op.name for op in item.walk()].count("tt.reduce") == 1
    (warning,) = [w for w in caught if "one-element block" in str(w.message)]
    assert warning.filename == __file__ and warning.lineno == line_of("one_element")
    assert ".item()" in str(warning.message)


@jit
def k_pid_axis(X):
    pid = tl.program_id(20)  # E:pid_axis


def test_a_language_error_keeps_its_exception_as_the_cause():
    with pytest.raises(CompilationError) as info:
        ttir_for(k_pid_axis, F32)
    assert info.value.lineno == line_of("pid_axis")
    assert "program_id axis must be 0, 1, or 2 but got 20" in str(info.value.__cause__)
    assert info.value.__cause__.__traceback__ is None


# -- declarations and tuples --------------------------------------------------------------------------

@jit
def k_declared_constexprs(X, SHAPE: tl.constexpr):
    d0: tl.constexpr
    d1: tl.constexpr
    (d0, d1), d2 = SHAPE
    tl.static_assert(d0 * 100 + d1 * 10 == 840)
    tl.store(X, tl.full((d0,), d2, tl.int32).sum(0))


def test_bare_constexpr_declarations_keep_unpacked_values_compile_time():
    module = compile_ttir(k_declared_constexprs, I32, SHAPE=((8, 4), 2))
    assert "arith.constant" in Counter(op.name for op in module.walk())


@jit
def k_declared_runtime(X):
    d: tl.constexpr
    d = tl.load(X)  # E:declared_runtime


def test_a_declared_constexpr_given_a_runtime_value_is_an_error():
    with pytest.raises(CompilationError) as info:
        ttir_for(k_declared_runtime, I32)
    assert info.value.lineno == line_of("declared_runtime")
    assert "d is declared tl.constexpr but its value is only known at run time" in info.value.message


class View(NamedTuple):
    ptr: object
    size: object


@jit
def make_view(ptr, size):
    return View(size=size, ptr=ptr)


@jit
def k_namedtuples(V, Out):
    view = make_view(V.ptr, V.size)
    pair = tl.tuple((1, 2)) + (3,)
    tl.static_assert(pair == (1, 2, 3))
    tl.store(Out, tl.load(view.ptr) + view.size + pair[2])


def test_namedtuples_pass_through_parameters_and_returns_by_field():
    module = compile_ttir(k_namedtuples, View(F32, 7), F32)
    kernel = functions(module)["k_namedtuples"]
    assert [str(t) for t in kernel.function_type.inputs.data] == ["!tt.ptr<f32>", "i32",
                                                                   "!tt.ptr<f32>"]
