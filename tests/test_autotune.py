"""Autotuning: Config, @autotune and @heuristics behave as Triton's, on the CPU backend.

Most tests time with a fake benchmarker (preset times per config) so that the choice is
certain and the tests fast; `Recorder` stands in for a kernel where only the launches'
keyword arguments matter.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import naiad
import naiad.compat
import naiad.language as tl
from naiad.errors import OutOfResources
from naiad.runtime.autotuner import AutotunerError

pytestmark = pytest.mark.shipped_backends

def configs(*blocks, **options):
    return [naiad.Config({"BLOCK": b}, **options) for b in blocks]


class FakeBench:
    """A benchmarker returning preset times per BLOCK; use ``pre_hook=bench.saw`` so it knows
    which config it is timing.  Each timing runs the kernel ``calls`` times."""

    def __init__(self, times, calls=1):
        self.times, self.calls, self.seen, self.timed = times, calls, [], []

    def saw(self, nargs):
        self.seen.append(nargs["BLOCK"])

    def __call__(self, kernel_call, quantiles):
        for _ in range(self.calls):
            kernel_call()
        self.timed.append(self.seen[-1])
        return [self.times[self.seen[-1]]] * len(quantiles)


class Recorder:
    """A stand-in kernel: records each launch's keyword arguments; BLOCK in ``fail`` raises."""

    def __init__(self, arg_names, fail=()):
        self.arg_names, self.fail, self.launches = list(arg_names), fail, []
        self.fn = recorded

    def run(self, *args, grid=None, warmup=False, **kwargs):
        if kwargs.get("BLOCK") in self.fail:
            raise OutOfResources(kwargs["BLOCK"] * 4, 256, "shared memory")
        self.launches.append(kwargs)
        return kwargs


def recorded():
    """The base function under `Recorder` (its name is the kernel's name in messages)."""


@naiad.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


@naiad.jit
def accumulate(x, total, counts, n, BLOCK: tl.constexpr):
    """Adds x into total (4 slots) with atomics and increments counts in place."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.atomic_add(total + offs % 4, tl.load(x + offs, mask=m), mask=m)
    tl.store(counts + offs, tl.load(counts + offs, mask=m) + 1, mask=m)


@naiad.jit
def small_blocks_only(src, dst, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 16, "BLOCK must be at most 16")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def grid(meta):
    return (naiad.cdiv(meta["n"], meta["BLOCK"]),)


def arrays(n=1000, dtype=np.float32):
    return np.arange(n, dtype=dtype), np.zeros(n, dtype)


# -- choosing ---------------------------------------------------------------------------------------
def test_chooses_the_fastest_config_and_launches_it():
    bench = FakeBench({16: 3.0, 64: 1.0, 256: 2.0})
    kernel = naiad.autotune(configs(16, 64, 256), key=["n"], do_bench=bench, pre_hook=bench.saw)(copy_kernel)
    src, dst = arrays()
    compiled = kernel[grid](src, dst, src.size)
    assert kernel.best_config.kwargs == {"BLOCK": 64}
    assert bench.timed == [16, 64, 256]
    assert kernel.configs_timings[kernel.best_config] == [1.0, 1.0, 1.0]
    assert compiled.name == "copy_kernel"
    np.testing.assert_array_equal(dst, src)


def test_a_new_key_or_dtype_retunes_and_a_known_one_does_not():
    bench = FakeBench({16: 2.0, 64: 1.0})
    kernel = naiad.autotune(configs(16, 64), key=["n"], do_bench=bench, pre_hook=bench.saw)(
        Recorder(["src", "dst", "n", "BLOCK"]))
    src, dst = arrays()
    kernel[(1,)](src, dst, 1000)
    kernel[(1,)](src, dst, n=1000)            # by keyword: the same key
    assert len(bench.timed) == 2 and len(kernel.cache) == 1
    kernel[(1,)](src, dst, 500)
    assert len(bench.timed) == 4 and (500, "float32", "float32") in kernel.cache
    kernel[(1,)](*arrays(dtype=np.float64), 500)
    assert len(bench.timed) == 6 and len(kernel.cache) == 3
    assert [launch["BLOCK"] for launch in kernel.fn.launches[-3:]] == [16, 64, 64]   # timed, timed, real


def test_one_config_is_launched_without_timing():
    kernel = naiad.autotune(configs(32), key=["n"], do_bench=pytest.fail)(copy_kernel)
    src, dst = arrays(100)
    kernel[grid](src, dst, 100)
    assert kernel.best_config.kwargs == {"BLOCK": 32} and kernel.cache == {}
    np.testing.assert_array_equal(dst, src)


def test_default_benchmarker_times_on_the_cpu():
    kernel = naiad.autotune(configs(32, 128), key=["n"], warmup=1, rep=1)(copy_kernel)
    src, dst = arrays()
    kernel[grid](src, dst, src.size)
    assert set(kernel.configs_timings) == set(kernel.configs)
    assert all(len(t) == 3 and 0 < t[0] < float("inf") for t in kernel.configs_timings.values())
    np.testing.assert_array_equal(dst, src)


def test_warmup_compiles_every_config():
    kernel = naiad.autotune(configs(16, 32), key=["n"])(copy_kernel)
    src, dst = arrays(64)
    compiled = kernel.warmup(src, dst, 64, grid=(1,))
    assert [k.metadata["name"] for k in compiled] == ["copy_kernel", "copy_kernel"]
    np.testing.assert_array_equal(dst, 0)


# -- pruning ----------------------------------------------------------------------------------------
def test_early_config_prune_sees_the_arguments_and_its_choice_is_not_timed():
    seen = {}

    def prune(configs, nargs, **kwargs):
        seen.update(nargs=sorted(nargs), kwargs=sorted(kwargs))
        return [configs[1]]

    kernel = naiad.autotune(configs(16, 64, 256), key=["n"], do_bench=pytest.fail,
                            prune_configs_by={"early_config_prune": prune})(
        Recorder(["src", "dst", "n", "BLOCK"]))
    kernel[(1,)](*arrays(), n=1000)
    assert seen == {"nargs": ["dst", "src"], "kwargs": ["n"]}
    assert kernel.best_config is kernel.configs[1]
    assert kernel.fn.launches[-1]["BLOCK"] == 64


def test_early_config_prune_returning_nothing_is_a_clear_error():
    prune = {"early_config_prune": lambda configs, nargs, **kwargs: []}
    kernel = naiad.autotune(configs(16, 64), key=["n"], prune_configs_by=prune)(copy_kernel)
    with pytest.raises(AutotunerError, match=r"autotuning copy_kernel: early_config_prune returned no "
                                             r"config -- fix: make it return at least one"):
        kernel[grid](*arrays(), 1000)


@pytest.mark.parametrize("top_k, timed", [(2, [16, 64]), (0.34, []), (5, [16, 64, 256])])
def test_perf_model_keeps_the_top_k_estimates(top_k, timed):
    bench = FakeBench({16: 2.0, 64: 1.0, 256: 3.0})
    estimates = []

    def perf_model(**kwargs):
        estimates.append(kwargs["BLOCK"])
        assert kwargs["n"] == 1000 and kwargs["num_warps"] == 4
        return kwargs["BLOCK"]

    kernel = naiad.autotune(configs(256, 64, 16), key=["n"], do_bench=bench, pre_hook=bench.saw,
                            prune_configs_by={"perf_model": perf_model, "top_k": top_k})(
        Recorder(["src", "dst", "n", "BLOCK"]))
    kernel[(1,)](*arrays(), 1000)
    assert sorted(bench.timed) == timed
    assert estimates == ([] if top_k == 5 else [256, 64, 16])
    assert kernel.best_config.kwargs == {"BLOCK": 16 if top_k == 0.34 else 64}   # one left: not timed


def test_bad_top_k_is_a_clear_error():
    kernel = naiad.autotune(configs(16, 64), key=["n"],
                            prune_configs_by={"perf_model": lambda **kw: 0, "top_k": "all"})(copy_kernel)
    with pytest.raises(AutotunerError, match=r"prune_configs_by\['top_k'\] is 'all' -- fix: give a count"):
        kernel[grid](*arrays(), 1000)


# -- hooks, reset and restore ---------------------------------------------------------------------
def test_reset_to_zero_and_restore_value_undo_each_timed_launch():
    bench = FakeBench({16: 2.0, 64: 1.0}, calls=3)
    kernel = naiad.autotune(configs(16, 64), key=["n"], do_bench=bench, pre_hook=bench.saw,
                            reset_to_zero=["total"], restore_value=["counts"])(accumulate)
    x = np.arange(1000, dtype=np.float32)
    total, counts = np.full(4, 7.0, np.float32), np.arange(1000, dtype=np.int32)
    kernel[grid](x, total, counts, 1000)
    assert len(bench.timed) == 2                       # 6 launches while tuning, then the real one
    np.testing.assert_array_equal(total, x.reshape(-1, 4).sum(axis=0))
    np.testing.assert_array_equal(counts, np.arange(1000) + 1)


def test_without_reset_the_timed_launches_accumulate():
    bench = FakeBench({16: 2.0, 64: 1.0}, calls=3)
    kernel = naiad.autotune(configs(16, 64), key=["n"], do_bench=bench, pre_hook=bench.saw)(accumulate)
    x = np.ones(1000, np.float32)
    total, counts = np.zeros(4, np.float32), np.zeros(1000, np.int32)
    kernel[grid](x, total, counts, 1000)
    np.testing.assert_array_equal(total, 7 * 250)
    np.testing.assert_array_equal(counts, 7)


def test_pre_and_post_hooks_surround_each_timed_launch_and_see_failures():
    events = []
    bench = FakeBench({16: 2.0, 64: 1.0, 256: 0.5})

    def pre(nargs):
        events.append(("pre", nargs["BLOCK"]))
        bench.saw(nargs)

    def post(nargs, exception):
        events.append(("post", nargs["BLOCK"], type(exception).__name__))

    kernel = naiad.autotune(configs(16, 64, 256), key=["n"], do_bench=bench, pre_hook=pre, post_hook=post)(
        Recorder(["src", "dst", "n", "BLOCK"], fail=(256,)))
    config_hook = []
    kernel.configs[1].pre_hook = lambda nargs: config_hook.append(nargs["n"])
    kernel[(1,)](*arrays(), 1000)
    assert events == [("pre", 16), ("post", 16, "NoneType"), ("pre", 64), ("post", 64, "NoneType"),
                      ("pre", 256), ("post", 256, "OutOfResources")]
    assert kernel.best_config.kwargs == {"BLOCK": 64}      # 256 was fastest but failed
    assert kernel.configs_timings[kernel.configs[2]] == [float("inf")] * 3
    assert config_hook == [1000, 1000]                     # its timed launch, then the real one


def test_reset_to_zero_of_a_scalar_is_a_clear_error():
    bench = FakeBench({16: 2.0, 64: 1.0})
    kernel = naiad.autotune(configs(16, 64), key=["n"], do_bench=bench, pre_hook=bench.saw,
                            reset_to_zero=["n"])(copy_kernel)
    with pytest.raises(AutotunerError, match=r"copy_kernel: reset_to_zero names 'n', which is a int, not an "
                                             r"array -- fix: list only array arguments"):
        kernel[grid](*arrays(), 1000)


# -- failures -----------------------------------------------------------------------------------------
def test_a_config_that_fails_to_compile_is_skipped():
    bench = FakeBench({16: 2.0, 32: 1.0})
    kernel = naiad.autotune(configs(16, 32), key=["n"], do_bench=bench, pre_hook=bench.saw)(small_blocks_only)
    src, dst = arrays(100)
    kernel[grid](src, dst, 100)
    assert kernel.best_config.kwargs == {"BLOCK": 16}
    np.testing.assert_array_equal(dst, src)


def test_when_every_config_fails_the_error_lists_each():
    bench = FakeBench({32: 2.0, 64: 1.0})
    kernel = naiad.autotune(configs(32, 64), key=["n"], do_bench=bench, pre_hook=bench.saw)(small_blocks_only)
    with pytest.raises(AutotunerError) as info:
        kernel[grid](*arrays(100), 100)
    message = str(info.value)
    assert message.startswith("autotuning kernel small_blocks_only failed: none of its 2 configs "
                              "compiled and ran")
    for config in kernel.configs:
        assert f"config {config}:" in message
    assert message.count("static_assert failed: BLOCK must be at most 16") == 2
    assert "CompileTimeAssertionFailure: in kernel 'small_blocks_only'" in message
    assert "-- fix: make at least one config fit" in message


# -- backend options ----------------------------------------------------------------------------------
AMD_CONFIG = dict(num_warps=8, num_stages=2, waves_per_eu=2, kpack=2, enable_fp_fusion=False)


def test_options_of_another_backend_are_kept_but_not_passed():
    config = naiad.Config({"BLOCK": 64, "matrix_instr_nonkdim": 16}, **AMD_CONFIG)
    assert config.backend_options == {"waves_per_eu": 2, "kpack": 2, "enable_fp_fusion": False}
    assert config.all_kwargs() == {"BLOCK": 64, "matrix_instr_nonkdim": 16, "num_warps": 8, "num_ctas": 1,
                                   "num_stages": 2}
    assert str(config) == ("BLOCK: 64, matrix_instr_nonkdim: 16, num_warps: 8, num_ctas: 1, num_stages: 2, "
                           "maxnreg: None, waves_per_eu: 2, kpack: 2, enable_fp_fusion: False")
    kernel = naiad.autotune([config], key=["n"])(Recorder(["src", "dst", "n", "BLOCK"]))
    launch = kernel[(1,)](*arrays(), 1000)
    assert launch["enable_fp_fusion"] is False                  # the CPU backend declares it
    assert "waves_per_eu" not in launch and "kpack" not in launch


def test_a_config_written_for_amd_runs_on_the_cpu():
    kernel = naiad.autotune([naiad.Config({"BLOCK": 64, "matrix_instr_nonkdim": 16}, **AMD_CONFIG)],
                            key=["n"])(copy_kernel)
    src, dst = arrays()
    compiled = kernel[grid](src, dst, src.size)
    assert compiled.metadata["enable_fp_fusion"] is False and compiled.metadata["num_warps"] == 8
    np.testing.assert_array_equal(dst, src)


# -- heuristics -----------------------------------------------------------------------------------------
@naiad.heuristics({"BLOCK": lambda args: naiad.next_power_of_2(args["n"]),
                   "EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@naiad.jit
def scale_one_block(x, out, n, factor, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    scale_body(x, out, n, factor, BLOCK, EVEN)


@naiad.jit
def scale_body(x, out, n, factor, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out + offs, tl.load(x + offs) * factor)
    else:
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) * factor, mask=offs < n)


@pytest.mark.parametrize("n, even", [(100, False), (128, True)])
def test_heuristics_compute_constexprs_from_the_arguments(n, even):
    x, out = arrays(n)
    compiled = scale_one_block[(1,)](x, out, n, 2.0)
    np.testing.assert_array_equal(out, 2 * x)
    assert "end = 128" in compiled.asm["ttir"]                # BLOCK = next_power_of_2(n)
    assert ("arith.cmpi" in compiled.asm["ttir"]) is not even  # EVEN drops the mask


@naiad.autotune(configs=configs(32, 64), key=["n"], do_bench=lambda call, quantiles: (call(), [1.0] * 3)[1])
@naiad.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@naiad.jit
def scale_tuned_then_heuristic(x, out, n, factor, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    scale_body_at(x, out, n, factor, tl.program_id(0) * BLOCK, BLOCK, EVEN)


@naiad.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@naiad.autotune(configs=configs(32, 64), key=["n"], do_bench=lambda call, quantiles: (call(), [1.0] * 3)[1])
@naiad.jit
def scale_heuristic_then_tuned(x, out, n, factor, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    scale_body_at(x, out, n, factor, tl.program_id(0) * BLOCK, BLOCK, EVEN)


@naiad.heuristics({"factor": lambda args: float(args["n"])})
@naiad.autotune(configs=configs(32, 64), key=["n"], do_bench=lambda call, quantiles: (call(), [1.0] * 3)[1])
@naiad.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@naiad.jit
def heuristic_over_tuned(x, out, n, factor, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    scale_body_at(x, out, n, factor, tl.program_id(0) * BLOCK, BLOCK, EVEN)


@naiad.jit
def scale_body_at(x, out, n, factor, start, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out + offs, tl.load(x + offs) * factor)
    else:
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) * factor, mask=offs < n)


def test_autotune_over_heuristics_gives_heuristics_the_config():
    x, out = arrays(96)
    scale_tuned_then_heuristic[grid](x, out, 96, 3.0)
    np.testing.assert_array_equal(out, 3 * x)
    assert isinstance(scale_tuned_then_heuristic.fn, naiad.Heuristics)


def test_heuristics_over_autotune_need_arguments_the_launch_passes():
    x, out = arrays(96)
    with pytest.raises(AutotunerError, match=r"scale_heuristic_then_tuned: the heuristic for 'EVEN' reads "
                                             r"argument 'BLOCK', which this launch does not pass "
                                             r"\(it passes: x, out, n, factor\) -- fix: pass it"):
        scale_heuristic_then_tuned[grid](x, out, n=96, factor=3.0)


def test_heuristics_over_autotune_over_jit():
    x, out = arrays(96)
    heuristic_over_tuned[grid](x, out, 96)
    np.testing.assert_array_equal(out, 96 * x)
    assert heuristic_over_tuned.fn.best_config.kwargs["BLOCK"] in (32, 64)


# -- the on-disk cache ------------------------------------------------------------------------------
def test_disk_cache_is_reused_by_another_autotuner_and_survives_corruption(tmp_path, capsys):
    naiad.knobs.cache.dir = str(tmp_path)
    src, dst = arrays()

    def tuner(bench):
        return naiad.autotune(configs(16, 64), key=["n"], do_bench=bench, pre_hook=bench.saw,
                              cache_results=True)(copy_kernel)

    first = FakeBench({16: 2.0, 64: 1.0})
    tuner(first)[grid](src, dst, src.size)
    files = list((tmp_path / "autotune").glob("*.json"))
    assert len(files) == 1 and first.timed == [16, 64]

    second = FakeBench({16: 1.0, 64: 2.0})                 # would choose 16 if it timed
    kernel = tuner(second)
    naiad.knobs.autotuning.print = True
    kernel[grid](src, dst, src.size)
    del naiad.knobs.autotuning.print
    assert second.timed == [] and kernel.best_config.kwargs == {"BLOCK": 64}
    assert capsys.readouterr().out == (f"naiad: kernel copy_kernel uses the config cached in {files[0]}: "
                                       f"{kernel.best_config}\n")

    files[0].write_text("{ not json")
    third = FakeBench({16: 1.0, 64: 2.0})
    kernel = tuner(third)
    kernel[grid](src, dst, src.size)
    assert third.timed == [16, 64] and kernel.best_config.kwargs == {"BLOCK": 16}
    assert [p.name for p in (tmp_path / "autotune").iterdir()] == [files[0].name]   # no temporary left

    other_key = FakeBench({16: 1.0, 64: 2.0})
    tuner(other_key)[grid](src, dst, 999)
    assert other_key.timed == [16, 64] and len(list((tmp_path / "autotune").glob("*.json"))) == 2


def test_unwritable_disk_cache_is_a_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    naiad.knobs.cache.dir = str(blocker)                   # a file where a directory should be
    bench = FakeBench({16: 2.0, 64: 1.0})
    kernel = naiad.autotune(configs(16, 64), key=["n"], do_bench=bench, pre_hook=bench.saw,
                            cache_results=True)(Recorder(["src", "dst", "n", "BLOCK"]))
    with pytest.warns(naiad.errors.NaiadWarning, match="cannot write the autotuning cache file .* -- "
                                                       "fix: set NAIAD_CACHE_DIR to a writable directory"):
        kernel[(1,)](*arrays(), 1000)
    assert kernel.best_config.kwargs == {"BLOCK": 64}


def test_cache_dir_default(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("NAIAD_CACHE_DIR")             # conftest points it at a temporary dir
    assert naiad.knobs.cache.dir == os.path.join(str(tmp_path), ".naiad", "cache")
    monkeypatch.setenv("NAIAD_CACHE_DIR", "/somewhere")
    assert naiad.knobs.cache.dir == "/somewhere"


# -- printing -------------------------------------------------------------------------------------------
def test_print_autotuning_shows_the_choice(monkeypatch, capsys):
    """stderr here is no terminal: no progress line (tests/test_autotune_progress.py has it)."""
    monkeypatch.setenv("NAIAD_PRINT_AUTOTUNING", "1")
    bench = FakeBench({16: 2.0, 64: 1.0})
    kernel = naiad.autotune(configs(16, 64), key=["n"], do_bench=bench, pre_hook=bench.saw)(
        Recorder(["src", "dst", "n", "BLOCK"]))
    kernel[(1,)](*arrays(), 1000)
    out, err = capsys.readouterr()
    assert "naiad: autotuned kernel recorded for key (1000, 'float32', 'float32') in" in out
    assert f"(2 configs); best config: {kernel.configs[1]}" in out
    assert err == ""
    kernel[(1,)](*arrays(), 1000)
    assert capsys.readouterr() == ("", "")                   # a cached key prints nothing


def test_quiet_by_default(capsys):
    bench = FakeBench({16: 2.0, 64: 1.0})
    naiad.autotune(configs(16, 64), key=["n"], do_bench=bench, pre_hook=bench.saw)(
        Recorder(["src", "dst", "n", "BLOCK"]))[(1,)](*arrays(), 1000)
    assert capsys.readouterr() == ("", "")


# -- mistakes -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options, message", [
    (dict(key=["m"]), r"autotune\(copy_kernel\): key names 'm', which is not a parameter of the kernel "
                      r"\(its parameters: src, dst, n, BLOCK\) -- fix: list parameter names in key="),
    (dict(key="n"), r"key must be a list of parameter names, not the string 'n' -- fix: key=\['n'\]"),
    (dict(key=["n"], reset_to_zero=["out", "dest"]),
     r"reset_to_zero names 'out', 'dest', which are not parameters"),
    (dict(key=["n"], prune_configs_by={"top": 2}),
     r"prune_configs_by has unknown entries 'top' -- fix: use only 'early_config_prune', 'perf_model'"),
    (dict(key=["n"], configs=[{"BLOCK": 16}]), r"configs must be Config objects, not dict -- fix: configs="),
])
def test_autotune_arguments_are_checked(options, message):
    options.setdefault("configs", configs(16))
    with pytest.raises(AutotunerError, match=message):
        naiad.autotune(**options)(copy_kernel)


def test_config_needs_a_dict():
    with pytest.raises(AutotunerError, match=r"Config takes a dict of meta-parameters first, not int -- fix: "
                                             r"Config\(\{'BLOCK': 128\}, num_warps=4\)"):
        naiad.Config(128)


@pytest.mark.parametrize("decorator", [naiad.autotune(configs(16), key=[]), naiad.heuristics({})])
def test_decorating_a_plain_function_is_a_clear_error(decorator):
    with pytest.raises(AutotunerError, match=r"must decorate a kernel \(@naiad.jit.*\), not function "
                                             r"recorded -- fix: put @naiad.jit below"):
        decorator(recorded)


def test_heuristics_need_a_dict_of_functions():
    with pytest.raises(AutotunerError, match=r"heuristics\(copy_kernel\) takes a dict of parameter name -> "
                                             r"function"):
        naiad.heuristics({"BLOCK": 16})(copy_kernel)


def test_passing_a_tuned_parameter_is_a_clear_error():
    kernel = naiad.autotune(configs(16, 64), key=["n"])(copy_kernel)
    with pytest.raises(AutotunerError, match=r"copy_kernel: 'BLOCK' passed to the launch but also set by "
                                             r"the autotuner's configs -- fix: do not pass it"):
        kernel[grid](*arrays(), 1000, BLOCK=32)


# -- names ----------------------------------------------------------------------------------------------
def test_triton_names():
    naiad.compat.enable()
    try:
        import triton
        from triton.runtime.autotuner import Autotuner, Heuristics

        assert triton.autotune is naiad.autotune and triton.heuristics is naiad.heuristics
        assert triton.Config is naiad.Config
        assert Autotuner is naiad.Autotuner and Heuristics is naiad.Heuristics
    finally:
        naiad.compat.disable()
