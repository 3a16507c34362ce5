"""The remote compile cache (``NAIAD_REMOTE_CACHE``, `naiad.compiler.remote_cache`) against a
real Redis server started on 127.0.0.1 for each test (tests/redis_server.py), with "nodes" that
are processes of their own, each with its own local cache (tests/remote_cache_node.py: every
kernel's result checked against numpy, compilations counted).

A second node gets every kernel, and the autotuner's choice, from Redis without compiling or
tuning; nodes compiling at once all succeed; and when Redis is down, goes down, hangs, is full
or holds garbage, every launch still succeeds from a local compile, with one warning per
process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.redis_server import RedisServer

pytestmark = pytest.mark.shipped_backends

pytest.importorskip("redis")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def server(tmp_path):
    redis_server = RedisServer(str(tmp_path))
    yield redis_server
    redis_server.stop()


def node(tmp_path, name: str, url: str, *kernels: str, timeout: float = 10.0, wait: bool = True):
    """Run one node (a process with the cache folder ``tmp_path/name``); its JSON report, or the
    process itself when not ``wait``."""
    env = dict(os.environ, NAIAD_CACHE_DIR=str(tmp_path / name), NAIAD_REMOTE_CACHE=url,
               NAIAD_REMOTE_CACHE_TIMEOUT=str(timeout), PYTHONPATH=ROOT)
    process = subprocess.Popen([sys.executable, "-m", "tests.remote_cache_node", *kernels], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return process
    return report(process)


def report(process) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def kernel_keys(server) -> list[bytes]:
    return sorted(server.client.keys("naiad:kernel:*"))


def test_a_second_node_gets_every_kernel_from_redis_without_compiling(server, tmp_path):
    first = node(tmp_path, "a", server.url, "add", "add:128", "max")
    assert first["compiles"] == 3 and first["warnings"] == []
    assert len(kernel_keys(server)) == 3
    second = node(tmp_path, "b", server.url, "add", "add:128", "max")
    assert second == {**second, "compiles": 0, "hits": 3, "warnings": []}
    assert len(os.listdir(tmp_path / "b" / "kernels")) == 3        # kept locally for the next process
    hits = [int(server.client.hget(key, "@hits")) for key in kernel_keys(server)]
    assert hits == [1, 1, 1]


def test_the_autotuners_choice_is_shared(server, tmp_path):
    """The first node tunes (three configs compiled and timed); the second compiles only the
    chosen one and times none."""
    first = node(tmp_path, "a", server.url, "tuned")
    assert first["compiles"] == 3
    assert len(server.client.keys("naiad:autotune:*")) == 1
    second = node(tmp_path, "b", server.url, "tuned")
    assert second["compiles"] == 0 and second["hits"] == 1 and second["warnings"] == []


def test_nodes_compiling_at_once_all_succeed_and_share(server, tmp_path):
    """Four processes at once, each a kernel of its own and one in common; then a fifth finds
    all five kernels in Redis."""
    processes = [node(tmp_path, f"n{i}", server.url, "add", f"max:{128 * 2 ** i}", wait=False)
                 for i in range(4)]
    reports = [report(p) for p in processes]
    assert all(r["warnings"] == [] for r in reports)
    assert sum(r["compiles"] + r["hits"] for r in reports) == 8
    assert len(kernel_keys(server)) == 5
    last = node(tmp_path, "last", server.url, "add", *[f"max:{128 * 2 ** i}" for i in range(4)])
    assert last["compiles"] == 0 and last["hits"] == 5, last


def test_redis_down_at_start_is_one_warning_and_local_compiles(tmp_path):
    import socket

    with socket.socket() as s:                          # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = node(tmp_path, "a", f"redis://127.0.0.1:{port}/0", "add", "add:128", "max", "tuned")
    assert result["compiles"] == 6
    assert len(result["warnings"]) == 1
    assert f"the remote cache redis://127.0.0.1:{port}/0 failed" in result["warnings"][0]
    assert "compiling locally" in result["warnings"][0]


def test_redis_going_down_mid_run(server, tmp_path):
    """The server is killed while a node runs: its later kernels compile locally, one warning."""
    process = node(tmp_path, "a", server.url, *[f"add:{64 * 2 ** i}" for i in range(6)], wait=False)
    while not kernel_keys(server):
        time.sleep(0.01)
        assert process.poll() is None
    server.stop()
    result = report(process)
    assert result["compiles"] == 6
    assert len(result["warnings"]) <= 1                 # none if it had published all before


def test_a_server_that_hangs_costs_one_timeout(server, tmp_path):
    """A frozen server (connections accepted, no answers): the first request waits out the
    timeout, the rest of the process leaves the server alone."""
    server.pause()
    try:
        start = time.monotonic()
        result = node(tmp_path, "a", server.url, "add", "add:128", "max", "tuned", timeout=0.5)
        elapsed = time.monotonic() - start
    finally:
        server.resume()
    assert result["compiles"] == 6 and len(result["warnings"]) == 1
    assert "Timeout" in result["warnings"][0] or "timed out" in result["warnings"][0]
    assert elapsed < 30


def test_a_full_server_is_one_warning(server, tmp_path):
    server.client.config_set("maxmemory-policy", "noeviction")
    server.client.config_set("maxmemory", 1)            # every write refused (OOM)
    result = node(tmp_path, "a", server.url, "add", "max")
    assert result["compiles"] == 2 and len(result["warnings"]) == 1
    assert "OOM" in result["warnings"][0] or "maxmemory" in result["warnings"][0]
    assert kernel_keys(server) == []


@pytest.mark.parametrize("damage", ["a file changed", "a file missing", "not a hash"])
def test_a_damaged_remote_entry_is_ignored_and_overwritten(server, tmp_path, damage):
    node(tmp_path, "a", server.url, "add")
    (key,) = kernel_keys(server)
    fields = [f for f in server.client.hkeys(key) if not f.startswith(b"@")]
    binary = next(f for f in fields if f.endswith(b".obj") or f.endswith(b".so") or f.endswith(b".llir"))
    if damage == "a file changed":
        server.client.hset(key, binary, b"\x00garbage")
    elif damage == "a file missing":
        server.client.hdel(key, binary)
    else:
        server.client.delete(key)
        server.client.set(key, b"not an entry")
    second = node(tmp_path, "b", server.url, "add")
    assert second["compiles"] == 1 and len(second["warnings"]) == 1
    assert "is damaged" in second["warnings"][0] and "overwritten" in second["warnings"][0]
    third = node(tmp_path, "c", server.url, "add")
    assert third["compiles"] == 0 and third["warnings"] == []


def test_a_damaged_autotuning_record_is_tuned_again(server, tmp_path):
    node(tmp_path, "a", server.url, "tuned")
    (key,) = server.client.keys("naiad:autotune:*")
    server.client.hset(key, "record.json", b'{"best": "not what was tuned"}')
    second = node(tmp_path, "b", server.url, "tuned")
    assert second["compiles"] == 0 and second["hits"] == 3     # tuned again: every config's kernel
    assert len(second["warnings"]) == 1 and "autotuning record" in second["warnings"][0]
    third = node(tmp_path, "c", server.url, "tuned")
    assert third["compiles"] == 0 and third["hits"] == 1 and third["warnings"] == []


def test_a_shared_folder_serves_as_the_remote_cache(tmp_path):
    url = (tmp_path / "shared").as_uri()
    first = node(tmp_path, "a", url, "add", "tuned")
    assert first["compiles"] == 4 and first["warnings"] == []
    second = node(tmp_path, "b", url, "add", "tuned")
    assert second["compiles"] == 0 and second["warnings"] == []


def test_an_unknown_scheme_or_missing_store_says_what_to_do(tmp_path):
    result = node(tmp_path, "a", "s3://bucket/naiad", "add")
    assert result["compiles"] == 1 and len(result["warnings"]) == 1
    assert "no remote cache store for the scheme 's3'" in result["warnings"][0]
    assert "naiad.remote_cache" in result["warnings"][0]
    result = node(tmp_path, "b", "file://somehost/dir", "add")
    assert "a file URL names a local path -- fix: file:///path" in result["warnings"][0]


def test_a_store_registered_by_entry_point_is_used(tmp_path, monkeypatch):
    """The protocol as a third party uses it: a store class under the 'naiad.remote_cache'
    entry point group, found by the URL's scheme."""
    import naiad
    from naiad.compiler import cache, remote_cache
    from tests import remote_cache_node

    class MemoryStore:
        entries: dict = {}

        def __init__(self, url, timeout):
            self.url = url

        def get(self, namespace, key):
            return self.entries.get((namespace, key))

        def put(self, namespace, key, files):
            self.entries[(namespace, key)] = dict(files)

        def remove(self, namespace, key):
            self.entries.pop((namespace, key), None)

        def entries_of(self, namespace):
            return iter(())

    class Point:
        name = "memory"

        def load(self):
            return MemoryStore

    monkeypatch.setattr("naiad.entry_points.entry_points",
                        lambda group: [Point()] if group == remote_cache.ENTRY_POINT_GROUP else [])
    compiles = []
    monkeypatch.setattr(naiad.knobs.compilation, "listener",
                        lambda src, metadata, times, hit: compiles.append(hit))
    for folder in ("a", "b"):
        monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path / folder))
        monkeypatch.setenv("NAIAD_REMOTE_CACHE", "memory://here")
        cache._managers.clear()
        remote_cache_node.scaled_add.cache.clear()
        remote_cache_node.RUNS["add"](64)
    assert compiles == [False, True]
    assert len(MemoryStore.entries) == 1


def test_threads_of_one_process_share_the_connection(server, tmp_path, monkeypatch):
    """Four threads compile four kernels at once through one Redis connection: no warning, every
    result right, every kernel published (a second node compiles none)."""
    import threading
    import warnings

    from naiad.compiler import cache
    from tests import remote_cache_node

    monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path / "threads"))
    monkeypatch.setenv("NAIAD_REMOTE_CACHE", server.url)
    cache._managers.clear()
    remote_cache_node.scaled_add.cache.clear()
    blocks = [64 * 2 ** i for i in range(4)]
    errors = []

    def run(block):
        try:
            remote_cache_node.RUNS["add"](block)
        except Exception as e:        # noqa: BLE001  (reported below)
            errors.append(e)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=run, args=(b,)) for b in blocks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    from naiad.errors import NaiadWarning

    assert errors == [] and [str(w.message) for w in caught if issubclass(w.category, NaiadWarning)] == []
    assert len(kernel_keys(server)) == 4
    second = node(tmp_path, "b", server.url, *[f"add:{b}" for b in blocks])
    assert second["compiles"] == 0 and second["hits"] == 4


def test_a_forked_child_opens_its_own_connection(server, tmp_path, monkeypatch):
    """A process that used Redis forks (as compile workers are made); parent and child then
    compile at once, each on its own connection: both publish, neither warns."""
    import multiprocessing

    from naiad.compiler import cache
    from tests import remote_cache_node

    monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path / "parent"))
    monkeypatch.setenv("NAIAD_REMOTE_CACHE", server.url)
    cache._managers.clear()
    remote_cache_node.scaled_add.cache.clear()
    remote_cache_node.RUNS["add"](64)                     # the parent's connection is open now
    context = multiprocessing.get_context("fork")
    child = context.Process(target=_child_compiles, args=(str(tmp_path / "child"),), daemon=True)
    child.start()
    remote_cache_node.RUNS["add"](512)
    child.join(60)
    if child.exitcode is None:
        child.kill()              # a hung child fails this test, not the whole suite at its exit
    assert child.exitcode == 0
    assert len(kernel_keys(server)) == 3


def _child_compiles(cache_dir: str) -> None:
    import os
    import warnings

    from naiad.compiler import cache
    from tests import remote_cache_node

    os.environ["NAIAD_CACHE_DIR"] = cache_dir
    cache._managers.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        remote_cache_node.RUNS["add"](256)
