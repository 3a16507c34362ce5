"""``triton.backends`` under compat: ``backends``, Triton's registry of installed backends,
holding Naiad's.

Each entry has Triton's shape: ``.compiler`` is the backend's `naiad.backends.compiler.BaseBackend`
subclass and ``.driver`` its `naiad.backends.driver.DriverBase` subclass.  Backends appear under
Triton's names where Triton names them differently (`TRITON_NAMES`: Naiad's cuda backend is
"nvidia" there, as torch's device checks ask ``"nvidia" in triton.backends.backends``); every
other backend keeps its own name.  A backend is loaded when it is first looked up, so importing
this module costs nothing (torch imports it at ``import torch._dynamo``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

#: Naiad's backend name -> Triton's, where they differ.
TRITON_NAMES = {"cuda": "nvidia", "hip": "amd"}


class TritonBackends(Mapping):
    """Triton name -> Naiad's loaded backend (a `naiad.backends.discovery.Backend`), for every
    backend that loads."""

    @staticmethod
    def _naiad_names() -> dict[str, str]:
        from naiad.backends.discovery import registry

        return {TRITON_NAMES.get(name, name): name for name in registry.sources()}

    def __getitem__(self, name: str) -> Any:
        from naiad.backends.discovery import Backend, registry

        naiad_name = self._naiad_names().get(name)
        loaded = registry.get_or_failure(naiad_name) if naiad_name is not None else None
        if not isinstance(loaded, Backend):
            raise KeyError(name)
        return loaded

    def __iter__(self) -> Iterator[str]:
        from naiad.backends.discovery import registry

        return iter([triton for triton, naiad in self._naiad_names().items() if naiad in registry])

    def __len__(self) -> int:
        return sum(1 for _ in self)


backends = TritonBackends()

#: Looks like a package, so that ``import triton.backends.<missing>`` reaches the compat
#: layer's "not provided" error instead of Python's "not a package".
__path__: list[str] = []

__all__ = ["TRITON_NAMES", "TritonBackends", "backends"]
