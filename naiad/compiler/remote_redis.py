"""The remote cache on Redis (``NAIAD_REMOTE_CACHE=redis://host:port/db``): one Redis hash per
entry, ``naiad:<namespace>:<key>``, whose fields are the entry's files and, under names no file
has (``@created``, ``@used``, ``@hits``), its figures.  Writes replace the whole hash in one
transaction, so a reader sees an entry entirely or not at all; what it reads is checked by the
core (`naiad.compiler.cache`), never unpickled.  Spoken through `naiad.compiler.resp` (no
client package to import); every request gives up after the timeout."""

from __future__ import annotations

import time
from typing import Any, Iterator

from naiad.compiler.cache_managers import EntryStats
from naiad.compiler.resp import Client, RespError

_META = ("@created", "@used", "@hits")


class RedisStore:
    def __init__(self, url: str, timeout: float):
        self.client = Client(url, timeout)

    @staticmethod
    def name(namespace: str, key: str) -> str:
        return f"naiad:{namespace}:{key}"

    def get(self, namespace: str, key: str) -> dict[str, bytes] | None:
        try:
            reply = self.client.call("HGETALL", self.name(namespace, key))
        except RespError as e:
            if not str(e).startswith("WRONGTYPE"):
                raise
            return {}                       # something else under our name: damaged, overwritten
        if not reply:
            return None
        fields = dict(zip(reply[::2], reply[1::2]))
        return {k.decode(errors="replace"): v for k, v in fields.items() if not k.startswith(b"@")}

    def hit(self, namespace: str, key: str) -> None:
        name = self.name(namespace, key)
        self.client.pipeline([("HINCRBY", name, "@hits", 1), ("HSET", name, "@used", repr(time.time()))])

    def put(self, namespace: str, key: str, files: dict[str, bytes]) -> None:
        name, now = self.name(namespace, key), repr(time.time())
        fields = [item for pair in files.items() for item in pair]
        replies = self.client.pipeline([("MULTI",), ("DEL", name),
                                        ("HSET", name, *fields, "@created", now, "@used", now, "@hits", 0),
                                        ("EXEC",)])
        if replies[-1] is None:
            raise RespError("the transaction was aborted")

    def remove(self, namespace: str, key: str) -> None:
        self.client.call("DEL", self.name(namespace, key))

    def close(self) -> None:
        self.client.close()

    def entries(self, namespace: str) -> Iterator[tuple[str, EntryStats]]:
        prefix = f"naiad:{namespace}:"
        cursor = b"0"
        while True:
            cursor, names = self.client.call("SCAN", cursor, "MATCH", prefix + "*", "COUNT", 500)
            for name in names:
                yield name.decode(errors="replace")[len(prefix):], self._stats(name)
            if cursor == b"0":
                return

    def _stats(self, name: bytes) -> EntryStats:
        try:
            meta = self.client.call("HMGET", name, *_META)
            fields = [f for f in self.client.call("HKEYS", name) if not f.startswith(b"@")]
            sizes = self.client.pipeline([("HSTRLEN", name, f) for f in fields]) if fields else []
        except RespError:
            return EntryStats(0, 0.0, 0.0, 0)     # not a hash: `naiad cache verify` removes it
        return EntryStats(sum(sizes), _number(meta[0]), _number(meta[1]), int(_number(meta[2])))


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
