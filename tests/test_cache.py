"""The on-disk kernel cache (naiad/compiler/cache.py): hits, the key, the entry format, damaged
entries, concurrent writers, custom managers, NAIAD_ALWAYS_COMPILE."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import naiad
from naiad import knobs
from naiad.backends.compiler import GPUTarget
from naiad.compiler import cache
from naiad.compiler.compiler import ASTSource
from naiad.errors import NaiadError, NaiadWarning

from jit_helpers import SCALE_SIGNATURE as SIGNATURE, scale
from plugin_fixtures import subprocess_env

TOY = GPUTarget("toy", "v1", 1)


def source(block: int = 64) -> ASTSource:
    return ASTSource(scale, SIGNATURE, {"BLOCK": block})


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("NAIAD_CACHE_DIR", str(directory))
    cache._managers.clear()
    yield directory
    cache._managers.clear()


def entry_dir(cache_dir, kernel) -> os.PathLike:
    return cache_dir / "kernels" / kernel.hash


def same_kernel(a, b) -> bool:
    def parts(k):
        return k.name, k.asm, dict(k.metadata), k.signature
    return parts(a) == parts(b)


# -- hits ------------------------------------------------------------------------------------

def test_second_compile_reads_the_cache(plugins, cache_dir, stage_calls):
    plugins.add("toy")
    first = naiad.compile(source(), target=TOY)
    assert stage_calls == ["ttir", "toyasm", "toybin"]
    stage_calls.clear()
    second = naiad.compile(source(), target=TOY)
    assert stage_calls == []
    assert same_kernel(first, second)
    assert isinstance(second.asm["toybin"], bytes) and isinstance(second.asm["toyasm"], str)
    assert second.hash == first.hash == first.metadata["hash"]


def test_entry_layout(plugins, cache_dir):
    plugins.add("toy")
    kernel = naiad.compile(source(), target=TOY)
    folder = entry_dir(cache_dir, kernel)
    assert sorted(os.listdir(folder)) == ["MANIFEST", "scale.json", "scale.toyasm", "scale.toybin",
                                          "scale.ttir"]
    assert (folder / "scale.toybin").read_bytes() == kernel.asm["toybin"]
    assert (folder / "scale.toyasm").read_text() == kernel.asm["toyasm"]
    record = json.loads((folder / "scale.json").read_text())
    assert record["name"] == "scale" and record["key"] == kernel.hash
    assert record["stages"] == ["ttir", "toyasm", "toybin"]
    assert record["signature"] == [["x_ptr", "*fp32"], ["out_ptr", "*fp32"], ["n", "i32"],
                                   ["BLOCK", "constexpr"]]
    assert record["metadata"] == dict(kernel.metadata)
    manifest = json.loads((folder / "MANIFEST").read_text())
    assert set(manifest["files"]) == {"scale.json", "scale.toyasm", "scale.toybin", "scale.ttir"}
    for name, info in manifest["files"].items():
        data = (folder / name).read_bytes()
        assert info == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert not [n for n in os.listdir(cache_dir / "kernels") if n.startswith(".")]


def test_always_compile_skips_the_lookup(plugins, cache_dir, stage_calls, monkeypatch):
    plugins.add("toy")
    first = naiad.compile(source(), target=TOY)
    monkeypatch.setenv("NAIAD_ALWAYS_COMPILE", "1")
    stage_calls.clear()
    again = naiad.compile(source(), target=TOY)
    assert stage_calls == ["ttir", "toyasm", "toybin"]
    assert same_kernel(first, again)
    monkeypatch.delenv("NAIAD_ALWAYS_COMPILE")
    stage_calls.clear()
    naiad.compile(source(), target=TOY)
    assert stage_calls == []


# -- the key ---------------------------------------------------------------------------------

class _Backend:
    def __init__(self, hash_="tool-1", env=()):
        self._hash, self.cache_env_vars = hash_, env

    def hash(self):
        return self._hash


class _Options:
    def __init__(self, text="o"):
        self.text = text

    def hash(self):
        return self.text


def _key(src=None, backend=None, options=None, target=TOY):
    return cache.compile_key(src or source(), backend or _Backend(), options or _Options(), target)


def test_key_follows_every_input(monkeypatch):
    base = _key()
    assert base == _key() and len(base) == 64
    assert _key(src=source(128)) != base
    assert _key(backend=_Backend("tool-2")) != base
    assert _key(options=_Options("p")) != base
    assert _key(target=GPUTarget("toy", "v2", 1)) != base
    declaring = _Backend(env=("NAIAD_TEST_CACHE_FLAG",))
    unset = _key(backend=declaring)
    monkeypatch.setenv("NAIAD_TEST_CACHE_FLAG", "1")
    one = _key(backend=declaring)
    monkeypatch.setenv("NAIAD_TEST_CACHE_FLAG", "2")
    assert len({unset, one, _key(backend=declaring)}) == 3
    assert _key() == base                        # undeclared variables do not count
    monkeypatch.setattr(cache, "hook_key", lambda: "a hook")
    assert _key() != base


def test_key_follows_a_knob_assigned_from_code(monkeypatch):
    backend = _Backend(env=("NAIAD_DEBUG",))
    off = _key(backend=backend)
    knobs.runtime.debug = True
    assert _key(backend=backend) != off


def test_key_follows_naiads_own_sources(monkeypatch):
    base = _key()
    monkeypatch.setattr(cache, "naiad_sources_hash", lambda: "edited")
    assert _key() != base


def test_naiad_sources_are_hashed_once_per_process():
    assert cache.naiad_sources_hash() == cache.naiad_sources_hash()
    assert cache.naiad_sources_hash.cache_info().hits >= 1


def test_options_and_declared_variables_recompile(plugins, cache_dir, stage_calls, monkeypatch):
    plugins.add("toy", compiler_methods={"cache_env_vars": 'cache_env_vars = ("NAIAD_TOY_FLAG",)'})
    a = naiad.compile(source(), target=TOY)
    b = naiad.compile(source(), target=TOY, options={"num_warps": 8})
    monkeypatch.setenv("NAIAD_TOY_FLAG", "on")
    c = naiad.compile(source(), target=TOY)
    assert stage_calls == ["ttir", "toyasm", "toybin"] * 3
    assert len({a.hash, b.hash, c.hash}) == 3
    assert len(os.listdir(cache_dir / "kernels")) == 3


# -- damaged entries -------------------------------------------------------------------------

def _truncate(folder, name):
    data = (folder / name).read_bytes()
    (folder / name).write_bytes(data[: len(data) // 2])


def _flip_a_byte(folder, name):
    data = bytearray((folder / name).read_bytes())
    data[len(data) // 2] ^= 0x55
    (folder / name).write_bytes(bytes(data))


DAMAGE = {
    "truncated binary": (lambda f: _truncate(f, "scale.toybin"), "scale.toybin has"),
    "flipped byte": (lambda f: _flip_a_byte(f, "scale.toyasm"), "does not match its sha256"),
    "garbled json": (lambda f: (f / "scale.json").write_text("{not json"), "scale.json has"),
    # Bad JSON that the manifest agrees with: only the checks of the JSON itself catch these.
    "bad json, manifest agrees": (lambda f: _rewrite_json(f, b'{"name": "scale", "stages": ['),
                                  "scale.json is not valid JSON"),
    "json not a record": (lambda f: _rewrite_json(f, b'{"format": 1}'),
                          "scale.json is not a kernel record"),
    "missing stage": (lambda f: os.remove(f / "scale.toyasm"), "scale.toyasm is missing"),
    "missing manifest": (lambda f: os.remove(f / "MANIFEST"), "MANIFEST is missing"),
    "garbled manifest": (lambda f: (f / "MANIFEST").write_text("[1, 2"), "MANIFEST is not valid JSON"),
    "empty folder": (lambda f: [os.remove(f / n) for n in os.listdir(f)], "MANIFEST is missing"),
}


def _rewrite_json(folder, data):
    (folder / "scale.json").write_bytes(data)
    manifest = json.loads((folder / "MANIFEST").read_text())
    manifest["files"]["scale.json"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (folder / "MANIFEST").write_text(json.dumps(manifest))


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_entry_is_removed_and_compiled_again(plugins, cache_dir, stage_calls, damage):
    plugins.add("toy")
    good = naiad.compile(source(), target=TOY)
    folder = entry_dir(cache_dir, good)
    harm, reason = DAMAGE[damage]
    harm(folder)
    stage_calls.clear()
    with pytest.warns(NaiadWarning, match="damaged") as record:
        again = naiad.compile(source(), target=TOY)
    assert reason in str(record[0].message) and str(folder) in str(record[0].message)
    assert stage_calls == ["ttir", "toyasm", "toybin"]
    assert same_kernel(good, again)
    stage_calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = naiad.compile(source(), target=TOY)      # the entry was written again, whole
    assert stage_calls == [] and same_kernel(good, third)
    assert sorted(n for n in os.listdir(cache_dir / "kernels")) == [good.hash]


def _file_in_place(path):
    path.write_text("not an entry")


def _link_loop(path):
    os.symlink(path, path)                      # the link points at itself


def _dangling_link(path):
    os.symlink(path.parent / "nowhere", path)


@pytest.mark.parametrize("blocker", [_file_in_place, _link_loop, _dangling_link],
                         ids=["file", "symlink loop", "dangling symlink"])
def test_a_non_folder_in_an_entrys_place_is_replaced(plugins, cache_dir, stage_calls, blocker):
    plugins.add("toy")
    good = naiad.compile(source(), target=TOY)
    folder = entry_dir(cache_dir, good)
    cache.FileCacheManager().remove(good.hash)
    blocker(folder)
    stage_calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = naiad.compile(source(), target=TOY)      # compiled, and stored in its place
    assert stage_calls == ["ttir", "toyasm", "toybin"] and same_kernel(good, again)
    assert folder.is_dir() and not folder.is_symlink()
    stage_calls.clear()
    third = naiad.compile(source(), target=TOY)
    assert stage_calls == [] and same_kernel(good, third)   # repaired: a hit from now on


def test_a_damaged_entry_that_cannot_be_removed_says_so(plugins, cache_dir, monkeypatch):
    plugins.add("toy")
    good = naiad.compile(source(), target=TOY)
    _truncate(entry_dir(cache_dir, good), "scale.toybin")
    real_rename = os.rename

    def read_only_rename(src, dst):
        if os.path.basename(src) == good.hash:
            raise PermissionError(13, "Permission denied", src)
        return real_rename(src, dst)

    monkeypatch.setattr(cache.os, "rename", read_only_rename)
    with pytest.warns(NaiadWarning) as record:
        again = naiad.compile(source(), target=TOY)
    message = str(record[0].message)
    assert "is damaged" in message and "it was removed" not in message
    assert "it could not be removed (PermissionError: [Errno 13] Permission denied" in message
    assert "fix: make the cache directory writable" in message
    assert same_kernel(good, again)


def test_a_manager_that_cannot_remove_is_not_said_to_have_removed(plugins, cache_dir):
    plugins.add("toy")

    class KeepsEverything(cache.CacheManager):
        entries: dict = {}

        def get(self, key):
            return self.entries.get(key)

        def put(self, key, files):
            self.entries[key] = {**files, "MANIFEST": b"garbled"}

    knobs.cache.manager_class = KeepsEverything
    naiad.compile(source(), target=TOY)
    with pytest.warns(NaiadWarning, match=r"is damaged: MANIFEST is not valid JSON .*; it stays in "
                                          r"the cache \(.*KeepsEverything cannot remove entries\)"):
        naiad.compile(source(), target=TOY)


@pytest.mark.shipped_backends
def test_damaged_object_file_gives_a_correct_cpu_kernel(cache_dir):
    from naiad.backends.selection import active_driver

    naiad.set_backend("cpu")
    target = active_driver().get_current_target()
    src = ASTSource(scale, SIGNATURE, {"BLOCK": 64})
    kernel = naiad.compile(src, target=target)
    _truncate(entry_dir(cache_dir, kernel), "scale.obj")
    with pytest.warns(NaiadWarning, match="scale.obj has .* bytes"):
        kernel = naiad.compile(src, target=target)
    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    kernel[(2,)](x, out, 100, 64)
    np.testing.assert_array_equal(out, 2 * x)


def test_unwritable_cache_is_a_warning(plugins, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("NAIAD_CACHE_DIR", str(blocker))
    plugins.add("toy")
    with pytest.warns(NaiadWarning, match="cannot store kernel .* NAIAD_CACHE_DIR"):
        kernel = naiad.compile(source(), target=TOY)
    assert kernel.binary.startswith(b"toybin(")


def test_metadata_that_is_not_json_is_not_cached(plugins, cache_dir):
    plugins.add("toy", compiler_methods={"add_stages": """
        def add_stages(self, stages, options, language):
            def first(ir, metadata):
                metadata["name"], metadata["shared"], metadata["thing"] = "kernel", 0, object()
                return "asm"
            stages["ttir"] = first
            stages["toybin"] = lambda ir, metadata: b"bin"
    """})
    with pytest.warns(NaiadWarning, match="'kernel' is not cached: its metadata is not JSON"):
        kernel = naiad.compile(source(), target=TOY)
    assert kernel.binary == b"bin"
    assert not (cache_dir / "kernels").exists()


def test_stage_named_json_is_refused(plugins, cache_dir):
    plugins.add("toy", stages=("ttir", "json", "toybin"))
    with pytest.raises(NaiadError, match="stage named 'json'"):
        naiad.compile(source(), target=TOY)


# -- several processes ------------------------------------------------------------------------

SCRIPT = textwrap.dedent('''
    import json, os, sys, time
    import numpy as np
    import naiad
    import naiad.language as tl
    from naiad.compiler import cache, compiler

    stages = []
    real_run_stage = compiler._run_stage
    def counting(stage, name, *rest):
        stages.append(name)
        return real_run_stage(stage, name, *rest)
    compiler._run_stage = counting

    barrier = os.environ.get("TEST_BARRIER_DIR")
    if barrier:    # both processes have missed the cache and compiled before either stores
        real_store = cache.store
        def store(key, files):
            open(os.path.join(barrier, str(os.getpid())), "w").close()
            deadline = time.time() + 120
            while len(os.listdir(barrier)) < 2 and time.time() < deadline:
                time.sleep(0.005)
            real_store(key, files)
        cache.store = store

    @naiad.jit
    def axpy(x, y, out, n, a, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out + offs, a * tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask),
                 mask=mask)

    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    start = time.perf_counter()
    kernel = axpy[(naiad.cdiv(n, 256),)](x, y, out, n, 3.0, BLOCK=256)
    seconds = time.perf_counter() - start
    print(json.dumps({"stages": stages, "ok": bool(np.array_equal(out, 3 * x + 1)),
                      "hash": kernel.hash, "seconds": seconds}))
''')


def _start(script, cache_dir, **env):
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=subprocess_env(NAIAD_CACHE_DIR=str(cache_dir), **env))


def _result(process) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_hit_in_a_new_process_skips_compilation(tmp_path):
    script = tmp_path / "axpy.py"
    script.write_text(SCRIPT)
    cold = _result(_start(script, tmp_path / "cache"))
    warm = _result(_start(script, tmp_path / "cache"))
    assert cold["ok"] and warm["ok"]
    assert cold["stages"] == ["ttir", "ttgir", "llir", "obj"]
    assert warm["stages"] == []
    assert warm["hash"] == cold["hash"]


def test_two_processes_compile_the_same_kernel_at_once(tmp_path):
    script = tmp_path / "axpy.py"
    script.write_text(SCRIPT)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    processes = [_start(script, tmp_path / "cache", TEST_BARRIER_DIR=str(barrier)) for _ in range(2)]
    results = [_result(p) for p in processes]
    assert len(os.listdir(barrier)) == 2                 # both compiled, then both stored
    assert all(r["ok"] and r["stages"] == ["ttir", "ttgir", "llir", "obj"] for r in results)
    assert results[0]["hash"] == results[1]["hash"]
    assert os.listdir(tmp_path / "cache" / "kernels") == [results[0]["hash"]]   # one entry, no leftovers
    files = cache.FileCacheManager(str(tmp_path / "cache")).get(results[0]["hash"])
    cache.unpack(files, results[0]["hash"], "axpy", _CodecOnly())      # whole and consistent


class _CodecOnly:
    def stage_codec(self, stage):
        from naiad.backends.compiler import BYTES, TEXT

        return BYTES if stage == "obj" else TEXT


def test_file_manager_keeps_the_first_entry(tmp_path):
    manager = cache.FileCacheManager(str(tmp_path))
    key = "ab" * 32
    manager.put(key, {"k.a": b"first"})
    manager.put(key, {"k.a": b"second"})
    assert manager.get(key) == {"k.a": b"first"}
    manager.remove(key)
    assert manager.get(key) is None
    manager.remove(key)                                   # removing twice is harmless
    assert os.listdir(tmp_path / "kernels") == []
    with pytest.raises(ValueError, match="not a cache file name"):
        manager.put(key, {"../escape": b""})


# -- custom managers -------------------------------------------------------------------------

MANAGER_MODULE = '''
from naiad.compiler.cache import CacheManager

STORE = {}
CALLS = []


class DictManager(CacheManager):
    def get(self, key):
        CALLS.append(("get", key))
        return dict(STORE[key]) if key in STORE else None

    def put(self, key, files):
        CALLS.append(("put", key))
        STORE[key] = dict(files)

    def remove(self, key):
        CALLS.append(("remove", key))
        STORE.pop(key, None)


class Broken:
    def get(self, key):
        raise ConnectionError("the cache server is down")

    def put(self, key, files):
        raise ConnectionError("the cache server is down")


class NoPut:
    def get(self, key):
        return None


class NeedsArgs:
    def __init__(self, url):
        pass

    def get(self, key):
        return None

    def put(self, key, files):
        pass
'''


@pytest.fixture
def manager_module(tmp_path, monkeypatch, cache_dir):
    (tmp_path / "my_cache_manager.py").write_text(MANAGER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_cache_manager", None)
    import my_cache_manager

    yield my_cache_manager
    sys.modules.pop("my_cache_manager", None)


def test_custom_manager_from_the_environment(plugins, manager_module, cache_dir, stage_calls,
                                             monkeypatch):
    monkeypatch.setenv("NAIAD_CACHE_MANAGER", "my_cache_manager:DictManager")
    plugins.add("toy")
    first = naiad.compile(source(), target=TOY)
    stage_calls.clear()
    second = naiad.compile(source(), target=TOY)
    assert stage_calls == [] and same_kernel(first, second)
    assert [c for c, _ in manager_module.CALLS] == ["get", "put", "get"]
    assert set(manager_module.STORE[first.hash]) == {"MANIFEST", "scale.json", "scale.ttir",
                                                     "scale.toyasm", "scale.toybin"}
    assert not (cache_dir / "kernels").exists()
    # The core checks what a custom manager returns, and asks it to remove a damaged entry.
    manager_module.STORE[first.hash]["scale.toybin"] = b"garbage"
    with pytest.warns(NaiadWarning, match=r"my_cache_manager.DictManager\) is damaged: scale.toybin"):
        third = naiad.compile(source(), target=TOY)
    assert same_kernel(first, third)
    assert [c for c, _ in manager_module.CALLS][3:] == ["get", "remove", "put"]


def test_custom_manager_class_assigned_from_code(plugins, manager_module, cache_dir):
    knobs.cache.manager_class = manager_module.DictManager
    plugins.add("toy")
    kernel = naiad.compile(source(), target=TOY)
    assert kernel.hash in manager_module.STORE


def test_failing_manager_is_a_warning(plugins, manager_module, monkeypatch):
    monkeypatch.setenv("NAIAD_CACHE_MANAGER", "my_cache_manager:Broken")
    plugins.add("toy")
    with pytest.warns(NaiadWarning) as record:
        kernel = naiad.compile(source(), target=TOY)
    messages = [str(w.message) for w in record]
    assert any("failed to read" in m and "the cache server is down" in m for m in messages)
    assert any("cannot store kernel" in m for m in messages)
    assert kernel.binary.startswith(b"toybin(")


@pytest.mark.parametrize("value, message", [
    ("no_colon_here", "is not of the form 'module:Class'"),
    ("my_cache_manager:", "is not of the form 'module:Class'"),
    ("no_such_module_for_naiad_tests:C", "cannot import module 'no_such_module_for_naiad_tests'"),
    ("my_cache_manager:Missing", "module 'my_cache_manager' has no attribute 'Missing'"),
    ("my_cache_manager:STORE", "is not a class"),
    ("my_cache_manager:NoPut", "NoPut has no put method"),
    ("my_cache_manager:NeedsArgs", r"constructing NeedsArgs\(\) failed"),
])
def test_bad_manager_is_a_clear_error(plugins, manager_module, monkeypatch, value, message):
    monkeypatch.setenv("NAIAD_CACHE_MANAGER", value)
    plugins.add("toy")
    with pytest.raises(cache.CacheManagerError, match=message) as info:
        naiad.compile(source(), target=TOY)
    assert "NAIAD_CACHE_MANAGER" in str(info.value)
    assert isinstance(info.value, NaiadError)


def test_a_launch_served_by_the_disk_cache_imports_no_compiler(tmp_path):
    """A new process whose kernel is in the on-disk cache launches without importing the
    compiler's IR libraries (xDSL): most of a cold start."""
    script = tmp_path / "launch.py"
    script.write_text(textwrap.dedent("""\
        import sys
        import numpy as np
        import naiad
        import naiad.language as tl

        @naiad.jit
        def add_one(x, out, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)

        x = np.arange(8, dtype=np.float32)
        out = np.zeros_like(x)
        add_one[(1,)](x, out, 8, BLOCK=8)
        assert (out == x + 1).all()
        print("xdsl" in sys.modules)
        """))
    env = dict(subprocess_env(), NAIAD_CACHE_DIR=str(tmp_path / "cache"))
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    assert [r.stdout.strip() for r in runs] == ["True", "False"]
