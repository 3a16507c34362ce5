"""What every launchable kernel object offers: ``kernel[grid](*args, **kwargs)``.

`naiad.runtime.jit.JITFunction`, the autotuner and the heuristics wrapper are launched the same
way, and code written for Triton subclasses this interface for its own launchable objects (torch's
Inductor derives its ``CachingAutotuner`` from Triton's ``KernelInterface``), so it is a class of
its own, with Triton's name and meaning: a subclass implements `run`.
"""

from __future__ import annotations

from typing import Any, Callable


class KernelInterface:
    """``kernel[grid](*args, **kwargs)`` is ``kernel.run(*args, grid=grid, warmup=False,
    **kwargs)``; ``kernel.warmup(...)`` compiles without launching."""

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement run(*args, grid, warmup, **kwargs)")

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        return self.run(*args, grid=grid, warmup=True, **kwargs)
