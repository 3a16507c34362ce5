"""The shared GPU lowering: one ``tt.func`` in TTIR -> one LLVM kernel run by a program's threads.

Every tensor value becomes a `Dist`: the values one thread holds, in the order of its layout's
`elements`.  Layouts come from `naiad.codegen.gpu.assign`; an op whose operand arrives in
another layout than it needs gets it through shared memory (`convert`), once per block
(`tensor`); `naiad.codegen.gpu.conversions` has already removed the conversions of values that
are cheaper to compute again.  Rules are registered
per op class in `RULES` (one small function each, in the ``ops_*`` modules) and reach the target
only through its `GPUHooks` (thread ids, barriers, shuffles, shared memory, math library).
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

import llvmlite.ir as ir
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, SSAValue

from naiad.codegen import elementwise, llvm_types as lt, loops
from naiad.codegen.axis_info import AxisInfo, analyze, info_of
from naiad.codegen.gpu import layouts as L, replicated_warps
from naiad.codegen.gpu.assign import assign_layouts
from naiad.codegen.gpu.hooks import GPUHooks
from naiad.codegen.registry import registrar
from naiad.ir import tt

_SHARED_RULES: dict[type, Callable[["GPUKernel", Any], None]] = {}
rule = registrar(_SHARED_RULES)
#: op class -> rule(kernel, op); filled by the ``ops_*`` modules.  Read-only: a backend lowers
#: with a table of its own (``{**RULES, OpClass: its_rule}``, passed to `GPUKernel`), so that
#: replacing a rule never changes another backend's lowering in the same process.
RULES: Mapping[type, Callable[["GPUKernel", Any], None]] = MappingProxyType(_SHARED_RULES)


@dataclasses.dataclass
class Dist:
    """A tensor as one thread holds it: ``values[i]`` is its element ``elements(layout)[i]``."""

    layout: L.Layout
    shape: tuple[int, ...]
    values: list[ir.Value]


def is_tensor(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType)


def shape_of(value: SSAValue) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


class GPUKernel:
    """Lowers the public ``tt.func`` of a TTIR module for ``num_warps`` warps of ``hooks`` (the
    target's side: `naiad.codegen.gpu.hooks.GPUHooks`)."""

    def __init__(self, module: Any, hooks: GPUHooks, num_warps: int,
                 rules: Mapping[type, Callable[["GPUKernel", Any], None]] | None = None,
                 prepare: Callable[["GPUKernel"], None] | None = None):
        """``rules``: the backend's rule table (the shared `RULES` with its own overrides,
        e.g. its tensor-core ``tt.dot``); the shared table when None.  ``prepare(kernel)`` runs
        once the layouts are known and before any op is lowered: where a backend reserves the
        shared memory that lives across ops (`reserve_shared`)."""
        self.module = module
        self.hooks = hooks
        self.rules = RULES if rules is None else rules
        self.prepare = prepare
        #: Backend state kept for the whole kernel (e.g. the shared-memory rings of pipelined
        #: loads), by whatever key the backend chooses.
        self.state: dict[Any, Any] = {}
        #: Shared memory the backend keeps across ops (`reserve_shared`): (the ops a region is
        #: live in, its first byte, its end).  The scratch that ops share one after another
        #: (`shared_regions`) starts after the regions live where it is used, at 0 elsewhere.
        self._reservations: list[tuple[set, int, int]] = []
        #: op -> the end of the regions live while it is lowered; the stack of the ops being
        #: lowered now.
        self._reserved_top: dict[Any, int] = {}
        self._tops: list[int] = []
        self.num_warps = num_warps
        self.warp_size = hooks.warp_size
        self.llmod = ir.Module(name="naiad_kernel")
        hooks.prepare_module(self.llmod)
        self.env: dict[SSAValue, Any] = {}
        self.b: ir.IRBuilder = None  # type: ignore[assignment]
        #: Bytes of shared memory the kernel needs (the largest conversion or reduction).
        self.shared_bytes = 0
        self._coords: dict[tuple, list[list[ir.Value]]] = {}
        #: Conversions made so far: (value, layout) -> [(LLVM block it ended in, the Dist
        #: converted, the result)].
        self._converted: dict[tuple, list[tuple[ir.Block, Dist, Dist]]] = {}

    # -- entry --------------------------------------------------------------------------------
    def lower(self) -> ir.Module:
        func = tt.public_functions(self.module)[0]
        self.func_op = func
        self.axis = analyze(func)
        self.layouts = assign_layouts(func, self.num_warps, self.warp_size, axis=self.axis)
        args = list(func.body.block.args)
        types = [self.hooks.param_type(a.type) for a in args]
        fn = ir.Function(self.llmod, ir.FunctionType(lt.VOID, types), func.sym_name.data)
        self.hooks.mark_kernel(fn, self.num_warps * self.warp_size)
        self.function = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        for arg, param in zip(args, fn.args):
            self.env[arg] = self.hooks.param_value(self.b, param, arg.type)
        self.thread = self.hooks.thread_id(self.b)
        self.lane = self.b.urem(self.thread, ir.Constant(lt.I32, self.warp_size))
        self.warp = self.b.udiv(self.thread, ir.Constant(lt.I32, self.warp_size))
        if self.prepare is not None:
            self.prepare(self)
        if self.hooks.counts_barrier_threads:
            self._without_repeating_warps(replicated_warps.needed_warps(func, self.layouts, self.num_warps))
        self.lower_block(func.body.block)
        if not self.b.block.is_terminated:
            self.b.ret_void()
        return self.llmod

    def _without_repeating_warps(self, needed: int) -> None:
        """Warps from ``needed`` on return at once (`replicated_warps`); barriers count the rest."""
        if needed >= self.num_warps:
            self.hooks.barrier_threads = None
            return
        self.hooks.barrier_threads = needed * self.warp_size
        work, leave = self.function.append_basic_block("work"), self.function.append_basic_block("repeats")
        self.b.cbranch(self.b.icmp_unsigned("<", self.warp, ir.Constant(lt.I32, needed)), work, leave)
        self.b.position_at_end(leave)
        self.b.ret_void()
        self.b.position_at_end(work)

    def lower_block(self, block: Block) -> None:
        for op in block.ops:
            self.lower_op(op)

    def lower_op(self, op: Any) -> None:
        top = self._reserved_top.get(op)
        if top is None:
            self._lower_op(op)
            return
        self._tops.append(top)
        try:
            self._lower_op(op)
        finally:
            self._tops.pop()

    def _lower_op(self, op: Any) -> None:
        fn = self.rules.get(type(op))
        if fn is None:
            if type(op) in elementwise.RULES:
                fn = self.rules[_ELEMENTWISE]
            else:
                raise NotImplementedError(f"{op.name} is not supported by the GPU lowering yet")
        fn(self, op)

    # -- values --------------------------------------------------------------------------------
    def ctx(self) -> elementwise.Lowering:
        return elementwise.Lowering(self.b, self.hooks, 1)

    def scalar(self, value: SSAValue) -> ir.Value:
        held = self.env[value]
        if isinstance(held, Dist):
            raise RuntimeError(f"internal error: expected a scalar for {value.type}")
        return held

    def layout_of(self, value: SSAValue) -> L.Layout:
        return self.layouts[value]

    def tensor(self, value: SSAValue, layout: L.Layout | None = None) -> Dist:
        """``value`` in ``layout`` (its own by default), converted through shared memory once:
        a later use takes an earlier conversion when the LLVM block that made it dominates the
        builder's block (the same block, or one every path here goes through), so the values
        are defined there; a conversion under another branch is not reused."""
        held = self.env[value]
        if layout is None or held.layout == layout:
            return held
        made = self._converted.setdefault((value, layout), [])
        for block, source, dist in made:
            if source is held and self._dominates(block, self.b.block):
                return dist
        dist = self.convert(held, layout, value.type)
        made.append((self.b.block, held, dist))
        return dist

    def _dominates(self, block: ir.Block, here: ir.Block) -> bool:
        """Whether every path from the entry to ``here`` goes through ``block`` (the function's
        branches so far; ``here``, still being filled, has none yet)."""
        if block is here:
            return True
        seen, stack = {block}, [self.function.entry_basic_block]
        while stack:
            current = stack.pop()
            if current is here:
                return False
            if current in seen:
                continue
            seen.add(current)
            if current.is_terminated:
                stack.extend(t for t in current.terminator.operands if isinstance(t, ir.Block))
        return True

    def define(self, value: SSAValue, values: list[ir.Value]) -> None:
        self.env[value] = Dist(self.layouts[value], shape_of(value), values)

    def info(self, value: SSAValue) -> AxisInfo:
        return info_of(self.axis, value)

    # -- where a thread's elements are ------------------------------------------------------
    def coordinates(self, layout: L.Layout, shape: Sequence[int]) -> list[list[ir.Value]]:
        """Per element of a thread, its coordinate per dimension of ``shape`` (i32 values)."""
        key = (layout, tuple(shape), id(self.b.block))
        cached = self._coords.get(key)
        if cached is not None:
            return cached
        linear = L.linear_of(layout, shape)
        if linear is not None:
            result = self._linear_coordinates(linear)
            self._coords[key] = result
            return result
        blocked, removed = L.blocked_of(layout)
        full = L.parent_shape(layout, shape)
        bases = self.thread_bases(blocked)
        result = []
        for element in L.elements(layout, shape):
            offsets = L.constant_offsets(layout, shape, element)
            coords = []
            for d in range(blocked.rank):
                if d in removed:
                    continue
                value = self.b.add(bases[d], ir.Constant(lt.I32, offsets[d]))
                coords.append(self.b.and_(value, ir.Constant(lt.I32, full[d] - 1)))
            result.append(coords)
        self._coords[key] = result
        return result

    def _linear_coordinates(self, linear: L.Linear) -> list[list[ir.Value]]:
        """`coordinates` of a `Linear` layout: the thread's part is the sum of the lane and
        warp bases of its set bits, each element adds its register offset."""
        bases = self.linear_thread_bases(linear)
        result = []
        for offset in linear.offsets():
            coords = []
            for d, size in enumerate(linear.shape):
                value = self.b.add(bases[d], ir.Constant(lt.I32, offset[d])) if offset[d] else bases[d]
                coords.append(self.b.and_(value, ir.Constant(lt.I32, size - 1)))
            result.append(coords)
        return result

    def linear_thread_bases(self, linear: L.Linear) -> list[ir.Value]:
        """This thread's coordinate per dimension under a `Linear` layout (before the
        register offsets)."""
        bases: list[ir.Value] = [ir.Constant(lt.I32, 0) for _ in linear.shape]
        for index, vectors in ((self.lane, linear.lanes), (self.warp, linear.warps)):
            for bit, vector in enumerate(vectors):
                if not any(vector):
                    continue
                flag = self.b.and_(self.b.lshr(index, ir.Constant(lt.I32, bit)), ir.Constant(lt.I32, 1))
                for d, step in enumerate(vector):
                    if step:
                        bases[d] = self.b.add(bases[d], self.b.mul(flag, ir.Constant(lt.I32, step)))
        return bases

    def thread_bases(self, blocked: L.Blocked) -> list[ir.Value]:
        """This thread's first coordinate per dimension (before repetitions and offsets)."""
        lane_ids = self._split(self.lane, [blocked.threads_per_warp[d] for d in blocked.order])
        warp_ids = self._split(self.warp, [blocked.warps_per_cta[d] for d in blocked.order])
        bases: list[ir.Value] = [None] * blocked.rank  # type: ignore[list-item]
        for i, d in enumerate(blocked.order):
            spt, tpw = blocked.size_per_thread[d], blocked.threads_per_warp[d]
            lane_part = self.b.mul(lane_ids[i], ir.Constant(lt.I32, spt))
            warp_part = self.b.mul(warp_ids[i], ir.Constant(lt.I32, spt * tpw))
            bases[d] = self.b.add(lane_part, warp_part)
        return bases

    def _split(self, index: ir.Value, sizes: list[int]) -> list[ir.Value]:
        parts, stride = [], 1
        for size in sizes:
            part = self.b.udiv(index, ir.Constant(lt.I32, stride)) if stride > 1 else index
            parts.append(self.b.urem(part, ir.Constant(lt.I32, size)))
            stride *= size
        return parts

    def linear(self, coords: Sequence[ir.Value], shape: Sequence[int]) -> ir.Value:
        """Row-major linear index of a coordinate."""
        index = ir.Constant(lt.I32, 0)
        for c, size in zip(coords, shape):
            index = self.b.add(self.b.mul(index, ir.Constant(lt.I32, size)), c)
        return index

    # -- shared memory --------------------------------------------------------------------------
    def shared_pointer(self, index: ir.Value, storage: ir.Type, byte_offset: int = 0,
                       base: ir.Value | None = None) -> ir.Value:
        """Element ``index`` of shared memory viewed as an array of ``storage``, from byte
        ``byte_offset`` of ``base`` (a pointer into shared memory: a region reserved for a
        ring, `naiad.codegen.gpu.operand_rings`) or of the scratch."""
        if base is None:
            base = self.hooks.shared_base(self.b)
            byte_offset += self.scratch_start
        if byte_offset:
            base = self.b.gep(base, [ir.Constant(lt.I32, byte_offset)], source_etype=lt.I8)
        return self.b.gep(base, [index], source_etype=storage)

    @property
    def scratch_start(self) -> int:
        """Where the scratch of the op being lowered starts: after the reserved regions live
        there (1024-byte aligned: what swizzled tensor-core tiles need), else at 0."""
        return -(-max(self._tops, default=0) // 1024) * 1024

    def need_shared(self, nbytes: int) -> None:
        """``nbytes`` of scratch (from its start), for the op being lowered."""
        self.shared_bytes = max(self.shared_bytes, self.scratch_start + nbytes)

    def reserve_shared(self, nbytes: int, span: Sequence[Any], align: int = 16) -> int:
        """The byte offset (in shared memory) of ``nbytes`` that nothing else touches while the
        ops of ``span`` (and the ops inside them) are lowered: the lowest that no region live at
        the same time holds, so that the buffers of loops one after another share memory (the
        two halves of attention's backward).  Only from ``prepare``, before any op is lowered."""
        covered = {inner for op in span for inner in op.walk()}
        offset = 0
        for first, end in sorted((o, e) for ops, o, e in self._reservations if ops & covered):
            if offset + nbytes <= first:
                break
            offset = max(offset, -(-end // align) * align)
        self._reservations.append((covered, offset, offset + nbytes))
        for op in span:
            self._reserved_top[op] = max(self._reserved_top.get(op, 0), offset + nbytes)
        self.shared_bytes = max(self.shared_bytes, offset + nbytes)
        return offset

    def shared_regions(self, sizes: Sequence[int], align: int = 16) -> list[int]:
        """Scratch byte offsets of consecutive regions of ``sizes`` bytes, each aligned to
        ``align`` bytes (16 at least: a region of 4-byte values after one of 2-byte values must
        not be misaligned; swizzled tensor-core tiles want 1024), and reserve them."""
        offsets, end = aligned_regions(sizes, align)
        self.need_shared(end)
        return list(offsets)

    def convert(self, dist: Dist, layout: L.Layout, mlir_type: Any) -> Dist:
        """``dist`` redistributed into ``layout``: through shared memory, or as it is where
        the two layouts place every element alike (`layouts.equivalent`)."""
        if L.equivalent(dist.layout, layout, dist.shape):
            return Dist(layout, dist.shape, dist.values)
        values = self.gather_through_shared(dist, mlir_type, layout, dist.shape, None,
                                            dist.shape, read_vector=_contiguous(layout, dist.shape))
        return Dist(layout, dist.shape, values)

    def gather_through_shared(self, dist: Dist, mlir_type: Any, layout: L.Layout,
                              shape: Sequence[int], source: Callable[[list], list] | None,
                              source_shape: Sequence[int], read_vector: int = 1) -> list[ir.Value]:
        """Every thread writes its elements of ``dist`` to shared memory at their row-major
        index (padded: `SharedPadding`); then, for each element of ``layout`` over ``shape``,
        reads the element at ``source(coordinates)`` (coordinates in ``source_shape``, the same
        elements viewed with another shape; None: the same coordinates).  ``read_vector``: how
        many consecutive elements one read may take at once (the padding keeps such runs
        aligned)."""
        padding = tile_padding(dist.layout, dist.shape, mlir_type, read_vector)
        self.need_shared(padding.size_bytes(numel(dist.shape)))
        self.hooks.barrier(self.b)
        self.write_tile(dist, mlir_type, padding)
        self.hooks.barrier(self.b)
        return self.read_tile(mlir_type, padding, layout, shape, source, source_shape)

    def write_tile(self, dist: Dist, mlir_type: Any, padding: "SharedPadding",
                   base: ir.Value | None = None) -> None:
        """Every thread's elements of ``dist`` into shared memory (from ``base``, else the
        scratch) at their padded row-major index; where the layout's coordinates split
        (`split_coordinates`), a thread computes one address and its elements lie at constant
        distances from it.  The caller places the barriers."""
        storage = lt.scalar(mlir_type)
        stored = lt.I8 if storage == lt.I1 else storage
        split = self.split_coordinates(dist.layout, dist.shape)
        if split is None:
            for value, coords in zip(dist.values, self.coordinates(dist.layout, dist.shape)):
                self.write_shared(padding.index(self.b, self.linear(coords, dist.shape)), value, base)
        elif not (padding.keeps_chunks(dist.shape) and
                  self.hooks.store_in_shared(self, dist, self._padded_addresses(padding, dist.shape, stored, base))):
            for value, pointer in zip(dist.values, self._padded_pointers(padding, dist.shape, stored, *split, base=base)):
                value = self.b.zext(value, lt.I8) if value.type == lt.I1 else value
                self.b.store(value, pointer)

    def read_tile(self, mlir_type: Any, padding: "SharedPadding", layout: L.Layout, shape: Sequence[int],
                  source: Callable[[list], list] | None = None, source_shape: Sequence[int] | None = None,
                  base: ir.Value | None = None) -> list[ir.Value]:
        """The elements of a tile `write_tile` left in shared memory, in ``layout`` over
        ``shape`` (as `gather_through_shared` reads them)."""
        storage = lt.scalar(mlir_type)
        stored = lt.I8 if storage == lt.I1 else storage
        split = self.split_coordinates(layout, shape) if source is None else None
        if split is None:
            source = source or (lambda c: c)
            return [self.read_shared(padding.index(self.b, self.linear(source(coords), source_shape or shape)),
                                     storage, base)
                    for coords in self.coordinates(layout, shape)]
        values = [self.b.load(p, typ=stored) for p in self._padded_pointers(padding, shape, stored, *split, base=base)]
        return [self.b.trunc(v, lt.I1) for v in values] if storage == lt.I1 else values

    def _padded_pointers(self, padding: "SharedPadding", shape: Sequence[int], stored: ir.Type,
                         thread: list[ir.Value], constants: list[tuple[int, ...]],
                         base: ir.Value | None = None) -> list[ir.Value]:
        """Pointers, in the padded scratch of a tile of ``shape``, to the elements at coordinates
        ``thread`` (values) plus each of ``constants`` (`split_coordinates`' two parts): one
        address computation, the rest constant offsets."""
        first = self.shared_pointer(padding.index(self.b, self.linear(thread, shape)), stored, base=base)
        return [self._at(first, padding.offset(_row_major(c, shape)), stored) for c in constants]

    def _padded_addresses(self, padding: "SharedPadding", shape: Sequence[int], stored: ir.Type,
                          base: ir.Value | None = None) -> Callable:
        """For `GPUHooks.store_in_shared`: `_padded_pointers` as 32-bit shared addresses."""
        def addresses(thread: list[ir.Value], constants: list[tuple[int, ...]]) -> list[ir.Value]:
            return [self.b.ptrtoint(p, lt.I32)
                    for p in self._padded_pointers(padding, shape, stored, thread, constants, base)]
        return addresses

    def _at(self, pointer: ir.Value, delta: int, storage: ir.Type) -> ir.Value:
        """``delta`` elements of ``storage`` after ``pointer``."""
        return self.b.gep(pointer, [ir.Constant(lt.I32, delta)], source_etype=storage) if delta else pointer

    def split_coordinates(self, layout: L.Layout, shape: Sequence[int]) -> tuple[list[ir.Value], list[tuple[int, ...]]] | None:
        """A thread's coordinates as (the thread's part, per dimension; each element's constant
        part) when every coordinate is exactly their sum and the two share no bit: so any
        power-of-two index arithmetic (row-major indices, `SharedPadding`) splits the same
        way.  True of `Linear` layouts (their bases share no bit) and of blocked ones that fit
        in a tensor of power-of-two sizes; None for the others (a layout wider than its
        tensor wraps around it)."""
        runs = L.thread_runs(layout, shape)
        if runs is None:
            return None
        offsets = runs[0]
        linear = L.linear_of(layout, shape)
        if linear is not None:
            return self.linear_thread_bases(linear), offsets
        blocked, removed = L.blocked_of(layout)
        bases = self.thread_bases(blocked)
        return [bases[d] for d in range(blocked.rank) if d not in removed], offsets

    def write_shared(self, index: ir.Value, value: ir.Value, base: ir.Value | None = None) -> None:
        """``value`` as element ``index`` of shared memory (from ``base``, else the scratch)
        viewed as an array of its type (a boolean as a byte, `llvm_types.memory_type`)."""
        if value.type == lt.I1:
            value = self.b.zext(value, lt.I8)
        self.b.store(value, self.shared_pointer(index, value.type, base=base))

    def read_shared(self, index: ir.Value, storage: ir.Type, base: ir.Value | None = None) -> ir.Value:
        """Element ``index`` of shared memory viewed as an array of ``storage``, as
        `write_shared` left it."""
        stored = lt.I8 if storage == lt.I1 else storage
        value = self.b.load(self.shared_pointer(index, stored, base=base), typ=stored)
        return self.b.trunc(value, lt.I1) if storage == lt.I1 else value

    @staticmethod
    def replicated(layout: L.Layout, shape: Sequence[int]) -> bool:
        """Whether several threads hold the same elements (a layout wider than its tensor)."""
        linear = L.linear_of(layout, shape)
        if linear is not None:
            return any(not any(v) for v in (*linear.lanes, *linear.warps))
        blocked, removed = L.blocked_of(layout)
        full = L.parent_shape(layout, shape)
        for d in range(blocked.rank):
            if d in removed:
                if blocked.threads_per_warp[d] > 1 or blocked.warps_per_cta[d] > 1:
                    return True
                continue
            lanes, warps = L.distinct_threads(blocked, full, d)
            if lanes < blocked.threads_per_warp[d] or warps < blocked.warps_per_cta[d]:
                return True
        return False

    def owner(self, layout: L.Layout, shape: Sequence[int]) -> list[ir.Value]:
        """Per element of this thread, whether it is the element's first holder (a layout
        wider than its tensor gives threads the same elements; one of them owns each)."""
        linear = L.linear_of(layout, shape)
        if linear is not None:           # the threads whose repeating bits are all zero
            owns = ir.Constant(lt.I1, 1)
            for index, vectors in ((self.lane, linear.lanes), (self.warp, linear.warps)):
                for bit, vector in enumerate(vectors):
                    if not any(vector):
                        flag = self.b.and_(index, ir.Constant(lt.I32, 1 << bit))
                        owns = self.b.and_(owns, self.b.icmp_unsigned("==", flag, ir.Constant(lt.I32, 0)))
            return [owns] * len(linear.offsets())
        blocked, removed = L.blocked_of(layout)
        full = L.parent_shape(layout, shape)
        bases = self.thread_bases(blocked)
        owns = ir.Constant(lt.I1, 1)
        for d in range(blocked.rank):
            if d in removed:
                continue
            inside = self.b.icmp_unsigned("<", bases[d], ir.Constant(lt.I32, full[d]))
            owns = self.b.and_(owns, inside)
        for d in removed:          # a slice: only the threads at the start of the sliced dim
            owns = self.b.and_(owns, self.b.icmp_unsigned("==", bases[d], ir.Constant(lt.I32, 0)))
        return [owns] * L.element_count(layout, shape)

    def share_from_owners(self, values: list[ir.Value], layout: L.Layout, shape: Sequence[int],
                          mlir_type: Any) -> list[ir.Value]:
        """Each element's value as its owner computed it, in every thread that holds it."""
        storage = lt.scalar(mlir_type)
        self.need_shared(numel(shape) * lt.byte_size(storage))
        self.hooks.barrier(self.b)
        coords = self.coordinates(layout, shape)
        owners = self.owner(layout, shape)
        for value, c, own in zip(values, coords, owners):
            pointer = self.shared_pointer(self.linear(c, shape), storage)
            self.when(own, lambda v=value, p=pointer: self.b.store(v, p))
        self.hooks.barrier(self.b)
        return [self.b.load(self.shared_pointer(self.linear(c, shape), storage), typ=storage)
                for c in coords]

    def broadcast_from_thread0(self, value: ir.Value) -> ir.Value:
        """A scalar as thread 0 computed it, in every thread."""
        self.need_shared(lt.byte_size(value.type))
        self.hooks.barrier(self.b)
        pointer = self.shared_pointer(ir.Constant(lt.I32, 0), value.type)
        self.when(self.is_thread0(), lambda: self.b.store(value, pointer))
        self.hooks.barrier(self.b)
        return self.b.load(pointer, typ=value.type)

    def is_thread0(self) -> ir.Value:
        """Whether this is the program's first thread (the one that does what only one may)."""
        return self.b.icmp_unsigned("==", self.thread, ir.Constant(lt.I32, 0))

    def when(self, condition: ir.Value | None, body: Callable[[], Any]) -> None:
        """``body()`` emitted under ``condition`` (always, when None)."""
        if condition is None:
            body()
            return
        then, merge = self.b.append_basic_block("then"), self.b.append_basic_block("merge")
        self.b.cbranch(condition, then, merge)
        self.b.position_at_end(then)
        body()
        self.b.branch(merge)
        self.b.position_at_end(merge)

    def guarded(self, condition: ir.Value | None, body: Callable[[], ir.Value],
                otherwise: ir.Value) -> ir.Value:
        """``body()``'s value where ``condition`` holds (always, when None), else ``otherwise``."""
        if condition is None:
            return body()
        b = self.b
        before = b.block
        then, merge = b.append_basic_block("then"), b.append_basic_block("merge")
        b.cbranch(condition, then, merge)
        b.position_at_end(then)
        value = body()
        end = b.block
        b.branch(merge)
        b.position_at_end(merge)
        phi = b.phi(value.type)
        phi.add_incoming(value, end)
        phi.add_incoming(otherwise, before)
        return phi

    def carried_loop(self, name: str, start: int, keep_going: Callable[[ir.Value], ir.Value],
                     values: list[ir.Value],
                     body: Callable[[ir.Value, list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
        """`naiad.codegen.loops.carried_loop`; the coordinates remembered inside the loop are
        forgotten after it (they do not dominate what follows)."""
        values = loops.carried_loop(self.b, name, start, keep_going, values, body)
        self.forget_coordinates()
        return values

    def forget_coordinates(self) -> None:
        """Drop the remembered coordinates (`coordinates`): a region is being entered, where
        values computed before it are not all available."""
        self._coords.clear()


@dataclasses.dataclass(frozen=True)
class SharedPadding:
    """Where a tile's element of row-major index ``i`` lies in shared memory: after each row
    (of at least one 128-byte line of the 32 banks) ``pad`` elements are skipped, and ``pad``
    more after every ``group`` rows.

    A layout change writes a tile along one dimension and reads it along another; unpadded,
    the elements of a column are a multiple of 128 bytes apart and the threads of a warp that
    read them all hit one bank.  One pad per row moves each next row over by a "chunk" (4
    bytes, or the widest vector access either side makes, so vector accesses stay aligned and
    never straddle a pad), and the extra pad every ``128 / chunk`` rows spreads rows that are a
    multiple of that apart too (a thread holding several rows of a column).  The position
    depends on the row-major index only, so any view of the tile (a reshape) reads it back."""

    element_bytes: int
    row: int
    pad: int
    group: int

    @staticmethod
    def of(shape: Sequence[int], element_bytes: int, vector: int) -> "SharedPadding":
        """The padding of a tile of ``shape`` whose accesses take up to ``vector`` consecutive
        elements of ``element_bytes`` at once (none for a tile of one row)."""
        chunk = min(16, max(4, element_bytes * vector))
        row = max(shape[-1] if shape else 1, 128 // element_bytes)
        if numel(shape) <= row:
            return SharedPadding(element_bytes, row, 0, 1)
        return SharedPadding(element_bytes, row, max(1, chunk // element_bytes), 128 // chunk)

    def keeps_chunks(self, shape: Sequence[int]) -> bool:
        """Whether every 16 bytes of a row that start at a multiple of 16 stay 16 contiguous,
        aligned bytes (rows and pads of whole chunks)."""
        return len(shape) == 2 and all(n * self.element_bytes % 16 == 0 for n in (self.row, self.pad, shape[1]))

    def offset(self, i: int) -> int:
        """The padded position of index ``i`` (at compile time)."""
        return i + (i // self.row + i // (self.row * self.group)) * self.pad

    def index(self, b: ir.IRBuilder, i: ir.Value) -> ir.Value:
        """The padded position of index ``i`` (an i32 value)."""
        if not self.pad:
            return i
        rows = b.udiv(i, ir.Constant(lt.I32, self.row))
        groups = b.udiv(i, ir.Constant(lt.I32, self.row * self.group))
        return b.add(i, b.mul(b.add(rows, groups), ir.Constant(lt.I32, self.pad)))

    def size_bytes(self, count: int) -> int:
        """Bytes ``count`` elements take, padding included, rounded up to 16."""
        return -(-(self.offset(count - 1) + 1) * self.element_bytes // 16) * 16


def _row_major(coords: Sequence[int], shape: Sequence[int]) -> int:
    """Row-major index of a compile-time coordinate."""
    index = 0
    for c, size in zip(coords, shape):
        index = index * size + c
    return index


def aligned_regions(sizes: Sequence[int], align: int) -> tuple[tuple[int, ...], int]:
    """Byte offsets of consecutive regions of ``sizes`` bytes, each starting at a multiple of
    ``align``, and the end of the last."""
    offsets, end = [], 0
    for size in sizes:
        offsets.append(end)
        end += -(-size // align) * align
    return tuple(offsets), end


def tile_padding(layout: L.Layout, shape: Sequence[int], mlir_type: Any, read_vector: int = 1) -> SharedPadding:
    """The padding in shared memory of a tile of ``shape`` written from ``layout`` and read
    ``read_vector`` consecutive elements at a time (`GPUKernel.write_tile`)."""
    vector = max(_contiguous(layout, shape), read_vector)
    return SharedPadding.of(shape, lt.byte_size(lt.memory_type(mlir_type)), vector)


def conversion_padding(held: L.Layout, layout: L.Layout, shape: Sequence[int], mlir_type: Any) -> SharedPadding:
    """The padding of a tile of ``shape`` on its way from ``held`` to ``layout`` (`GPUKernel.convert`)."""
    return tile_padding(held, shape, mlir_type, _contiguous(layout, shape))


def _contiguous(layout: L.Layout, shape: Sequence[int]) -> int:
    """Consecutive elements along the last dimension of ``shape`` one thread holds (what a
    vector access of shared memory can take at once)."""
    return L.run_length(layout, shape, len(shape) - 1) if shape else 1


def numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class _ELEMENTWISE:
    """Key of the rule every op with a shared element-wise rule uses (`naiad.codegen.elementwise`)."""
