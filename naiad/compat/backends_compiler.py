"""``triton.backends.compiler`` under compat: the compiler half of the backend contract
(`naiad.backends.compiler`), under Triton's names."""

from naiad.backends.compiler import BaseBackend, GPUTarget, Language

__all__ = ["BaseBackend", "GPUTarget", "Language"]
