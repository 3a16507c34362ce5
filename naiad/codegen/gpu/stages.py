"""The stages a GPU backend shares, as three calls: what a backend's ``add_stages`` builds on.

A GPU backend's pipeline is ``ttir -> ttgir -> llir -> (its assembly) -> (its binary)``.  The
first three are the same for every GPU target but for what the target supplies:

- `make_ttir`: the shared TTIR passes, then what the shared GPU lowering has no rule for
  rewritten away (``noinline`` calls inlined, block pointers and tensor descriptors as tensors
  of pointers with masks);
- `make_ttgir`: the module's target attributes and each tensor's layout written on the op that
  makes it (``ttg.layout``), after the backend's own TTGIR passes (``passes(func)``: NVIDIA's
  tensor-core layouts and software pipelining);
- `make_llir`: the LLVM module of the kernel, lowered by the shared rules (or the backend's
  table) with the backend's `naiad.codegen.gpu.hooks.GPUHooks`, and what the launcher needs
  in the metadata.

`naiad.backends.cuda.compiler` is one user; an out-of-tree backend is another.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from xdsl.dialects.builtin import IntegerAttr, StringAttr, TensorType, i32

from naiad.codegen.gpu.hooks import GPUHooks
from naiad.ir import tt


def make_ttir(module: Any, block_copies: Callable[[Any], bool] | None = None) -> Any:
    """The shared TTIR pipeline, then ``noinline`` functions inlined (the GPU lowering has no
    calls) and block pointers (and the tensor descriptors built on them) rewritten as tensors
    of pointers with masks.  ``block_copies(module)``, run before that rewrite, is where a
    backend with block-copy hardware (NVIDIA's TMA) takes the accesses it can do as such (True
    if it took any)."""
    from naiad.passes import run_passes, run_ttir_pipeline
    from naiad.passes.block_pointers import rewrite_block_pointers
    from naiad.passes.inline import inline

    run_ttir_pipeline(module)
    if inline(module, noinline_too=True):
        run_passes(module, ("canonicalize", "cse", "dce"))
    if block_copies is not None and block_copies(module):
        run_passes(module, ("dce",))
    if rewrite_block_pointers(module):
        run_passes(module, ("cse", "dce"))
        module.verify()
    return module


def make_ttgir(module: Any, num_warps: int, warp_size: int, target: str,
               passes: Callable[[Any], None] | None = None) -> Any:
    """Target attributes (``ttg.num-warps``, ``ttg.threads-per-warp``, ``ttg.target``); the
    backend's ``passes(func)`` on each kernel; the remove-redundant-conversions pass (cheap
    values computed again in each layout their uses want); then each tensor's layout on the op
    that makes it and, on an op whose operand is converted through shared memory,
    ``ttg.convert`` (for reading: the llir stage assigns layouts again from what the ops carry,
    so an edited TTGIR needs neither)."""
    from naiad.codegen.gpu.conversions import remove_redundant_conversions

    module.attributes["ttg.num-warps"] = IntegerAttr(num_warps, i32)
    module.attributes["ttg.threads-per-warp"] = IntegerAttr(warp_size, i32)
    module.attributes["ttg.target"] = StringAttr(target)
    for func in module.body.ops:
        if not isinstance(func, tt.FuncOp) or not func.body.blocks:
            continue
        if passes is not None:
            passes(func)
        layouts, conversions = remove_redundant_conversions(func, num_warps, warp_size)
        for op in func.walk():
            if op.results and isinstance(op.results[0].type, TensorType) and op.results[0] in layouts:
                op.attributes["ttg.layout"] = StringAttr(str(layouts[op.results[0]]))
        converted: dict[Any, list[str]] = {}
        for conversion in conversions:
            converted.setdefault(conversion.op, []).append(str(conversion))
        for op, texts in converted.items():
            op.attributes["ttg.convert"] = StringAttr("; ".join(texts))
    return module


def make_llir(module: Any, metadata: dict, hooks: GPUHooks, num_warps: int,
              rules: Mapping[type, Callable] | None = None,
              prepare: Callable[[Any], None] | None = None, rings: bool = False,
              staging: Callable[[Any, Any], Any] | None = None) -> Any:
    """The kernel as an llvmlite module, lowered with ``hooks`` (and the backend's rule table
    and ``prepare``, `naiad.codegen.gpu.kernel.GPUKernel`); ``metadata`` gains the kernel's
    ``name``, ``shared`` (bytes of shared memory), ``num_warps`` and ``arg_types``.
    ``staging(kernel, dot)``: what the backend's dot rule stages in shared memory (default: the
    shared FMA rule's), for `naiad.codegen.gpu.operand_rings`: the conversions of dots'
    loop-invariant operands made before their loop; ``rings``: the operands of dots in loops
    staged in rings of two shared-memory slots (one barrier a trip)."""
    import naiad.codegen.gpu  # noqa: F401  (registers the shared rules)
    from naiad.codegen.gpu import operand_rings
    from naiad.codegen.gpu.kernel import GPUKernel
    from naiad.codegen.gpu.ops_dot import fma_staging

    if rings or staging is not None:
        backend_prepare = prepare

        def prepare(kernel: Any) -> None:
            if backend_prepare is not None:
                backend_prepare(kernel)
            operand_rings.plan(kernel, staging or fma_staging, rings)
    lowering = GPUKernel(module, hooks, num_warps, rules=rules, prepare=prepare)
    llmod = lowering.lower()
    metadata["name"] = lowering.func_op.sym_name.data
    metadata["shared"] = lowering.shared_bytes
    metadata["num_warps"] = num_warps
    metadata["arg_types"] = [str(t) for t in lowering.func_op.function_type.inputs.data]
    return llmod


def make_llir_in(module: Any, metadata: dict, new_hooks: Callable[[], GPUHooks], num_warps: int,
                 shared_limit: int, rings: bool, **options: Any) -> tuple[Any, GPUHooks]:
    """`make_llir` (with ``options``: ``rules``, ``prepare``, ``staging``) with the operand
    rings where asked and the kernel's shared memory stays within ``shared_limit`` bytes with
    them, else without (each lowering with fresh hooks from ``new_hooks()``); the module and
    the hooks that made it."""
    hooks = new_hooks()
    llmod = make_llir(module, metadata, hooks, num_warps, rings=rings, **options)
    if rings and metadata["shared"] > shared_limit:
        hooks = new_hooks()
        llmod = make_llir(module, metadata, hooks, num_warps, **options)
    return llmod, hooks
