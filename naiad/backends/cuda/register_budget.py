"""A register budget for small kernels, so that ptxas issues their loads together.

Left to itself, ptxas fits a kernel that can be made small into 32 registers a thread (all 64
warps of an SM resident) by moving loads down to their first use.  In a fused element-wise
kernel such as ``gelu(a) * b`` that means ``b`` is loaded only after ``a``'s erf is computed: a
thread waits on memory twice, one load after the other, and a grid smaller than a wave (where
residency does not matter) pays both latencies.  Given a budget (the PTX's ``.maxnreg``) ptxas
schedules for it instead: with 48 the kernel above issues both loads first and uses 45
registers (40 warps resident), and on an H100 ran 1.01-1.05x Triton 3.6 at 2^16 elements
(1.04-1.07x with Naiad's erf) instead of 0.89-0.93 (docs/PERFORMANCE.md, session 29).

A budget is also a ceiling, and kernels that need more registers would spill under it, so only
kernels that ptxas squeezed to `SQUEEZED` registers or fewer are assembled again with
`BUDGET`; the second cubin is kept when it does not spill.  Kernels compiled with the
``maxnreg`` option keep exactly what was asked for.  Small kernels are assembled both ways at
once, so the cold compile of the gallery's add stays at about 40 ms (57 ms one after the other).
"""

from __future__ import annotations

import concurrent.futures
import re
from typing import Any, Callable

#: What ptxas squeezes a small kernel into: 64 K registers / 2048 threads.
SQUEEZED = 32
#: The budget given to such kernels: 48 a thread still leaves 40 warps of an SM resident.
BUDGET = 48
#: PTX up to this many lines is assembled with and without the budget at once (the small
#: kernels; a tensor-core matmul's is several thousand).
SHORT_PTX = 1500

_THREAD_LIMIT = re.compile(r"^\.(maxntid|reqntid)\b[^\n]*$", re.MULTILINE)


def with_budget(ptx: str, registers: int) -> str | None:
    """``ptx`` with ``.maxnreg registers`` after its kernel's thread limit; None where the PTX
    has no thread limit to place it after, or already states a register limit."""
    if ".maxnreg" in ptx:
        return None
    limit = _THREAD_LIMIT.search(ptx)
    if limit is None:
        return None
    return f"{ptx[:limit.end()]}\n.maxnreg {registers}{ptx[limit.end():]}"


def assemble(ptx: str, assemble_ptx: Callable[[str], Any]) -> tuple[bytes, int | None]:
    """The cubin of ``ptx`` (``assemble_ptx`` returns a `toolchain.Assembled`), assembled again
    with `BUDGET` registers where ptxas squeezed it into `SQUEEZED` or fewer and the budgeted
    one does not spill; and the budget used (None: none).  A short PTX (`SHORT_PTX` lines: the
    kernels that come out small) is assembled both ways at once, in two ptxas processes, so the
    second costs no wait."""
    budgeted = with_budget(ptx, BUDGET)
    if budgeted is None:
        return assemble_ptx(ptx).cubin, None
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        early = pool.submit(assemble_ptx, budgeted) if ptx.count("\n") <= SHORT_PTX else None
        first = assemble_ptx(ptx)
        if not 0 < first.registers <= SQUEEZED:
            return first.cubin, None
        second = early.result() if early is not None else assemble_ptx(budgeted)
    return (second.cubin, BUDGET) if second.spill_bytes == 0 else (first.cubin, None)
