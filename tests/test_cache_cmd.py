"""``naiad cache ls|stats|clear|prune|verify`` on real entries: kernels compiled into a fresh
local cache (and a tuned one's record), and with ``--remote`` a real Redis server's; damaged
entries found by ``verify`` and removed; every user error's message."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import naiad
from naiad.compiler import cache
from naiad.tools import cli
from tests import remote_cache_node as kernels

pytestmark = pytest.mark.shipped_backends


@pytest.fixture
def local(tmp_path, monkeypatch):
    """A local cache holding three kernels and one autotuning record."""
    monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NAIAD_REMOTE_CACHE", raising=False)
    cache._managers.clear()
    for fn in (kernels.scaled_add, kernels.row_max, kernels.tuned_square.fn):
        fn.cache.clear()
    kernels.tuned_square.cache.clear()
    kernels.RUNS["add"](64)
    kernels.RUNS["max"](128)
    kernels.RUNS["tuned"](0)
    return tmp_path / "cache"


def naiad_cache(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["cache", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_ls_names_each_kernel_with_its_target_size_and_hits(local, capsys):
    kernels.scaled_add.cache.clear()
    cache._managers.clear()
    kernels.RUNS["add"](64)                           # a second use, from the disk cache
    code, out, _ = naiad_cache(capsys, "ls")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["key", "kernel", "backend:target", "size", "age", "used", "hits"]
    rows = {line.split()[1]: line.split() for line in lines[1:]}
    assert {"scaled_add", "row_max", "tuned_square"} <= set(rows)
    assert rows["scaled_add"][2].startswith("cpu:") and rows["scaled_add"][-1] == "1"
    assert len(lines) == 1 + 5                        # three tuned configs


def test_stats_counts_entries_bytes_and_records(local, capsys):
    code, out, _ = naiad_cache(capsys, "stats")
    kernel_bytes = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(local / "kernels")
                       for f in files if not f.startswith("."))
    assert code == 0
    assert out.startswith("kernels: 5, ")
    assert f"{kernel_bytes / 1024:.1f} KB" in out
    assert "autotuning records: 1, " in out


def test_verify_removes_and_reports_damaged_entries(local, capsys):
    folders = sorted((local / "kernels").iterdir())
    victim = next(f for f in sorted(folders[0].iterdir()) if f.suffix == ".obj")
    victim.write_bytes(b"\0" + victim.read_bytes()[1:])
    record = next((local / "autotune").iterdir())
    record.write_text("{not json")
    code, out, _ = naiad_cache(capsys, "verify")
    assert code == 1
    assert out.startswith("checked 6 entries of the local cache")
    assert ": 2 damaged" in out
    assert f"kernel {folders[0].name[:16]}...: {victim.name} does not match its sha256 in the manifest -- removed" in out
    assert not folders[0].exists() and not record.exists()
    code, out, _ = naiad_cache(capsys, "verify")
    assert code == 0 and "checked 4 entries" in out and ": 0 damaged" in out


def test_prune_by_age_then_by_size(local, capsys):
    entries = sorted(cache.FileCacheManager().entries(), key=lambda e: e[1].size)
    old_key = entries[0][0]
    long_ago = time.time() - 40 * 86400
    for file in (local / "kernels" / old_key).iterdir():      # written and last used long ago
        os.utime(file, (long_ago, long_ago))
    code, out, _ = naiad_cache(capsys, "prune", "--older-than", "30d")
    assert code == 0 and out.startswith("removed 1 entries")
    assert not (local / "kernels" / old_key).exists()
    left = sum(stats.size for _, stats in cache.FileCacheManager().entries())
    code, out, _ = naiad_cache(capsys, "prune", "--max-size", str(left // 2))
    sizes = [stats.size for _, stats in cache.FileCacheManager().entries()]
    assert code == 0 and sum(sizes) <= left // 2 and sizes


def test_clear_empties_the_cache_and_it_still_works(local, capsys):
    code, out, _ = naiad_cache(capsys, "clear")
    assert code == 0 and out.startswith("removed 6 entries from the local cache")
    assert list(cache.FileCacheManager().entries()) == []
    code, out, _ = naiad_cache(capsys, "ls")
    assert "is empty" in out
    kernels.scaled_add.cache.clear()
    kernels.RUNS["add"](64)                           # compiled again, results still right
    assert len(list(cache.FileCacheManager().entries())) == 1


def test_remote_ls_verify_and_clear(local, capsys, tmp_path, monkeypatch):
    pytest.importorskip("redis")
    from tests.redis_server import RedisServer

    server = RedisServer(str(tmp_path))
    try:
        monkeypatch.setenv("NAIAD_REMOTE_CACHE", server.url)
        monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path / "other"))
        cache._managers.clear()
        kernels.scaled_add.cache.clear()
        kernels.RUNS["add"](64)                       # compiled here, published
        code, out, _ = naiad_cache(capsys, "--remote", "ls")
        assert code == 0 and len(out.splitlines()) == 2 and "scaled_add" in out
        (key,) = server.client.keys("naiad:kernel:*")
        server.client.hset(key, "MANIFEST", b"{}")
        code, out, _ = naiad_cache(capsys, "--remote", "verify")
        assert code == 1 and "MANIFEST is not a manifest -- removed" in out
        assert server.client.keys("naiad:kernel:*") == []
        kernels.scaled_add.cache.clear()
        cache.FileCacheManager().remove(key.decode().split(":")[-1])
        kernels.RUNS["add"](64)
        code, out, _ = naiad_cache(capsys, "--remote", "clear")
        assert code == 0 and out.startswith("removed 1 entries from the remote cache")
        code, out, _ = naiad_cache(capsys, "--remote", "stats")
        assert "kernels: none" in out
    finally:
        server.stop()


@pytest.mark.parametrize("args, message", [
    (["--remote", "ls"], "--remote: no remote cache is set -- fix: set NAIAD_REMOTE_CACHE"),
    (["prune"], "prune needs --older-than AGE or --max-size SIZE (or both) -- fix:"),
    (["prune", "--older-than", "soon"], "--older-than 'soon' is not an age -- fix: a number with s, m, h, d or w"),
    (["prune", "--max-size", "big"], "--max-size 'big' is not a size -- fix: a number of bytes with K, M, G or T"),
])
def test_user_errors_say_what_to_do(local, capsys, args, message):
    code, out, err = naiad_cache(capsys, *args)
    assert code == 1 and message in err and "Traceback" not in err


def test_an_unreachable_remote_is_an_error_naming_it(local, capsys, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("NAIAD_REMOTE_CACHE", f"redis://127.0.0.1:{port}/0")
    code, _, err = naiad_cache(capsys, "--remote", "stats")
    assert code == 1 and f"the remote cache redis://127.0.0.1:{port}/0 failed (ConnectionRefusedError" in err


def test_a_custom_cache_manager_cannot_be_listed(local, capsys, monkeypatch):
    class Elsewhere(cache.CacheManager):
        def get(self, key):
            return None

        def put(self, key, files):
            pass

    monkeypatch.setattr(naiad.knobs.cache, "manager_class", Elsewhere)
    code, _, err = naiad_cache(capsys, "ls")
    assert code == 1 and "cannot list its entries -- fix: unset NAIAD_CACHE_MANAGER" in err


def test_results_stay_right_after_every_command(local, capsys):
    for args in (["ls"], ["stats"], ["verify"], ["prune", "--max-size", "1"]):
        naiad_cache(capsys, *args)
    x = np.arange(10, dtype=np.float32)
    out = np.empty_like(x)
    kernels.scaled_add.cache.clear()
    kernels.scaled_add[(1,)](x, x, out, 10, 2.0, BLOCK=64)
    np.testing.assert_array_equal(out, 3 * x)
