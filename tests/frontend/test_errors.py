"""User errors: each must raise a CompilationError (or a subclass) that names the kernel,
reports the exact line of the mistake, and says what is wrong and what to do.

Every offending line below ends with a ``# E:<name>`` marker; `line_of` finds it, so the
expected line numbers follow the file when it is edited.
"""

import re
import traceback
from pathlib import Path

import numpy as np
import pytest

import naiad.language as tl
from naiad.compiler.errors import (CompilationError, CompileTimeAssertionFailure,
                                   UnsupportedLanguageConstruct)
from naiad.compiler.frontend import make_ttir, ttir_for
from naiad.errors import KernelDefinitionError
from naiad.runtime.jit import LaunchError, jit

_SOURCE = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> int:
    """The line of this file that ends with ``# E:<marker>``."""
    tag = f"# E:{marker}"
    (line,) = [i + 1 for i, text in enumerate(_SOURCE) if text.rstrip().endswith(tag)]
    return line


F32, F16, I32 = np.zeros(64, np.float32), np.zeros(64, np.float16), np.zeros(64, np.int32)
U32 = np.zeros(64, np.uint32)


# -- kernels with one mistake each -------------------------------------------------------------

@jit
def undefined_name(X):
    tl.store(X, missing + 1)  # E:undefined


@jit
def uses_lambda(X):
    f = lambda v: v + 1  # E:lambda


@jit
def uses_try(X):
    try:  # E:try
        tl.store(X, 1.0)
    except Exception:
        pass


@jit
def uses_with(X):
    with X:  # E:with
        pass


@jit
def uses_list_comprehension(X):
    values = [i for i in range(4)]  # E:listcomp


@jit
def uses_dict_comprehension(X):
    values = {i: i for i in range(4)}  # E:dictcomp


@jit
def uses_set_comprehension(X):
    values = {i for i in range(4)}  # E:setcomp


@jit
def uses_generator(X):
    total = tuple(i for i in range(4))  # E:generator


@jit
def uses_break(X, n):
    for i in range(n):
        break  # E:break


@jit
def uses_continue(X, n):
    for i in range(n):
        continue  # E:continue


@jit
def uses_global(X):
    global GLOBAL_COUNTER  # E:global


@jit
def uses_nested_def(X):
    def inner():  # E:nested_def
        pass


@jit
def uses_class(X):
    class Inner:  # E:class
        pass


@jit
def uses_del(X):
    value = 1
    del value  # E:del


@jit
def uses_raise(X):
    raise ValueError("no")  # E:raise


@jit
def uses_yield(X):
    yield X  # E:yield


@jit
def uses_walrus(X, n):
    if (m := n) > 0:  # E:walrus
        pass


@jit
def pointer_plus_pointer(X, Y):
    Z = X + Y  # E:ptr_plus_ptr


@jit
def pointer_times_int(X):
    Z = X * 2  # E:ptr_times_int


@jit
def store_to_int(X, n):
    tl.store(n, 1.0)  # E:store_non_pointer


@jit
def load_from_float(X, f):
    v = tl.load(f)  # E:load_non_pointer


@jit
def bitwise_on_float(X):
    v = tl.load(X) & 1  # E:bitwise_float


@jit
def floordiv_on_float(X):
    v = tl.load(X) // 2.0  # E:floordiv_float


@jit
def mixed_signedness_division(X, Y):
    v = tl.load(X) / tl.load(Y)  # E:mixed_sign


@jit
def shape_mismatch(X):
    v = tl.arange(0, 16) + tl.arange(0, 32)  # E:shape_mismatch


@jit
def runtime_arange_bound(X, n):
    offsets = tl.arange(0, n)  # E:arange_runtime


@jit
def runtime_static_range(X, n):
    for i in tl.static_range(n):  # E:static_range_runtime
        pass


@jit
def needs_constexpr(x, K: tl.constexpr):
    return x * K


@jit
def non_power_of_two_arange(X):
    offsets = tl.arange(0, 10)  # E:arange_pow2


@jit
def empty_arange(X):
    offsets = tl.arange(8, 8)  # E:arange_empty


def plain_python(x):
    return x + 1


@jit
def calls_plain_python(X):
    v = plain_python(tl.load(X))  # E:plain_python


PLAIN_GLOBAL = 5


@jit
def reads_plain_global(X):
    tl.store(X, PLAIN_GLOBAL)  # E:plain_global


@jit
def branch_types_differ(X, n):
    if n > 0:  # E:if_types
        v = 1
    else:
        v = 1.5
    tl.store(X, v)


@jit
def loop_changes_type(X, n):
    acc = 0
    for i in range(n):  # E:loop_type
        acc = acc + 0.5
    tl.store(X, acc)


@jit
def kernel_returns(X):
    return tl.load(X)  # E:kernel_return


@jit
def early_return(x):
    while x > 0:
        return x  # E:return_in_loop
    return -x


@jit
def calls_early_return(X):
    tl.store(X, early_return(tl.load(X)))  # E:return_in_if_call


@jit
def dot_k_mismatch(X):
    a = tl.zeros((16, 32), tl.float16)
    b = tl.zeros((16, 16), tl.float16)
    c = tl.dot(a, b)  # E:dot_k


@jit
def dot_too_small(X):
    a = tl.zeros((8, 16), tl.float16)
    c = tl.dot(a, tl.zeros((16, 16), tl.float16))  # E:dot_small


@jit
def dot_mixed_dtypes(X):
    a = tl.zeros((16, 16), tl.float16)
    c = tl.dot(a, tl.zeros((16, 16), tl.float32))  # E:dot_dtypes


@jit
def dot_bad_precision(X):
    a = tl.zeros((16, 16), tl.float32)
    c = tl.dot(a, a, input_precision="fast")  # E:dot_precision


@jit
def static_assert_fails(X, B: tl.constexpr):
    tl.static_assert(B % 2 == 0, "B must be even")  # E:static_assert


@jit
def chained_comparison(X, n):
    v = 0 < n < 10  # E:chained


@jit
def block_condition(X):
    offsets = tl.arange(0, 16)
    if offsets > 4:  # E:block_if
        tl.store(X, 1.0)


@jit
def exp_on_fp16(X):
    v = tl.exp(tl.load(X))  # E:exp_fp16


@jit
def fp8_to_int(X):
    v = tl.load(X).to(tl.float8e5).to(tl.int32)  # E:bad_cast


@jit
def reshape_numel(X):
    v = tl.reshape(tl.arange(0, 16), (4, 8))  # E:reshape


@jit
def permute_bad_order(X):
    v = tl.permute(tl.zeros((4, 8), tl.float32), (0, 2))  # E:permute


@jit
def expand_dims_axis(X):
    v = tl.expand_dims(tl.arange(0, 16), 3)  # E:expand_dims


@jit
def reduction_axis(X):
    v = tl.sum(tl.arange(0, 16), axis=2)  # E:reduce_axis


@jit
def xor_sum_of_floats(X):
    v = tl.xor_sum(tl.load(X + tl.arange(0, 16)))  # E:xor_sum_float


@jit
def tensor_descriptor(X):
    d = tl.make_tensor_descriptor(X, shape=[16], strides=[1], block_shape=[2])  # E:descriptor


@jit
def one_sided_assignment(X, n):
    if n > 0:  # E:one_sided_if
        v = 1.0
    tl.store(X, v)  # E:one_sided_use


@jit
def unsigned_minus_one(X):
    v = tl.load(X) + (-1)  # E:unsigned_negative


@jit
def float_atomic_max_fp16(X):
    tl.atomic_max(X, 1.0)  # E:atomic_fp16


@jit
def other_without_mask(X):
    v = tl.load(X + tl.arange(0, 16), other=0.0)  # E:other_no_mask


@jit
def integer_mask(X):
    v = tl.load(X + tl.arange(0, 16), mask=tl.arange(0, 16))  # E:int_mask


@jit
def power_operator(X):
    v = tl.load(X) ** 2  # E:power


@jit
def bad_cache_modifier(X):
    v = tl.load(X, cache_modifier=".zz")  # E:cache_modifier


@jit
def wrong_call_arity(X):
    v = needs_constexpr(tl.load(X))  # E:call_arity


@jit
def tensor_in_bool(X):
    flag = bool(tl.load(X))  # E:bool_tensor


@jit
def uses_dot_scaled(X):
    a = tl.zeros((16, 16), tl.float16)
    c = tl.dot_scaled(a, None, "e4m3", a, None, "e4m3")  # E:dot_scaled


@jit
def loops_over_a_tensor(X):
    for v in tl.arange(0, 16):  # E:loop_tensor
        pass


@jit
def padding_without_block_pointer(X):
    v = tl.load(X + tl.arange(0, 16), padding_option="zero")  # E:padding


@jit
def assigns_to_an_element(X):
    v = tl.zeros([16], tl.float32)
    v[0] = 1.0  # E:item_assign


@jit
def indexes_with_an_int(X):
    v = tl.arange(0, 16)[3]  # E:int_index


@jit
def formats_a_runtime_value(X):
    tl.static_print(f"value: {tl.load(X)}")  # E:fstring


@jit
def unary_plus(X):
    v = +tl.load(X)  # E:unary_plus


@jit
def not_of_a_float(X):
    v = not tl.load(X)  # E:not_float


@jit
def dot_into_bf16(X):
    a = tl.zeros((16, 16), tl.float16)
    c = tl.dot(a, a, out_dtype=tl.bfloat16)  # E:dot_bf16


@jit
def dot_accumulator_type(X):
    a = tl.zeros((16, 16), tl.float32)
    c = tl.dot(a, a, tl.zeros((16, 16), tl.float16), out_dtype=tl.float32)  # E:dot_acc


@jit
def constexpr_depends_on_runtime(X, n):
    if n > 0:  # E:constexpr_branches
        mode: tl.constexpr = 1
    else:
        mode: tl.constexpr = 2
    tl.store(X, mode)


@jit
def fdiv_of_integers(X):
    v = tl.fdiv(tl.arange(0, 16), 3)  # E:fdiv_int


@jit
def runtime_shape(X, n):
    v = tl.zeros((n, 16), tl.float32)  # E:runtime_shape


# (kernel, arguments, keyword arguments, error class, marker, phrases in the message)
CASES = [
    (undefined_name, (F32,), {}, CompilationError, "undefined",
     ["'missing' is not defined", "fix: define it"]),
    (uses_lambda, (F32,), {}, UnsupportedLanguageConstruct, "lambda",
     ["lambda expressions cannot be used", "fix: define a @naiad.jit function"]),
    (uses_try, (F32,), {}, UnsupportedLanguageConstruct, "try", ["try/except", "fix:"]),
    (uses_with, (F32,), {}, UnsupportedLanguageConstruct, "with", ["'with' blocks", "fix:"]),
    (uses_list_comprehension, (F32,), {}, UnsupportedLanguageConstruct, "listcomp",
     ["list comprehensions", "tl.static_range"]),
    (uses_dict_comprehension, (F32,), {}, UnsupportedLanguageConstruct, "dictcomp",
     ["dict comprehensions", "fix:"]),
    (uses_set_comprehension, (F32,), {}, UnsupportedLanguageConstruct, "setcomp",
     ["set comprehensions", "fix:"]),
    (uses_generator, (F32,), {}, UnsupportedLanguageConstruct, "generator",
     ["generator expressions", "fix: use a for loop"]),
    (uses_break, (F32, 4), {}, UnsupportedLanguageConstruct, "break",
     ["'break' cannot be used", "fix: use a while loop"]),
    (uses_continue, (F32, 4), {}, UnsupportedLanguageConstruct, "continue",
     ["'continue' cannot be used", "fix: put the rest of the loop body under an 'if'"]),
    (uses_global, (F32,), {}, UnsupportedLanguageConstruct, "global", ["'global'", "tl.constexpr"]),
    (uses_nested_def, (F32,), {}, UnsupportedLanguageConstruct, "nested_def",
     ["nested function definitions", "define it at module level with @naiad.jit"]),
    (uses_class, (F32,), {}, UnsupportedLanguageConstruct, "class",
     ["class definitions", "fix: define the class outside"]),
    (uses_del, (F32,), {}, UnsupportedLanguageConstruct, "del", ["'del'", "fix:"]),
    (uses_raise, (F32,), {}, UnsupportedLanguageConstruct, "raise",
     ["'raise'", "tl.static_assert or tl.device_assert"]),
    (uses_yield, (F32,), {}, UnsupportedLanguageConstruct, "yield", ["'yield'", "return the values"]),
    (uses_walrus, (F32, 4), {}, UnsupportedLanguageConstruct, "walrus",
     ["':=' expressions", "fix: assign the value in a statement of its own"]),
    (pointer_plus_pointer, (F32, F32), {}, CompilationError, "ptr_plus_ptr",
     ["two pointers cannot be added", "keep integer offsets"]),
    (pointer_times_int, (F32,), {}, CompilationError, "ptr_times_int",
     ["the only operators on pointers are ptr + int", "cast the pointer with .to(tl.int64)"]),
    (store_to_int, (F32, 4), {}, CompilationError, "store_non_pointer",
     ["tl.store needs a pointer", "got int32", "fix: pass a pointer argument plus offsets"]),
    (load_from_float, (F32, 1.5), {}, CompilationError, "load_non_pointer",
     ["tl.load needs a pointer", "got fp32", "fix:"]),
    (bitwise_on_float, (F32,), {}, CompilationError, "bitwise_float",
     ["bitwise operators and shifts need integers", "bitcast=True"]),
    (floordiv_on_float, (F32,), {}, CompilationError, "floordiv_float",
     ["// is not defined for floating-point operands", "use tl.floor(a / b)"]),
    (mixed_signedness_division, (I32, U32), {}, CompilationError, "mixed_sign",
     ["different signedness", "Cast one operand to the other's signedness"]),
    (shape_mismatch, (F32,), {}, CompilationError, "shape_mismatch",
     ["cannot broadcast", "[16] and [32]", "fix: make the sizes equal"]),
    (runtime_arange_bound, (F32, 100), {}, CompilationError, "arange_runtime",
     ["compile-time integers", "fix: pass the bounds as tl.constexpr"]),
    (runtime_static_range, (F32, 4), {}, CompilationError, "static_range_runtime",
     ["tl.static_range needs compile-time bounds", "fix: use tl.range"]),
    (non_power_of_two_arange, (F32,), {}, CompilationError, "arange_pow2",
     ["must be a power of 2, got 10", "next_power_of_2"]),
    (empty_arange, (F32,), {}, CompilationError, "arange_empty",
     ["must be greater than its start", "fix: write tl.arange(start, end)"]),
    (calls_plain_python, (F32,), {}, CompilationError, "plain_python",
     ["cannot call the Python function 'plain_python'", "decorate it with @naiad.jit"]),
    (reads_plain_global, (F32,), {}, CompilationError, "plain_global",
     ["global variable 'PLAIN_GLOBAL'", "PLAIN_GLOBAL = tl.constexpr(5)"]),
    (branch_types_differ, (F32, 4), {}, CompilationError, "if_types",
     ["'v' has type int32 in the 'if' branch but fp32", "fix: cast one with .to"]),
    (loop_changes_type, (F32, 4), {}, CompilationError, "loop_type",
     ["loop-carried variable 'acc' starts as int32", "fp32", "fix: keep its type the same"]),
    (kernel_returns, (F32,), {}, CompilationError, "kernel_return",
     ["a kernel cannot return a value", "fix: store results through a pointer"]),
    (dot_k_mismatch, (F32,), {}, CompilationError, "dot_k",
     ["inner dimensions differ", "K = 32 vs 16", "M x K"]),
    (dot_too_small, (F32,), {}, CompilationError, "dot_small",
     ["every dimension must be >= 16", "M = 8", "fix: use blocks of at least 16"]),
    (dot_mixed_dtypes, (F32,), {}, CompilationError, "dot_dtypes",
     ["operands of one type, got fp16 and fp32", "fix: cast one"]),
    (dot_bad_precision, (F32,), {}, CompilationError, "dot_precision",
     ["input_precision must be one of", "'fast'"]),
    (static_assert_fails, (F32,), {"B": 3}, CompileTimeAssertionFailure, "static_assert",
     ["static_assert failed: B must be even"]),
    (chained_comparison, (F32, 4), {}, CompilationError, "chained",
     ["chained comparisons", "fix: write (a < b) & (b < c)"]),
    (block_condition, (F32,), {}, CompilationError, "block_if",
     ["condition must be a scalar, not a block of shape [16]", "fix: reduce it first"]),
    (exp_on_fp16, (F16,), {}, CompilationError, "exp_fp16",
     ["Expected dtype ['fp32', 'fp64'] but got fp16", "fix: convert with .to(tl.float32)"]),
    (fp8_to_int, (F32,), {}, CompilationError, "bad_cast",
     ["cannot cast tl.float8e5 to tl.int32", "go through a float"]),
    (reshape_numel, (F32,), {}, CompilationError, "reshape",
     ["reshape cannot change the number of elements: [16] -> [4, 8]", "fix: give a shape with 16"]),
    (permute_bad_order, (F32,), {}, CompilationError, "permute",
     ["permute order [0, 2] is not a permutation", "fix: name each dimension"]),
    (expand_dims_axis, (F32,), {}, CompilationError, "expand_dims",
     ["invalid axis 3. Expected -2 <= axis < 2", "fix: use an axis from -2 to 1"]),
    (reduction_axis, (F32,), {}, CompilationError, "reduce_axis",
     ["reduction axis 2 is out of range", "fix: use an axis from -1 to 0", "inside tl.sum"]),
    (xor_sum_of_floats, (F32,), {}, CompileTimeAssertionFailure, "xor_sum_float",
     ["xor_sum is only defined for integers", "inside tl.xor_sum"]),
    (tensor_descriptor, (F32,), {}, CompilationError, "descriptor",
     ["at least 16 bytes in the last dimension, but got 2 * 4 = 8 bytes",
      "fix: make the last dimension of block_shape at least 4 elements"]),
    (one_sided_assignment, (F32, 4), {}, CompilationError, "one_sided_use",
     ["'v' is not defined here", f"only in one branch of the runtime 'if' at line "
      f"{line_of('one_sided_if')}", "fix: assign it before the if"]),
    (unsigned_minus_one, (U32,), {}, CompilationError, "unsigned_negative",
     ["unsigned tensor (tl.uint32) and a negative scalar (-1)", "explicit cast"]),
    (float_atomic_max_fp16, (F16,), {}, CompilationError, "atomic_fp16",
     ["tl.atomic_max does not support fp16", "fix:"]),
    (other_without_mask, (F32,), {}, CompilationError, "other_no_mask",
     ["`other` needs a `mask`", "fix: pass mask="]),
    (integer_mask, (F32,), {}, CompilationError, "int_mask",
     ["mask must be a boolean (int1) tensor, got int32", "fix: compare"]),
    (power_operator, (F32,), {}, CompilationError, "power", ["'**' is not supported", "fix:"]),
    (bad_cache_modifier, (F32,), {}, CompilationError, "cache_modifier",
     ["cache_modifier '.zz' is not one of", "'.cg'"]),
    (wrong_call_arity, (F32,), {}, CompilationError, "call_arity",
     ["calling needs_constexpr", "missing a required argument: 'K'"]),
    (tensor_in_bool, (F32,), {}, CompilationError, "bool_tensor",
     ["bool() runs at compile time", "fix: compare explicitly (x != 0)"]),
    (uses_dot_scaled, (F32,), {}, CompilationError, "dot_scaled",
     ["tl.dot_scaled: lhs in format 'e4m3' must be fp8e4nv or uint8, got fp16"]),
    (loops_over_a_tensor, (F32,), {}, CompilationError, "loop_tensor",
     ["kernels loop only over range(...)", "tl.static_range(...) or a tuple"]),
    (padding_without_block_pointer, (F32,), {}, CompilationError, "padding",
     ["only for block pointers", "fix: use mask= and other="]),
    (assigns_to_an_element, (F32,), {}, CompilationError, "item_assign",
     ["cannot assign to v[0]", "use tl.where to change elements"]),
    (indexes_with_an_int, (F32,), {}, CompilationError, "int_index",
     ["unsupported tensor index 3", "fix: tensors accept only None (new axis) and ':'"]),
    (unary_plus, (F32,), {}, CompilationError, "unary_plus",
     ["unary + is not defined on Triton tensors", "drop it"]),
    (not_of_a_float, (F32,), {}, CompilationError, "not_float",
     ["`not` needs a boolean (tl.int1)", "write x == 0"]),
    (dot_into_bf16, (F32,), {}, CompilationError, "dot_bf16",
     ["out_dtype=bfloat16 is unsupported", "fix: use out_dtype=tl.float32"]),
    (dot_accumulator_type, (F32,), {}, CompilationError, "dot_acc",
     ["the accumulator is fp16[16, 16] but the product is fp32[16, 16]", "fix: pass an accumulator"]),
    (constexpr_depends_on_runtime, (F32, 4), {}, CompilationError, "constexpr_branches",
     ["'mode' is the constexpr 1 in one branch of this runtime 'if'",
      "fix: give it the same value in both branches"]),
    (fdiv_of_integers, (F32,), {}, CompilationError, "fdiv_int",
     ["both operands of tl.fdiv must be floats, got int32 and int32", "fix: convert them"]),
    (runtime_shape, (F32, 4), {}, CompilationError, "runtime_shape",
     ["shapes must be compile-time integers", "fix: use tl.constexpr values"]),
    (formats_a_runtime_value, (F32,), {}, CompilationError, "fstring",
     ["f-strings can only format compile-time values", "fix: use tl.device_print"]),
]


@pytest.mark.parametrize("kernel,args,kwargs,error,marker,phrases", CASES,
                         ids=[case[4] for case in CASES])
def test_user_error(kernel, args, kwargs, error, marker, phrases):
    with pytest.raises(error) as info:
        ttir_for(kernel, *args, **kwargs)
    e = info.value
    assert type(e) is error
    assert e.kernel == kernel.__name__ and e.function == kernel.__name__
    assert e.filename == __file__
    assert e.lineno == line_of(marker), str(e)
    for phrase in phrases:
        assert phrase in e.message, (phrase, e.message)
    text = str(e)
    assert text.startswith(f"in kernel '{kernel.__name__}' at {__file__}:{e.lineno}:{e.col + 1}:")
    assert _SOURCE[e.lineno - 1].rstrip() in text        # the source line is shown
    assert "\n" + " " * (4 + e.col) + "^\n" in text       # with a caret under the column


def test_distinct_error_count():
    assert len({case[4] for case in CASES}) >= 35


# -- errors inside called functions -------------------------------------------------------------

def test_error_in_a_helper_keeps_its_line_and_names_the_call():
    with pytest.raises(CompilationError) as info:
        ttir_for(calls_early_return, F32)
    e = info.value
    assert e.kernel == "calls_early_return" and e.function == "early_return"
    assert e.lineno == line_of("return_in_loop")
    assert "'return' inside a runtime for/while loop" in e.message
    assert "fix: assign the result to a variable" in e.message
    assert e.call_stack == [f"kernel 'calls_early_return' at {__file__}:{line_of('return_in_if_call')}"]
    assert str(e).startswith(f"in 'early_return' at {__file__}:{e.lineno}:")
    assert f"called from kernel 'calls_early_return' at {__file__}:{line_of('return_in_if_call')}" \
        in str(e).splitlines()[0]


@jit
def middle(x):
    return early_return(x) + 1  # E:middle_call


@jit
def calls_middle(X):
    tl.store(X, middle(tl.load(X)))  # E:outer_call


def test_error_two_calls_deep_lists_the_whole_call_stack():
    with pytest.raises(CompilationError) as info:
        ttir_for(calls_middle, F32)
    e = info.value
    assert (e.kernel, e.function, e.lineno) == ("calls_middle", "early_return", line_of("return_in_loop"))
    assert e.call_stack == [f"'middle' at {__file__}:{line_of('middle_call')}",
                            f"kernel 'calls_middle' at {__file__}:{line_of('outer_call')}"]


@jit
def bad_combine(a, b):
    return a + b, a  # E:bad_combine


@jit
def reduce_with_bad_combine(X):
    v = tl.reduce(tl.load(X + tl.arange(0, 16)), 0, bad_combine)  # E:reduce_call


def test_error_in_a_user_combine_function():
    with pytest.raises(CompilationError) as info:
        ttir_for(reduce_with_bad_combine, F32)
    e = info.value
    assert e.kernel == "reduce_with_bad_combine"
    assert e.lineno == line_of("reduce_call")
    assert "the combine function returns 2 values for 1 inputs" in e.message


def test_library_errors_point_at_the_users_call_not_the_library():
    with pytest.raises(CompilationError) as info:
        ttir_for(reduction_axis, F32)
    e = info.value
    assert "standard.py" not in str(e)
    assert "naiad/language" not in str(e)
    assert e.lineno == line_of("reduce_axis")


# -- recursion ----------------------------------------------------------------------------------

@jit
def forever(x):
    return forever(x)  # E:forever


@jit
def calls_forever(X):
    tl.store(X, forever(tl.load(X)))  # E:calls_forever


def test_recursion_that_cannot_end_is_named_at_the_recursive_call():
    with pytest.raises(CompilationError) as info:
        ttir_for(calls_forever, F32)
    e = info.value
    assert (e.function, e.lineno) == ("forever", line_of("forever"))
    assert "'forever' calls itself with the same argument types and constexpr values" in e.message
    assert "fix: let the recursion end at compile time" in e.message
    assert str(e).count("called from") == 1


@jit
def countdown(x, N: tl.constexpr):
    if N > 0:
        return countdown(x, N - 1) + 1  # E:countdown
    return x


@jit
def calls_countdown(X, N: tl.constexpr):
    tl.store(X, countdown(tl.load(X), N))


def test_deep_recursion_says_its_depth_once():
    ttir_for(calls_countdown, F32, N=10)                  # a recursion that ends compiles
    with pytest.raises(CompilationError) as info:
        ttir_for(calls_countdown, F32, N=5000)
    text = str(info.value)
    assert "past Python's recursion limit" in info.value.message
    first_line = text.splitlines()[0]
    assert first_line.count(f"called from 'countdown' at {__file__}:{line_of('countdown')}") == 1
    depth = int(re.search(r"\((\d+) times, recursively\)", first_line).group(1))
    assert depth > 10


# -- kernels that cannot be kernels ---------------------------------------------------------------

@pytest.mark.parametrize("thing", [3, "kernel", print, type], ids=repr)
def test_jit_of_something_that_is_not_a_function(thing):
    with pytest.raises(KernelDefinitionError, match=rf"naiad.jit decorates a Python function, not "
                                                    rf"{type(thing).__name__} .* -- fix: write "
                                                    rf"@naiad.jit"):
        jit(thing)


def test_kernels_take_no_star_args_or_star_star_kwargs():
    def with_args(x, *rest):
        pass

    def with_kwargs(x, **options):
        pass

    for fn, stars in ((with_args, "*rest"), (with_kwargs, "**options")):
        with pytest.raises(KernelDefinitionError,
                           match=rf"kernel '{fn.__name__}' at {re.escape(__file__)}:\d+: parameter "
                                 rf"'{re.escape(stars)}' -- kernels and the functions they call take "
                                 rf"no \*args or \*\*kwargs -- fix: name each parameter"):
            jit(fn)


# -- launch errors ------------------------------------------------------------------------------

@jit
def two_params(X, n, BLOCK: tl.constexpr):
    tl.store(X, n)


def test_missing_argument_names_the_parameter():
    with pytest.raises(LaunchError, match=r"two_params: missing a value for parameter 'n' -- fix: "
                                          r"pass every"):
        ttir_for(two_params, F32, BLOCK=4)


def test_too_many_arguments():
    with pytest.raises(LaunchError, match=r"two_params takes 3 arguments but 4 were given"):
        ttir_for(two_params, F32, 1, 2, 3)


def test_a_parameter_given_twice():
    with pytest.raises(LaunchError, match=r"two_params got two values for parameter 'n'"):
        ttir_for(two_params, F32, 1, n=2, BLOCK=4)


def test_unsupported_argument_type_names_the_parameter():
    with pytest.raises(LaunchError, match=r"argument 'n': cannot pass an object of type dict"):
        ttir_for(two_params, F32, {"a": 1}, BLOCK=4)


def test_unsupported_array_dtype():
    with pytest.raises(LaunchError, match=r"argument 'X': arrays of dtype complex64"):
        ttir_for(two_params, np.zeros(4, np.complex64), 1, BLOCK=4)


def test_constexpr_without_a_value_in_make_ttir():
    with pytest.raises(CompilationError, match=r"parameter 'BLOCK' has no type in the signature"):
        make_ttir(two_params, {"X": "*fp32", "n": "i32", "BLOCK": "constexpr"})


def test_bad_signature_string_in_make_ttir():
    with pytest.raises(CompilationError, match=r"parameter 'n' has the type 'int', which is not"):
        make_ttir(two_params, {"X": "*fp32", "n": "int"}, {"BLOCK": 4})


# -- what the traceback shows -----------------------------------------------------------------------

def _frames(error: BaseException) -> list[str]:
    return [frame.filename for frame in traceback.extract_tb(error.__traceback__)]


@pytest.mark.parametrize("kernel,args", [(undefined_name, (F32,)), (pointer_plus_pointer, (F32, F32)),
                                         (reduction_axis, (F32,)), (calls_early_return, (F32,))])
def test_traceback_hides_the_compiler(kernel, args):
    with pytest.raises(CompilationError) as info:
        ttir_for(kernel, *args)
    frames = _frames(info.value)
    assert not [f for f in frames if "code_generator" in f or "semantic" in f or "language" in f]
    assert len([f for f in frames if f.endswith("frontend.py")]) == 1     # the entry point only
    # The language layer's exception stays the cause (Triton's tests read it), without frames.
    cause = info.value.__cause__
    assert info.value.__suppress_context__ and (cause is None or cause.__traceback__ is None)
    text = "".join(traceback.format_exception(info.value))
    assert "code_generator.py" not in text and "During handling" not in text


def test_frontend_debug_shows_the_compiler_frames(monkeypatch):
    monkeypatch.setenv("NAIAD_FRONTEND_DEBUG", "1")
    with pytest.raises(CompilationError) as info:
        ttir_for(undefined_name, F32)
    assert any(f.endswith("code_generator.py") for f in _frames(info.value))
    # Errors of the language layer come out as they were raised, with their own frames.
    with pytest.raises(TypeError) as raw:
        ttir_for(pointer_plus_pointer, F32, F32)
    assert not isinstance(raw.value, CompilationError)
    assert any(f.endswith("semantic.py") or f.endswith("promotion.py") for f in _frames(raw.value))


def test_errors_survive_pickling():
    import pickle

    with pytest.raises(CompilationError) as info:
        ttir_for(calls_early_return, F32)
    copy = pickle.loads(pickle.dumps(info.value))
    assert str(copy) == str(info.value) and copy.call_stack == info.value.call_stack
