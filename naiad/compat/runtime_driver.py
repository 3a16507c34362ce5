"""``triton.runtime.driver`` under compat: ``driver``, whose ``active`` is the driver kernels
launch through (Naiad's selected backend's, or the one a client set with ``set_active``)."""

from __future__ import annotations

from typing import Any


class DriverConfig:
    """Triton's ``triton.runtime.driver``: ``.active`` is the default backend's driver until a
    client sets one (torch's Inductor sets the cpu backend's before compiling for the CPU)."""

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


driver = DriverConfig()

__all__ = ["DriverConfig", "driver"]
