"""The autotuner's memory on disk (``@autotune(..., cache_results=True)``).

Tuning a kernel can take seconds per key; a process that starts again should not pay that twice.
Each (kernel source, target, tuning key, list of configs) gets one small JSON file under
``<NAIAD_CACHE_DIR>/autotune/``, named by a hash of those parts, so a changed kernel or config
list simply misses.  Files are written under a temporary name and renamed into place, so a
reader never sees half a file; a file that cannot be read or parsed counts as absent and is
replaced by the next tuning.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import warnings
from typing import Any

from naiad import knobs
from naiad.errors import NaiadWarning


def path_for(parts: list[Any]) -> str:
    """The file that holds the result for these parts (anything with a stable ``str``)."""
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()
    return os.path.join(knobs.cache.dir, "autotune", f"{digest}.json")


def load(path: str) -> dict[str, Any] | None:
    """The stored record, or None when the file is missing, unreadable or not a JSON object."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def store(path: str, data: dict[str, Any]) -> None:
    """Write ``data`` atomically.  A cache that cannot be written is a warning, not an error:
    the kernel still runs with the config just chosen."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")
    except OSError as e:
        _warn(path, e)
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(temporary, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        _warn(path, e)


def _warn(path: str, error: OSError) -> None:
    warnings.warn(f"cannot write the autotuning cache file {path} ({error}) -- fix: set "
                  f"NAIAD_CACHE_DIR to a writable directory", NaiadWarning, stacklevel=3)
