"""``triton.runtime`` under compat: ``driver.active`` is Naiad's selected backend's driver."""

from __future__ import annotations

from typing import Any

from naiad.compat import errors
from naiad.runtime import jit
from naiad.runtime.autotuner import Autotuner, Config, Heuristics, autotune, heuristics  # noqa: F401


class _DriverConfig:
    """Triton's ``triton.runtime.driver``: ``.active`` is the driver of the default backend."""

    def __init__(self) -> None:
        self._active: Any = None

    @property
    def active(self) -> Any:
        if self._active is None:
            from naiad.backends.selection import active_driver

            return active_driver()
        return self._active

    def set_active(self, driver: Any) -> None:
        self._active = driver

    def reset_active(self) -> None:
        self._active = None


driver = _DriverConfig()

#: Looks like a package, so that `import triton.<missing>` reaches the compat layer's
#: "not provided" error instead of Python's "not a package".
__path__: list[str] = []

__all__ = ["Autotuner", "Config", "Heuristics", "autotune", "driver", "errors", "heuristics", "jit"]
