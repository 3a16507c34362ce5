"""naiad.profiler on the CPU backend: the launches and compiles a profile records, their sums and
table, the Chrome trace, launch_metadata's FLOPs and bytes, hooks that leave with the block,
nesting, ``naiad profile`` and NAIAD_PROFILE=1 -- with real kernels whose results are checked
against numpy."""

from __future__ import annotations

import atexit
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad import knobs, profiler
from naiad.compiler import cache, compiler
from naiad.errors import KernelDefinitionError, NaiadError
from naiad.profiler import process
from naiad.runtime import native_code
from naiad.runtime.jit import JITFunction
from naiad.tools import cli

from plugin_fixtures import subprocess_env

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def vector_add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


@naiad.jit
def scale(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * 3.0, mask=mask)


SEEN_ARGUMENTS: list = []


def _work(grid, metadata, args):
    """Triton's launch_metadata convention: (grid, kernel metadata, arguments by name)."""
    SEEN_ARGUMENTS.append((grid, metadata.name, type(args["x"])))
    n = args["n"]
    return {"name": f"counted_axpy[n={n}]", "flops16": n, "flops32": 2 * n, "bytes": 3 * n * args["x"].itemsize}


@naiad.jit(launch_metadata=_work)
def counted_axpy(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x + offs, mask=mask)
    tl.store(out + offs, 2.0 * a + tl.load(y + offs, mask=mask), mask=mask)


def _arrays(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32), \
        np.zeros(n, np.float32)


def _launch_both(big: int = 1 << 20):
    """vector_add twice over ``big`` elements, scale three times over 64: results checked."""
    x, y, out = _arrays(big)
    for _ in range(2):
        vector_add[(naiad.cdiv(big, 1024),)](x, y, out, big, BLOCK=1024)
    np.testing.assert_array_equal(out, x + y)
    small, _, scaled = _arrays(64, seed=1)
    for _ in range(3):
        scale[(2, 1)](small, scaled, 64, BLOCK=32)
    np.testing.assert_allclose(scaled, small * 3.0)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NAIAD_CACHE_DIR", str(tmp_path / "cache"))
    cache._managers.clear()
    yield
    cache._managers.clear()


def _assert_nothing_installed():
    assert not knobs.runtime.launch_hooked()
    assert compiler.compile_observers == []


# -- what a profile records -----------------------------------------------------------------

def test_each_launch_is_recorded_with_its_name_grid_backend_and_times():
    _launch_both(4096)                      # compiled before: the profile sees warm launches
    with profiler.profile() as p:
        _launch_both()
    assert [e.name for e in p.events] == ["vector_add"] * 2 + ["scale"] * 3
    assert [e.grid for e in p.events] == [(1024, 1, 1)] * 2 + [(2, 1, 1)] * 3
    assert {e.backend for e in p.events} == {"cpu"}
    for event in p.events:
        assert event.device_time > 0 and event.host_time >= event.device_time
        assert event.flops is None and event.bytes is None
    assert p.compiles == []                 # the JIT had both kernels in memory
    _assert_nothing_installed()


def test_key_averages_sum_each_kernels_launches():
    with profiler.profile() as p:
        _launch_both()
    rows = {row.name: row for row in p.key_averages()}
    assert list(rows) == ["vector_add", "scale"]
    for name, calls in (("vector_add", 2), ("scale", 3)):
        times = [e.device_time for e in p.events if e.name == name]
        row = rows[name]
        assert row.calls == calls and row.backend == "cpu"
        assert row.device_total == pytest.approx(sum(times))
        assert row.device_mean == pytest.approx(sum(times) / calls)
        assert (row.device_min, row.device_max) == (min(times), max(times))
        assert row.host_total == pytest.approx(sum(e.host_time for e in p.events if e.name == name))
        assert row.flops is None and row.gflops is None and row.gbps is None


@pytest.mark.parametrize("sort, first", [("total", "vector_add"), ("mean", "vector_add"),
                                         ("calls", "scale"), ("name", "scale")])
def test_the_table_is_sorted_as_asked(sort, first):
    with profiler.profile() as p:
        _launch_both()
    text = p.table(sort=sort)
    rows = [line.split()[0] for line in text.splitlines() if line.split()[:1] in (["scale"], ["vector_add"])]
    assert rows == [first, "scale" if first == "vector_add" else "vector_add"]
    assert "Device total" in text and "GFLOP/s" in text
    assert "5 launches of 2 kernels" in text
    assert p.table() == p.table(sort="total")


def test_a_table_sorted_by_an_unknown_key_says_which_keys_there_are():
    with profiler.profile() as p:
        pass
    with pytest.raises(NaiadError, match="cannot sort the profile table by 'fastest' -- fix: sort "
                                         "by one of total, calls, mean, name"):
        p.table(sort="fastest")
    assert "no kernel launches or compiles were recorded" in p.table()


def test_the_chrome_trace_has_one_complete_event_per_launch(tmp_path):
    with profiler.profile() as p:
        _launch_both()
    path = tmp_path / "trace.json"
    p.export_chrome_trace(path)
    trace = json.loads(path.read_text())
    launches = [e for e in trace["traceEvents"] if e.get("cat") == "launch"]
    assert len(launches) == len(p.events) == 5
    assert all(e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0 for e in launches)
    assert [e["name"] for e in launches] == [e.name for e in p.events]
    assert launches[0]["args"]["grid"] == [1024, 1, 1] and launches[0]["args"]["backend"] == "cpu"
    assert {"flops", "bytes", "host_us"} <= set(launches[0]["args"])
    assert [e["ts"] for e in launches] == sorted(e["ts"] for e in launches)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert names == {"host", "cpu device"}


def test_a_trace_that_cannot_be_written_says_where_and_what_to_do(tmp_path):
    with profiler.profile() as p:
        pass
    missing = tmp_path / "no" / "such" / "dir" / "trace.json"
    with pytest.raises(NaiadError, match=r"cannot write the Chrome trace to .*trace.json'.*"
                                         r"fix: give a file path in a directory that exists"):
        p.export_chrome_trace(missing)


# -- launch_metadata: FLOPs, bytes, names ----------------------------------------------------

def test_launch_metadata_gives_flops_bytes_and_rates():
    n = 1 << 16
    x, y, out = _arrays(n)
    SEEN_ARGUMENTS.clear()
    with profiler.profile() as p:
        for _ in range(3):                  # cold, then the warm path
            counted_axpy[(naiad.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    np.testing.assert_allclose(out, 2.0 * x + y, rtol=1e-6)
    assert SEEN_ARGUMENTS == [((64, 1, 1), "counted_axpy", np.ndarray)] * 3
    assert [e.name for e in p.events] == [f"counted_axpy[n={n}]"] * 3
    assert all(e.flops == 3 * n and e.bytes == 12 * n for e in p.events)
    (row,) = p.key_averages()
    assert (row.flops, row.bytes) == (9 * n, 36 * n)
    assert row.gflops == pytest.approx(9 * n / row.device_total / 1e9)
    assert row.gbps == pytest.approx(36 * n / row.device_total / 1e9)
    assert f"{row.gflops:.2f}" in p.table() and f"{row.gbps:.2f}" in p.table()


def test_a_launch_metadata_that_is_not_a_function_is_refused():
    with pytest.raises(KernelDefinitionError, match="kernel 'bad': launch_metadata must be a "
                                                    "function fn\\(grid, metadata, args\\)"):
        @naiad.jit(launch_metadata={"flops": 1})
        def bad(x):
            pass


def test_a_launch_metadata_returning_no_dict_is_said_at_launch():
    def nothing(grid, metadata, args):
        return [1, 2]

    broken = JITFunction(scale.fn, launch_metadata=nothing)
    x, _, out = _arrays(64)
    with profiler.profile():
        with pytest.raises(NaiadError, match="scale: its launch_metadata function returned list, "
                                             "not a dict -- fix: return a dict"):
            broken[(1,)](x, out, 64, BLOCK=64)
    _assert_nothing_installed()


def test_a_count_that_is_not_a_number_is_said_before_the_kernel_runs():
    broken = JITFunction(scale.fn, launch_metadata=lambda grid, metadata, args: {"flops": "many"})
    x, _, out = _arrays(64)
    with profiler.profile() as p:
        with pytest.raises(NaiadError, match="kernel 'scale': its launch_metadata gave "
                                             "flops='many' -- fix: return a number for 'flops'"):
            broken[(1,)](x, out, 64, BLOCK=64)
    assert not out.any() and p.events == []


# -- compiles and cache hits ------------------------------------------------------------------

def test_compiles_and_cache_hits_are_counted_per_kernel(fresh_cache, tmp_path):
    x, _, out = _arrays(64)
    scale.cache.clear()
    with profiler.profile() as p:
        scale[(1,)](x, out, 64, BLOCK=64)               # compiled: the cache is new
        scale.cache.clear()
        scale[(1,)](x, out, 64, BLOCK=64)               # read back from the compile cache
    np.testing.assert_allclose(out, x * 3.0)
    assert [(c.name, c.backend, c.cache_hit) for c in p.compiles] == [("scale", "cpu", False),
                                                                      ("scale", "cpu", True)]
    assert p.compiles[0].seconds > p.compiles[1].seconds > 0
    (row,) = p.key_averages()
    assert (row.calls, row.compiles, row.cache_hits) == (2, 1, 1)
    assert row.compile_time == pytest.approx(sum(c.seconds for c in p.compiles))
    assert "1 compiled, 1 from the compile cache" in p.table()
    p.export_chrome_trace(tmp_path / "trace.json")
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    compiles = [e for e in events if e.get("cat") == "compile"]
    assert [(e["name"], e["args"]["cache_hit"]) for e in compiles] == [("compile scale", False),
                                                                       ("compile scale", True)]


# -- installing and removing the hooks --------------------------------------------------------

@pytest.mark.skipif(not native_code.available(), reason="no native entries here")
def test_after_the_block_nothing_is_installed_and_the_native_entry_runs_again(monkeypatch):
    x, _, out = _arrays(64)
    launch = lambda: scale[(1,)](x, out, 64, BLOCK=64)  # noqa: E731
    launch()
    launch()                                # the native variant is built
    with profiler.profile() as p:
        launch()
        assert knobs.runtime.launch_hooked()
    assert len(p.events) == 1
    _assert_nothing_installed()

    def took_the_python_path(self, *args, **kwargs):
        raise AssertionError("the launch took the Python path")
    scale._fast.clear()                     # the Python entry's warm path is gone too
    monkeypatch.setattr(JITFunction, "_run_slow", took_the_python_path)
    out[:] = 0
    launch()
    np.testing.assert_allclose(out, x * 3.0)


def test_an_exception_in_the_block_still_removes_the_hooks():
    x, _, out = _arrays(64)
    with pytest.raises(ValueError, match="inside"):
        with profiler.profile() as p:
            scale[(1,)](x, out, 64, BLOCK=64)
            raise ValueError("inside")
    assert len(p.events) == 1 and not p.recording
    _assert_nothing_installed()


def test_profiles_nest_and_an_inner_launch_is_in_both():
    x, y, out = _arrays(64)
    with profiler.profile() as outer:
        scale[(1,)](x, out, 64, BLOCK=64)
        with profiler.profile() as inner:
            vector_add[(1,)](x, y, out, 64, BLOCK=64)
        assert knobs.runtime.launch_hooked()           # the outer one still records
        scale[(1,)](x, out, 64, BLOCK=64)
    assert [e.name for e in outer.events] == ["scale", "vector_add", "scale"]
    assert [e.name for e in inner.events] == ["vector_add"]
    assert inner.events[0] is outer.events[1]
    _assert_nothing_installed()


def test_a_profile_entered_twice_at_once_is_refused():
    p = profiler.profile()
    with p:
        with pytest.raises(NaiadError, match="this profile is recording already -- fix: leave its "
                                             "`with` block"):
            p.__enter__()
    _assert_nothing_installed()


def test_a_launch_hook_assigned_instead_of_added_is_said():
    with knobs.runtime.scope():
        knobs.runtime.launch_exit_hook = lambda metadata: None
        with pytest.raises(NaiadError, match="knobs.runtime.launch_exit_hook holds a function, not the "
                                             "hook chain .* fix: add your hook with "
                                             r"knobs.runtime.launch_exit_hook.add\(fn\)"):
            profiler.profile().__enter__()
    _assert_nothing_installed()


def test_other_launch_hooks_keep_running_beside_the_profiler():
    seen = []
    x, _, out = _arrays(64)
    with knobs.runtime.scope():
        knobs.runtime.launch_enter_hook.add(lambda metadata: seen.append(metadata["name"]))
        with profiler.profile() as p:
            scale[(1,)](x, out, 64, BLOCK=64)
        assert knobs.runtime.launch_enter_hook.calls and len(p.events) == 1 and seen == ["scale"]


# -- naiad profile and NAIAD_PROFILE=1 ----------------------------------------------------------

SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    import naiad
    import naiad.language as tl

    @naiad.jit
    def doubled(x, out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)

    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    for _ in range(4):
        doubled[(4,)](x, out, 100, BLOCK=32)
    assert (out == 2 * x).all()
    print("script argv:", sys.argv[1:], "name:", __name__)
    {end}
''')


def test_naiad_profile_runs_the_script_prints_the_table_and_writes_the_trace(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT.format(end="sys.exit(3)"))
    trace = tmp_path / "job.json"
    status = cli.main(["profile", "--trace", str(trace), "--sort", "calls", str(script), "--steps", "2"])
    out = capsys.readouterr().out
    assert status == 3
    assert "script argv: ['--steps', '2'] name: __main__" in out
    assert "doubled" in out and "4 launches of 1 kernel" in out
    assert f"wrote the Chrome trace {trace}" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert len([e for e in events if e.get("cat") == "launch"]) == 4
    _assert_nothing_installed()


def test_a_script_that_raises_exits_1_with_its_traceback_and_the_profile(tmp_path, capsys):
    script = tmp_path / "fails.py"
    script.write_text(SCRIPT.format(end="raise RuntimeError('the script failed')"))
    assert profiler.run_script(str(script), []) == 1
    captured = capsys.readouterr()
    assert "RuntimeError: the script failed" in captured.err
    assert "4 launches of 1 kernel" in captured.out


def test_naiad_profile_of_a_missing_script_exits_1_naming_it(tmp_path, capsys):
    missing = tmp_path / "nowhere.py"
    assert cli.main(["profile", str(missing)]) == 1
    err = capsys.readouterr().err
    assert f"naiad profile: cannot profile '{missing}': there is no such file" in err
    assert "fix: give the path of a Python script" in err


def test_run_script_refuses_an_unknown_sort_before_running(tmp_path):
    script = tmp_path / "never.py"
    script.write_text("raise SystemExit('must not run')\n")
    with pytest.raises(NaiadError, match="cannot sort the profile table by 'slowest'"):
        profiler.run_script(str(script), [], sort="slowest")


def test_naiad_profile_env_profiles_the_process_and_prints_the_table_at_exit(tmp_path):
    script = tmp_path / "whole.py"
    script.write_text(SCRIPT.format(end=""))
    trace = tmp_path / "whole.json"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                            env=subprocess_env(NAIAD_PROFILE="1", NAIAD_PROFILE_TRACE=str(trace)))
    assert result.returncode == 0, result.stderr
    assert "script argv: [] name: __main__" in result.stdout and "Kernel" not in result.stdout
    assert "naiad profile (NAIAD_PROFILE=1)" in result.stderr and "doubled" in result.stderr
    assert "4 launches of 1 kernel" in result.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    assert len([e for e in events if e.get("cat") == "launch"]) == 4


def test_a_trace_at_exit_that_cannot_be_written_is_said_on_stderr(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NAIAD_PROFILE_TRACE", str(tmp_path / "missing" / "t.json"))
    whole = process.profile_process()
    atexit.unregister(process.report)          # reported here instead of at the tests' exit
    process.report(whole)
    err = capsys.readouterr().err
    assert "naiad profile (NAIAD_PROFILE=1)" in err
    assert "naiad profile: cannot write the Chrome trace to" in err and "missing" in err
    _assert_nothing_installed()
