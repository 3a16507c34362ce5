"""What a GPU target supplies to the shared GPU lowering (`naiad.codegen.gpu`): the contract.

The shared rules lower TTGIR to LLVM IR for any GPU whose programs run as blocks of threads in
lockstep groups ("warps": NVIDIA's warps, AMD's wavefronts, OpenCL's sub-groups) with a shared
memory per block.  Everything that differs between targets goes through an instance of a
subclass of `GPUHooks`, which `GPUKernel` holds as ``hooks``:

- the module (triple, data layout), kernel parameters and the kernel's marking;
- thread, program and grid ids, the block barrier, lane shuffles within a warp, the shared
  memory's base;
- memory accesses with cache hints, atomics with memory semantics and scopes, polling loads,
  fences and a clock: each with a default in plain LLVM that a target may replace by its own
  instructions (NVIDIA: PTX);
- inline assembly's register classes, device printf and assert (from `TargetHooks`, with its
  math library choices).

A member without a default raises `NotImplementedError` naming what the target must supply;
the compiler reports it as the backend's missing feature.  `naiad.backends.cuda.hooks` is the
worked example.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from naiad.codegen.hooks import TargetHooks


class GPUHooks(TargetHooks):
    """The target side of the shared GPU lowering; subclass it and override what the target
    has (the abstract members first)."""

    #: Threads of one lockstep group, the unit of shuffles and of a layout's lanes.
    warp_size: int = 32
    #: LLVM address spaces of global memory (kernel pointers), constants and shared memory.
    global_addrspace: int = 1
    constant_addrspace: int = 4
    shared_addrspace: int = 3

    def _missing(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"the {self.name} backend's GPU hooks do not supply {what}")

    # -- the module and the kernel's interface ---------------------------------------------------
    def prepare_module(self, module: ir.Module) -> None:
        """Set the module's triple and data layout (called once, before anything is emitted)."""
        raise self._missing("prepare_module (the LLVM triple and data layout)")

    def param_type(self, mlir_type: Any) -> ir.Type:
        """The LLVM type of a kernel parameter of TTIR type ``mlir_type``."""
        raise self._missing("param_type")

    def param_value(self, b: ir.IRBuilder, param: ir.Value, mlir_type: Any) -> ir.Value:
        """The value the shared rules use for parameter ``param`` (pointers as i64 addresses,
        booleans as i1)."""
        raise self._missing("param_value")

    def mark_kernel(self, fn: ir.Function, threads: int) -> None:
        """Make ``fn`` a kernel entry of ``threads`` threads per block (calling convention,
        annotations)."""
        raise self._missing("mark_kernel")

    # -- ids, synchronization, shuffles, shared memory ----------------------------------------
    def thread_id(self, b: ir.IRBuilder) -> ir.Value:
        """This thread's index in its block (i32)."""
        raise self._missing("thread_id")

    def program_id(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        """``tl.program_id(axis)`` (i32)."""
        raise self._missing("program_id")

    def num_programs(self, b: ir.IRBuilder, axis: int) -> ir.Value:
        """``tl.num_programs(axis)`` (i32)."""
        raise self._missing("num_programs")

    def barrier(self, b: ir.IRBuilder) -> None:
        """Every thread of the block waits here; shared memory written before is visible after.
        It must be a call LLVM knows is convergent."""
        raise self._missing("barrier")

    def shuffle_xor(self, b: ir.IRBuilder, value: ir.Value, offset: int) -> ir.Value:
        """The 32-bit ``value`` of lane ``lane ^ offset`` of the same warp."""
        raise self._missing("shuffle_xor")

    def shuffle_index(self, b: ir.IRBuilder, value: ir.Value, lane: ir.Value) -> ir.Value:
        """The 32-bit ``value`` of lane ``lane`` (an i32) of the same warp."""
        raise self._missing("shuffle_index")

    def shuffle_up(self, b: ir.IRBuilder, value: ir.Value, delta: int) -> ir.Value:
        """The 32-bit ``value`` of lane ``lane - delta`` (a lane's own below ``delta``)."""
        raise self._missing("shuffle_up")

    def shared_base(self, b: ir.IRBuilder) -> ir.Value:
        """A pointer (in the shared address space) to the block's shared memory, whose size the
        compiler reports as the kernel's ``shared`` metadata."""
        raise self._missing("shared_base")

    # -- memory with hints, atomics, polling ----------------------------------------------------
    def access_policy(self, k: Any, op: Any, store: bool) -> Any:
        """What the target makes of a load's or store's cache modifier and eviction policy, once
        per op (an object the two calls below receive), or None for a plain access.  By
        default hints are ignored: they change speed, not results."""
        return None

    def load_with_policy(self, k: Any, policy: Any, address: ir.Value, vtype: ir.Type,
                         nbytes: int) -> ir.Value:
        """One load of ``vtype`` (an element of ``nbytes`` or a vector of them) at the i64
        ``address`` under ``policy`` (from `access_policy`)."""
        raise self._missing("load_with_policy")

    def store_with_policy(self, k: Any, policy: Any, address: ir.Value, value: ir.Value,
                          nbytes: int) -> None:
        """One store of ``value`` at the i64 ``address`` under ``policy``."""
        raise self._missing("store_with_policy")

    def atomic_rmw(self, k: Any, op: Any, address: ir.Value, value: ir.Value) -> ir.Value:
        """``tt.atomic_rmw`` ``op``'s read-modify-write of one element: ``value`` at the i64
        ``address``, with ``op``'s kind, memory semantics and scope; the old value."""
        raise self._missing("atomic_rmw (tl.atomic_add and the other read-modify-writes)")

    def atomic_cas(self, k: Any, op: Any, address: ir.Value, expected: ir.Value,
                   value: ir.Value) -> ir.Value:
        """``tt.atomic_cas`` ``op`` on one element; the old value."""
        raise self._missing("atomic_cas (tl.atomic_cas)")

    def relaxed_load(self, b: ir.IRBuilder, address: ir.Value, element: ir.Type, scope: str) -> ir.Value:
        """A relaxed atomic load of ``element`` at the i64 ``address`` (``tl.atomic_poll``)."""
        raise self._missing("relaxed_load (tl.atomic_poll)")

    def acquire_fence(self, b: ir.IRBuilder, scope: str) -> None:
        """A fence with (at least) acquire semantics at ``scope`` ("gpu", "cta", "sys")."""
        raise self._missing("acquire_fence")

    def clock_ns(self, b: ir.IRBuilder) -> ir.Value:
        """A nanosecond clock (i64) for timeouts (``tl.atomic_poll(timeout_ns=...)``)."""
        raise self._missing("clock_ns (timeouts)")

    # -- inline assembly -----------------------------------------------------------------------------
    def asm_register_type(self, letter: str) -> ir.Type:
        """The LLVM type of an inline-assembly operand of constraint ``letter`` (NVIDIA: ``r``
        is i32, ``f`` f32...)."""
        raise self._missing("asm_register_type (inline assembly: tl.inline_asm_elementwise)")
