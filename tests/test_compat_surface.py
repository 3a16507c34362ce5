"""The Triton helper surface beside the language: ``triton.testing``, ``triton._internal_testing``,
``reinterpret``/``TensorWrapper``, ``TensorDescriptor`` and the driver conveniences."""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest
import torch

import naiad
import naiad.compat
import naiad.language as tl
from naiad import testing
from naiad.backends.driver import DriverBase
from naiad.backends.selection import active_driver
from naiad.compat import internal_testing as it
from naiad.runtime.tensor_descriptor import TensorDescriptor
from naiad.runtime.tensor_wrapper import TensorWrapper, reinterpret

shipped = pytest.mark.shipped_backends


@naiad.jit
def add_one_kernel(x_ptr, out_ptr, half_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + 1, mask=mask)
    tl.store(half_ptr + offs, x >> 1, mask=mask)      # a logical shift only if x is unsigned


@naiad.jit
def fp8_roundtrip_kernel(x_ptr, f32_ptr, back_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    f = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(f32_ptr + offs, f, mask=mask)
    tl.store(back_ptr + offs, f.to(back_ptr.dtype.element_ty), mask=mask)


@pytest.fixture
def compat():
    """Enable compat for one test; leave no `triton` module behind."""
    spec = it.__spec__         # importing triton._internal_testing replaces it (bug, see below)
    naiad.compat.enable()
    yield
    naiad.compat.disable()
    it.__spec__ = spec
    for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
        del sys.modules[name]


def test_new_aliases_resolve(compat):
    import triton
    import triton.knobs
    import triton.testing
    from triton._internal_testing import numpy_random
    from triton.tools.tensor_descriptor import TensorDescriptor as TritonTD

    assert triton.testing is testing and triton.knobs is naiad.knobs
    assert TritonTD is TensorDescriptor and numpy_random is it.numpy_random
    assert triton.reinterpret is reinterpret and triton.TensorWrapper is TensorWrapper
    naiad.compat.disable()
    assert "triton._internal_testing" not in sys.modules


def test_lazy_alias_leaves_the_naiad_module_spec_alone(compat):
    import triton._internal_testing  # noqa: F401

    assert it.__spec__.name == "naiad.compat.internal_testing"


@shipped
@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_unsigned_data_through_to_triton(compat, dtype):
    import triton
    from triton._internal_testing import to_numpy, to_triton

    top = int(np.iinfo(dtype).max)
    x = np.array([0, 1, 2**31 - 1, 2**31, 3_000_000_000, top - 1, top, min(2**32 + 7, top)], dtype)
    xt = to_triton(x, device="cpu")
    assert isinstance(xt, triton.TensorWrapper) and xt.dtype is getattr(tl, dtype)
    assert xt.base.dtype == getattr(torch, dtype[1:])
    out, half = to_triton(np.zeros_like(x), "cpu"), to_triton(np.zeros_like(x), "cpu")
    add_one_kernel[(triton.cdiv(x.size, 4),)](xt, out, half, x.size, BLOCK=4)
    assert to_numpy(out).dtype == np.dtype(dtype)
    np.testing.assert_array_equal(to_numpy(out), x + np.array(1, dtype))    # wraps at the top
    np.testing.assert_array_equal(to_numpy(half), x >> np.array(1, dtype))


@shipped
@pytest.mark.parametrize("name, torch_dtype", [("float8e4nv", torch.float8_e4m3fn),
                                               ("float8e5", torch.float8_e5m2)])
def test_fp8_reinterpret_round_trip(name, torch_dtype):
    bits = it.numpy_random(64, "float8_e4m3fn")
    x = it.to_triton(bits, "cpu", dst_type=name)
    assert isinstance(x, TensorWrapper) and x.dtype is getattr(tl, name)
    f32 = torch.full((64,), -1.0)
    back = reinterpret(torch.zeros(64, dtype=torch.int8), getattr(tl, name))
    fp8_roundtrip_kernel[(1,)](x, f32, back, 64, BLOCK=64)
    assert torch.equal(f32, torch.from_numpy(bits).view(torch_dtype).float())
    assert torch.equal(back.base, torch.from_numpy(bits))
    assert reinterpret(back, torch.int8) is back.base


def test_reinterpret_rules():
    t = torch.arange(4, dtype=torch.int32)
    w = reinterpret(t, tl.uint32)
    assert w.base is t and w.data_ptr() == t.data_ptr() and w.shape == t.shape
    assert w.stride() == (1,) and w.element_size() == 4 and w.numel() == 4 and w.dim() == 1
    assert reinterpret(w, tl.float32).base is t and reinterpret(w, torch.int32) is t
    assert "TensorWrapper[uint32]" in str(w)
    with pytest.raises(TypeError, match="reinterpret needs a tensor with data_ptr"):
        reinterpret(np.zeros(3), tl.uint32)


@pytest.mark.parametrize("dtype", it.dtypes_with_bfloat16 + it.torch_float8_dtypes + ["bool"])
def test_numpy_random_properties(dtype):
    x = it.numpy_random((4, 500), dtype)
    assert x.shape == (4, 500)
    np.testing.assert_array_equal(x, it.numpy_random((4, 500), dtype))          # seed 17
    assert not np.array_equal(x, it.numpy_random((4, 500), dtype, rs=np.random.RandomState(3)))
    if dtype in it.integral_dtypes:
        assert x.dtype == np.dtype(dtype) and not (x == 0).any()
    elif dtype in it.float_dtypes:
        assert x.dtype == np.dtype(dtype)
        assert abs(float(x.mean())) < 0.1 and 0.9 < float(x.std()) < 1.1
    elif dtype == "bfloat16":
        assert x.dtype == np.float32 and (x != 0).all() and not (x.view(np.uint32) & 0xFFFF).any()
        assert torch.equal(torch.from_numpy(x).bfloat16().float(), torch.from_numpy(x))
    elif "float8" in dtype:
        assert x.dtype == np.int8 and x.min() >= 20 and x.max() < 40
    else:
        assert x.dtype == np.bool_ and x.any() and not x.all()


def test_numpy_random_replaces_zero_and_clamps():
    x = it.numpy_random(3000, "int8", low=-2, high=2)
    assert set(x.tolist()) == {-2, -1, 1} and abs((x == 1).mean() - 0.5) < 0.05   # 0 became 1
    y = it.numpy_random(3000, "uint8", low=-50, high=1000)
    assert y.dtype == np.uint8 and y.min() == 1 and y.max() > 250
    with pytest.raises(RuntimeError, match="unknown dtype 'complex64'"):
        it.numpy_random(3, "complex64")


def test_to_triton_and_to_numpy():
    x, bf = it.numpy_random(50, "float32"), it.numpy_random(50, "bfloat16")
    t, b = it.to_triton(x, "cpu"), it.to_triton(bf, "cpu", dst_type="bfloat16")
    assert (t.dtype, b.dtype) == (torch.float32, torch.bfloat16)
    np.testing.assert_array_equal(it.to_numpy(t), x)
    np.testing.assert_array_equal(it.to_numpy(b), bf)            # bf16 values: exact
    u = np.array([0, 1, 40000, 65535], np.uint16)
    w = it.to_triton(u, "cpu")
    assert w.dtype is tl.uint16 and w.base.tolist() == [0, 1, -25536, -1]
    np.testing.assert_array_equal(it.to_numpy(w), u)
    assert it.unwrap_tensor(w) is w.base and it.unwrap_tensor(t) is t
    with pytest.raises(ValueError, match="not a tensor"):
        it.to_numpy([1, 2])


def test_dtype_names():
    pairs = {"bool": tl.int1, "float8e4nv": tl.float8e4nv, "float8_e5m2": tl.float8e5,
             "uint32": tl.uint32, "bfloat16": tl.bfloat16, "float64": tl.float64, "int8": tl.int8}
    assert {name: it.str_to_triton_dtype(name) for name in pairs} == pairs
    names = [it.torch_dtype_name(d) for d in (torch.float8_e4m3fn, torch.int16, tl.uint64)]
    assert names == ["float8_e4m3fn", "int16", "uint64"]
    with pytest.raises(TypeError, match="not a language or torch dtype: str"):
        it.torch_dtype_name("int16")


@shipped
def test_platform_predicates_on_the_cpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert it.get_current_target().backend == "cpu" and not it.is_interpreter()
    predicates = [it.is_cuda, it.is_hip, it.is_xpu, it.is_hopper, it.is_ampere_or_newer,
                  it.is_blackwell, it.is_blackwell_ultra, it.is_hip_cdna, it.supports_tma]
    assert not any(p() for p in predicates) and it.get_hip_lds_size() == 65536
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert it.is_interpreter() and it.get_current_target() is None and it.supports_tma()
    monkeypatch.setenv("TRITON_INTERPRET", "true")
    assert not it.is_interpreter()


def test_run_in_process_returns_the_exception_and_restores_the_environment(monkeypatch):
    monkeypatch.delenv("NAIAD_PROBE", raising=False)
    seen = []
    env = {"NAIAD_PROBE": "x"}
    probe = it.run_in_process(lambda v: seen.append(os.environ.get(v)), ("NAIAD_PROBE",), env=env)
    assert probe.exc is None
    result = it.run_in_process(lambda: {}["boom"])
    assert isinstance(result.exc, KeyError) and result.exc.args == ("boom",)
    assert seen == ["x"] and "NAIAD_PROBE" not in os.environ


def test_assert_close():
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    testing.assert_close(x, x + 0.009)                                  # default atol 1e-2
    testing.assert_close(torch.from_numpy(x).bfloat16(), x, atol=1e-2, rtol=1e-2)
    testing.assert_close(np.array([np.nan, 1.0]), torch.tensor([np.nan, 1.0]))
    testing.assert_close(x * 1000, x * 1000 * 1.001, atol=0, rtol=2e-3)
    testing.assert_close(np.array([True, False]), torch.tensor([True, False]))
    y = np.zeros(10, np.float32)
    y[3] = 0.5
    with pytest.raises(AssertionError, match=r"(?s)bad output.*Mismatched elements: 1 / 10"):
        testing.assert_close(np.zeros(10), y, err_msg="bad output")
    with pytest.raises(AssertionError):
        testing.assert_close(x, x + 0.02)
    with pytest.raises(AssertionError):
        testing.assert_close(np.array([True, False]), np.array([True, True]), atol=10)


def test_assert_close_on_unsigned_wrapper():
    x = np.array([1, 3_000_000_000], np.uint32)
    testing.assert_close(it.to_triton(x, "cpu"), x, atol=0)


def test_assert_close_callable_tolerances():
    testing.assert_close(torch.ones(3), torch.ones(3) + 0.05, atol=lambda dtype: 0.1)


@shipped
def test_do_bench_statistics_over_fixed_samples(monkeypatch):
    samples, calls = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0], []

    def fake(call, *, quantiles, warmup, rep):
        calls.append((quantiles, warmup, rep))
        call()
        return list(samples)

    monkeypatch.setattr(active_driver(), "get_benchmarker", lambda: fake)
    param = type("Param", (), {"grad": "stale"})()
    bench = testing.do_bench
    assert bench(lambda: None, warmup=7, rep=9, grad_to_none=[param]) == pytest.approx(25 / 6)
    assert param.grad is None and calls[0] == (None, 7, 9)
    modes = {m: bench(lambda: None, return_mode=m) for m in ("median", "min", "max", "all")}
    assert modes == {"median": 3.5, "min": 1.0, "max": 10.0, "all": sorted(samples)}
    qs = [0.0, 0.2, 0.5, 0.9, 1.0]
    assert bench(lambda: None, quantiles=qs) == pytest.approx(np.quantile(samples, qs).tolist())
    assert bench(lambda: None, quantiles=[0.8]) == pytest.approx(float(np.quantile(samples, 0.8)))
    with pytest.raises(ValueError, match="one of min, max, mean, median, all, not 'avg'"):
        bench(lambda: None, return_mode="avg")


@shipped
def test_do_bench_and_the_cpu_benchmarker_time_real_calls():
    from naiad.backends.cpu.driver import benchmark

    count = []

    def work():
        count.append(time.sleep(0.0002))

    for mode in ("mean", "median", "min", "max"):
        value = testing.do_bench(work, warmup=1, rep=3, return_mode=mode)
        assert isinstance(value, float) and 0.19 <= value < 1000, (mode, value)
    every = testing.do_bench(work, warmup=1, rep=3, return_mode="all")
    assert len(every) >= 5 and every == sorted(every) and all(isinstance(t, float) for t in every)
    low, mid, high = testing.do_bench(work, warmup=1, rep=3, quantiles=[0.2, 0.5, 0.8])
    assert 0.19 <= low <= mid <= high and len(count) >= 6 * 7
    count.clear()
    every = benchmark(lambda: count.append(1), quantiles=None, warmup=2, rep=1)
    assert len(every) >= 5 and every == sorted(every) and min(every) >= 0
    assert len(count) == 2 + 1 + len(every)                     # warm-up, estimate, samples
    low, mid, high = benchmark(work, quantiles=(0.2, 0.5, 0.8), rep=2)
    assert 0.19 <= low <= mid <= high


def _mark(fn, x_names=("n",), x_vals=(1,)):
    return testing.perf_report(testing.Benchmark(list(x_names), list(x_vals), "p", [1], ["p1"],
                                                 "plot", {}))(fn)


def test_perf_report_writes_the_table(tmp_path, capsys):
    seen = []

    @testing.perf_report([testing.Benchmark(
        x_names=["size"], x_vals=[16, 64], line_arg="provider", line_vals=["a", "b"],
        line_names=["A", "B"], plot_name="sweep", args={"scale": 2})])
    def bench(size, provider, scale):
        seen.append((size, provider, scale))
        return float(size * scale) if provider == "a" else (size / 2, size / 4, size / 1)

    assert bench.run(print_data=True, save_path=str(tmp_path / "out")) is None
    assert (tmp_path / "out" / "sweep.csv").read_text().splitlines() == [
        "size,A,A-min,A-max,B,B-min,B-max",
        "16,32.0,32.0,32.0,8.0,4.0,16.0",
        "64,128.0,128.0,128.0,32.0,16.0,64.0"]
    assert seen == [(16, "a", 2), (16, "b", 2), (64, "a", 2), (64, "b", 2)]
    printed = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert printed == [["sweep:"], ["size", "A", "B"], ["16", "32", "8"], ["64", "128", "32"]]
    mark = _mark(lambda M, N, p: float(M * N + p), ["M", "N"], [8, (2, 3)])
    header, rows = mark.run(return_df=True)
    assert header == ["M", "N", "p1", "p1-min", "p1-max"]
    assert rows == [[8, 8, 65.0, 65.0, 65.0], [2, 3, 7.0, 7.0, 7.0]]


def test_perf_report_forwards_run_kwargs():
    header, rows = _mark(lambda n, p, extra: float(n + extra)).run(return_df=True, extra=10)
    assert rows == [[1, 11.0, 11.0, 11.0]]


@shipped
def test_driver_conveniences(compat):
    import triton

    driver = triton.runtime.driver.active
    props = driver.utils.get_device_properties(0)
    assert {"max_shared_mem", "multiprocessor_count", "max_num_regs", "warpSize"} <= props.keys()
    assert props == driver.get_device_properties(0)
    from naiad.backends.cpu.driver import l2_cache_bytes

    # The occupancy model of docs/CPU.md: a worker thread per "SM", the L2 as "shared memory".
    assert props["multiprocessor_count"] == driver.threads() and props["max_shared_mem"] == l2_cache_bytes()
    assert props["warpSize"] == 1 and props["max_num_regs"] >= 32 * 16
    assert driver.get_active_torch_device() == torch.device("cpu")
    interface = driver.get_device_interface()
    assert interface.current_device() == 0 and interface.device_count() == 1
    start, end = interface.Event(enable_timing=True), interface.Event(enable_timing=True)
    start.record()
    time.sleep(0.003)
    end.record()
    end.synchronize()
    assert 2.9 <= start.elapsed_time(end) < 1000 and end.elapsed_time(start) < 0
    cache = driver.get_empty_cache_for_benchmark()
    assert cache.nbytes >= 64 << 20
    cache[:4096], cache[-1] = 7, 7
    driver.clear_cache(cache)
    assert not cache[:4096].any() and cache[-1] == 0
    buffer, tensor = bytearray(b"\x01\x02\x03"), torch.ones(5)
    DriverBase.clear_cache(driver, buffer)              # the defaults for other backends
    DriverBase.clear_cache(driver, tensor)
    assert buffer == bytearray(3) and not tensor.any()


def test_tensor_descriptor_from_tensor():
    t = torch.zeros(8, 32)
    d = TensorDescriptor.from_tensor(t, [4, 16], padding="nan")
    assert (d.base, d.shape, d.strides, d.block_shape) == (t, [8, 32], [32, 1], [4, 16])
    assert d.padding == "nan" and d.round_f32_to_tf32 is False
    with pytest.raises(ValueError, match="contiguous"):
        TensorDescriptor.from_tensor(t.t(), [4, 4])


@pytest.mark.parametrize("shape, strides, block, padding, message", [
    ([8, 8], [8], [4, 4], "zero", r"same rank \(1 to 5\): \[8, 8\], \[8\], \[4, 4\]"),
    ([], [], [], "zero", "need the same rank"),
    ([2] * 6, [1] * 6, [2] * 6, "zero", "need the same rank"),
    ([8, 8], [8, 1], [4, 3], "zero", r"block_shape entries must be powers of 2: \[4, 3\]"),
    ([8, 8], [1, 8], [4, 4], "zero", r"last dimension must be contiguous \(stride 1\)"),
    ([8, 0], [8, 1], [4, 4], "zero", r"shape entries must be positive: \[8, 0\]"),
    ([8, 8], [8, 1], [4, 4], "inf", "padding must be 'zero' or 'nan', not 'inf'"),
])
def test_tensor_descriptor_errors(shape, strides, block, padding, message):
    with pytest.raises(ValueError, match=message):
        TensorDescriptor(torch.zeros(64), shape, strides, block, padding)
