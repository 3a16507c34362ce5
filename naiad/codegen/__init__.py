"""Shared lowering to LLVM IR (llvmlite.ir): types, one rule per element-wise op, target hooks.

Backends build on this: `naiad.codegen.llvm_types` maps TTIR types to LLVM types,
`naiad.codegen.elementwise` holds the per-op rules that turn scalar or vector LLVM values into
results (the same rule serves a CPU lane vector and a GPU thread's elements), and
`naiad.codegen.hooks.TargetHooks` is what a target supplies (program ids, the math library,
vector width).  How tensors are laid out and iterated is the backend's own business.
"""
