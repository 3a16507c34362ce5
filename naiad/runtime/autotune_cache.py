"""The autotuner's memory on disk (``@autotune(..., cache_results=True)``).

Tuning a kernel can take seconds per key; a process that starts again should not pay that twice.
Each (kernel source, target, tuning key, list of configs) gets one small JSON file under
``<NAIAD_CACHE_DIR>/autotune/``, named by a hash of those parts, so a changed kernel or config
list simply misses.  With ``NAIAD_REMOTE_CACHE`` the records are shared under the same hash
(`naiad.compiler.remote_cache`), so a cluster tunes each kernel once.  Files are written under a temporary name and renamed into place, so a
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
    return os.path.join(directory(), f"{digest}.json")


def load(path: str) -> dict[str, Any] | None:
    """The stored record, or None when the file is missing, unreadable or not a JSON object;
    a record missing here is looked for in the remote cache (`_load_remote`)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return _load_remote(path)
    return data if isinstance(data, dict) else _load_remote(path)


#: A shared record's files: the JSON, and its sha256 (checked before it is believed).
RECORD, CHECKSUM = "record.json", "record.sha256"


def directory() -> str:
    """The folder of this machine's records."""
    return os.path.join(knobs.cache.dir, "autotune")


def shared_files(text: bytes) -> dict[str, bytes]:
    """A record's JSON text as a shared entry's files."""
    return {RECORD: text, CHECKSUM: hashlib.sha256(text).hexdigest().encode()}


def check_shared(files: dict[str, bytes]) -> dict[str, Any]:
    """The record a shared entry holds; ValueError says what is wrong with a damaged one."""
    data = files.get(RECORD) if isinstance(files, dict) else None
    if not isinstance(data, bytes) or hashlib.sha256(data).hexdigest().encode() != files.get(CHECKSUM):
        raise ValueError("its checksum does not match")
    record = json.loads(data.decode("utf-8"))
    if not isinstance(record, dict):
        raise ValueError("it is not a JSON object")
    return record


def _load_remote(path: str) -> dict[str, Any] | None:
    """The record another machine tuned (``NAIAD_REMOTE_CACHE``), kept here too; None when
    there is none or it fails its checksum (the tuning that follows overwrites it)."""
    from naiad.compiler import remote_cache

    remote = remote_cache.current()
    if remote is None:
        return None
    digest = _digest(path)
    files = remote.get(remote_cache.AUTOTUNE, digest)
    if not files:
        return None
    try:
        record = check_shared(files)
    except ValueError as e:
        remote.warn_once(f"its autotuning record {digest[:16]}... is damaged ({e}); the kernel is "
                         f"tuned again and the record overwritten")
        return None
    remote.hit(remote_cache.AUTOTUNE, digest)
    _write(path, record)
    return record


def _digest(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def store(path: str, data: dict[str, Any]) -> None:
    """Write ``data`` atomically, and publish it to the remote cache, if any.  A cache that
    cannot be written is a warning, not an error: the kernel still runs with the config just
    chosen."""
    from naiad.compiler import remote_cache

    _write(path, data)
    remote = remote_cache.current()
    if remote is not None:
        remote.put(remote_cache.AUTOTUNE, _digest(path), shared_files(json.dumps(data, indent=1).encode()))


def _write(path: str, data: dict[str, Any]) -> None:
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
                  f"NAIAD_CACHE_DIR to a writable directory", NaiadWarning, stacklevel=4)
