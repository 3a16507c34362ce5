"""The on-disk cache of compiled kernels: the key, the entry format, and the managers that store
entries.

**Key.**  `compile_key` hashes everything that can change what a compilation produces: Naiad's
version and the text of its own ``.py`` files (`naiad_sources_hash`, read once per process), the
source's hash (``ASTSource.hash()`` / ``IRSource.hash()``), the target, ``backend.hash()``, the
options' ``hash()``, the effective values of the variables the backend lists in
``cache_env_vars``, and `hook_key` (the pipeline hooks' part).  The key is a sha256 hex digest;
it is also the kernel's ``metadata["hash"]`` and the name of its dump and override folders.

**Entry.**  One entry per key, a flat set of files (name -> bytes):

- ``<kernel>.<stage>`` for every stage output in ``kernel.asm``, written with the backend's
  codec for that stage (`naiad.backends.compiler.StageCodec`: UTF-8 text or raw bytes);
- ``<kernel>.json``: what rebuilds the `CompiledKernel` without compiling -- the kernel's name,
  its launch signature, the stage order and the metadata (JSON, never pickle);
- ``MANIFEST``: JSON giving the sha256 and size of each of those files.

``<kernel>`` is the source's name (the ``@jit`` function's name, or an IR file's base name).  On
reading, every file named in the manifest must be present with its size and hash, the metadata
must parse, and every stage it lists must decode; an entry that fails any check is reported
with a `NaiadWarning`, removed, and compiled again -- never a crash, never a wrong kernel.

**Managers.**  The default `FileCacheManager` (`naiad.compiler.cache_managers`) keeps one
folder per key under ``<NAIAD_CACHE_DIR>/kernels/``, written as a temporary folder beside it and
renamed into place, so a reader never sees half an entry; when another process has put the same
key first, its entry is kept.  ``NAIAD_CACHE_MANAGER=module:Class`` (or
``naiad.knobs.cache.manager_class = Class``) replaces it with any class of `CacheManager`'s
shape: ``get(key)``, ``put(key, files)`` and optionally ``remove(key)``.  The integrity checks
above run in the core, whatever the manager.

**Remote.**  With ``NAIAD_REMOTE_CACHE`` a miss here is looked for in a cache shared by
machines before compiling, and what is compiled is published there (`load`, `store`;
`naiad.compiler.remote_cache`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import json
import os
import warnings
from typing import Any

from naiad import knobs
from naiad.compiler import remote_cache
from naiad.compiler.cache_managers import CacheManager, FileCacheManager
from naiad.version import __version__
from naiad.errors import KnobError, NaiadWarning

#: Version of the entry format; part of the key, so a new format never reads an old entry.
CACHE_FORMAT = 1
#: Name of the manifest file.  Kernel files always contain a dot, so no kernel collides with it.
MANIFEST = "MANIFEST"
#: Kernel names are cut to this many characters in file names (file systems allow 255 bytes).
MAX_NAME = 150


class CacheManagerError(KnobError):
    """``NAIAD_CACHE_MANAGER`` does not name a usable cache manager class."""


class CorruptEntry(Exception):
    """A cache entry failed an integrity check (the message says which)."""


# -- the key ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def naiad_sources_hash() -> str:
    """sha256 of every ``.py`` file of the ``naiad`` package (relative path and content), read
    once per process: any change to Naiad's compiler invalidates every cached kernel."""
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    digest = hashlib.sha256()
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, "rb") as f:
                content = f.read()
            digest.update(f"{relative}\0{len(content)}\0".encode())
            digest.update(content)
    return digest.hexdigest()


def hook_key() -> str:
    """The part of the cache key that changes the stages a backend runs: the stages inspection
    hook's own ``(key, hash)`` (Triton's convention: the hook called with no arguments) and the
    pass plugin modules configured."""
    from naiad import knobs

    hook = knobs.runtime.add_stages_inspection_hook
    parts = [repr(hook()) if hook is not None else "", ";".join(knobs.compilation.pass_plugins)]
    return "|".join(parts) if any(parts) else ""


def env_part(backend: Any) -> list[list]:
    """The values of ``backend``'s `cache_env_vars` (a `BaseBackend` class or instance), as
    ``[name, value]`` pairs: part of every compile's key, on disk and in the JIT's memory."""
    return [[var, knobs.env_value(var)] for var in backend.cache_env_vars]


def compile_key(src: Any, backend: Any, options: Any, target: Any) -> str:
    """The cache key of compiling ``src`` with ``backend`` and ``options`` for ``target``."""
    parts = {
        "format": CACHE_FORMAT,
        "naiad": __version__,
        "naiad_sources": naiad_sources_hash(),
        "source": [src.ext, str(src.language), src.hash()],
        "target": target.to_json(),
        "backend": backend.hash(),
        "options": options.hash(),
        "env": env_part(backend),
        "hooks": hook_key(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def file_name(kernel_name: str) -> str:
    """The ``<kernel>`` part of an entry's file names."""
    return kernel_name[:MAX_NAME]


# -- entries ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Entry:
    """What a `CompiledKernel` is made of, apart from its backend."""

    name: str
    asm: dict[str, Any]
    metadata: dict[str, Any]
    signature: list[tuple[str, Any]]


def pack(key: str, name: str, entry: Entry, backend: Any) -> dict[str, bytes]:
    """The files of an entry: every stage, the JSON metadata and the manifest.

    Raises TypeError (from ``json``) when the metadata is not JSON-safe.
    """
    files: dict[str, bytes] = {}
    for stage, output in entry.asm.items():
        codec = backend.stage_codec(stage)
        if not codec.binary and isinstance(output, (bytes, bytearray)):
            files[f"{name}.{stage}"] = bytes(output)
        else:
            files[f"{name}.{stage}"] = codec.encode(output)
    record = {"format": CACHE_FORMAT, "key": key, "name": entry.name, "stages": list(entry.asm),
              "signature": [list(pair) for pair in entry.signature], "metadata": entry.metadata}
    files[f"{name}.json"] = json.dumps(record, indent=1, allow_nan=True).encode()
    manifest = {"format": CACHE_FORMAT, "key": key,
                "files": {n: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
                          for n, data in files.items()}}
    files[MANIFEST] = json.dumps(manifest, indent=1, sort_keys=True).encode()
    return files


def check(files: dict[str, bytes], key: str) -> dict:
    """The manifest of ``files``, once every file it lists is there with its size and sha256;
    `CorruptEntry` says what is wrong otherwise."""
    manifest = _json(files, MANIFEST)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise CorruptEntry(f"{MANIFEST} is not a manifest")
    if manifest.get("format") != CACHE_FORMAT or manifest.get("key") != key:
        raise CorruptEntry(f"{MANIFEST} belongs to another key or format")
    for file, expected in manifest["files"].items():
        data = files.get(file)
        if data is None:
            raise CorruptEntry(f"{file} is missing")
        if not isinstance(expected, dict):
            raise CorruptEntry(f"{MANIFEST} has no size and hash for {file}")
        if len(data) != expected.get("size"):
            raise CorruptEntry(f"{file} has {len(data)} bytes, the manifest says {expected.get('size')}")
        if hashlib.sha256(data).hexdigest() != expected.get("sha256"):
            raise CorruptEntry(f"{file} does not match its sha256 in the manifest")
    return manifest


def record_of(files: dict[str, bytes], key: str) -> dict:
    """The kernel record (``<kernel>.json``: name, stages, metadata) of a sound entry, for tools
    that know the key but not the kernel's name (`naiad cache`)."""
    manifest = check(files, key)
    records = [f for f in manifest["files"] if f.endswith(".json")]
    if len(records) != 1:
        raise CorruptEntry(f"the manifest lists {len(records)} kernel records, not one")
    record = _json(files, records[0])
    if not isinstance(record, dict) or not isinstance(record.get("metadata"), dict):
        raise CorruptEntry(f"{records[0]} is not a kernel record")
    return record


def unpack(files: dict[str, bytes], key: str, name: str, backend: Any) -> Entry:
    """The entry held by ``files``; `CorruptEntry` says what is wrong with a damaged one."""
    manifest = check(files, key)
    metadata_file = f"{name}.json"
    if metadata_file not in manifest["files"]:
        raise CorruptEntry(f"the manifest does not list {metadata_file}")
    record = _json(files, metadata_file)
    try:
        if record["format"] != CACHE_FORMAT or record["key"] != key:
            raise CorruptEntry(f"{metadata_file} belongs to another key or format")
        kernel_name, stages, metadata = record["name"], record["stages"], record["metadata"]
        signature = [(str(n), _tuples(ty)) for n, ty in record["signature"]]
        if not isinstance(kernel_name, str) or not isinstance(metadata, dict) or \
                not isinstance(stages, list):
            raise TypeError("wrong field types")
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptEntry(f"{metadata_file} is not a kernel record ({type(e).__name__}: {e})") from None
    asm: dict[str, Any] = {}
    for stage in stages:
        stage_file = f"{name}.{stage}"
        if stage_file not in manifest["files"]:
            raise CorruptEntry(f"the manifest does not list {stage_file}")
        try:
            asm[stage] = backend.stage_codec(stage).decode(files[stage_file])
        except UnicodeDecodeError:
            raise CorruptEntry(f"{stage_file} is not UTF-8 text") from None
    return Entry(kernel_name, asm, metadata, signature)


def _json(files: dict[str, bytes], file: str) -> Any:
    if file not in files:
        raise CorruptEntry(f"{file} is missing")
    try:
        return json.loads(files[file].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptEntry(f"{file} is not valid JSON ({e})") from None


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples of a launch signature (tuple parameters)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def load(key: str, name: str, backend: Any) -> tuple[Entry, dict[str, bytes]] | None:
    """The cached entry of ``key`` and its files, or None: from the local cache, else from the
    remote one (`naiad.compiler.remote_cache`, then copied into the local one).  A damaged local
    entry is removed, with a warning; a damaged remote one is ignored (the compile that follows
    overwrites it)."""
    manager = get_manager()
    hit = _load_local(manager, key, name, backend)
    if hit is not None:
        _count_hit(manager, key)
        return hit
    remote = remote_cache.current()
    if remote is None:
        return None
    files = remote.get(remote_cache.KERNEL, key)
    if files is None:
        return None
    try:
        if not isinstance(files, dict) or not all(isinstance(v, bytes) for v in files.values()):
            raise CorruptEntry("the store did not return a dict of bytes")
        entry = unpack(files, key, name, backend)
    except CorruptEntry as e:
        remote.warn_once(f"its entry for kernel '{name}' ({key[:16]}...) is damaged ({e}); it is "
                         f"compiled again and overwritten")
        return None
    remote.hit(remote_cache.KERNEL, key)
    store_local(manager, key, files)
    return entry, files


def _load_local(manager: Any, key: str, name: str, backend: Any) -> tuple[Entry, dict[str, bytes]] | None:
    try:
        files = manager.get(key)
    except Exception as e:  # a cache manager that is down must not stop compilation
        _warn(f"the kernel cache manager {_describe(manager)} failed to read {key} "
              f"({type(e).__name__}: {e}); compiling instead")
        return None
    if files is None:
        return None
    try:
        if not isinstance(files, dict):
            raise CorruptEntry(f"{_describe(manager)}.get returned {type(files).__name__}, not a dict")
        return unpack(files, key, name, backend), files
    except CorruptEntry as e:
        _warn(f"the cached kernel '{name}' ({_where(manager, key)}) is damaged: {e}; "
              f"{_removal(manager, key)}, and the kernel is compiled again")
        return None


def _count_hit(manager: Any, key: str) -> None:
    """Count a use of a local entry where the manager keeps count (`naiad cache ls`)."""
    hit = getattr(manager, "hit", None)
    if callable(hit):
        with contextlib.suppress(Exception):
            hit(key)


def _removal(manager: Any, key: str) -> str:
    """Remove a damaged entry; what happened, said as it is."""
    remove = getattr(manager, "remove", None)
    if not callable(remove) or getattr(type(manager), "remove", None) is CacheManager.remove:
        return f"it stays in the cache ({_describe(manager)} cannot remove entries)"
    try:
        remove(key)
    except Exception as e:
        fix = "make the cache directory writable, or set NAIAD_CACHE_DIR to one that is" \
            if isinstance(manager, FileCacheManager) else "remove it from the cache by hand"
        return f"it could not be removed ({type(e).__name__}: {e}) -- fix: {fix}"
    return "it was removed"


def store(key: str, files: dict[str, bytes]) -> None:
    """Put an entry in the local cache and publish it to the remote one, if any; a cache that
    cannot be written is a warning, the kernel still runs."""
    store_local(get_manager(), key, files)
    remote = remote_cache.current()
    if remote is not None:
        remote.put(remote_cache.KERNEL, key, files)


def store_local(manager: Any, key: str, files: dict[str, bytes]) -> None:
    try:
        manager.put(key, files)
    except Exception as e:
        fix = " -- fix: set NAIAD_CACHE_DIR to a writable directory" \
            if isinstance(manager, FileCacheManager) else ""
        _warn(f"cannot store kernel {key} with the cache manager {_describe(manager)} "
              f"({type(e).__name__}: {e}){fix}")


def _warn(message: str) -> None:
    warnings.warn(message, NaiadWarning, stacklevel=4)


def _describe(manager: Any) -> str:
    return f"{type(manager).__module__}.{type(manager).__qualname__}"


def _where(manager: Any, key: str) -> str:
    if isinstance(manager, FileCacheManager):
        return manager.path(key)
    return f"key {key} of {_describe(manager)}"


_managers: dict[Any, CacheManager] = {}


def get_manager() -> Any:
    """The manager chosen by ``naiad.knobs.cache.manager_class`` (one instance per class)."""
    spec = knobs.cache.manager_class
    if spec is None:
        return FileCacheManager()
    manager = _managers.get(spec)
    if manager is None:
        cls = _manager_class(spec)
        try:
            manager = cls()
        except Exception as e:
            raise CacheManagerError(f"NAIAD_CACHE_MANAGER={_spec_text(spec)}: constructing "
                                    f"{cls.__name__}() failed ({type(e).__name__}: {e}) -- fix: "
                                    f"the class must be constructible without arguments") from e
        _managers[spec] = manager
    return manager


def _spec_text(spec: Any) -> str:
    return repr(spec) if isinstance(spec, str) else repr(getattr(spec, "__qualname__", spec))


def _manager_class(spec: Any) -> type:
    fix = ("-- fix: set it to 'package.module:ClassName' of a class with get(key) and "
           "put(key, files) (see naiad.compiler.cache.CacheManager), or unset it")
    if isinstance(spec, str):
        module_name, _, class_name = spec.strip().partition(":")
        if not module_name or not class_name or not class_name.replace(".", "_").isidentifier():
            raise CacheManagerError(f"NAIAD_CACHE_MANAGER={spec!r} is not of the form "
                                    f"'module:Class' {fix}")
        try:
            module = importlib.import_module(module_name)
        except Exception as e:
            raise CacheManagerError(f"NAIAD_CACHE_MANAGER={spec!r}: cannot import module "
                                    f"{module_name!r} ({type(e).__name__}: {e}) {fix}") from e
        cls: Any = module
        for part in class_name.split("."):
            cls = getattr(cls, part, None)
        if cls is None:
            raise CacheManagerError(f"NAIAD_CACHE_MANAGER={spec!r}: module {module_name!r} has no "
                                    f"attribute {class_name!r} {fix}")
    else:
        cls = spec
    if not isinstance(cls, type):
        raise CacheManagerError(f"NAIAD_CACHE_MANAGER={_spec_text(spec)} is not a class {fix}")
    missing = [m for m in ("get", "put") if not callable(getattr(cls, m, None))]
    if missing:
        raise CacheManagerError(f"NAIAD_CACHE_MANAGER={_spec_text(spec)}: {cls.__qualname__} has no "
                                f"{' and no '.join(missing)} method {fix}")
    return cls
