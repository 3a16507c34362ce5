"""The remote cache on Redis (``NAIAD_REMOTE_CACHE=redis://host:port/db``): one Redis hash per
entry, ``naiad:<namespace>:<key>``, whose fields are the entry's files and, under names no file
has (``@created``, ``@used``, ``@hits``), its figures.  Writes replace the whole hash in one
transaction, so a reader sees an entry entirely or not at all; what it reads is checked by the
core (`naiad.compiler.cache`), never unpickled.  Every request gives up after the timeout."""

from __future__ import annotations

import time
from typing import Any, Iterator

from naiad.compiler.remote_cache import EntryStats
from naiad.errors import NaiadError

_META = ("@created", "@used", "@hits")


class RedisStore:
    def __init__(self, url: str, timeout: float):
        try:
            import redis
        except ImportError:
            raise NaiadError(f"NAIAD_REMOTE_CACHE={url!r} needs the redis package -- fix: "
                             f"pip install 'naiad[redis]'") from None
        self.errors = redis.RedisError
        self.client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)

    @staticmethod
    def name(namespace: str, key: str) -> str:
        return f"naiad:{namespace}:{key}"

    def get(self, namespace: str, key: str) -> dict[str, bytes] | None:
        name = self.name(namespace, key)
        try:
            fields = self.client.hgetall(name)
        except self.errors as e:
            if "WRONGTYPE" not in str(e):
                raise
            return {}                       # something else under our name: damaged, overwritten
        if not fields:
            return None
        return {k.decode(errors="replace"): v for k, v in fields.items() if not k.startswith(b"@")}

    def hit(self, namespace: str, key: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.hincrby(self.name(namespace, key), "@hits", 1)
        pipe.hset(self.name(namespace, key), "@used", repr(time.time()))
        pipe.execute()

    def put(self, namespace: str, key: str, files: dict[str, bytes]) -> None:
        name, now = self.name(namespace, key), repr(time.time())
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(name)
        pipe.hset(name, mapping={**files, "@created": now, "@used": now, "@hits": 0})
        pipe.execute()

    def remove(self, namespace: str, key: str) -> None:
        self.client.delete(self.name(namespace, key))

    def entries(self, namespace: str) -> Iterator[tuple[str, EntryStats]]:
        prefix = f"naiad:{namespace}:"
        for name in self.client.scan_iter(match=prefix + "*", count=500):
            key = name.decode(errors="replace")[len(prefix):]
            yield key, self._stats(name)

    def _stats(self, name: bytes) -> EntryStats:
        try:
            meta = self.client.hmget(name, *_META)
            size = sum(self.client.hstrlen(name, field) for field in self.client.hkeys(name)
                       if not field.startswith(b"@"))
        except self.errors:
            return EntryStats(0, 0.0, 0.0, 0)     # not a hash: `naiad cache verify` removes it
        return EntryStats(size, _number(meta[0]), _number(meta[1]), int(_number(meta[2])))


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
