"""Backends: the contract every backend implements, and how backends are found and chosen.

``naiad.backends.backends`` maps each backend name to its `Backend` (compiler and driver
classes), loading each lazily on first use; `naiad.backends.discovery` explains the sources and
the precedence rule, `naiad.backends.selection` how one is picked for a launch.  Sub-packages
of this package (``naiad/backends/<name>/``) are the in-tree backends.
"""

from naiad.backends.compiler import (BACKEND_API_VERSION, OLDEST_BACKEND_API_VERSION, BaseBackend,
                                     GPUTarget, Language)
from naiad.backends.discovery import Backend, BackendFailure, BackendSource
from naiad.backends.discovery import registry as backends
from naiad.backends.driver import DriverBase

__all__ = ["BACKEND_API_VERSION", "OLDEST_BACKEND_API_VERSION", "Backend", "BackendFailure",
           "BackendSource", "BaseBackend", "DriverBase", "GPUTarget", "Language", "backends"]
