"""The global-scratch allocator: ``naiad.set_allocator(fn)``, Triton's ``triton.set_allocator``.

Some kernels need device memory beyond their arguments (Triton's tensor descriptors built
inside a kernel, profiling buffers); the runtime asks the allocator set here for it,
``fn(size, alignment, stream) -> array``.  The CPU backend needs no scratch of this kind, so
until a backend asks, the allocator is only stored; the default one refuses with a message
that says how to set one.  The setting is per context (a `ContextVar`), as in Triton.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

from naiad.errors import NaiadError


class Allocator(Protocol):
    def __call__(self, size: int, alignment: int, stream: Any) -> Any: ...


class NullAllocator:
    """The default: kernels that need global scratch memory fail with a clear message."""

    def __call__(self, size: int, alignment: int, stream: Any) -> Any:
        raise NaiadError(f"this kernel needs {size} bytes of global scratch memory and no allocator "
                         f"is set -- fix: call naiad.set_allocator(fn), fn(size, alignment, stream) "
                         f"returning an array of at least that many bytes")


_allocator: ContextVar[Allocator] = ContextVar("naiad_allocator", default=NullAllocator())


def set_allocator(allocator: Allocator) -> None:
    """Use ``allocator(size, alignment, stream)`` for kernels' global scratch memory."""
    if not callable(allocator):
        raise NaiadError(f"set_allocator needs a callable (size, alignment, stream) -> array, "
                         f"not {type(allocator).__name__}")
    _allocator.set(allocator)


def get_allocator() -> Allocator:
    return _allocator.get()
