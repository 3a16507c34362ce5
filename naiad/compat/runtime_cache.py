"""``triton.runtime.cache`` under compat: ``triton_key``, the compiler's identity in a client's
cache keys, and ``knobs`` (``knobs.cache.dir``) as Triton's module re-exports it."""

from naiad import knobs
from naiad.compat.compiler import triton_key

__all__ = ["knobs", "triton_key"]
