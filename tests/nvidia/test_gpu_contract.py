"""The shared GPU lowering's contract with a target (naiad/codegen/gpu/hooks.py) and its rule
tables: what a backend author builds on."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import llvmlite.binding as llvm
from xdsl.dialects.builtin import Float32Type
import llvmlite.ir as ir
import pytest

import naiad.codegen.gpu  # noqa: F401  (registers the shared rules)
from naiad.backends.cuda.hooks import NVPTXHooks
from naiad.backends.cuda.tensor_cores import RULES as CUDA_RULES
from naiad.codegen import llvm_types as lt
from naiad.codegen.gpu.hooks import GPUHooks
from naiad.codegen.gpu.kernel import RULES
from naiad.ir import tt

pytestmark = pytest.mark.shipped_backends

#: The members a target must supply (no plain-LLVM default).
REQUIRED = ["prepare_module", "mark_kernel", "thread_id", "program_id",
            "num_programs", "barrier", "shuffle_xor", "shuffle_index", "lane_id",
            "load_with_policy", "store_with_policy", "clock_ns", "asm_register_type"]
#: The members with a plain-LLVM default (that NVIDIA replaces by PTX).
DEFAULTED = ["atomic_rmw", "atomic_cas", "relaxed_load", "acquire_fence"]


def _arguments(name):
    """Placeholders for a member's parameters (the defaults never look at them)."""
    return [None] * (len(inspect.signature(getattr(GPUHooks, name)).parameters) - 1)


@pytest.mark.parametrize("name", REQUIRED)
def test_a_member_the_target_lacks_says_which(name):
    class Partial(GPUHooks):
        name = "toy"

    with pytest.raises(NotImplementedError, match=rf"the toy backend's GPU hooks do not supply {name}"):
        getattr(Partial(), name)(*_arguments(name))


def test_shuffle_up_defaults_to_an_indexed_shuffle_keeping_the_low_lanes():
    """Lane l reads lane l - delta; lanes below delta keep their own value."""
    from naiad.codegen.gpu.hooks import sized_shared_array

    class Indexed(GPUHooks):
        name = "toy"

        def lane_id(self, b):
            return b.call(lt.function(b.module, "lane", lt.I32, []), [])

        def shuffle_index(self, b, value, lane):
            return b.call(lt.function(b.module, "read_lane", lt.I32, [lt.I32, lt.I32]), [value, lane])

    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(lt.I32, [lt.I32]), "up")
    b = ir.IRBuilder(fn.append_basic_block())
    hooks = Indexed()
    b.ret(hooks.shuffle_up(b, fn.args[0], 2))
    base = hooks.shared_base(b)
    assert base is not None
    text = str(module)
    assert "sub i32" in text and "icmp slt i32" in text and text.count("select") == 2
    assert '@"naiad_shared" = external addrspace(3) global [0 x i8]' in text
    sized = sized_shared_array(text, "naiad_shared", 300)
    assert '@"naiad_shared" = internal addrspace(3) global [300 x i8] undef, align 16' in sized


def test_parameters_default_to_global_pointers_and_byte_booleans():
    """Pointers come in as pointers into the global address space and reach the shared rules
    as i64 addresses; booleans come in as bytes and reach them as i1; other scalars as they are."""
    from xdsl.dialects.builtin import i1

    from naiad.ir.types import PointerType

    hooks = GPUHooks()
    pointer = PointerType(Float32Type())
    assert hooks.param_type(pointer) == ir.PointerType(addrspace=hooks.global_addrspace)
    assert hooks.param_type(i1) == lt.I8 and hooks.param_type(Float32Type()) == ir.FloatType()
    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [hooks.param_type(t) for t in
                                                                   (pointer, i1, Float32Type())]), "k")
    b = ir.IRBuilder(fn.append_basic_block())
    address, flag, value = (hooks.param_value(b, a, t) for a, t in zip(fn.args, (pointer, i1, Float32Type())))
    assert address.type == lt.I64 and address.opname == "ptrtoint"
    assert flag.type == lt.I1 and flag.opname == "trunc"
    assert value is fn.args[2]


def test_cache_hints_are_ignored_by_default():
    """A target without cache policies gets plain accesses (hints change speed, not results)."""
    assert GPUHooks().access_policy(None, None, store=False) is None


def _op(kind=None, sem="acq_rel", element=Float32Type()):
    """What the atomic hooks read off a tt.atomic_rmw / tt.atomic_cas op."""
    text = lambda value: SimpleNamespace(data=SimpleNamespace(value=value))  # noqa: E731
    return SimpleNamespace(atomic_rmw_op=text(kind), sem=text(sem), val=SimpleNamespace(type=element))


def _builder():
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(64)]), "f")
    b = ir.IRBuilder(fn.append_basic_block())
    return module, b, fn.args[0]


@pytest.mark.parametrize("kind, value, expected", [
    ("add", ir.Constant(ir.IntType(32), 1), "atomicrmw add ptr addrspace(1)"),
    ("umax", ir.Constant(ir.IntType(64), 1), "atomicrmw umax"),
    ("exch", ir.Constant(ir.FloatType(), 1.0), "atomicrmw xchg ptr addrspace(1) %"),
    ("fadd", ir.Constant(ir.FloatType(), 1.0), "cmpxchg ptr addrspace(1)"),
    ("max", ir.Constant(ir.DoubleType(), 1.0), "cmpxchg ptr addrspace(1)"),
    ("fadd", ir.Constant(ir.HalfType(), 1.0), "i32 %"),           # narrow: on the 32-bit word
    ("umin", ir.Constant(ir.IntType(8), 1), "i32 %")])
def test_the_default_atomics_are_llvm_atomics(kind, value, expected):
    """What a target without its own atomics gets: LLVM atomicrmw, or a cmpxchg loop for the
    float operations not every target has; acq_rel everywhere the op says so."""
    module, b, address = _builder()
    old = GPUHooks().atomic_rmw(SimpleNamespace(b=b), _op(kind), address, value)
    b.ret_void()
    assert old.type == value.type
    text = str(module)
    llvm.parse_assembly(text).verify()
    assert expected in text and "acq_rel" in text


def test_the_default_cas_poll_and_fence():
    module, b, address = _builder()
    hooks, k = GPUHooks(), SimpleNamespace(b=b)
    old = hooks.atomic_cas(k, _op(sem="release"), address, ir.Constant(ir.FloatType(), 0.0),
                           ir.Constant(ir.FloatType(), 1.0))
    assert old.type == ir.FloatType()
    hooks.relaxed_load(b, address, ir.IntType(32), "gpu")
    hooks.acquire_fence(b, "gpu")
    b.ret_void()
    text = str(module)
    llvm.parse_assembly(text).verify()
    assert "cmpxchg ptr addrspace(1)" in text and "release monotonic" in text
    assert "load atomic i32, ptr addrspace(1)" in text and "monotonic" in text
    assert "fence acquire" in text


def test_a_narrow_compare_and_swap_works_on_the_word_around_it():
    module, b, address = _builder()
    old = GPUHooks().atomic_cas(SimpleNamespace(b=b), _op(sem="acquire"), address,
                                ir.Constant(ir.IntType(16), 3), ir.Constant(ir.IntType(16), 4))
    b.ret_void()
    text = str(module)
    llvm.parse_assembly(text).verify()
    assert old.type == ir.IntType(16)
    assert "cmpxchg ptr addrspace(1)" in text and "i32" in text and "i16" not in text.split("cmpxchg")[1].split("\n")[0]


@pytest.mark.parametrize("name", REQUIRED + DEFAULTED)
def test_the_nvidia_hooks_supply_every_member(name):
    assert getattr(NVPTXHooks, name) is not getattr(GPUHooks, name)
    assert issubclass(NVPTXHooks, GPUHooks)


def test_the_shared_rule_table_is_read_only():
    with pytest.raises(TypeError):
        RULES[tt.DotOp] = lambda k, op: None            # type: ignore[index]


def test_a_backend_replaces_a_rule_in_its_own_table_only():
    """cuda lowers dots with its tensor-core rule (and the loads, loops and transposes around
    them); the shared table keeps the FMA one."""
    assert CUDA_RULES[tt.DotOp] is not RULES[tt.DotOp]
    assert RULES[tt.DotOp].__module__ == "naiad.codegen.gpu.ops_dot"
    assert all(CUDA_RULES[op] is RULES[op] for op in RULES
               if op not in (tt.DotOp, tt.LoadOp, tt.TransOp) and op.__name__ != "ForOp")
