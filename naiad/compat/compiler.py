"""``triton.compiler`` and ``triton.compiler.compiler`` under compat: compiling one
specialization ahead of its launch, as Triton's clients do (torch's Inductor among them:
``triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget(...), options=...)``
and a `CompiledKernel` it launches through ``kernel.run``)."""

from __future__ import annotations

from naiad.compat.errors import CompilationError, CompileTimeAssertionFailure, UnsupportedLanguageConstruct
from naiad.compiler.compiler import ASTSource, CompiledKernel, IRSource, compile, make_backend


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
