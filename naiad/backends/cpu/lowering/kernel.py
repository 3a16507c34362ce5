"""TTIR kernel -> one LLVM function per program, plus the grid function the driver calls.

``naiad_kernel(args, pid_x, pid_y, pid_z, n_x, n_y, n_z, kept, zeroed)`` runs one program; the
arguments come packed in 8-byte slots of ``args``.  ``naiad_grid(args, n_x, n_y, n_z, first,
last)`` runs programs ``first .. last-1`` (linear ids, x fastest): a driver thread calls it once
per share of the grid, so no Python runs per program.  Memory a program keeps for the next ones
its thread runs (`share_memory`: `operand_cache`'s copies) is allocated there, once a share,
and given to each program as ``kept`` (and ``zeroed``, its part cleared first; both null where
none could be had).

Op by op, in program order: scalars become LLVM values; tensors become `Lazy` (computed inside
whatever loop consumes them) or `Buffer` (materialized, when used twice, across a region, or by
an op that needs random access).  Ops with effects (stores, atomics) and ops that produce whole
tensors (reductions, scans, dot) emit their own loops, evaluating operands chunk by chunk.
Calls of ``noinline`` functions are inlined as they are lowered.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterator

import llvmlite.ir as ir
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerType, ModuleOp, TensorType
from xdsl.ir import Block, SSAValue

from naiad.backends.cpu.lowering import (block_pointers, control, debug, matmul, memory,
                                         reductions, shapes)
from naiad.backends.cpu.lowering.tiles import (ELEMENTWISE, Buffer, ChunkEmitter, Lazy,
                                               consecutive_lanes, numel, shape_of, uniform_lanes)
from naiad.codegen import elementwise, llvm_types as lt, loops
from naiad.codegen.axis_info import AxisInfo, analyze, info_of, innermost_dim
from naiad.compiler.errors import error_at
from naiad.ir import arith, gpu, tt
from naiad.ir.types import PointerType

ARG_SLOT = 8
#: Bytes before the argument slots in `naiad_launch`'s buffer: five int32 and padding.
LAUNCH_HEADER = 24
#: Tensor ops that are cheap to recompute wherever they are used (no memory traffic).
_CHEAP = (arith.ConstantOp, tt.SplatOp, tt.MakeRangeOp, tt.ExpandDimsOp, tt.ReshapeOp,
          tt.BroadcastOp)
_MAX_RECOMPUTE = 6
#: Columns of the grid's y axis run together in a kernel with dots, and the side of the squares
#: of programs they run in (`_grouped_ids`); a power of two.
DOT_GROUP = 8
_DOTS = (tt.DotOp,)


class KernelLowering:
    """Lowers the public ``tt.func`` of a TTIR module into an llvmlite module."""

    def __init__(self, module: ModuleOp, hooks: Any, lanes: int, triple: str, data_layout: str,
                 bounds_check: bool = False):
        self.module = module
        self.hooks = hooks
        self.lanes = lanes
        self.bounds_check = bounds_check
        self.llmod = ir.Module(name="naiad_kernel")
        self.llmod.triple = triple
        self.llmod.data_layout = data_layout
        self.env: dict[SSAValue, Any] = {}
        self.chunks = ChunkEmitter(self)
        self.b: ir.IRBuilder = None  # type: ignore[assignment]
        self._contexts: dict[int, elementwise.Lowering] = {}
        self.position = 0
        #: Bounds checks: one entry per checked memory access (kind, file, line, argument).
        self.debug_accesses: list[dict] = []
        #: Bytes of stack buffers for materialized tensors: the kernel's "shared memory".
        self.scratch_bytes = 0
        self.debug_ranges: tuple[ir.Value, ir.Value] | None = None
        #: Per region being lowered (innermost last): its block, and what `remember` replaced
        #: there for values defined outside it.
        self._regions: list[tuple[Block, list[tuple[SSAValue, Any]]]] = []
        #: Loop-body values computed a chunk at a time with the yields they feed
        #: (`control.fused_values`): never materialized for their several uses.
        self.fused: set[SSAValue] = set()
        #: Code to emit where an `scf.for` exits, before its results are used (`after_loop`).
        self._after_loops: dict[Any, list[Callable[[], None]]] = {}
        #: Bytes of the memory kept across a thread's programs (`share_memory`): cleared first
        #: and not.
        self._share_bytes = {True: 0, False: 0}
        #: Whether some dot operand's copies are kept across programs (`operand_cache`): the grid
        #: then runs its programs in the order that shares them (`_grouped_ids`).
        self.keeps_operand_copies = False
        #: Code the grid function emits after a share's last program (`at_share_end`), by name.
        self._share_ends: dict[str, Callable[[ir.IRBuilder], None]] = {}

    # -- entry ------------------------------------------------------------------------------
    def lower(self) -> ir.Module:
        func = tt.public_functions(self.module)[0]
        self.func_op = func
        self.uses = _use_counts(self.module)
        #: What is known of each value's elements (`consecutive`): once, of the module as it is
        #: lowered; a called function's values are added as each call is lowered (`_call`).
        self.axis = analyze(func)
        body = ir.Function(self.llmod, ir.FunctionType(lt.VOID, [lt.PTR] + [lt.I32] * 6 + [lt.PTR] * 2),
                           "naiad_kernel")
        body.linkage = "internal"
        body.attributes.add("alwaysinline")
        entry = body.append_basic_block("entry")
        self.alloca_builder = ir.IRBuilder(entry)
        start = body.append_basic_block("start")
        self.b = ir.IRBuilder(start)
        args_ptr, *ids, self._kept, self._zeroed = body.args
        self.program_ids, self.num_programs = ids[:3], ids[3:6]
        self._unpack_arguments(func, args_ptr)
        self.lower_block(func.body.block)
        if not self.b.block.is_terminated:
            self.b.ret_void()
        self.alloca_builder.branch(start)
        self._launch_function(self._grid_function(body))
        return self.llmod

    def _unpack_arguments(self, func: Any, args_ptr: ir.Value) -> None:
        for i, arg in enumerate(func.body.block.args):
            slot = self.b.gep(args_ptr, [ir.Constant(lt.I64, i * ARG_SLOT)], source_etype=lt.I8)
            storage, stored = lt.scalar(arg.type), lt.memory_type(arg.type)
            value = self.b.load(slot, typ=stored, align=lt.byte_size(stored))
            self.env[arg] = self.b.trunc(value, lt.I1) if storage == lt.I1 else value
        if self.bounds_check:      # the launcher appends the argument buffers' address ranges
            count_slot = len(func.body.block.args) * ARG_SLOT
            count = self.b.load(self.b.gep(args_ptr, [ir.Constant(lt.I64, count_slot)], source_etype=lt.I8),
                                typ=lt.I64, align=8)
            table = self.b.gep(args_ptr, [ir.Constant(lt.I64, count_slot + ARG_SLOT)], source_etype=lt.I8)
            self.debug_ranges = (count, table)

    def pointer_argument(self, value: SSAValue) -> int | None:
        """The index of the kernel argument a pointer value is derived from, if there is one."""
        seen = 0
        while seen < 64:
            seen += 1
            if isinstance(value.owner, Block):
                args = list(self.func_op.body.block.args)
                return args.index(value) if value in args else None
            op = value.owner
            if not op.operands:
                return None
            value = op.operands[0]
        return None

    def share_memory(self, size: int, zeroed: bool) -> ir.Value:
        """``size`` bytes (64-byte aligned) that stay from one program to the next a thread
        runs in a launch, all zero at the start of its share where ``zeroed``: their address
        (an i64), 0 where the memory could not be had."""
        offset = self._share_bytes[zeroed]
        self._share_bytes[zeroed] += -(-size // 64) * 64
        b = self.alloca_builder                 # at the program's entry: it dominates every use
        address = b.ptrtoint(self._zeroed if zeroed else self._kept, lt.I64)
        moved = b.add(address, ir.Constant(lt.I64, offset))
        return b.select(b.icmp_unsigned("==", address, ir.Constant(lt.I64, 0)), address, moved)

    def at_share_end(self, name: str, emit: Callable[[ir.IRBuilder], None]) -> None:
        """Have ``emit(builder)`` run once after the last program of each share of the grid a
        thread runs (what a program leaves for the next, such as AMX's configured tiles, is
        undone there); ``name`` keeps one of each kind."""
        self._share_ends.setdefault(name, emit)

    def _grid_function(self, body: ir.Function) -> ir.Function:
        """``naiad_grid(args, nx, ny, nz, first, last)``: run programs first..last-1."""
        fn = ir.Function(self.llmod, ir.FunctionType(lt.VOID, [lt.PTR] + [lt.I32] * 5), "naiad_grid")
        fn.attributes.add("noinline")           # one copy of the kernel, called by naiad_launch too
        args, nx, ny, nz, first, last = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        kept, zeroed, release = self._share_allocation(b)
        header, loop, done = (fn.append_basic_block(n) for n in ("header", "loop", "done"))
        start = b.block
        b.branch(header)
        b.position_at_end(header)
        pid = b.phi(lt.I32)
        pid.add_incoming(first, start)
        b.cbranch(b.icmp_signed("<", pid, last), loop, done)
        b.position_at_end(loop)
        if any(isinstance(op, _DOTS) for op in self.module.walk()):
            if self.keeps_operand_copies:           # see `_grouped_ids`
                y, x, z = _grouped_ids(b, pid, ny, nx)
            else:
                x, y, z = _grouped_ids(b, pid, nx, ny)
        else:
            x = b.urem(pid, nx)
            rest = b.udiv(pid, nx)
            y, z = b.urem(rest, ny), b.udiv(rest, ny)
        b.call(body, [args, x, y, z, nx, ny, nz, kept, zeroed])
        pid.add_incoming(b.add(pid, ir.Constant(lt.I32, 1)), loop)
        b.branch(header)
        b.position_at_end(done)
        for emit in self._share_ends.values():
            emit(b)
        release()
        b.ret_void()
        return fn

    def _share_allocation(self, b: ir.IRBuilder) -> tuple[ir.Value, ir.Value, Callable[[], None]]:
        """The memory `share_memory` handed out, allocated once for a share of the grid: its
        kept and zeroed parts (null pointers where there is none), and what frees it after the
        share's programs.  The heap, not the stack: a worker thread's stack may be small."""
        null = ir.Constant(lt.PTR, None)
        zeroed_size, kept_size = self._share_bytes[True], self._share_bytes[False]
        if zeroed_size + kept_size == 0:
            return null, null, lambda: None
        malloc = lt.function(self.llmod, "malloc", lt.PTR, [lt.I64])
        free = lt.function(self.llmod, "free", lt.VOID, [lt.PTR])
        raw = b.call(malloc, [ir.Constant(lt.I64, zeroed_size + kept_size + 64)])
        address = b.ptrtoint(raw, lt.I64)
        aligned = b.and_(b.add(address, ir.Constant(lt.I64, 63)), ir.Constant(lt.I64, -64))
        had = b.icmp_unsigned("!=", address, ir.Constant(lt.I64, 0))
        zeroed = b.select(had, b.inttoptr(aligned, lt.PTR), null)
        kept = b.select(had, b.inttoptr(b.add(aligned, ir.Constant(lt.I64, zeroed_size)), lt.PTR), null)
        memset = lt.intrinsic(self.llmod, "memset", [lt.PTR, lt.I64], lt.VOID, [lt.PTR, lt.I8, lt.I64, lt.I1])
        with b.if_then(had):
            b.call(memset, [zeroed, ir.Constant(lt.I8, 0), ir.Constant(lt.I64, zeroed_size), ir.Constant(lt.I1, 0)])
        return kept, zeroed, lambda: b.call(free, [raw])

    def _launch_function(self, grid: ir.Function) -> None:
        """``naiad_launch(header)``: a whole launch on one thread, from one pointer: the header
        holds nx, ny, nz, first and last (int32 each, `LAUNCH_HEADER` bytes in all) and the
        argument slots follow it.  A ctypes call with one argument costs a quarter of one with
        six, which matters to the warm launch of a small kernel."""
        fn = ir.Function(self.llmod, ir.FunctionType(lt.VOID, [lt.PTR]), "naiad_launch")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        header = fn.args[0]
        fields = [b.load(b.gep(header, [ir.Constant(lt.I64, 4 * i)], source_etype=lt.I8), typ=lt.I32,
                         align=4) for i in range(5)]
        args = b.gep(header, [ir.Constant(lt.I64, LAUNCH_HEADER)], source_etype=lt.I8)
        b.call(grid, [args] + fields)
        b.ret_void()

    # -- values --------------------------------------------------------------------------------
    def ctx(self, lanes: int) -> elementwise.Lowering:
        context = self._contexts.get(lanes)
        if context is None or context.b is not self.b:
            context = self._contexts[lanes] = elementwise.Lowering(self.b, self.hooks, lanes)
        return context

    def lookup(self, value: SSAValue) -> Any:
        try:
            return self.env[value]
        except KeyError:
            raise RuntimeError(f"internal error: {value} has no lowered value") from None

    def scalar(self, value: SSAValue) -> ir.Value:
        held = self.lookup(value)
        if isinstance(held, (Buffer, Lazy)):
            raise RuntimeError(f"internal error: expected a scalar for {value.type}")
        return held

    def scalar_constant(self, value: Any, mlir_elem: Any) -> ir.Value:
        return elementwise.scalar_constant(self.ctx(1), value, mlir_elem)

    def constant_value(self, value: SSAValue) -> int | None:
        """The integer a value is known to hold everywhere (constants and their splats)."""
        owner = value.owner
        if isinstance(owner, tt.SplatOp):
            return self.constant_value(owner.src)
        if isinstance(owner, arith.ConstantOp):
            attr = owner.value
            data = attr.get_values() if hasattr(attr, "get_values") else [attr.value.data]
            if len(set(data)) == 1 and isinstance(data[0], int):
                return data[0]
        return None

    def axis_info(self, value: SSAValue) -> AxisInfo:
        """What is known of ``value``'s elements (nothing, where the analysis did not reach)."""
        return info_of(self.axis, value)

    def consecutive(self, value: SSAValue, lanes: int) -> bool:
        """Whether each chunk of ``lanes`` elements of the tensor ``value`` holds consecutive
        values (pointers: addresses one element apart), as `consecutive_lanes` reads it."""
        return consecutive_lanes(self.axis_info(value), shape_of(value.type), lanes)

    def uniform(self, value: SSAValue, lanes: int) -> bool:
        """Whether each chunk of ``lanes`` elements of the tensor ``value`` holds one value
        (pointers: one address), as `uniform_lanes` reads it."""
        return uniform_lanes(self.axis_info(value), shape_of(value.type), lanes)

    def buffer(self, mlir_type: Any, copies: int = 1) -> Buffer:
        """A fresh stack buffer for a tensor of ``mlir_type`` (allocated once, at entry), or
        for ``copies`` of them one after another (the buffer is the first)."""
        storage = lt.memory_type(mlir_type)
        count = numel(mlir_type) * copies
        ptr = self.alloca_builder.alloca(ir.ArrayType(storage, count))
        ptr.align = 64
        self.scratch_bytes += count * lt.byte_size(storage)
        return Buffer(lt.opaque(self.alloca_builder, ptr), mlir_type)

    def constant_buffer(self, values: list, mlir_type: Any) -> Buffer:
        """A dense constant of distinct values, as a read-only global read like a buffer."""
        storage, element = lt.memory_type(mlir_type), lt.element(mlir_type)
        items = [self.scalar_constant(v, element) for v in values]
        if storage != lt.scalar(mlir_type):             # booleans are kept as bytes
            items = [ir.Constant(storage, int(v.constant)) for v in items]
        array = ir.ArrayType(storage, len(items))
        data = ir.GlobalVariable(self.llmod, array, self.llmod.get_unique_name("constant"))
        data.initializer = ir.Constant(array, items)
        data.global_constant = True
        data.linkage = "private"
        data.align = 64
        return Buffer(data.bitcast(lt.PTR), mlir_type)

    def materialize(self, value: SSAValue, into: Buffer | None = None) -> Buffer:
        """Compute ``value`` into a buffer (``into`` or a new one) and remember it there."""
        held = self.lookup(value)
        if isinstance(held, Buffer) and into is None:
            return held
        target = into or self.buffer(value.type)
        if isinstance(held, Buffer):
            self.copy(held, target)
        else:
            self.for_each_chunk(value.type, lambda index, lanes: self.chunks.store_chunk(
                target, index, self.chunks.value_at(value, index, lanes)))
        if into is None:
            self.remember(value, target)
        return target

    def remember(self, value: SSAValue, buffer: Buffer) -> None:
        """Keep the buffer ``value`` was computed into for its later uses.

        Inside a region (a loop body, a branch), the buffer of a value defined outside it is
        filled only when the region runs, so leaving the region forgets it (`region`): a use
        after a loop that ran zero times, or after a branch not taken, computes the value again
        instead of reading an unfilled buffer.
        """
        if self._regions and not _defined_in(value, self._regions[-1][0]):
            self._regions[-1][1].append((value, self.env[value]))
        self.env[value] = buffer

    @contextlib.contextmanager
    def region(self, block: Block) -> Iterator[None]:
        """Lower ``block``'s ops inside this: buffers `remember` kept there for values defined
        outside it are forgotten after it."""
        self._regions.append((block, []))
        try:
            yield
        finally:
            for value, held in reversed(self._regions.pop()[1]):
                self.env[value] = held

    def copy(self, source: Buffer, target: Buffer) -> None:
        size = numel(source.mlir_type) * lt.byte_size(lt.scalar(source.mlir_type))
        memcpy = lt.intrinsic(self.llmod, "memcpy", [lt.PTR, lt.PTR, lt.I64], lt.VOID,
                              [lt.PTR, lt.PTR, lt.I64, lt.I1])
        self.b.call(memcpy, [target.ptr, source.ptr, ir.Constant(lt.I64, size), ir.Constant(lt.I1, 0)])

    def chunk_lanes(self, count: int) -> int:
        return min(self.lanes, count)

    def row_lanes(self, shape: list[int]) -> int:
        """Lanes of the chunks of a tensor of ``shape``: the vector width, or the length of its
        rows (along the innermost dimension longer than 1) where they are shorter, so that no
        chunk spans two rows: lanes across rows are not known to be consecutive in memory and
        are loaded one by one (a ``[64, 4]`` block took three times as long as ``[64, 8]``)."""
        inner = innermost_dim(shape)
        lanes = self.chunk_lanes(math.prod(shape))
        return shape[inner] if inner is not None and shape[inner] < lanes else lanes

    def for_each_chunk(self, mlir_type: Any, body: Callable[[ir.Value, int], None]) -> None:
        """Run ``body(linear index, lanes)`` over every chunk of a tensor of ``mlir_type``."""
        count = numel(mlir_type)
        lanes = self.row_lanes(shape_of(mlir_type))
        self.counted_loop(count // lanes, lambda i: body(self.b.mul(i, ir.Constant(lt.I32, lanes)), lanes))

    def counted_loop(self, trips: int | ir.Value, body: Callable[[ir.Value], None]) -> None:
        """``for i in range(trips): body(i)`` as an LLVM loop (inline when it runs once);
        ``trips`` a number or an i32 known only at run time."""
        if isinstance(trips, int) and trips == 1:
            saved = self.chunks.set_aside()
            body(ir.Constant(lt.I32, 0))
            self.chunks.restore(saved)
            return
        self.carried_loop(0, trips, 1, [], lambda i, values: (body(i), values)[1])

    def carried_loop(self, start: int, end: int | ir.Value, step: int, values: list[ir.Value],
                     body: Callable[[ir.Value, list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
        """``for k in range(start, end, step): values = body(k, values)`` as an LLVM loop whose
        carried values are phis; returns the values after the loop.

        Chunks evaluated before the loop may be reused inside it (they dominate the body);
        chunks evaluated inside are forgotten after it (they do not dominate what follows).
        """
        b = self.b

        def step_body(k: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
            saved = self.chunks.set_aside()
            updated = body(k, carried)
            self.chunks.restore(saved)
            return updated

        bound = end if isinstance(end, ir.Value) else ir.Constant(lt.I32, end)
        return loops.carried_loop(b, "loop", start, lambda k: b.icmp_signed("<", k, bound), values, step_body, step)

    def choose(self, condition: ir.Value, then: Callable[[], Any], otherwise: Callable[[], Any],
               result_type: ir.Type | None) -> ir.Value | None:
        """``then()`` if ``condition`` else ``otherwise()``, each in its own block, merged with a
        phi of ``result_type`` (None: only the effects matter)."""
        b = self.b
        yes, no, merge = (b.append_basic_block(f"choose.{n}") for n in ("then", "else", "merge"))
        b.cbranch(condition, yes, no)
        ends = []
        for block, emit in ((yes, then), (no, otherwise)):
            b.position_at_end(block)
            saved = self.chunks.set_aside()
            ends.append((emit(), b.block))
            self.chunks.restore(saved)
            b.branch(merge)
        b.position_at_end(merge)
        if result_type is None:
            return None
        phi = b.phi(result_type)
        for value, block in ends:
            phi.add_incoming(value, block)
        return phi

    # -- ops ---------------------------------------------------------------------------------------
    def lower_block(self, block: Block) -> None:
        for position, op in enumerate(list(block.ops)):
            self.position = position
            self.lower_op(op)

    def lower_op(self, op: Any) -> None:
        """Lower one op.  What the CPU backend cannot do yet becomes a `CompilationError` at
        the op's source line (not an internal error): the user can work around it there."""
        try:
            if _may_write(op):
                self._materialize_pending_loads(op)
            handler = _HANDLERS.get(type(op))
            if handler is not None:
                handler(self, op)
            elif isinstance(op, ELEMENTWISE) or isinstance(op, tuple(_LAZY_SHAPE_OPS)):
                self._lower_value_op(op)
            else:
                raise NotImplementedError(f"the CPU backend cannot lower {op.name} yet")
        except NotImplementedError as e:
            raise error_at(self.func_op.sym_name.data, op.location,
                           f"not supported by the CPU backend: {e}") from None

    def _lower_value_op(self, op: Any) -> None:
        result = op.results[0]
        if not isinstance(result.type, TensorType):
            args = [self.scalar(v) for v in op.operands]
            self.env[result] = elementwise.lower(self.ctx(1), op, args)
            return
        self.env[result] = Lazy(op)
        if self._must_materialize(result):
            if isinstance(op, tt.BroadcastOp) and isinstance(self.env.get(op.src), Lazy):
                # the smaller source is held; each chunk of the broadcast reads it in place
                # (a [1, 4] row broadcast to [64, 4] for a loop: 16 bytes, not a kilobyte a program)
                self.materialize(op.src)
            else:
                self.materialize(result)

    def _must_materialize(self, value: SSAValue) -> bool:
        """Whether a lazy tensor used more than once (or in another region) is computed once
        into a buffer rather than again at each use.  Held values cost a store and a reload
        per element, and their buffers crowd the cache (a [8, 1024] block is a whole L1), so
        what is cheap to compute again is: few operations, over loads that are cheap to repeat
        (`_reloads_cheaply`) and indices that are scalar arithmetic (`_recompute_cost`).  Uses
        that all meet in one consumer (``gelu(y) = 0.5 * y * (1 + erf(y / sqrt2))``, stored)
        compute the value once per chunk anyway: the chunks a loop evaluates are memoized."""
        if value in self.fused:
            return False
        count, elsewhere = self.uses.get(value, (0, False))
        cost = _recompute_cost(self, value)
        if elsewhere:
            return cost > 2 or _contains_load(self, value)
        if count > 1 and _one_consumer(value) is None:
            return cost > 2 or not all(self._reloads_cheaply(load) for load in _loads(self, value))
        return False

    def _reloads_cheaply(self, load: Any) -> bool:
        """Whether running ``load`` again costs no more than reading a buffer it was held in:
        each chunk one vector load of consecutive elements, or one scalar load where every lane
        reads one address under one mask (an index loaded once per row, which Inductor both
        checks and uses).  Gathers are held.  Loads happen in program order regardless:
        `_materialize_pending_loads` holds what a later write could change."""
        if block_pointers.is_block_pointer(load.ptr) or self.bounds_check:
            return False
        lanes = self.row_lanes(shape_of(load.ptr.type))
        if lanes == 1:
            return False
        return self.consecutive(load.ptr, lanes) or memory.reads_one_address(self, load, lanes)

    def _materialize_pending_loads(self, op: Any) -> None:
        """Loads happen in program order: before an op with effects runs, compute every lazy
        value that still reads memory and is used after it -- or by it, when it writes through
        the same pointer argument elsewhere (``x[i + 1] = x[i]``: fused into the store's loop,
        a chunk would read what the previous chunk wrote)."""
        for value, held in list(self.env.items()):
            if isinstance(held, Lazy) and _contains_load(self, value) and (
                    _used_after(value, op) or self._overwrites(op, value)):
                self.materialize(value)

    def _overwrites(self, op: Any, value: SSAValue) -> bool:
        """Whether ``op`` writes, through the argument a load of ``value`` reads, at a pointer
        that is not the load's own (same pointer, same element: in place is safe)."""
        if not isinstance(op, (tt.StoreOp, tt.AtomicRMWOp, tt.AtomicCASOp)) or value not in op.operands:
            return False
        written = self.pointer_argument(op.ptr)
        return written is not None and any(
            self.pointer_argument(load.ptr) == written and load.ptr is not op.ptr
            for load in _loads(self, value))

    def dot_destination(self, op: Any) -> Buffer | None:
        return control.dot_destination(self, op)

    def after_loop(self, loop: Any, emit: Callable[[], None]) -> None:
        """Have ``emit()`` run at the exit of ``loop`` (an `scf.for` being lowered), before
        anything reads its results: a dot of `k_panels` multiplies what its last trips left."""
        self._after_loops.setdefault(loop, []).append(emit)

    def loop_exits(self, loop: Any) -> None:
        """Emit what `after_loop` asked for at ``loop``'s exit (called there, by `control`)."""
        for emit in self._after_loops.pop(loop, []):
            emit()

    def evaluate_special(self, op: Any, result_index: int, index: ir.Value, lanes: int) -> ir.Value:
        """Chunks of lazy ops that are neither element-wise rules nor the index remaps of `tiles`:
        loads, and the rearranging ops of `shapes`."""
        rule = shapes.CHUNK_RULES.get(type(op))
        if rule is not None:
            return rule(self, op, result_index, index, lanes)
        if isinstance(op, tt.LoadOp) and block_pointers.is_block_pointer(op.ptr):
            return block_pointers.load_chunk(self, op, index, lanes)
        if isinstance(op, tt.LoadOp):
            return memory.load_chunk(self, op, index, lanes)
        raise NotImplementedError(f"the CPU backend cannot evaluate {op.name} lazily")


def _used_after(value: SSAValue, op: Any) -> bool:
    block = op.parent_block()
    for use in value.uses:
        user = use.operation
        while user is not None and user.parent_block() is not block:
            user = user.parent_op()
        if user is not None and user is not op and block.get_operation_index(user) > block.get_operation_index(op):
            return True
    return False


def _recompute_cost(kernel: KernelLowering, value: SSAValue, depth: int = 0) -> int:
    held = kernel.env.get(value)
    if not isinstance(held, Lazy):
        return 0
    if depth > _MAX_RECOMPUTE:
        return _MAX_RECOMPUTE + 1
    if not isinstance(held.op, tt.LoadOp) and _index_like(kernel, value):
        return 0
    own = 0 if isinstance(held.op, _CHEAP) else 1
    return own + sum(_recompute_cost(kernel, v, depth + 1) for v in held.op.operands
                     if isinstance(v.type, TensorType))


def _one_consumer(value: SSAValue) -> Any | None:
    """The one op that every use of ``value`` flows into through element-wise ops of its block
    (which evaluate their operands at the same chunk), or None where there are several."""
    block = value.owner.parent_block() if not isinstance(value.owner, Block) else value.owner
    sinks, pending, seen = set(), [value], set()
    while pending:
        current = pending.pop()
        for use in current.uses:
            user = use.operation
            if user.parent_block() is not block:
                return None
            if isinstance(user, ELEMENTWISE) and len(user.results) == 1 \
                    and isinstance(user.results[0].type, TensorType):
                if user not in seen:
                    seen.add(user)
                    pending.append(user.results[0])
            else:
                sinks.add(user)
            if len(sinks) > 1:
                return None
    return next(iter(sinks), None)


def _index_like(kernel: KernelLowering, value: SSAValue) -> bool:
    """Whether the integer or pointer tensor ``value`` is, chunk by chunk, one value or a run
    of consecutive ones: LLVM computes it from lane 0 as scalar arithmetic (an address of a
    vector load) or one vector add of a ramp, so it is as cheap to compute again as a
    constant."""
    element = value.type.element_type
    if not isinstance(element, (IntegerType, PointerType)):
        return False
    lanes = kernel.row_lanes(shape_of(value.type))
    return kernel.consecutive(value, lanes) or kernel.uniform(value, lanes)


def _contains_load(kernel: KernelLowering, value: SSAValue) -> bool:
    return bool(_loads(kernel, value))


def _loads(kernel: KernelLowering, value: SSAValue) -> list[Any]:
    """The loads that computing the lazy ``value`` would run (each lazy value visited once)."""
    loads, seen, pending = [], set(), [value]
    while pending:
        held = kernel.env.get(pending.pop())
        if not isinstance(held, Lazy) or held.op in seen:
            continue
        seen.add(held.op)
        if isinstance(held.op, tt.LoadOp):
            loads.append(held.op)
        else:
            pending.extend(v for v in held.op.operands if isinstance(v.type, TensorType))
    return loads


def _grouped_ids(b: ir.IRBuilder, pid: ir.Value, nx: ir.Value, ny: ir.Value) -> tuple:
    """Program ``pid``'s (x, y, z) in a grouped order: within each plane, `DOT_GROUP` columns of
    y at a time, and for each x all of them -- by squares of `DOT_GROUP` x's (`_in_squares`)
    where the group is whole.  A kernel with ``tl.dot`` reads a panel of one
    operand per x and of the other per y; run x-fastest, every x's panel is read again for each
    y, from memory once the matrix outgrows the caches, while in groups each x's panel serves
    `DOT_GROUP` programs in a row and the group's y panels stay cached (Triton's tutorial does
    the same on the GPU with GROUP_SIZE_M).  Programs may run in any order; a 1-D grid keeps
    its own.  Gallery matmul, 2048^3 fp32, tiles 32 / 64: 95-104 -> 128, 132-135 -> 151-158
    GFLOP/s; a 2-D elementwise kernel lost a quarter of its bandwidth this way, so only kernels
    with dots take it.

    A kernel that keeps its operand copies across programs (`operand_cache`) is called with
    the axes swapped (``y, x, z = _grouped_ids(b, pid, ny, nx)``): groups of x rows, for each
    y all of them, so the programs in a row share y's operand -- B, where program id 1 walks
    N's blocks as in Triton's kernels -- whose kept copy saves the most: B is the operand
    copied into the interleaved layout of the bf16 and int8 products.  On a 2-core AMD EPYC
    (AVX-512), 2048^3, against the same kept copies in the other order: int8 32-wide tiles
    0.41 -> 0.59x torch, fp32 64-wide 1.34 -> 1.38x numpy (docs/PERFORMANCE.md, session 32).
    Within a square, the two orders differ only in which operand the first two programs share."""
    group = ir.Constant(lt.I32, DOT_GROUP)
    plane = b.mul(nx, ny)
    z, p = b.udiv(pid, plane), b.urem(pid, plane)
    per_group = b.mul(nx, group)
    first = b.mul(b.udiv(p, per_group), group)
    rest = b.urem(p, per_group)
    left = b.sub(ny, first)
    width = b.select(b.icmp_unsigned("<", left, group), left, group)
    x, y = _in_squares(b, rest, width, nx)
    return x, b.add(first, y), z


def _in_squares(b: ir.IRBuilder, rest: ir.Value, width: ir.Value, nx: ir.Value) -> tuple:
    """Program ``rest`` of a group of `DOT_GROUP` y columns (``width`` of them, ``nx`` programs
    each): its (x, y offset).  Squares of `DOT_GROUP` x `DOT_GROUP` programs, one after another
    along x, each walked in Z order -- bits of ``rest`` taken in turn for y and for x -- so any
    aligned run of 4^k programs is a square: a thread's share of 16 programs reads 4 panels of
    each operand, not 8 of one and 2 of the other, and copies (`operand_cache`) 8 of them, not
    10.  Where the group or the square is not whole (the grid's edges), for each x all of the
    group's y.  16 threads of a Xeon with AMX, alternating processes, Naiad / torch, medians of
    3-5 rounds: bf16 2048^3 tiles 32 / 64 / 128 0.76 / 0.85 / 0.92 -> 0.81 / 0.85 / 0.96, int8
    tile 64 0.86 -> 0.90 (docs/PERFORMANCE.md, session 35).  Where shares are far larger than
    a square -- the 2-core EPYC, 512 programs a thread -- it costs 1-4 % (fp32 2048^3 tile 64
    1.60 -> 1.54x numpy): taken for the many-core machines, whose shares are small."""
    group = ir.Constant(lt.I32, DOT_GROUP)
    square = ir.Constant(lt.I32, DOT_GROUP * DOT_GROUP)
    block, index = b.udiv(rest, square), b.urem(rest, square)
    whole = b.and_(b.icmp_unsigned("==", width, group),
                   b.icmp_unsigned("<=", b.mul(b.add(block, ir.Constant(lt.I32, 1)), group), nx))
    in_x, in_y = ir.Constant(lt.I32, 0), ir.Constant(lt.I32, 0)
    for bit in range(DOT_GROUP.bit_length() - 1):
        one = ir.Constant(lt.I32, 1 << bit)
        in_y = b.or_(in_y, b.and_(b.lshr(index, ir.Constant(lt.I32, bit)), one))
        in_x = b.or_(in_x, b.and_(b.lshr(index, ir.Constant(lt.I32, bit + 1)), one))
    x = b.select(whole, b.add(b.mul(block, group), in_x), b.udiv(rest, width))
    return x, b.select(whole, in_y, b.urem(rest, width))


def _use_counts(func: Any) -> dict[SSAValue, tuple[int, bool]]:
    """value -> (number of using ops, whether some use is in another block or a terminator)."""
    counts: dict[SSAValue, tuple[int, bool]] = {}
    for op in func.walk():
        for value in {id(v): v for v in op.operands}.values():
            count, elsewhere = counts.get(value, (0, False))
            defined_in = value.owner if isinstance(value.owner, Block) else value.owner.parent_block()
            terminator = isinstance(op, (scf.YieldOp, scf.ConditionOp, tt.ReturnOp))
            counts[value] = (count + 1, elsewhere or defined_in is not op.parent_block() or terminator)
    return counts


def _may_write(op: Any) -> bool:
    """Whether ``op`` may write memory a pending load reads (printing and assertions do not:
    a load used by an assertion and after it is not held in a buffer for that)."""
    return isinstance(op, (tt.StoreOp, tt.AtomicRMWOp, tt.AtomicCASOp, tt.AtomicPollOp,
                           scf.ForOp, scf.WhileOp, scf.IfOp, tt.CallOp))


def _get_program_id(kernel: KernelLowering, op: Any) -> None:
    kernel.env[op.results[0]] = kernel.program_ids[op.axis_index]


def _get_num_programs(kernel: KernelLowering, op: Any) -> None:
    kernel.env[op.results[0]] = kernel.num_programs[op.axis_index]


def _constant(kernel: KernelLowering, op: Any) -> None:
    """Scalars and splats are LLVM constants; other dense tensors are read-only buffers."""
    result = op.results[0]
    if isinstance(result.type, TensorType):
        values = op.value.get_values()
        distinct = {repr(v) for v in values}        # NaNs are alike, -0.0 and 0.0 are not
        kernel.env[result] = Lazy(op) if len(distinct) == 1 else kernel.constant_buffer(values, result.type)
        return
    attr = op.value
    kernel.env[result] = kernel.scalar_constant(attr.value.data, result.type)


def _call(kernel: KernelLowering, op: tt.CallOp) -> None:
    """A call of a ``noinline`` function, inlined here: a program is one thread, so a real call
    would only add the cost of passing tensors through memory.  Tensor results are
    materialized, as the next call of the same function rebinds the callee's values (and their
    axis information is analyzed again, from this call's operands)."""
    name = op.callee.root_reference.data
    callee = next(f for f in kernel.module.body.ops if isinstance(f, tt.FuncOp) and f.sym_name.data == name)
    block = callee.body.block
    kernel.axis.update(analyze(callee, [kernel.axis_info(v) for v in op.operands]))
    for arg, value in zip(block.args, op.operands):
        kernel.env[arg] = kernel.lookup(value)
    control.lower_body(kernel, block)
    for result, value in zip(op.results, block.last_op.operands):
        held = kernel.lookup(value)
        kernel.env[result] = kernel.materialize(value) if isinstance(held, Lazy) else held


def _store(kernel: KernelLowering, op: Any) -> None:
    if block_pointers.is_block_pointer(op.ptr):
        block_pointers.lower_store(kernel, op)
    else:
        memory.lower_store(kernel, op)


def _return(kernel: KernelLowering, op: Any) -> None:
    kernel.b.ret_void()


def _ignore(kernel: KernelLowering, op: Any) -> None:
    """Ops that mean nothing on one CPU thread per program (barriers, hints)."""


_LAZY_SHAPE_OPS = (arith.ConstantOp, tt.SplatOp, tt.MakeRangeOp, tt.ExpandDimsOp, tt.ReshapeOp,
                   tt.BroadcastOp, tt.TransOp, tt.LoadOp, tt.JoinOp, tt.CatOp)

_HANDLERS: dict[type, Callable[[KernelLowering, Any], None]] = {
    tt.GetProgramIdOp: _get_program_id,
    tt.GetNumProgramsOp: _get_num_programs,
    arith.ConstantOp: _constant,
    tt.ReturnOp: _return,
    tt.CallOp: _call,
    gpu.BarrierOp: _ignore,
    tt.AssumeOp: _ignore,
    tt.LoadOp: memory.lower_load,
    tt.StoreOp: _store,
    tt.MakeTensorPtrOp: block_pointers.lower_make,
    tt.AdvanceOp: block_pointers.lower_advance,
    tt.SplitOp: shapes.lower_split,
    tt.GatherOp: shapes.lower_gather,
    tt.HistogramOp: shapes.lower_histogram,
    tt.AtomicRMWOp: memory.lower_atomic_rmw,
    tt.AtomicCASOp: memory.lower_atomic_cas,
    tt.AtomicPollOp: memory.lower_atomic_poll,
    tt.ReduceOp: reductions.lower_reduce,
    tt.ScanOp: reductions.lower_scan,
    tt.DotOp: matmul.lower_dot,
    tt.PrintOp: debug.lower_print,
    tt.AssertOp: debug.lower_assert,
    scf.ForOp: control.lower_for,
    scf.IfOp: control.lower_if,
    scf.WhileOp: control.lower_while,
}


def _defined_in(value: SSAValue, block: Block) -> bool:
    """Whether ``value`` is defined in ``block`` or in a region nested in it."""
    owner = value.owner
    current = owner if isinstance(owner, Block) else owner.parent_block()
    while current is not None:
        if current is block:
            return True
        parent = current.parent_op()
        current = parent.parent_block() if parent is not None else None
    return False
