"""The remote cache in a folder every machine mounts (``NAIAD_REMOTE_CACHE=file:///shared/dir``):
the local cache's own layout and atomic writes (`naiad.compiler.cache.FileCacheManager`), one
folder per namespace.  It shows the store interface at its simplest, and serves clusters with a
shared file system and no Redis."""

from __future__ import annotations

import urllib.parse
import urllib.request
from typing import Iterator

from naiad.compiler.cache_managers import FileCacheManager
from naiad.compiler.cache_managers import EntryStats
from naiad.errors import NaiadError


class DirectoryStore:
    def __init__(self, url: str, timeout: float):
        parts = urllib.parse.urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise NaiadError(f"NAIAD_REMOTE_CACHE={url!r}: a file URL names a local path -- fix: "
                             f"file:///path/to/shared/dir (three slashes)")
        self.directory = urllib.request.url2pathname(parts.path)
        self.managers: dict[str, FileCacheManager] = {}

    def manager(self, namespace: str) -> FileCacheManager:
        if namespace not in self.managers:
            self.managers[namespace] = FileCacheManager(self.directory, folder=namespace)
        return self.managers[namespace]

    def get(self, namespace: str, key: str) -> dict[str, bytes] | None:
        return self.manager(namespace).get(key)

    def put(self, namespace: str, key: str, files: dict[str, bytes]) -> None:
        manager = self.manager(namespace)
        manager.remove(key)                 # replace: a damaged entry is overwritten
        manager.put(key, files)

    def remove(self, namespace: str, key: str) -> None:
        self.manager(namespace).remove(key)

    def entries(self, namespace: str) -> Iterator[tuple[str, EntryStats]]:
        return self.manager(namespace).entries()
