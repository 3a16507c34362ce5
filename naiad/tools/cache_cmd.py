"""``naiad cache [--remote] ls|stats|clear|prune|verify``: the compiled-kernel cache seen and
trimmed by hand -- the local one (``NAIAD_CACHE_DIR``), or with ``--remote`` the shared one
(``NAIAD_REMOTE_CACHE``).  Entries are listed with the kernel, backend and target their record
names, their bytes, age, last use and hits; ``verify`` checks every file against the entry's
manifest (sha256 and size) and removes the damaged entries, saying which and why."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import time
from typing import Any, Callable, Iterator

from naiad import knobs
from naiad.compiler import cache, remote_cache
from naiad.compiler.cache_managers import EntryStats
from naiad.errors import NaiadError
from naiad.runtime import autotune_cache

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_BYTES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclasses.dataclass
class Place:
    """One cache as the command sees it: its name in messages, its store (`RemoteStore`'s
    shape) and the namespaces of entries it holds."""

    name: str
    store: Any
    namespaces: tuple[str, ...]


class LocalStore:
    """The local cache in the remote stores' shape: the kernels' manager (only the default,
    file-based one can list its entries) and the autotuning records' files."""

    def __init__(self) -> None:
        manager = cache.get_manager()
        if not isinstance(manager, cache.FileCacheManager):
            raise NaiadError(f"the cache manager {type(manager).__qualname__} (NAIAD_CACHE_MANAGER) "
                             f"cannot list its entries -- fix: unset NAIAD_CACHE_MANAGER to see the "
                             f"files under NAIAD_CACHE_DIR")
        self.kernels = manager

    def entries(self, namespace: str) -> Iterator[tuple[str, EntryStats]]:
        if namespace == remote_cache.KERNEL:
            yield from self.kernels.entries()
            return
        folder = autotune_cache.directory()
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            path = os.path.join(folder, name)
            if name.endswith(".json") and os.path.isfile(path):
                changed = os.path.getmtime(path)
                yield name[:-len(".json")], EntryStats(os.path.getsize(path), changed, changed, 0)

    def get(self, namespace: str, key: str) -> dict[str, bytes] | None:
        if namespace == remote_cache.KERNEL:
            return self.kernels.get(key)
        try:
            with open(os.path.join(autotune_cache.directory(), f"{key}.json"), "rb") as f:
                return autotune_cache.shared_files(f.read())
        except FileNotFoundError:
            return None

    def remove(self, namespace: str, key: str) -> None:
        if namespace == remote_cache.KERNEL:
            self.kernels.remove(key)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(autotune_cache.directory(), f"{key}.json"))


def _place(remote: bool) -> Place:
    if not remote:
        return Place(f"local cache {knobs.cache.dir}", LocalStore(), (remote_cache.KERNEL, remote_cache.AUTOTUNE))
    url = knobs.cache.remote
    if not url:
        raise NaiadError("--remote: no remote cache is set -- fix: set NAIAD_REMOTE_CACHE, e.g. "
                         "redis://host:6379/0")
    return Place(f"remote cache {url}", remote_cache.open_store(url, knobs.cache.remote_timeout),
                 (remote_cache.KERNEL, remote_cache.AUTOTUNE))


def run(args: argparse.Namespace, write: Callable[[str], Any]) -> int:
    place = _place(args.remote)
    try:
        return _ACTIONS[args.action](place, args, write)
    except NaiadError:
        raise
    except Exception as e:          # noqa: BLE001  (a store that fails: its error, not a traceback)
        raise NaiadError(f"the {place.name} failed ({type(e).__name__}: {e}) -- fix: check that it "
                         f"is reachable (NAIAD_REMOTE_CACHE_TIMEOUT={knobs.cache.remote_timeout:g} s)") from None
    finally:
        if callable(getattr(place.store, "close", None)):
            place.store.close()


def _ls(place: Place, args: argparse.Namespace, write: Callable[[str], Any]) -> int:
    now = time.time()
    rows = []
    for key, stats in place.store.entries(remote_cache.KERNEL):
        kernel, target = _describe(place.store.get(remote_cache.KERNEL, key), key)
        rows.append((key[:12], kernel, target, _bytes(stats.size), _age(now - stats.created),
                     _age(now - stats.used), str(stats.hits)))
    header = ("key", "kernel", "backend:target", "size", "age", "used", "hits")
    write(_table(header, rows) if rows else f"the {place.name} is empty\n")
    return 0


def _describe(files: dict[str, bytes] | None, key: str) -> tuple[str, str]:
    """The kernel's name and ``backend:arch`` from its record; a damaged entry says so."""
    try:
        record = cache.record_of(files or {}, key)
        target = record["metadata"].get("target") or {}
        return str(record.get("name")), f"{target.get('backend')}:{target.get('arch')}"
    except cache.CorruptEntry as e:
        return "(damaged: naiad cache verify)", str(e)[:40]


def _stats(place: Place, args: argparse.Namespace, write: Callable[[str], Any]) -> int:
    now = time.time()
    for namespace in place.namespaces:
        entries = [stats for _, stats in place.store.entries(namespace)]
        what = "kernels" if namespace == remote_cache.KERNEL else "autotuning records"
        if not entries:
            write(f"{what}: none\n")
            continue
        write(f"{what}: {len(entries)}, {_bytes(sum(e.size for e in entries))}, "
              f"{sum(e.hits for e in entries)} hits; oldest {_age(now - min(e.created for e in entries))}, "
              f"newest {_age(now - max(e.created for e in entries))}, "
              f"last used {_age(now - max(e.used for e in entries))} ago\n")
    write(f"({place.name})\n")
    return 0


def _clear(place: Place, args: argparse.Namespace, write: Callable[[str], Any]) -> int:
    count = 0
    for namespace in place.namespaces:
        for key, _ in list(place.store.entries(namespace)):
            place.store.remove(namespace, key)
            count += 1
    write(f"removed {count} entries from the {place.name}\n")
    return 0


def _prune(place: Place, args: argparse.Namespace, write: Callable[[str], Any]) -> int:
    if args.older_than is None and args.max_size is None:
        raise NaiadError("prune needs --older-than AGE or --max-size SIZE (or both) -- fix: e.g. "
                         "naiad cache prune --older-than 30d --max-size 2G")
    oldest = time.time() - parse_age(args.older_than) if args.older_than is not None else None
    limit = parse_size(args.max_size) if args.max_size is not None else None
    entries = sorted(((stats.used, namespace, key, stats.size) for namespace in place.namespaces
                      for key, stats in place.store.entries(namespace)))
    total = sum(size for *_, size in entries)
    removed = freed = 0
    for used, namespace, key, size in entries:          # least recently used first
        if (oldest is not None and used < oldest) or (limit is not None and total > limit):
            place.store.remove(namespace, key)
            removed, freed, total = removed + 1, freed + size, total - size
    write(f"removed {removed} entries ({_bytes(freed)}) from the {place.name}; "
          f"{len(entries) - removed} left ({_bytes(total)})\n")
    return 0


def _verify(place: Place, args: argparse.Namespace, write: Callable[[str], Any]) -> int:
    checked, damaged = 0, []
    for namespace in place.namespaces:
        for key, _ in list(place.store.entries(namespace)):
            files = place.store.get(namespace, key)
            checked += 1
            problem = _problem(namespace, files, key)
            if problem is not None:
                place.store.remove(namespace, key)
                damaged.append(f"  {namespace} {key[:16]}...: {problem} -- removed\n")
    write(f"checked {checked} entries of the {place.name}: {len(damaged)} damaged\n" + "".join(damaged))
    return 1 if damaged else 0


def _problem(namespace: str, files: dict[str, bytes] | None, key: str) -> str | None:
    """What is wrong with an entry, or None."""
    if files is None:
        return None                                     # removed meanwhile
    try:
        if namespace == remote_cache.KERNEL:
            cache.record_of(files, key)
        else:
            autotune_cache.check_shared(files)
    except (cache.CorruptEntry, ValueError) as e:
        return str(e)
    return None


def parse_age(text: str) -> float:
    found = _AGE.match(text)
    if found is None:
        raise NaiadError(f"--older-than {text!r} is not an age -- fix: a number with s, m, h, d or w, "
                         f"e.g. 30d or 12h")
    return float(found.group(1)) * _SECONDS[found.group(2).lower()]


def parse_size(text: str) -> int:
    found = _SIZE.match(text)
    if found is None:
        raise NaiadError(f"--max-size {text!r} is not a size -- fix: a number of bytes with K, M, G or "
                         f"T, e.g. 500M or 2G")
    return int(float(found.group(1)) * _BYTES[found.group(2).lower()])


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "\n".join(lines) + "\n"


_ACTIONS = {"ls": _ls, "stats": _stats, "clear": _clear, "prune": _prune, "verify": _verify}
