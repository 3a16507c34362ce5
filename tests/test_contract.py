"""The backend contract's value types and base classes, and naiad's small integer helpers."""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

import naiad
from naiad.backends.compiler import (BYTES, TEXT, BackendOptions, BaseBackend, GPUTarget, Language,
                                     StageCodec)
from naiad.backends.driver import DriverBase


# --------------------------------------------------------------------------------------------
# GPUTarget
# --------------------------------------------------------------------------------------------

def test_gpu_target_is_frozen():
    target = GPUTarget("cuda", 90, 32)
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.arch = 80  # type: ignore[misc]


def test_gpu_target_is_hashable_by_value():
    a = GPUTarget("cuda", 90, 32)
    b = GPUTarget("cuda", 90, 32)
    assert a == b and hash(a) == hash(b)
    assert len({a, b, GPUTarget("cuda", 80, 32), GPUTarget("hip", 90, 32)}) == 3
    assert {a: "kernel"}[b] == "kernel"
    assert GPUTarget("cpu", "x86_64-avx2", 1) != GPUTarget("cpu", "x86_64-avx512", 1)


@pytest.mark.parametrize("target", [GPUTarget("cuda", 90, 32), GPUTarget("cpu", "x86_64-avx2", 1),
                                    GPUTarget("hip", "gfx942", 64)])
def test_gpu_target_round_trips_through_json(target):
    text = json.dumps(target.to_json())
    back = GPUTarget.from_json(json.loads(text))
    assert back == target
    assert type(back.arch) is type(target.arch)
    assert hash(back) == hash(target)


# --------------------------------------------------------------------------------------------
# BackendOptions
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Options(BackendOptions):
    num_warps: int = 4
    num_stages: int = 3
    arch: str = "sm90"
    debug: bool = False
    extern_libs: tuple = ()


def test_options_hash_is_stable():
    assert Options().hash() == Options().hash()
    options = Options(num_warps=8, extern_libs=(("libdevice", "/x.bc"),))
    assert options.hash() == options.hash()
    assert options.hash() == Options(num_warps=8, extern_libs=(("libdevice", "/x.bc"),)).hash()


@pytest.mark.parametrize("change", [{"num_warps": 8}, {"num_stages": 4}, {"arch": "sm80"},
                                    {"debug": True}, {"extern_libs": (("libdevice", "/x.bc"),)}])
def test_options_hash_changes_when_a_field_changes(change):
    assert Options(**change).hash() != Options().hash()


def test_options_hash_is_a_string():
    assert isinstance(Options().hash(), str) and Options().hash()


# --------------------------------------------------------------------------------------------
# Stage codecs
# --------------------------------------------------------------------------------------------

@given(st.text())
def test_text_codec_round_trips(text):
    data = TEXT.encode(text)
    assert isinstance(data, bytes)
    assert TEXT.decode(data) == text


@given(st.binary())
def test_bytes_codec_round_trips(data):
    encoded = BYTES.encode(data)
    assert isinstance(encoded, bytes)
    assert BYTES.decode(encoded) == data
    assert BYTES.encode(bytearray(data)) == data


def test_text_codec_is_utf8():
    assert TEXT.encode("µ-op ✓") == "µ-op ✓".encode("utf-8")
    assert TEXT.decode("tt.func @k() ≥".encode("utf-8")) == "tt.func @k() ≥"


def test_codecs_are_text_and_binary():
    assert TEXT == StageCodec(binary=False) and not TEXT.binary
    assert BYTES == StageCodec(binary=True) and BYTES.binary


# --------------------------------------------------------------------------------------------
# BaseBackend
# --------------------------------------------------------------------------------------------

class ToyBackend(BaseBackend):
    api_version = 1
    binary_ext = "cubin"

    @staticmethod
    def supports_target(target):
        return target.backend == "toy"

    def hash(self):
        return f"toy-{self.target.arch}"

    def parse_options(self, options):
        return Options(**options)

    def add_stages(self, stages, options, language):
        stages["ttir"] = lambda ir, md: ir
        stages["cubin"] = lambda ir, md: b"\x7fELF"

    def load_dialects(self, context):
        pass

    def get_module_map(self):
        return {}

    def get_codegen_implementation(self, options):
        return {}

    def pack_metadata(self, metadata):
        return ()

    def get_target_name(self, options):
        return f"toy:{self.target.arch}"


def test_stage_codec_is_bytes_for_binary_ext_and_text_otherwise():
    backend = ToyBackend(GPUTarget("toy", 1, 32))
    assert backend.stage_codec("cubin") is BYTES
    for stage in ("ttir", "ttgir", "llir", "ptx", "asm"):
        assert backend.stage_codec(stage) is TEXT


def test_option_names_are_the_fields_of_the_options():
    assert ToyBackend(GPUTarget("toy", 1, 32)).option_names() == \
        frozenset(f.name for f in dataclasses.fields(Options))


def test_backend_keeps_its_target():
    target = GPUTarget("toy", 1, 32)
    assert ToyBackend(target).target is target


def test_backend_rejects_a_target_it_does_not_support():
    target = GPUTarget("cuda", 90, 32)
    with pytest.raises(ValueError) as info:
        ToyBackend(target)
    message = str(info.value)
    assert "ToyBackend does not compile for" in message
    assert str(target) in message


def test_backend_leaving_a_method_abstract_cannot_be_instantiated():
    class Partial(BaseBackend):
        api_version = 1
        binary_ext = "bin"

        @staticmethod
        def supports_target(target):
            return True

    with pytest.raises(TypeError, match="get_target_name"):
        Partial(GPUTarget("toy", 1, 1))


def test_language_members():
    assert {Language.TRITON, Language.GLUON} == set(Language)


# --------------------------------------------------------------------------------------------
# DriverBase
# --------------------------------------------------------------------------------------------

def test_driver_leaving_methods_abstract_cannot_be_instantiated():
    class Partial(DriverBase):
        device_types = ("cpu",)

        @classmethod
        def is_active(cls):
            return True

        def get_current_target(self):
            return GPUTarget("cpu", "x", 1)

    with pytest.raises(TypeError) as info:
        Partial()
    for missing in ("load_binary", "make_launcher", "get_current_stream"):
        assert missing in str(info.value)


def test_driver_defaults():
    class Complete(DriverBase):
        device_types = ("cpu",)

        @classmethod
        def is_active(cls):
            return False

        def get_current_target(self): return GPUTarget("cpu", "x", 1)
        def get_current_device(self): return 0
        def set_current_device(self, device): pass
        def get_current_stream(self, device=None): return 0
        def map_python_to_cpp_type(self, ty): return "int32_t"
        def get_benchmarker(self): return lambda fn, *, quantiles, **kw: [0.0]
        def load_binary(self, name, binary, metadata, device): return (None, None, 0, 0, 1)
        def unload_module(self, module): pass
        def make_launcher(self, signature, metadata): return lambda *a: None
        def get_device_properties(self, device): return {"max_shared_mem": 0, "multiprocessor_count": 1}

    driver = Complete()
    assert driver.get_active_torch_device() is None
    assert Complete.why_inactive()
    assert Complete.max_grid == (2**31 - 1, 65535, 65535) and Complete.max_programs is None


# --------------------------------------------------------------------------------------------
# naiad.cdiv / naiad.next_power_of_2
# --------------------------------------------------------------------------------------------

def _cdiv_reference(x: int, y: int) -> int:
    """The smallest k with k * y >= x, found by search (small x) or exact rational ceiling."""
    if abs(x) > 400:
        return math.ceil(Fraction(x, y))
    k = -abs(x) - 1
    while k * y < x:
        k += 1
    return k


def _next_power_of_2_reference(n: int) -> int:
    """The smallest power of two >= n, found by search."""
    p = 1
    while p < n:
        p *= 2
    return p


@pytest.mark.parametrize("y", list(range(1, 18)) + [31, 32, 33, 64, 128, 1000])
def test_cdiv_matches_brute_force(y):
    for x in list(range(-40, 300)) + [1023, 1024, 1025, 4095, 4096, 4097]:
        assert naiad.cdiv(x, y) == _cdiv_reference(x, y), (x, y)


def test_cdiv_of_large_values_is_exact():
    for big in (2**70 + 3, 2**64 - 1, 10**30 + 7):
        for y in (3, 2**35, 10**9 + 7):
            q = naiad.cdiv(big, y)
            assert q * y >= big > (q - 1) * y


def _powers_and_neighbours():
    values = set(range(-4, 1100))
    for k in range(0, 66):
        values |= {2**k - 1, 2**k, 2**k + 1}
    return sorted(values)


def test_next_power_of_2_matches_brute_force():
    for n in _powers_and_neighbours():
        assert naiad.next_power_of_2(n) == _next_power_of_2_reference(n), n


@pytest.mark.parametrize("n, expected", [(0, 1), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (1000, 1024)])
def test_next_power_of_2_examples(n, expected):
    assert naiad.next_power_of_2(n) == expected


def test_benchmark_quantiles_interpolate_as_numpy_does():
    """Every benchmarker and naiad.testing.do_bench share one rule (Triton's do_bench uses
    torch.quantile): linear interpolation between the nearest samples."""
    import numpy as np

    from naiad.backends.driver import sample_quantiles

    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 10, 101):
        times = sorted(rng.random(n).tolist())
        qs = [0.0, 0.2, 0.5, 0.8, 1.0]
        np.testing.assert_allclose(sample_quantiles(times, qs), np.quantile(times, qs))
