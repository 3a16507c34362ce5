"""Hooks and pass plugins: a pass plugin loaded from NAIAD_PASS_PLUGINS and inserted into the CPU
pipeline by a stages inspection hook (examples/insert_pass.py, run as a user would), the hook's
key forcing a recompile, entry-point passes, plugin errors, launch and load hooks, and the
compilation listener's per-stage times."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad import knobs
from naiad.passes import PassError, get_pass, plugins
from plugin_fixtures import subprocess_env

pytestmark = pytest.mark.shipped_backends
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@naiad.jit
def scale(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0)


def test_the_example_inserts_a_plugin_pass_into_the_cpu_pipeline(tmp_path):
    env = subprocess_env(NAIAD_PASS_PLUGINS="double_to_add", NAIAD_CACHE_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, str(EXAMPLES / "insert_pass.py")], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "result matches: True" in result.stdout
    assert "ttir has addf: True mulf: False" in result.stdout


def _insert(*args):
    if not args:
        return ("test-insert", "v1")
    backend, stages, options, language, capability = args
    make_ttir = stages["ttir"]

    def ttir(module, md):
        module = make_ttir(module, md)
        get_pass("double-to-add")(module)
        return module

    stages["ttir"] = ttir


@pytest.fixture
def plugin(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    with knobs.compilation.scope(), knobs.runtime.scope():
        knobs.compilation.pass_plugins = ["double_to_add"]
        yield
    plugins._loaded = None


def test_the_hook_key_forces_a_recompile_and_the_listener_sees_stage_times(plugin):
    seen = []
    knobs.compilation.listener = lambda src, md, times, hit: seen.append((md["hash"], dict(times), hit))
    x = np.arange(8, dtype=np.float32)
    out = np.empty_like(x)
    plain = scale.warmup(x, out, BLOCK=8)
    knobs.runtime.add_stages_inspection_hook = _insert
    scale.cache.clear()
    hooked = scale[(1,)](x, out, BLOCK=8)
    np.testing.assert_array_equal(out, x * 2)
    assert plain.hash != hooked.hash
    assert "arith.mulf" in plain.asm["ttir"] and "arith.mulf" not in hooked.asm["ttir"]
    scale.cache.clear()
    again = scale.warmup(x, out, BLOCK=8)                      # same hook key: the on-disk entry
    assert again.hash == hooked.hash and seen[-1][2] is True
    compiled = [entry for entry in seen if not entry[2]]
    assert compiled and {"ir", "ttir", "ttgir", "llir", "obj"} <= set(compiled[-1][1])
    assert all(t >= 0 for t in compiled[-1][1].values())


def test_a_plugin_that_cannot_be_imported_is_named():
    with knobs.compilation.scope():
        knobs.compilation.pass_plugins = ["no_such_plugin_module"]
        with pytest.raises(PassError, match="pass plugin 'no_such_plugin_module' .NAIAD_PASS_PLUGINS. "
                                            "cannot be imported: ModuleNotFoundError"):
            get_pass("cse")
    plugins._loaded = None


def test_entry_point_passes_are_registered_by_name(monkeypatch):
    entry = metadata.EntryPoint(name="ep-identity", value="builtins:id", group=plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(plugins, "_entry_points", lambda: [entry])
    plugins._loaded = None
    try:
        assert get_pass("ep-identity") is id
    finally:
        plugins._loaded = None


def test_launch_and_load_hooks_see_each_launch():
    events = []
    x = np.arange(8, dtype=np.float32)
    out = np.empty_like(x)
    with knobs.runtime.scope():
        knobs.runtime.launch_enter_hook.add(lambda md: events.append(("enter", md["name"], md["grid"])))
        knobs.runtime.launch_exit_hook.add(lambda md: events.append(("exit", md["name"])))
        knobs.runtime.kernel_load_start_hook.add(lambda m, f, name, md, h: events.append(("load", name, m)))
        knobs.runtime.kernel_load_end_hook.add(lambda m, f, name, md, h: events.append(("loaded", name, h)))
        scale.cache.clear()
        kernel = scale[(2,)](x, out, BLOCK=8)
    assert events[:2] == [("load", "scale", None), ("loaded", "scale", kernel.hash)]
    assert events[2:] == [("enter", "scale", (2, 1, 1)), ("exit", "scale")]
    with pytest.raises(naiad.errors.KnobError, match="a hook must be callable"):
        knobs.runtime.launch_enter_hook.add(3)
