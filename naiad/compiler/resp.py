"""A small Redis client: RESP over one socket, for the few commands the remote cache sends.

Importing the ``redis`` package takes 65-90 ms on the 2-core machine (it loads its asyncio
client too), more than a whole local cache hit (docs/PERFORMANCE.md, issue 20): a node reading
its first kernel from Redis could not then come within 1.2x of a local hit.  This client loads
nothing but the standard library's ``socket`` (and ``ssl`` for ``rediss://``).

URLs: ``redis://[[user]:password@]host[:port][/db]`` and ``rediss://`` (TLS).  Every request
gives up after the timeout; after any failure the connection is closed and the next request
opens a new one.
"""

from __future__ import annotations

import os
import socket
import threading
import urllib.parse
from typing import Any


class RespError(Exception):
    """An error reply from the server (``WRONGTYPE ...``, ``OOM ...``)."""


class Client:
    def __init__(self, url: str, timeout: float):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 6379
        self.tls = parts.scheme == "rediss"
        self.username, self.password = parts.username, parts.password
        path = parts.path.strip("/")
        if path and not path.isdigit():
            raise ValueError(f"{url!r}: the path names a database by its number, e.g. /0")
        self.db = int(path or 0)
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.reader: Any = None
        #: One request at a time on the socket: threads compiling at once share the client.
        self.lock = threading.RLock()
        #: The process that opened the socket: a forked child (a compile worker) opens its own.
        self.pid = os.getpid()

    def call(self, *args: Any) -> Any:
        """One command's reply (an error reply raised as `RespError`)."""
        (reply,) = self.pipeline([args])
        return reply

    def pipeline(self, commands: list[tuple]) -> list[Any]:
        """Send ``commands`` at once and read their replies; the first error reply is raised
        after all were read, so the connection stays in step."""
        with self.lock:
            try:
                self._connect()
                self.sock.sendall(b"".join(_encode(c) for c in commands))
                replies = [self._read() for _ in commands]
            except BaseException:
                self.close()
                raise
        for reply in replies:
            if isinstance(reply, RespError):
                raise reply
        return replies

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock, self.reader = None, None

    def _connect(self) -> None:
        if self.sock is not None and self.pid != os.getpid():
            self.close()              # this process's copy of the parent's socket; the parent keeps its own
        if self.sock is not None:
            return
        self.pid = os.getpid()
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        if self.tls:
            import ssl

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        sock.settimeout(self.timeout)
        self.sock, self.reader = sock, sock.makefile("rb")
        hello = []
        if self.password is not None:
            hello.append(("AUTH", self.username, self.password) if self.username else ("AUTH", self.password))
        if self.db:
            hello.append(("SELECT", self.db))
        if hello:
            self.pipeline(hello)

    def _read(self) -> Any:
        line = self.reader.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("the server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RespError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            data = self.reader.read(size + 2)
            if len(data) != size + 2:
                raise ConnectionError("the server closed the connection")
            return data[:-2]
        if kind == b"*":
            count = int(rest)
            return None if count < 0 else [self._read() for _ in range(count)]
        raise ConnectionError(f"not a Redis reply: {line[:40]!r}")


def _encode(command: tuple) -> bytes:
    parts = [a if isinstance(a, bytes) else str(a).encode() for a in command if a is not None]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
