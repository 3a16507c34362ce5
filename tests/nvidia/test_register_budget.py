"""Small kernels are assembled with a register budget (`naiad.backends.cuda.register_budget`):
ptxas, which squeezed them into 32 registers by loading late, then issues their loads
together.  Kernels that need more registers, or that name ``maxnreg``, are left as ptxas makes
them, and a budget that would spill is not kept."""

from __future__ import annotations

import re

import pytest

import naiad
import naiad.language as tl
from naiad.backends.cuda import register_budget, toolchain

from .conftest import TARGET, compile_cuda, needs_ptxas
from .test_erf import ALIGNED, GELU_SIGNATURE, gelu_mul

pytestmark = pytest.mark.shipped_backends

_ENTRY = """.visible .entry k(
\t.param .u64 k_param_0
)
.maxntid 128
{
\tret;
}
"""


def test_the_budget_follows_the_kernels_thread_limit():
    budgeted = register_budget.with_budget(_ENTRY, 48)
    assert ".maxntid 128\n.maxnreg 48\n{" in budgeted
    assert budgeted.replace(".maxnreg 48\n", "") == _ENTRY
    required = register_budget.with_budget(_ENTRY.replace(".maxntid", ".reqntid"), 40)
    assert ".reqntid 128\n.maxnreg 40\n{" in required


@pytest.mark.parametrize("ptx", [_ENTRY.replace(".maxntid 128", ".maxntid 128\n.maxnreg 64"),
                                 _ENTRY.replace(".maxntid 128\n", "")])
def test_no_budget_where_the_ptx_states_a_limit_or_has_no_thread_limit(ptx):
    assert register_budget.with_budget(ptx, 48) is None


def _registers(ptx: str) -> int:
    return toolchain.ptx_to_cubin(ptx, 90, ptxas=toolchain.find_ptxas()).registers


@needs_ptxas
def test_a_gelu_that_ptxas_squeezes_gets_the_budget_and_uses_it():
    kernel = compile_cuda(gelu_mul, {**GELU_SIGNATURE, "A": "*fp16", "B": "*fp16", "Out": "*fp16"},
                          {"BLOCK": 1024}, ALIGNED, num_warps=4)
    ptx = kernel.asm["ptx"]
    assert _registers(ptx) <= register_budget.SQUEEZED
    assert kernel.metadata["register_budget"] == register_budget.BUDGET
    budgeted = toolchain.ptx_to_cubin(register_budget.with_budget(ptx, register_budget.BUDGET), 90,
                                      ptxas=toolchain.find_ptxas())
    assert register_budget.SQUEEZED < budgeted.registers <= register_budget.BUDGET
    assert budgeted.spill_bytes == 0
    assert kernel.asm["cubin"] == budgeted.cubin


@naiad.jit
def row_softmax(X, Out, N: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(X + row * N + tl.arange(0, N))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(Out + row * N + tl.arange(0, N), e / tl.sum(e, 0))


@needs_ptxas
def test_a_kernel_that_needs_more_registers_keeps_ptxas_s_choice():
    kernel = compile_cuda(row_softmax, {"X": "*fp32", "Out": "*fp32"}, {"N": 16384}, num_warps=4)
    assert _registers(kernel.asm["ptx"]) > register_budget.SQUEEZED
    assert "register_budget" not in kernel.metadata


@needs_ptxas
def test_maxnreg_is_kept_as_asked():
    from naiad.compiler.compiler import ASTSource

    source = ASTSource(gelu_mul, GELU_SIGNATURE, {"BLOCK": 1024}, ALIGNED)
    kernel = naiad.compile(source, target=TARGET, options={"maxnreg": 40})
    assert re.search(r"\.maxnreg 40\b", kernel.asm["ptx"])
    assert "register_budget" not in kernel.metadata


_LONG = _ENTRY.replace("{\n", "{\n" + "\t// padding\n" * register_budget.SHORT_PTX)


@pytest.mark.parametrize("first, second, kept", [
    ((32, 0), (45, 0), ("budgeted", 48)),      # squeezed: the budget is kept
    ((32, 0), (48, 16), ("first", None)),      # the budget would spill
    ((33, 0), (40, 0), ("first", None)),       # not squeezed
    ((0, 0), (40, 0), ("first", None)),        # a ptxas that reports nothing
])
@pytest.mark.parametrize("ptx", [_ENTRY, _LONG], ids=["short", "long"])
def test_the_budgeted_cubin_is_kept_only_where_ptxas_squeezed_and_it_does_not_spill(first, second, kept, ptx):
    calls = []

    def assemble(text):
        calls.append(text)
        budgeted = ".maxnreg" in text
        registers, spills = second if budgeted else first
        return toolchain.Assembled(b"budgeted" if budgeted else b"first", registers, spills)

    cubin, budget = register_budget.assemble(ptx, assemble)
    assert (cubin.decode(), budget) == kept
    # a short PTX is assembled both ways at once; a long one a second time only where squeezed
    squeezed = 0 < first[0] <= register_budget.SQUEEZED
    assert len(calls) == (2 if ptx is _ENTRY or squeezed else 1)
