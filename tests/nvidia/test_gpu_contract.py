"""The shared GPU lowering's contract with a target (naiad/codegen/gpu/hooks.py) and its rule
tables: what a backend author builds on."""

from __future__ import annotations

import inspect

import pytest

import naiad.codegen.gpu  # noqa: F401  (registers the shared rules)
from naiad.backends.cuda.hooks import NVPTXHooks
from naiad.backends.cuda.tensor_cores import RULES as CUDA_RULES
from naiad.codegen.gpu.hooks import GPUHooks
from naiad.codegen.gpu.kernel import RULES
from naiad.ir import tt

pytestmark = pytest.mark.shipped_backends

#: The members a target must supply (no plain-LLVM default).
REQUIRED = ["prepare_module", "param_type", "param_value", "mark_kernel", "thread_id", "program_id",
            "num_programs", "barrier", "shuffle_xor", "shuffle_index", "shuffle_up", "shared_base",
            "load_with_policy", "store_with_policy", "atomic_rmw", "atomic_cas", "relaxed_load",
            "acquire_fence", "clock_ns", "asm_register_type"]


def _arguments(name):
    """Placeholders for a member's parameters (the defaults never look at them)."""
    return [None] * (len(inspect.signature(getattr(GPUHooks, name)).parameters) - 1)


@pytest.mark.parametrize("name", REQUIRED)
def test_a_member_the_target_lacks_says_which(name):
    class Partial(GPUHooks):
        name = "toy"

    with pytest.raises(NotImplementedError, match=rf"the toy backend's GPU hooks do not supply {name}"):
        getattr(Partial(), name)(*_arguments(name))


def test_cache_hints_are_ignored_by_default():
    """A target without cache policies gets plain accesses (hints change speed, not results)."""
    assert GPUHooks().access_policy(None, None, store=False) is None


@pytest.mark.parametrize("name", REQUIRED)
def test_the_nvidia_hooks_supply_every_member(name):
    assert getattr(NVPTXHooks, name) is not getattr(GPUHooks, name)
    assert issubclass(NVPTXHooks, GPUHooks)


def test_the_shared_rule_table_is_read_only():
    with pytest.raises(TypeError):
        RULES[tt.DotOp] = lambda k, op: None            # type: ignore[index]


def test_a_backend_replaces_a_rule_in_its_own_table_only():
    """cuda lowers dots with its tensor-core rule; the shared table keeps the FMA one."""
    assert CUDA_RULES[tt.DotOp] is not RULES[tt.DotOp]
    assert RULES[tt.DotOp].__module__ == "naiad.codegen.gpu.ops_dot"
    assert all(CUDA_RULES[op] is RULES[op] for op in RULES
               if op not in (tt.DotOp, tt.LoadOp) and op.__name__ != "ForOp")
