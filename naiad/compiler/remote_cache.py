"""A compile cache shared by machines (``NAIAD_REMOTE_CACHE``), beside the local one.

A launch looks in the local cache, then in the remote one, then compiles and publishes to both
(`naiad.compiler.cache`); an entry found remotely is checked as a local one is (the manifest's
sha256 of every file, the JSON metadata: never unpickled) and copied into the local cache, so
the next process of that machine finds it there.  Autotuning results are shared the same way
(`naiad.runtime.autotune_cache`), so a cluster tunes each kernel once.

**Stores.**  A store is any class of `RemoteStore`'s shape, constructed as ``cls(url,
timeout)``: entries are small dicts of file name -> bytes in a namespace (``"kernel"`` or
``"autotune"``) under a sha256 hex key.  ``redis://host:port/db`` is `naiad.compiler.remote_redis`
(Redis's protocol spoken by `naiad.compiler.resp`: nothing to install), ``file:///shared/dir`` a folder on a
shared file system (`naiad.compiler.remote_files`); another scheme (``s3://``...) is a class a
package registers under the ``naiad.remote_cache`` entry point group with the scheme as its name
-- no change to Naiad.

**Faults.**  The remote cache only ever saves time: a store that cannot be reached, is slow
(each request may take ``NAIAD_REMOTE_CACHE_TIMEOUT`` seconds), is full, or answers garbage
never fails a launch.  The first failure is one `NaiadWarning` per process and URL; the store is
then left alone for `REST_SECONDS` (a launch does not wait on a dead server again and again) and
tried again after.  A damaged remote entry is ignored, compiled again and overwritten.
"""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.parse
import warnings
from typing import Any, Iterator

from naiad import knobs
from naiad.compiler.cache_managers import EntryStats
from naiad.errors import NaiadError, NaiadWarning

#: Seconds a remote store is left alone after it failed.
REST_SECONDS = 30.0
#: The entry point group where packages register stores for other URL schemes.
ENTRY_POINT_GROUP = "naiad.remote_cache"
#: The namespaces of entries.
KERNEL, AUTOTUNE = "kernel", "autotune"


class RemoteStore:
    """The interface of a remote store (documentation; stores need not inherit from it).

    Constructed as ``cls(url, timeout)``: ``url`` as the user wrote it, ``timeout`` the seconds
    any one request may take.  Methods may raise anything when the store fails: the caller
    turns that into one warning.  Keys are sha256 hex digests; file names contain no ``/``.
    """

    def get(self, namespace: str, key: str) -> dict[str, bytes] | None:
        """The entry's files, or None when there is none."""
        raise NotImplementedError

    def put(self, namespace: str, key: str, files: dict[str, bytes]) -> None:
        """Store an entry, replacing one of the same key (a damaged one is overwritten so)."""
        raise NotImplementedError

    def remove(self, namespace: str, key: str) -> None:
        """Drop an entry (none there: nothing happens)."""
        raise NotImplementedError

    def entries(self, namespace: str) -> Iterator[tuple[str, EntryStats]]:
        """Every entry's key and figures (for ``naiad cache --remote``)."""
        raise NotImplementedError

    def hit(self, namespace: str, key: str) -> None:
        """Optional: count a use of an entry the core found sound (``naiad cache ls``'s hits)."""

    def close(self) -> None:
        """Optional: let go of connections (when ``NAIAD_REMOTE_CACHE`` names another store)."""


def open_store(url: str, timeout: float) -> Any:
    """The store for ``url``, by its scheme.  A URL no store takes is a `NaiadError` saying
    which schemes exist."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme == "redis":
        from naiad.compiler.remote_redis import RedisStore

        return RedisStore(url, timeout)
    if scheme == "file":
        from naiad.compiler.remote_files import DirectoryStore

        return DirectoryStore(url, timeout)
    from naiad.entry_points import entry_points

    for point in entry_points(ENTRY_POINT_GROUP):
        if point.name == scheme:
            return point.load()(url, timeout)
    raise NaiadError(f"NAIAD_REMOTE_CACHE={url!r}: no remote cache store for the scheme {scheme!r} "
                     f"-- fix: use redis://host:port/db or file:///shared/dir, or install the "
                     f"package that registers {scheme!r} under the {ENTRY_POINT_GROUP!r} entry points")


class Remote:
    """The store ``url`` names, opened at its first use and used so that it never fails a
    launch: each call's failure -- the store's construction's too (a bad URL, a server that
    refuses) -- is caught, warned about once, and the store rested (`REST_SECONDS`)."""

    def __init__(self, url: str):
        self.url = url
        self.store: Any = None
        self.resting_until = 0.0
        self.warned = False
        self.lock = threading.Lock()

    def get(self, namespace: str, key: str) -> dict[str, bytes] | None:
        return self._call("read", "get", namespace, key)

    def put(self, namespace: str, key: str, files: dict[str, bytes]) -> None:
        self._call("write", "put", namespace, key, files)

    def remove(self, namespace: str, key: str) -> None:
        self._call("remove", "remove", namespace, key)

    def hit(self, namespace: str, key: str) -> None:
        """Count a use of an entry, where the store keeps count (an optional method)."""
        self._call("count a hit of", "hit", namespace, key, optional=True)

    def _call(self, what: str, method: str, *args: Any, optional: bool = False) -> Any:
        if time.monotonic() < self.resting_until:
            return None
        try:
            if self.store is None:
                self.store = open_store(self.url, knobs.cache.remote_timeout)
            call = getattr(self.store, method, None)
            if call is None and optional:
                return None
            return call(*args)
        except Exception as e:       # noqa: BLE001  (a remote cache never fails a launch)
            self.fail(f"cannot {what} {args[0]} {args[1][:16]}... ({type(e).__name__}: {e})")
            return None

    def close(self) -> None:
        """Let go of the store's connections, where it has some (an optional method)."""
        if callable(getattr(self.store, "close", None)):
            with contextlib.suppress(Exception):
                self.store.close()

    def fail(self, why: str) -> None:
        """Rest the store, and warn the first time."""
        with self.lock:
            self.resting_until = time.monotonic() + REST_SECONDS
        self.warn_once(f"{why}; compiling locally, and not asking it again for {REST_SECONDS:.0f} s")

    def warn_once(self, why: str) -> None:
        """One warning per process and store, whatever went wrong first."""
        with self.lock:
            first, self.warned = not self.warned, True
        if first:
            warnings.warn(f"the remote cache {self.url} failed: {why} (this warning is shown once)",
                          NaiadWarning, stacklevel=4)


_lock = threading.Lock()
_current: dict[str, Any] = {"url": None, "remote": None}


def current() -> Remote | None:
    """The remote cache ``NAIAD_REMOTE_CACHE`` names (one per process and URL), or None."""
    url = knobs.cache.remote
    if not url:
        return None
    with _lock:
        if _current["url"] != url:
            if _current["remote"] is not None:
                _current["remote"].close()
            _current["url"], _current["remote"] = url, Remote(url)
        return _current["remote"]
