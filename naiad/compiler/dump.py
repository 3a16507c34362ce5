"""Dumps and overrides of stage outputs, for every stage of every backend.

``NAIAD_KERNEL_DUMP=1`` writes, for each kernel compiled or read from the cache, the files of
its cache entry (``<kernel>.<stage>`` for every stage, with the backend's codec, and
``<kernel>.json``) to ``<NAIAD_DUMP_DIR>/<hash>/``, where ``<hash>`` is the kernel's cache key
(``kernel.hash``, ``kernel.metadata["hash"]``).

``NAIAD_KERNEL_OVERRIDE=1``: when ``<NAIAD_OVERRIDE_DIR>/<hash>/<kernel>.<stage>`` exists, the
stage still runs (it may record metadata), then the file's content replaces its output and the
next stage starts from it.  The file is read as the stage's output is: bytes for a binary
stage, text for a text stage, and an IR module (parsed with the core's dialects and the
backend's own, `BaseBackend.load_dialects`) for a stage that hands an xDSL module on.  The
usual round trip: dump, copy ``<dump dir>/<hash>`` to ``<override dir>/<hash>``, keep only the
files to replace, edit them.  A kernel with an override is neither read from nor stored in the
on-disk cache, so an override never leaks into later runs without the variable set.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any

from naiad import knobs
from naiad.compiler.cache import MANIFEST
from naiad.errors import NaiadError


class OverrideError(NaiadError):
    """An override file cannot replace the output of its stage."""


def folder(directory: str, key: str) -> str:
    return os.path.join(directory, key)


def dump(key: str, files: dict[str, bytes]) -> str:
    """Write an entry's stage and metadata files to the dump folder of ``key``; return it."""
    target = folder(knobs.cache.dump_dir, key)
    os.makedirs(target, exist_ok=True)
    for name, data in files.items():
        if name == MANIFEST:
            continue
        # One file at a time through a temporary name: two processes dumping the same kernel
        # write the same bytes, and a reader never sees half a file.
        fd, temporary = tempfile.mkstemp(dir=target, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temporary, os.path.join(target, name))
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
    return target


def overrides(key: str, name: str, stages: list[str]) -> dict[str, str]:
    """Stage -> override file, for each of ``stages`` that has one under the override folder."""
    base = folder(knobs.cache.override_dir, key)
    if not os.path.isdir(base):
        return {}
    found = {}
    for stage in stages:
        path = os.path.join(base, f"{name}.{stage}")
        if os.path.isfile(path):
            found[stage] = path
    return found


def read_override(path: str, stage: str, output: Any, backend: Any) -> Any:
    """The content of override file ``path``, as the kind of object ``stage`` produced
    (``output``), so that the next stage receives what it always receives."""
    with open(path, "rb") as f:
        data = f.read()
    if isinstance(output, (bytes, bytearray)) or backend.stage_codec(stage).binary:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OverrideError(f"override file {path}: stage '{stage}' is text, and the file is not "
                            f"UTF-8 ({e}) -- fix: save it as UTF-8") from None
    if isinstance(output, str):
        return text
    from xdsl.ir import Operation

    if isinstance(output, Operation):
        from naiad.ir.context import make_context, parse_module

        context = make_context()
        backend.load_dialects(context)
        return parse_module(text, context, name=f"override file {path}")
    raise OverrideError(
        f"override file {path}: stage '{stage}' of the {backend.target.backend} backend hands the "
        f"next stage a {type(output).__module__}.{type(output).__qualname__} object, which Naiad "
        f"cannot build from text -- fix: override the stage before or after it instead")
