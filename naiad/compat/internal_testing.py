"""``triton._internal_testing`` under compat: the dtype lists, random inputs and platform
predicates that Triton's own test files import.

Written for Naiad from the behaviour those tests rely on: `numpy_random` never yields the
integer 0 (division tests), bf16 values are fp32 with the low 16 bits cleared, fp8 values are
int8 bit patterns in [20, 40); `to_triton` returns a torch tensor, or a reinterpreted signed
tensor for unsigned and fp8 dtypes; the ``is_<platform>`` predicates ask the active driver's
target (never true for the CPU).  Needs torch, as the tests do.
"""

from __future__ import annotations

import os
import re
from contextvars import ContextVar
from typing import Any

import numpy as np
import torch
from numpy.random import RandomState

import naiad.language as tl
from naiad.language import dtypes as language_dtypes
from naiad.runtime.tensor_wrapper import TensorWrapper, reinterpret

int_dtypes = ["int8", "int16", "int32", "int64"]
uint_dtypes = ["uint8", "uint16", "uint32", "uint64"]
integral_dtypes = int_dtypes + uint_dtypes
float_dtypes = ["float16", "float32", "float64"]
float_dtypes_with_bfloat16 = float_dtypes + ["bfloat16"]
dtypes = integral_dtypes + float_dtypes
dtypes_with_bfloat16 = dtypes + ["bfloat16"]
torch_float8_dtypes = ["float8_e4m3fn", "float8_e5m2"]
torch_dtypes = ["bool"] + int_dtypes + ["uint8"] + float_dtypes + ["bfloat16"]
tma_dtypes = sorted(set(dtypes_with_bfloat16) - {"int64", "uint64", "float64"})

#: Set while a test module compiles its kernels ahead of running them (Triton's warm-up mode).
_COMPILE_WARMUP_ACTIVE: ContextVar[bool] = ContextVar("naiad_compile_warmup_active", default=False)


def is_interpreter() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def is_compile_warmup() -> bool:
    return _COMPILE_WARMUP_ACTIVE.get()


def random_int(low: int, high: int, *, warmup_value: int | None = None, **kwargs: Any) -> int:
    if is_compile_warmup():
        return low if warmup_value is None else warmup_value
    return int(torch.randint(low, high, size=(), **kwargs).item())


def random_float(*, warmup_value: float = 0.5, **kwargs: Any) -> float:
    if is_compile_warmup():
        return warmup_value
    return float(torch.rand((), **kwargs).item())


def get_current_target() -> Any:
    """The active driver's target; None under Triton's interpreter or when no backend is active."""
    if is_interpreter():
        return None
    from naiad.backends.selection import active_driver
    from naiad.errors import NaiadError

    try:
        return active_driver().get_current_target()
    except NaiadError:
        return None


def _backend_is(name: str) -> bool:
    target = get_current_target()
    return target is not None and target.backend == name


def _arch_matches(*patterns: str) -> bool:
    target = get_current_target()
    return target is not None and target.backend == "hip" and \
        any(p in str(target.arch) for p in patterns)


def _cuda_major() -> int:
    target = get_current_target()
    return int(target.arch) // 10 if target is not None and target.backend == "cuda" else -1


def _cuda_capability() -> tuple[int, int]:
    target = get_current_target()
    arch = int(target.arch)
    return arch // 10, arch % 10


def is_cuda() -> bool:
    return _backend_is("cuda")


def is_hip() -> bool:
    return _backend_is("hip")


def is_xpu() -> bool:
    return _backend_is("xpu")


def is_ampere_or_newer() -> bool:
    return _cuda_major() >= 8


def is_hopper_or_newer() -> bool:
    return _cuda_major() >= 9


def is_hopper() -> bool:
    return _cuda_major() == 9


def is_blackwell() -> bool:
    return _cuda_major() in (10, 11)


def is_blackwell_ultra() -> bool:
    return is_cuda() and _cuda_capability() == (10, 3)


def is_rubin() -> bool:
    return is_cuda() and _cuda_capability() == (10, 7)


def is_sm12x() -> bool:
    return _cuda_major() == 12


def is_hip_cdna2() -> bool:
    return _arch_matches("gfx90a")


def is_hip_cdna3() -> bool:
    return _arch_matches("gfx942")


def is_hip_cdna4() -> bool:
    return _arch_matches("gfx950")


def is_hip_cdna() -> bool:
    return is_hip_cdna2() or is_hip_cdna3() or is_hip_cdna4()


def is_hip_cdna3_or_newer() -> bool:
    return is_hip_cdna3() or is_hip_cdna4()


def is_hip_rdna3() -> bool:
    return _arch_matches("gfx110", "gfx115")


def is_hip_rdna4m() -> bool:
    return _arch_matches("gfx117")


def is_hip_rdna4() -> bool:
    return _arch_matches("gfx120")


def is_hip_rdna() -> bool:
    return is_hip_rdna3() or is_hip_rdna4m() or is_hip_rdna4()


def is_hip_gfx1250() -> bool:
    return _arch_matches("gfx1250")


def get_hip_lds_size() -> int:
    return 163840 if is_hip_cdna4() else 65536


def supports_tma(byval_only: bool = False) -> bool:
    return is_interpreter()


def supports_ws() -> bool:
    return is_interpreter()


def supports_clc() -> bool:
    return False


def numpy_random(shape: Any, dtype_str: str, rs: RandomState | None = None, low: Any = None,
                 high: Any = None) -> np.ndarray:
    """Random test data of ``dtype_str``, reproducible (seed 17 unless ``rs`` is given)."""
    shape = (shape,) if isinstance(shape, int) else shape
    rs = RandomState(seed=17) if rs is None else rs
    if dtype_str in integral_dtypes:
        info = np.iinfo(getattr(np, dtype_str))
        low = info.min if low is None else max(low, info.min)
        high = info.max if high is None else min(high, info.max)
        values = rs.randint(low, high, shape, dtype=getattr(np, dtype_str))
        values[values == 0] = 1          # never zero: tests divide by these
        return values
    if dtype_str and "float8" in dtype_str:
        return rs.randint(20, 40, shape, dtype=np.int8)
    if dtype_str in float_dtypes:
        return rs.normal(0, 1, shape).astype(dtype_str)
    if dtype_str == "bfloat16":
        bits = rs.normal(0, 1, shape).astype("float32").view("uint32") & np.uint32(0xFFFF0000)
        return bits.view("float32")
    if dtype_str in ("bool", "int1", "bool_"):
        return rs.normal(0, 1, shape) > 0.0
    raise RuntimeError(f"numpy_random: unknown dtype {dtype_str!r}")


def to_triton(x: np.ndarray, device: Any, dst_type: str | None = None) -> Any:
    """A torch tensor holding ``x`` (as ``dst_type`` when given); unsigned and fp8 data come
    back as a signed tensor reinterpreted to the language dtype."""
    name = x.dtype.name
    if name in uint_dtypes:
        signed = x.astype(getattr(np, name[1:]))
        return reinterpret(torch.tensor(signed, device=device), getattr(tl, name))
    if dst_type and "float8" in dst_type:
        return reinterpret(torch.tensor(x, device=device), getattr(tl, dst_type))
    if name == "float32" and dst_type == "bfloat16":
        return torch.tensor(x, device=device).bfloat16()
    return torch.tensor(x, device=device)


def str_to_triton_dtype(name: str) -> Any:
    """The language dtype of a test parameter's dtype name ("float32", "bfloat16", "float8e5")."""
    return tl.str_to_ty(language_dtypes.from_torch_dtype_name(name) or name)


def torch_dtype_name(dtype: Any) -> str:
    if isinstance(dtype, tl.dtype):
        return dtype.name
    if isinstance(dtype, torch.dtype):
        return re.fullmatch(r"torch\.(\w+)", str(dtype)).group(1)
    raise TypeError(f"not a language or torch dtype: {type(dtype).__name__}")


def to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, TensorWrapper):
        return x.base.cpu().numpy().astype(getattr(np, torch_dtype_name(x.dtype)))
    if isinstance(x, torch.Tensor):
        return x.cpu().float().numpy() if x.dtype is torch.bfloat16 else x.cpu().numpy()
    raise ValueError(f"not a tensor this test helper knows: {type(x).__name__}")


def default_alloc_fn(size: int, alignment: int, stream: Any) -> Any:
    """The tests' scratch allocator: bytes on the active backend's torch device."""
    from naiad.backends.selection import active_driver

    return torch.empty(size, dtype=torch.int8, device=active_driver().get_active_torch_device())


def unwrap_tensor(t: Any) -> Any:
    return t.base if isinstance(t, TensorWrapper) else t


def run_in_process(client_fn: Any, args: tuple = (), kwargs: dict | None = None, env: Any = None) -> Any:
    """Tests call this to isolate crashes; CPU kernels cannot take the process down, so the
    function runs here and its exception (or None) is returned as the result's ``exc``."""
    import types

    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        client_fn(*args, **(kwargs or {}))
        exc = None
    except Exception as e:  # noqa: BLE001 -- handed to the test, as Triton's helper does
        exc = e
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return types.SimpleNamespace(exc=exc, driver_stderr_output="")
