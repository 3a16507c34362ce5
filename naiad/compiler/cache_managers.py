"""Where compiled kernels are kept: the interface of a cache manager, and the default one --
a folder per entry on the local disk (also the shared-folder remote store's,
`naiad.compiler.remote_files`).  Entries are opaque dicts of file name -> bytes here; their
format and checks are `naiad.compiler.cache`'s."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import tempfile
from typing import Iterator

from naiad import knobs

#: An entry folder's count of uses (one byte each; not part of the entry).
HITS = ".hits"
#: What a cache key looks like (a sha256 hex digest).
KEY = re.compile(r"^[0-9a-f]{64}$")


@dataclasses.dataclass
class EntryStats:
    """What `naiad cache` shows of an entry: bytes, creation and last use (Unix times), hits."""

    size: int
    created: float
    used: float
    hits: int


class CacheManager:
    """The interface of a kernel cache manager (``NAIAD_CACHE_MANAGER=module:Class``).

    The class is constructed without arguments, once per process and class.  Keys are sha256
    hex digests; an entry is a dict of file name -> bytes (names never contain a path
    separator).  The core checks every entry's integrity itself, so a manager only stores and
    returns bytes.
    """

    def get(self, key: str) -> dict[str, bytes] | None:
        """Every file of the entry ``key``, or None when there is none."""
        raise NotImplementedError

    def put(self, key: str, files: dict[str, bytes]) -> None:
        """Store an entry.  When ``key`` is already present the manager may keep either copy:
        both were compiled from the same inputs."""
        raise NotImplementedError

    def remove(self, key: str) -> None:
        """Drop the entry ``key`` (called when it is damaged).  Optional: the default does
        nothing, and then a damaged entry is replaced only if `put` overwrites."""


class FileCacheManager(CacheManager):
    """One folder per key under ``<directory>/<folder>/`` (``directory``: ``NAIAD_CACHE_DIR``,
    read at each call; ``folder``: ``kernels``).  Safe with several processes writing the same
    key at once.  Each use of an entry appends a byte to its ``.hits`` file (`hit`), whose size
    and time are the entry's hits and last use for `naiad cache`."""

    def __init__(self, directory: str | None = None, folder: str = "kernels"):
        self.directory = directory
        self.folder = folder

    @property
    def root(self) -> str:
        return os.path.join(self.directory or knobs.cache.dir, self.folder)

    def path(self, key: str) -> str:
        if not KEY.match(key):
            raise ValueError(f"not a cache key: {key!r}")
        return os.path.join(self.root, key)

    def get(self, key: str) -> dict[str, bytes] | None:
        folder = self.path(key)
        try:
            names = os.listdir(folder)
        except OSError:
            if os.path.lexists(folder) and not os.path.isdir(folder):
                return None        # a file or a broken link in its place: `put` replaces it
            if not os.path.lexists(folder):
                return None
            raise
        files = {}
        for name in names:
            if name.startswith("."):
                continue                              # the entry's own records (.hits)
            with contextlib.suppress(OSError):       # vanished or unreadable: the manifest says so
                with open(os.path.join(folder, name), "rb") as f:
                    files[name] = f.read()
        return files

    def put(self, key: str, files: dict[str, bytes]) -> None:
        folder = self.path(key)
        if os.path.isdir(folder):
            return                                    # another process was first: keep its entry
        if os.path.lexists(folder):                   # a file or a broken (looping) link
            try:
                os.unlink(folder)
            except FileNotFoundError:
                pass
            except OSError as e:
                raise OSError(f"{folder} is a {'link' if os.path.islink(folder) else 'file'}, "
                              f"not an entry folder, and cannot be removed ({e})") from None
        for name in files:
            if not name or name.startswith(".") or "/" in name or os.sep in name or \
                    (os.altsep and os.altsep in name):
                raise ValueError(f"not a cache file name: {name!r}")
        os.makedirs(self.root, exist_ok=True)
        temporary = tempfile.mkdtemp(dir=self.root, prefix=f".tmp-{key[:16]}-")
        try:
            for name, data in files.items():
                with open(os.path.join(temporary, name), "wb") as f:
                    f.write(data)
            try:
                os.rename(temporary, folder)
            except OSError:
                if not os.path.isdir(folder):
                    raise
                # Another process renamed its entry into place first: keep theirs.
        finally:
            if os.path.isdir(temporary):
                shutil.rmtree(temporary, ignore_errors=True)

    def hit(self, key: str) -> None:
        with open(os.path.join(self.path(key), HITS), "ab") as f:
            f.write(b".")

    def entries(self) -> Iterator[tuple[str, EntryStats]]:
        """Every entry's key and figures: its files' bytes, when they were written, its last
        use and how often it was used."""
        try:
            names = sorted(os.listdir(self.root))
        except OSError:
            return
        for key in names:
            if not KEY.match(key):
                continue
            folder = os.path.join(self.root, key)
            try:
                files = [os.stat(os.path.join(folder, n)) for n in os.listdir(folder) if not n.startswith(".")]
            except OSError:
                continue                              # removed meanwhile
            if not files:
                continue
            created = min(f.st_mtime for f in files)
            hits_file = os.path.join(folder, HITS)
            try:
                hits, used = os.path.getsize(hits_file), os.path.getmtime(hits_file)
            except OSError:
                hits, used = 0, created
            yield key, EntryStats(sum(f.st_size for f in files), created, max(used, created), hits)

    def remove(self, key: str) -> None:
        folder = self.path(key)
        doomed = os.path.join(self.root, f".del-{key[:16]}-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.rename(folder, doomed)                 # atomic: readers see the entry or nothing
        except FileNotFoundError:
            return                                    # gone already (another process removed it)
        shutil.rmtree(doomed, ignore_errors=True)
