"""``triton.compiler`` and ``triton.compiler.compiler`` under compat: compiling one
specialization ahead of its launch, as Triton's clients do (torch's Inductor among them:
``triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget(...), options=...)``
and a `CompiledKernel` it launches through ``kernel.run``)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any

from naiad.compat.errors import CompilationError, CompileTimeAssertionFailure, UnsupportedLanguageConstruct
from naiad.compiler import compiler as naiad_compiler
from naiad.compiler.compiler import ASTSource, CompiledKernel, IRSource, make_backend


def compile(src: Any, target: Any = None, options: dict | None = None) -> CompiledKernel:
    """`naiad.compile`, and the kernel's binary published in Triton's cache layout
    (`publish_binary`)."""
    kernel = naiad_compiler.compile(src, target=target, options=options)
    publish_binary(kernel)
    return kernel


def publish_binary(kernel: CompiledKernel) -> None:
    """With ``TRITON_CACHE_DIR`` set, write the kernel's binary as
    ``<TRITON_CACHE_DIR>/<kernel.hash>/<name>.<binary stage>`` (``.cubin`` on cuda), where Triton
    keeps it, unless it is there already.

    Why: Triton's clients read that file without asking Triton.  torch's Inductor (which sets
    ``TRITON_CACHE_DIR`` before it compiles) launches a CUDA kernel it finds there with its own
    C++ launcher instead of ``kernel.run`` -- ~10 us less a call, the path it takes with real
    Triton -- and its bundler saves the folder with its graph cache.  A kernel whose launch
    passes more than its parameters (cuda's tensor maps, which Naiad's launcher appends) is not
    published: such a launcher would pass too few."""
    folder = os.environ.get("TRITON_CACHE_DIR")
    if not folder or not kernel.hash or kernel.metadata.get("tensor_maps"):
        return
    entry = os.path.join(folder, kernel.hash)
    path = os.path.join(entry, f"{kernel.name}.{kernel.backend.binary_ext}")
    if os.path.exists(path):
        return
    os.makedirs(entry, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=entry, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(kernel.binary)
        os.replace(temporary, path)                # a reader sees the whole file or none
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def triton_key() -> str:
    """What Triton's clients put in their own cache keys for "this compiler": Naiad's version
    and a hash of its sources (`naiad.compiler.cache.naiad_sources_hash`), so that a client's
    cached kernels are rebuilt when Naiad changes."""
    from naiad.compiler.cache import naiad_sources_hash
    from naiad.version import __version__

    return f"naiad-{__version__}-{naiad_sources_hash()}"


#: Looks like a package, so that ``import triton.compiler.<missing>`` reaches the compat layer's
#: "not provided" error instead of Python's "not a package".
__path__: list[str] = []

__all__ = ["ASTSource", "CompilationError", "CompileTimeAssertionFailure", "CompiledKernel", "IRSource",
           "UnsupportedLanguageConstruct", "compile", "make_backend", "triton_key"]
