"""What a launch checks before it runs (issue 14): numpy scalars are scalars of their dtype,
data in the other byte order and read-only outputs are refused, grids are 1 to 3 ints within
the driver's limits, and a keyword that is neither a parameter nor a backend option is an error.
Each case was a silent wrong result, a crash or a traceback before."""

from __future__ import annotations

import mmap
import re

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends import selection
from naiad.backends.cpu.driver import CPUDriver
from naiad.errors import LaunchError
from naiad.runtime.jit import specialize

pytestmark = pytest.mark.shipped_backends


@naiad.jit
def store_value(y, value):
    tl.store(y, value)


@naiad.jit
def scaled(x, out, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * scale, mask=mask)


@naiad.jit
def count_programs(counter):
    tl.atomic_add(counter, 1)


@naiad.jit
def gather(index, x, out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + tl.load(index + offs)))


@naiad.jit(noinline=True)
def store_through(pointer, value):
    tl.store(pointer, value)


@naiad.jit
def writes_in_a_helper(x, out):
    store_through(out, tl.load(x))


@naiad.jit
def tuple_of_scalars(out, pair):
    tl.store(out, pair[0] + pair[1])


@naiad.jit
def with_default(x, out, n, SCALE: tl.constexpr = 1.0, BLOCK: tl.constexpr = 16):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * SCALE, mask=mask)


# -- numpy scalars -------------------------------------------------------------------------------

NUMPY_SCALARS = [np.bool_(True), np.int8(-3), np.int16(-300), np.int32(-70000), np.int64(2**40 + 7),
                 np.uint8(250), np.uint16(65000), np.uint32(4_000_000_000), np.uint64(2**63 + 5),
                 np.float16(1.5), np.float32(2.25), np.float64(0.125)]


@pytest.mark.parametrize("value", NUMPY_SCALARS, ids=lambda v: type(v).__name__)
def test_a_numpy_scalar_is_passed_as_its_value(value):
    for _ in range(2):                        # the full path, then the warm one
        y = np.zeros(1, value.dtype)
        store_value[(1,)](y, value)
        assert y[0] == value


@pytest.mark.parametrize("value, expected", [
    (np.int64(7), ("i64", "")), (np.int64(32), ("i64", "D")), (np.int32(-5), ("i32", "")),
    (np.uint64(2**64 - 1), ("u64", "")), (np.uint8(16), ("u8", "D")), (np.int16(1), ("i16", "")),
    (np.float32(2.5), ("fp32", None)), (np.float16(1.0), ("fp16", None)),
    (np.bool_(False), ("u1", None)),
    (np.float64(0.1), ("fp32", None)),        # a Python float: passed as Triton passes floats
])
def test_a_numpy_scalar_specializes_by_its_dtype(value, expected):
    assert specialize(value) == expected


def test_numpy_scalars_of_other_dtypes_are_refused_by_name():
    y = np.zeros(1, np.float32)
    for value in (np.complex64(1), np.str_("a"), np.datetime64("2026-01-01")):
        with pytest.raises(LaunchError, match=rf"store_value: argument 'value': numpy scalars of "
                                              rf"dtype {re.escape(value.dtype.name)} cannot be passed"):
            store_value[(1,)](y, value)


def test_numpy_scalars_in_arithmetic_and_as_constexprs():
    rng = np.random.default_rng(3)
    x = rng.random(100, dtype=np.float32)
    for scale, n in [(np.float32(-1.5), np.int64(100)), (np.int8(3), np.uint16(77)),
                     (np.float16(0.5), np.int32(1)), (2.0, np.uint64(100))]:
        out = np.zeros_like(x)
        scaled[(naiad.cdiv(100, 32),)](x, out, n, scale, BLOCK=np.int64(32))
        expected = np.where(np.arange(100) < int(n), x * np.float32(scale), 0)
        np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_numpy_scalars_in_a_tuple_and_in_debug_mode():
    out = np.zeros(1, np.float32)
    tuple_of_scalars[(1,)](out, (np.float32(1.5), np.int16(2)))
    assert out[0] == 3.5
    debug_out = np.zeros(1, np.int64)
    with naiad.knobs.runtime.scope():
        naiad.knobs.runtime.debug = True
        store_value[(1,)](debug_out, np.int64(-9))
    assert debug_out[0] == -9


def test_a_numpy_scalar_is_not_an_array_for_backend_selection():
    assert selection.device_type_of(np.float64(2.0)) is None
    assert selection.device_type_of(np.zeros(2)) == "cpu"


# -- byte order ------------------------------------------------------------------------------------

class InterfaceOnly:
    def __init__(self, array, typestr=None):
        self._array = array
        self.__array_interface__ = dict(array.__array_interface__)
        if typestr is not None:
            self.__array_interface__["typestr"] = typestr


def test_data_in_the_other_byte_order_is_refused():
    foreign = np.arange(64, dtype=np.dtype(np.int32).newbyteorder())
    out = np.zeros(64, np.float32)
    for x in (foreign, InterfaceOnly(foreign)):
        with pytest.raises(LaunchError, match=r"scaled: argument 'x': the array's data is in "
                                              r"non-native byte order.*newbyteorder\('='\)"):
            scaled[(1,)](x, out, 64, 1.0, BLOCK=64)
    assert not out.any()
    scaled[(1,)](foreign.astype(foreign.dtype.newbyteorder("=")), out, 64, 1.0, BLOCK=64)
    np.testing.assert_array_equal(out, np.arange(64))


# -- read-only arrays ---------------------------------------------------------------------------

def _read_only(n=64):
    array = np.zeros(n, np.float32)
    array.flags.writeable = False
    return array


def test_a_read_only_output_is_refused_and_left_alone():
    x = np.ones(64, np.float32)
    frozen = bytes(256)
    for out in (_read_only(), np.frombuffer(frozen, np.float32),
                InterfaceOnly(np.frombuffer(frozen, np.float32))):
        with pytest.raises(LaunchError, match=r"scaled: argument 'out' is a read-only array, and "
                                              r"the kernel stores to it.*fix: pass a writable"):
            scaled[(1,)](x, out, 64, 2.0, BLOCK=64)
    assert frozen == bytes(256)


def test_a_read_only_mmap_output_is_refused_without_crashing(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(256))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        out = np.frombuffer(mapped, np.float32)
        with pytest.raises(LaunchError, match="argument 'out' is a read-only array"):
            scaled[(1,)](np.ones(64, np.float32), out, 64, 2.0, BLOCK=64)
        del out
    assert path.read_bytes() == bytes(256)


def test_read_only_inputs_are_allowed():
    out = np.zeros(64, np.float32)
    with_default[(1,)](np.frombuffer(np.arange(64, dtype=np.float32).tobytes(), np.float32), out,
                       64, SCALE=2.0, BLOCK=64)
    np.testing.assert_array_equal(out, 2 * np.arange(64))
    index = _read_only_copy(np.arange(16, dtype=np.int32)[::-1].copy())
    gathered = np.zeros(16, np.float32)
    gather[(1,)](index, _read_only_copy(np.arange(16, dtype=np.float32) * 10), gathered, BLOCK=16)
    np.testing.assert_array_equal(gathered, np.arange(16)[::-1] * 10)


def _read_only_copy(array):
    array = array.copy()
    array.flags.writeable = False
    return array


def test_a_read_only_output_is_refused_on_the_warm_path_too():
    x, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    for _ in range(2):
        scaled[(1,)](x, out, 64, 2.0, BLOCK=64)
    with pytest.raises(LaunchError, match="argument 'out' is a read-only array"):
        scaled[(1,)](x, _read_only(), 64, 2.0, BLOCK=64)


def test_atomics_and_stores_in_called_functions_count_as_writes():
    with pytest.raises(LaunchError, match="count_programs: argument 'counter' is a read-only"):
        count_programs[(1,)](_read_only_copy(np.zeros(1, np.int32)))
    with pytest.raises(LaunchError, match="writes_in_a_helper: argument 'out' is a read-only"):
        writes_in_a_helper[(1,)](np.ones(1, np.float32), _read_only(1))
    out = np.zeros(1, np.float32)
    writes_in_a_helper[(1,)](_read_only_copy(np.full(1, 4, np.float32)), out)
    assert out[0] == 4


def test_the_metadata_says_which_parameters_are_written():
    kernel = gather.warmup(np.zeros(16, np.int32), np.zeros(16, np.float32),
                           np.zeros(16, np.float32), BLOCK=16)
    assert kernel.metadata["written_args"] == [2]
    kernel = scaled.warmup(np.zeros(4, np.float32), np.zeros(4, np.float32), 4, 1.0, BLOCK=4)
    assert kernel.metadata["written_args"] == [1]


@naiad.jit
def store_after_a_while(a, b, n):
    where = a
    i = 0
    while i < n:
        where = b
        i += 1
    tl.store(where, 1.0)


def test_a_pointer_carried_through_a_while_loop_counts_as_written():
    a, b = np.zeros(1, np.float32), np.zeros(1, np.float32)
    kernel = store_after_a_while.warmup(a, b, 1)
    assert kernel.metadata["written_args"] == [0, 1]
    store_after_a_while[(1,)](a, b, 2)
    assert (a[0], b[0]) == (0, 1)
    with pytest.raises(LaunchError, match="store_after_a_while: argument 'a' is a read-only"):
        store_after_a_while[(1,)](_read_only(1), b, 0)


def test_a_compiled_kernel_launched_directly_checks_too():
    x, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    kernel = scaled.warmup(x, out, 16, 3.0, BLOCK=16)
    kernel[(1,)](x, out, 16, np.float32(3.0), 16)
    np.testing.assert_array_equal(out, 3 * x)
    with pytest.raises(LaunchError, match="argument 'out' is a read-only array"):
        kernel[(1,)](x, _read_only(16), 16, 3.0, 16)
    with pytest.raises(LaunchError, match="grid dimension 0 is -1"):
        kernel[(-1,)](x, out, 16, 3.0, 16)


# -- grids ---------------------------------------------------------------------------------------

FORM = r"a grid is a tuple of 1 to 3 ints, or a callable"


@pytest.mark.parametrize("grid, message", [
    ((-1, -1), r"grid dimension 0 is -1; this backend runs 0 to 2147483647 programs along axis 0"),
    ((2, -3), r"grid dimension 1 is -3;"),
    ((-1,), r"grid dimension 0 is -1;"),
    ((2**31 + 3,), r"grid dimension 0 is 2147483651;"),
    ((2**40,), r"grid dimension 0 is 1099511627776;"),
    ((65536, 65536), r"the grid \(65536, 65536, 1\) has 4294967296 programs; this backend runs at "
                     r"most 2147483647"),
    ((2.5,), rf"grid dimension 0 is 2.5 \(float\), not an int -- {FORM}"),
    ((2.0,), r"grid dimension 0 is 2.0 \(float\), not an int"),
    ((np.float32(2),), r"grid dimension 0 is np.float32\(2.0\) \(float32\), not an int"),
    (("2",), r"grid dimension 0 is '2' \(str\), not an int"),
    (4, rf"the grid is 4 \(int\) -- {FORM}.*e\.g\. \(4,\)"),
    (lambda meta: 4, rf"the grid callable returned 4 \(int\) -- {FORM}"),
    (None, rf"the grid is None \(NoneType\) -- {FORM}"),
    ((), rf"the grid is \(\), with 0 dimensions -- {FORM}"),
    ((1, 1, 1, 1), r"the grid is \(1, 1, 1, 1\), with 4 dimensions"),
], ids=lambda case: case if isinstance(case, str) else repr(case) if not callable(case) else "callable")
def test_bad_grids_are_refused(grid, message):
    counter = np.zeros(1, np.int32)
    with pytest.raises(LaunchError, match=rf"count_programs: {message}"):
        count_programs[grid](counter)
    assert counter[0] == 0


@pytest.mark.parametrize("grid, programs", [
    ((0,), 0), ((3, 0), 0), ((3,), 3), ([2, 3], 6), ((np.int64(2), np.int32(2), 2), 8),
    (lambda meta: (5,), 5), (lambda meta: [meta["counter"].size, 2], 2), ((True,), 1),
])
def test_good_grids_run_every_program_once(grid, programs):
    for _ in range(2):                        # the full path, then the warm one
        counter = np.zeros(1, np.int32)
        count_programs[grid](counter)
        assert counter[0] == programs


def test_a_bad_grid_is_refused_on_the_warm_path():
    counter = np.zeros(1, np.int32)
    for _ in range(2):
        count_programs[(2,)](counter)
    with pytest.raises(LaunchError, match="grid dimension 0 is -2"):
        count_programs[(-2,)](counter)
    assert counter[0] == 4


def test_drivers_declare_their_grid_limits():
    assert CPUDriver.max_grid == (2**31 - 1,) * 3 and CPUDriver.max_programs == 2**31 - 1
    from naiad.backends.cuda.driver import CUDADriver

    assert CUDADriver.max_grid == (2**31 - 1, 65535, 65535) and CUDADriver.max_programs is None


# -- keywords --------------------------------------------------------------------------------------

def test_a_misspelled_keyword_is_refused_with_the_closest_name():
    x, out = np.ones(16, np.float32), np.zeros(16, np.float32)
    with pytest.raises(LaunchError, match=r"with_default: unknown keyword argument 'SCALEE': it is "
                                          r"neither a parameter of the kernel \(x, out, n, SCALE, "
                                          r"BLOCK\) nor an option of the cpu backend -- fix: did "
                                          r"you mean 'SCALE'\?"):
        with_default[(1,)](x, out, 16, SCALEE=2.0)
    with pytest.raises(LaunchError, match=r"unknown keyword argument 'num_warp'.*did you mean "
                                          r"'num_warps'\?"):
        with_default[(1,)](x, out, 16, num_warp=4)
    assert not out.any()
    with_default[(1,)](x, out, 16, SCALE=2.0, num_warps=8, num_stages=2)      # options pass
    np.testing.assert_array_equal(out, 2 * x)


def test_read_only_is_read_from_every_array_kind():
    from naiad.runtime.launch_checks import is_read_only

    class CudaInterface:
        def __init__(self, read_only):
            self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "version": 3,
                                             "data": (4096, read_only)}

    assert is_read_only(_read_only()) and not is_read_only(np.zeros(2))
    assert is_read_only(InterfaceOnly(_read_only())) and not is_read_only(InterfaceOnly(np.zeros(2)))
    assert is_read_only(CudaInterface(True)) and not is_read_only(CudaInterface(False))
    torch = pytest.importorskip("torch")
    assert not is_read_only(torch.zeros(2))
    assert not is_read_only(torch.zeros(2, dtype=torch.float8_e4m3fn))   # no __array_interface__
