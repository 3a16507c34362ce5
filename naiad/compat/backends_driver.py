"""``triton.backends.driver`` under compat: the driver half of the backend contract
(`naiad.backends.driver`), under Triton's names."""

from naiad.backends.driver import DriverBase

__all__ = ["DriverBase"]
