"""Global-memory ops of the cuda backend as PTX: atomics with PTX's memory semantics and scopes
(``atom.global.gpu.acq_rel.add.f32``), cache modifiers and eviction policies of loads and stores
(``ld.global.cg.v4.b32``, ``st.global.L1::evict_first``), ``tl.multiple_of`` /
``tl.max_contiguous`` hints giving 128-bit accesses, and ``tl.atomic_poll``.

The compile tests run anywhere (sm_90 PTX, and a cubin where ptxas is found: ptxas accepting
every instruction is part of the check); the ``gpu`` tests run the same kernels against torch.
"""


import pytest

import naiad
import naiad.language as tl

from .conftest import compile_cuda, needs_ptxas, ptxas_path

try:
    import torch
except ImportError:          # the compile tests need no torch
    torch = None

pytestmark = pytest.mark.shipped_backends


def _aligned(*names):
    """``tt.divisibility`` 16 for these parameters, as a launch with aligned tensors gives."""
    return {name: [["tt.divisibility", 16]] for name in names}


def _check_binary(kernel):
    if ptxas_path() is not None:
        assert kernel.asm["cubin"][:4] == b"\x7fELF"


# == atomics =======================================================================================
@naiad.jit
def rmw_kernel(z_ptr, x_ptr, old_ptr, OP: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr,
               BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    m = offs < BLOCK - 3                       # masked-off elements stay untouched
    if OP == "add":
        old = tl.atomic_add(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "max":
        old = tl.atomic_max(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "min":
        old = tl.atomic_min(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "and":
        old = tl.atomic_and(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "or":
        old = tl.atomic_or(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "xor":
        old = tl.atomic_xor(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    else:
        old = tl.atomic_xchg(z_ptr + offs % 4, x, mask=m, sem=SEM, scope=SCOPE)
    tl.store(old_ptr + offs, old, mask=m)


#: Triton type -> the atomic ops the frontend takes on it.
_INTS = ["i32", "u32", "i64", "u64"]
RMW_CASES = ([("add", t) for t in _INTS + ["fp16", "bf16", "fp32", "fp64"]]
             + [(op, t) for op in ("max", "min") for t in _INTS + ["fp32", "fp64"]]
             + [(op, t) for op in ("and", "or", "xor") for t in _INTS]
             + [("xchg", t) for t in ("i32", "i64", "fp32", "fp64")])

#: (op, Triton type) -> the PTX operation and type the atom must have.
_PTX_RMW = {"add": {"i32": "add.u32", "u32": "add.u32", "i64": "add.u64", "u64": "add.u64",
                    "fp16": "add.noftz.f16", "bf16": "add.noftz.bf16", "fp32": "add.f32",
                    "fp64": "add.f64"},
            "max": {"i32": "max.s32", "u32": "max.u32", "i64": "max.s64", "u64": "max.u64",
                    "fp32": "max.s32", "fp64": "max.s64"},
            "min": {"i32": "min.s32", "u32": "min.u32", "i64": "min.s64", "u64": "min.u64",
                    "fp32": "min.s32", "fp64": "min.s64"},
            "xchg": {"i32": "exch.b32", "i64": "exch.b64", "fp32": "exch.b32", "fp64": "exch.b64"}}


def _rmw(op, dtype, sem="acq_rel", scope="gpu"):
    return compile_cuda(rmw_kernel, {"z_ptr": "*" + dtype, "x_ptr": "*" + dtype, "old_ptr": "*" + dtype},
                        {"OP": op, "SEM": sem, "SCOPE": scope, "BLOCK": 128})


@needs_ptxas
@pytest.mark.parametrize("op, dtype", RMW_CASES)
def test_atomic_rmw_is_ptx_atom_for_every_op_and_type(op, dtype):
    """Every atomic the frontend makes is one ``atom.global.gpu.acq_rel.<op>.<type>`` that ptxas
    takes (bf16 add included: sm_90 has it); float max/min are integer atomics on the bits."""
    kernel = _rmw(op, dtype)
    ptx = kernel.asm["ptx"]
    bits = dtype[-2:] if dtype[-2:] in ("32", "64") else "16"
    expected = _PTX_RMW.get(op, {}).get(dtype, f"{op}.b{bits}")
    assert f"atom.global.gpu.acq_rel.{expected} " in ptx
    float_minmax = op in ("max", "min") and dtype.startswith("fp")
    if float_minmax:            # the negative values: unsigned min for max, max for min
        other = {"max": "min", "min": "max"}[op]
        assert f"atom.global.gpu.acq_rel.{other}.u{bits} " in ptx
    assert "atom.global.gpu.acq_rel" in ptx and "atom.acq_rel" not in ptx
    _check_binary(kernel)


@needs_ptxas
@pytest.mark.parametrize("sem", ["relaxed", "acquire", "release", "acq_rel"])
@pytest.mark.parametrize("scope", ["gpu", "cta", "sys"])
def test_atomic_rmw_takes_the_semantics_and_scope(sem, scope):
    kernel = _rmw("add", "fp32", sem, scope)
    assert f"atom.global.{scope}.{sem}.add.f32 " in kernel.asm["ptx"]
    _check_binary(kernel)


@naiad.jit
def cas_kernel(lock_ptr, out_ptr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    old = tl.atomic_cas(lock_ptr, 0, 1, sem=SEM, scope=SCOPE)
    tl.store(out_ptr, old)


@naiad.jit
def cas_block_kernel(slots_ptr, cmp_ptr, val_ptr, out_ptr, SEM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_cas(slots_ptr + offs, tl.load(cmp_ptr + offs), tl.load(val_ptr + offs), sem=SEM)
    tl.store(out_ptr + offs, old)


@needs_ptxas
@pytest.mark.parametrize("dtype", ["i32", "i64"])
@pytest.mark.parametrize("sem", ["relaxed", "acquire", "release", "acq_rel"])
@pytest.mark.parametrize("scope", ["gpu", "cta", "sys"])
def test_atomic_cas_is_ptx_atom_with_the_semantics(sem, scope, dtype):
    kernel = compile_cuda(cas_kernel, {"lock_ptr": "*" + dtype, "out_ptr": "*" + dtype},
                          {"SEM": sem, "SCOPE": scope})
    ptx = kernel.asm["ptx"]
    assert f"atom.global.{sem}.{scope}.cas.b{dtype[1:]} " in ptx
    assert "atom.cas" not in ptx and "atom.global.cas" not in ptx
    _check_binary(kernel)


@needs_ptxas
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "i16", "fp32", "fp64"])
def test_atomic_cas_on_the_bits_of_any_width(dtype):
    kernel = compile_cuda(cas_block_kernel, {"slots_ptr": "*" + dtype, "cmp_ptr": "*" + dtype,
                                             "val_ptr": "*" + dtype, "out_ptr": "*" + dtype},
                          {"SEM": "acq_rel", "BLOCK": 64})
    bits = dtype[-2:] if dtype[-2:] in ("32", "64") else "16"
    assert f"atom.global.acq_rel.gpu.cas.b{bits} " in kernel.asm["ptx"]
    _check_binary(kernel)


# == cache modifiers and eviction policies =========================================================
@naiad.jit
def copy_kernel(dst_ptr, src_ptr, n, LOAD_CACHE: tl.constexpr, LOAD_EVICT: tl.constexpr,
                STORE_CACHE: tl.constexpr, STORE_EVICT: tl.constexpr, MASKED: tl.constexpr,
                BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASKED:
        m = offs < n
        x = tl.load(src_ptr + offs, mask=m, other=0, cache_modifier=LOAD_CACHE,
                    eviction_policy=LOAD_EVICT)
        tl.store(dst_ptr + offs, x, mask=m, cache_modifier=STORE_CACHE, eviction_policy=STORE_EVICT)
    else:
        x = tl.load(src_ptr + offs, cache_modifier=LOAD_CACHE, eviction_policy=LOAD_EVICT)
        tl.store(dst_ptr + offs, x, cache_modifier=STORE_CACHE, eviction_policy=STORE_EVICT)


def _copy(dtype="fp32", load_cache="", load_evict="", store_cache="", store_evict="", masked=False,
          aligned=True, block=1024):
    return compile_cuda(copy_kernel, {"dst_ptr": "*" + dtype, "src_ptr": "*" + dtype, "n": "i32"},
                        {"LOAD_CACHE": load_cache, "LOAD_EVICT": load_evict, "STORE_CACHE": store_cache,
                         "STORE_EVICT": store_evict, "MASKED": masked, "BLOCK": block},
                        _aligned("dst_ptr", "src_ptr", "n") if aligned else None)


#: access -> (its PTX instruction, the cache modifiers Triton has for it)
_MODIFIERS = {"load": ("ld", (".ca", ".cg", ".cs", ".cv")), "store": ("st", (".wb", ".cg", ".cs", ".wt"))}


@needs_ptxas
@pytest.mark.parametrize("where,cache", [(w, c) for w, (_, mods) in _MODIFIERS.items()
                                         for c in ("",) + mods])
def test_cache_modifier(where, cache):
    """As upstream's test_load_cache_modifier / test_store_cache_modifier check:
    ``ld.global<cache>`` (``st.``) for the one asked for, none of the others; still 128 bits
    per access."""
    kernel = _copy(**{f"{where}_cache": cache})
    access, modifiers = _MODIFIERS[where]
    ptx = kernel.asm["ptx"]
    assert f"{access}.global{cache}.v4.b32" in ptx
    for other in set(modifiers) - {cache}:
        assert f"{access}.global{other}" not in ptx
    _check_binary(kernel)


@needs_ptxas
@pytest.mark.parametrize("where", ["load", "store"])
@pytest.mark.parametrize("policy", ["", "evict_first", "evict_last"])
def test_eviction_policy(policy, where):
    """An eviction policy is Triton's pair: the L1 priority on the access and an L2 policy made by
    ``createpolicy`` (``L2::cache_hint``); none without one."""
    kernel = _copy(**{f"{where}_evict": policy})
    ptx = kernel.asm["ptx"]
    access = {"load": "ld", "store": "st"}[where]
    for other in {"evict_first", "evict_last"} - {policy}:
        assert other not in ptx
    if policy:
        assert f"{access}.global.L1::{policy}.L2::cache_hint.v4.b32" in ptx
        assert f"createpolicy.fractional.L2::{policy}.b64" in ptx
    else:
        assert "L2::cache_hint" not in ptx and "createpolicy" not in ptx
    _check_binary(kernel)


@needs_ptxas
def test_cache_modifier_and_eviction_policy_together():
    """PTX takes no L1 priority next to a cache modifier: the policy goes to L2 alone."""
    kernel = _copy(load_cache=".cg", load_evict="evict_last", store_cache=".cs", store_evict="evict_first")
    ptx = kernel.asm["ptx"]
    assert "ld.global.cg.L2::cache_hint.v4.b32" in ptx and "st.global.cs.L2::cache_hint.v4.b32" in ptx
    assert "L1::" not in ptx
    _check_binary(kernel)


#: Triton type -> (the PTX of an aligned access, as wide as the plain one: 128 bits, bytes
#: included; of one element).
_WIDTHS = {"fp32": (".v4.b32", ".b32"), "fp16": (".v4.b32", ".b16"), "i8": (".v4.b32", ".b8"),
           "fp64": (".v2.b64", ".b64"), "i1": (".v4.b32", ".b8"), "bf16": (".v4.b32", ".b16")}


@needs_ptxas
@pytest.mark.parametrize("dtype", list(_WIDTHS))
@pytest.mark.parametrize("aligned", [True, False])
def test_cache_modified_access_widths(dtype, aligned):
    """Vectors as wide as plain accesses get, in 32-bit words (64-bit for fp64), and single
    elements of any width (bytes included); masked either way."""
    kernel = _copy(dtype, load_cache=".cg", store_cache=".cs", masked=True, aligned=aligned, block=2048)
    suffix = _WIDTHS[dtype][0 if aligned else 1]
    ptx = kernel.asm["ptx"]
    assert f"ld.global.cg{suffix} " in ptx and f"st.global.cs{suffix} " in ptx
    _check_binary(kernel)


@needs_ptxas
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "i8", "fp64", "i1"])
@pytest.mark.parametrize("store_cache", ["", ".cs"])
def test_masked_stores_are_predicated_instructions(dtype, store_cache):
    """A masked store is one ``@p st.global`` (Triton's form), with or without a cache
    modifier: no branch around each store, which ptxas would keep (a branch and a convergence
    barrier per vector); an unmasked one is a plain store."""
    for masked in (False, True):
        kernel = _copy(dtype, store_cache=store_cache, masked=masked, block=2048)
        stores = [line.strip() for line in kernel.asm["ptx"].splitlines() if "st.global" in line]
        assert stores and all(line.startswith("@") == masked for line in stores), stores
        if masked:
            assert "bra" not in kernel.asm["ptx"].split("ld.global")[-1]
        _check_binary(kernel)


# == tl.multiple_of / tl.max_contiguous ============================================================
@naiad.jit
def hinted_copy_kernel(dst_ptr, src_ptr, off_ptr, n, BLOCK: tl.constexpr, HINT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offs = offs + tl.load(off_ptr)
    if HINT:
        tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)
    x = tl.load(src_ptr + offs, mask=offs < n)
    tl.store(dst_ptr + offs, x, mask=offs < n)


@pytest.mark.parametrize("hint", [False, True])
def test_vectorization_hints(hint):
    """Upstream's test_vectorization_hints: an offset read from memory hides the alignment;
    the hints give it back (128-bit accesses), and without them each element is one access."""
    kernel = compile_cuda(hinted_copy_kernel, {"dst_ptr": "*fp32", "src_ptr": "*fp32", "off_ptr": "*i32",
                                               "n": "i32"}, {"BLOCK": 1024, "HINT": hint},
                          _aligned("dst_ptr", "src_ptr", "off_ptr", "n"))
    assert ("ld.global.v4.b32" in kernel.asm["ptx"]) == hint
    assert ("st.global.v4.b32" in kernel.asm["ptx"]) == hint


# == 1-byte tiles ==================================================================================
@naiad.jit
def widen_tile_kernel(dst_ptr, src_ptr, rows, ROWS: tl.constexpr, COLS: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, COLS)[None, :]
    x = tl.load(src_ptr + r * COLS + c, mask=r < rows)
    tl.store(dst_ptr + r * COLS + c, x.to(tl.float16) * 2 + 1, mask=r < rows)


@pytest.mark.parametrize("src", ["i8", "u8", "fp8e4nv", "fp8e5"])
@pytest.mark.parametrize("rows, cols", [(64, 64), (32, 128), (16, 16)])
def test_byte_tiles_load_16_bytes_per_thread(src, rows, cols):
    """A 2-D tile of 1-byte elements that its users widen (to fp16 here; fp8 and int8 dot
    operands, upstream's test_scaled_dot) still loads 16 bytes per thread in one 128-bit
    access, as Triton's coalescing gives it, instead of the 8 the fp16 users' layout holds."""
    kernel = compile_cuda(widen_tile_kernel, {"dst_ptr": "*fp16", "src_ptr": f"*{src}", "rows": "i32"},
                          {"ROWS": rows, "COLS": cols}, _aligned("dst_ptr", "src_ptr", "rows"))
    loads = [line.strip() for line in kernel.asm["ptx"].splitlines() if "ld.global" in line]
    assert loads and all(".v4.b32" in line for line in loads), loads
    _check_binary(kernel)


@pytest.mark.parametrize("src", ["int8", "uint8", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("rows, cols, total", [(64, 64, 200), (32, 128, 32), (16, 16, 7)])
def test_widened_byte_tiles_on_the_gpu(gpu, src, rows, cols, total):
    """The same kernel against torch, with rows past the end masked off."""
    torch = gpu
    dtype = getattr(torch, src)
    raw = torch.randint(-100, 100, (total, cols), device="cuda", dtype=torch.int16)
    x = raw.to(torch.float32).to(dtype) if dtype.is_floating_point else raw.to(dtype)
    out = torch.full((total, cols), -7.0, device="cuda", dtype=torch.float16)
    widen_tile_kernel[(naiad.cdiv(total, rows),)](out, x, total, ROWS=rows, COLS=cols)
    torch.testing.assert_close(out, x.to(torch.float16) * 2 + 1, rtol=0, atol=0)


# == tl.atomic_poll ================================================================================
@naiad.jit
def poll_kernel(flag_ptr, out_ptr, expected, SEM: tl.constexpr, SCOPE: tl.constexpr):
    tl.atomic_poll(flag_ptr, expected, sem=SEM, scope=SCOPE)
    tl.store(out_ptr, 1)


@naiad.jit
def poll_timeout_kernel(flag_ptr, out_ptr, timeout_ns):
    seen = tl.atomic_poll(flag_ptr, 1, timeout_ns=timeout_ns)
    tl.store(out_ptr, seen)


@pytest.fixture
def ptxas_release(monkeypatch):
    """Make the ptxas in use report another CUDA release (the PTX is still assembled by it)."""
    from naiad.backends.cuda import toolchain

    return lambda release: monkeypatch.setattr(toolchain, "ptxas_version", lambda path: release)


@needs_ptxas
@pytest.mark.parametrize("sem", ["relaxed", "acquire"])
@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
@pytest.mark.parametrize("dtype", ["i16", "i32", "i64"])
@pytest.mark.parametrize("release, fence, version", [("12.8", "acquire", "8.6"), ("13.0", "acquire", "8.6"),
                                                     ("12.4", "acq_rel", "8.0")])
def test_atomic_poll_is_a_relaxed_load_loop(dtype, sem, scope, release, fence, version, ptxas_release):
    """One ``ld.relaxed.<scope>.global`` in the loop, an acquire fence after it for
    ``sem="acquire"`` -- ``fence.acquire`` where ptxas takes PTX 8.6 (CUDA 12.8 on; the PTX is
    then of that version), ``fence.acq_rel`` before -- no timer and no shared memory without a
    timeout."""
    ptxas_release(release)
    kernel = compile_cuda(poll_kernel, {"flag_ptr": "*" + dtype, "out_ptr": "*" + dtype,
                                        "expected": dtype}, {"SEM": sem, "SCOPE": scope})
    ptx = kernel.asm["ptx"]
    assert ptx.count(f"ld.relaxed.{scope}.global.b{dtype[1:]}") == 1
    assert ptx.count(f"fence.{fence}.{scope};") == (sem == "acquire")
    assert "fence.acq" not in ptx.replace(f"fence.{fence}.{scope};", "")
    assert f".version {version if sem == 'acquire' else '8.0'}\n" in ptx
    assert "%globaltimer" not in ptx
    assert kernel.metadata["shared"] == 0
    _check_binary(kernel)


def test_without_ptxas_the_fence_is_acq_rel(monkeypatch):
    """PTX that the driver will load (no ptxas here) stays at the target's PTX version."""
    from naiad.backends.cuda import toolchain

    monkeypatch.setattr(toolchain, "find_ptxas", lambda: None)
    kernel = compile_cuda(poll_kernel, {"flag_ptr": "*i32", "out_ptr": "*i32", "expected": "i32"},
                          {"SEM": "acquire", "SCOPE": "gpu"})
    assert "fence.acq_rel.gpu;" in kernel.asm["ptx"] and ".version 8.0\n" in kernel.asm["ptx"]


@pytest.mark.parametrize("release, newest", [("12.0", 80), ("12.6", 85), ("12.8", 87), ("12.9", 88),
                                             ("13.0", 90), ("13.2", 90), ("11.8", 78), ("11.0", 60)])
def test_the_newest_ptx_of_a_cuda_release(monkeypatch, release, newest):
    from naiad.backends.cuda import toolchain

    monkeypatch.setattr(toolchain, "ptxas_version", lambda path: release)
    assert toolchain.newest_ptx("/some/ptxas") == newest
    assert toolchain.newest_ptx(None) is None


@needs_ptxas
def test_atomic_poll_timeout_reads_the_global_timer():
    kernel = compile_cuda(poll_timeout_kernel, {"flag_ptr": "*i32", "out_ptr": "*i1", "timeout_ns": "i64"})
    ptx = kernel.asm["ptx"]
    assert ptx.count("ld.relaxed.gpu.global.b32") == 1
    assert ptx.count("fence.acquire.gpu;") + ptx.count("fence.acq_rel.gpu;") == 1
    assert ptx.count("%globaltimer") == 2
    _check_binary(kernel)


# == on the GPU, against torch =====================================================================
@naiad.jit
def contention_kernel(z_ptr, x_ptr, old_ptr, n, OP: tl.constexpr, SEM: tl.constexpr,
                      SCOPE: tl.constexpr, SLOTS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    slot = z_ptr + offs % SLOTS
    if OP == "add":
        old = tl.atomic_add(slot, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "max":
        old = tl.atomic_max(slot, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "min":
        old = tl.atomic_min(slot, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "and":
        old = tl.atomic_and(slot, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "or":
        old = tl.atomic_or(slot, x, mask=m, sem=SEM, scope=SCOPE)
    elif OP == "xor":
        old = tl.atomic_xor(slot, x, mask=m, sem=SEM, scope=SCOPE)
    else:
        old = tl.atomic_xchg(slot, x, mask=m, sem=SEM, scope=SCOPE)
    tl.store(old_ptr + offs, old, mask=m)


#: Triton type -> (torch dtype holding its bits, numpy dtype of its values).
_HOLDERS = {"i32": ("int32", "int32"), "u32": ("int32", "uint32"), "i64": ("int64", "int64"),
            "u64": ("int64", "uint64"), "fp16": ("float16", "float16"), "bf16": ("bfloat16", None),
            "fp32": ("float32", "float32"), "fp64": ("float64", "float64")}


def _data(op, dtype, n, seed):
    """Values whose sums are exact in any order (0/1 for the 16-bit floats, halves for wider
    floats), signed ones where the type has a sign, and random bits for the bitwise ops."""
    import numpy as np

    rng = np.random.default_rng(seed)
    holder, values = _HOLDERS[dtype]
    if dtype in ("fp16", "bf16"):
        data = rng.integers(0, 2, n).astype(np.float32)
    elif dtype.startswith("fp"):
        data = rng.integers(-64, 64, n) / 2 if op == "add" else rng.normal(0, 1e3, n)
    elif op in ("and", "or", "xor"):
        data = rng.integers(0, 1 << 31, n) | (rng.integers(0, 2, n) << 31 if dtype[1:] == "32" else 0)
    elif dtype.startswith("u"):
        data = rng.integers(0, 1 << 30, n) * (1 if op == "add" else 3)
    else:
        data = rng.integers(-(1 << 20), 1 << 20, n)
    array = np.asarray(data).astype(values or np.float32)
    tensor = torch.tensor(array.view(holder) if values and values.startswith("u") else array)
    return tensor.to(getattr(torch, holder)).cuda(), array


def _arg(tensor, dtype):
    """``tensor`` as the kernel's ``dtype`` (torch has no unsigned 32/64-bit tensors)."""
    from naiad.runtime.tensor_wrapper import reinterpret

    return reinterpret(tensor, getattr(tl, {"u32": "uint32", "u64": "uint64"}[dtype])) \
        if dtype.startswith("u") else tensor


def _host(tensor, dtype):
    values = _HOLDERS[dtype][1]
    if values is None:
        return tensor.float().cpu().numpy()
    return tensor.cpu().numpy().view(values) if values.startswith("u") else tensor.cpu().numpy()


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("sem", ["relaxed", "acquire", "release", "acq_rel"])
@pytest.mark.parametrize("op, dtype", RMW_CASES)
def test_atomic_rmw_under_contention(op, dtype, sem):
    """Many programs on 16 slots: the slots end as numpy's reduction of everything added (exact:
    the values sum exactly in any order), and for exchange the values read plus the one left are
    the values written plus the start; masked-off elements do nothing."""
    import numpy as np

    n, slots, block = 4000, 16, 128
    x, xs = _data(op, dtype, n, seed=1)
    start, starts = _data(op, dtype, slots, seed=2)
    if op == "add":
        start.zero_()
        starts = np.zeros_like(starts)
    z, old = start.clone(), torch.zeros_like(x)
    contention_kernel[(naiad.cdiv(n, block),)](_arg(z, dtype), _arg(x, dtype), _arg(old, dtype), n,
                                               OP=op, SEM=sem, SCOPE="gpu", SLOTS=slots, BLOCK=block)
    got, olds = _host(z, dtype), _host(old, dtype)
    slot = np.arange(n) % slots
    for s in range(slots):
        mine = xs[slot == s]
        if op == "xchg":
            seen = np.sort(np.concatenate([olds[slot == s], got[s:s + 1]]))
            written = np.sort(np.concatenate([mine, starts[s:s + 1]]))
            np.testing.assert_array_equal(seen, written, err_msg=f"slot {s}")
            continue
        combine = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
                   "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
        expected = combine.reduce(np.concatenate([starts[s:s + 1], mine]))
        np.testing.assert_array_equal(got[s], np.asarray(expected).astype(got.dtype), err_msg=f"slot {s}")


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
@pytest.mark.parametrize("dtype", ["i32", "fp32", "bf16"])
def test_atomic_add_scopes(dtype, scope):
    import numpy as np

    n, slots = 3000, 16
    x, xs = _data("add", dtype, n, seed=3)
    z, old = torch.zeros(slots, dtype=x.dtype, device="cuda"), torch.zeros_like(x)
    contention_kernel[(naiad.cdiv(n, 256),)](z, x, old, n, OP="add", SEM="acq_rel", SCOPE=scope,
                                             SLOTS=slots, BLOCK=256)
    expected = [xs[np.arange(n) % slots == s].sum() for s in range(slots)]
    got = _host(z, dtype)
    np.testing.assert_array_equal(got, np.asarray(expected, dtype=np.float64).astype(got.dtype))


@naiad.jit
def serialized_add_kernel(data_ptr, lock_ptr, SEM: tl.constexpr, BARRIER: tl.constexpr):
    """Upstream's test_atomic_cas: a lock taken with ``atomic_cas(sem=SEM)``, a critical section
    every thread of the program takes part in, and the lock given back by an exchange."""
    offs = tl.arange(0, 128)
    while tl.atomic_cas(lock_ptr, 0, 1, SEM) == 1:
        pass
    tl.store(data_ptr + offs, tl.load(data_ptr + offs) + 1.0)
    if BARRIER:
        tl.debug_barrier()
    tl.atomic_xchg(lock_ptr, 0)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("barrier", [True, False])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("sem", ["relaxed", "acquire", "release", "acq_rel"])
def test_serialized_add_under_a_cas_lock(sem, dtype, barrier):
    """Every program adds 1 to 128 values under the lock: 2000 programs give 2000 each (this gave
    wrong values with LLVM's cmpxchg for ``release`` and int64).  Without the explicit barrier,
    the exchange's own (it releases) publishes the other threads' stores."""
    lock = torch.zeros(1, dtype=getattr(torch, dtype), device="cuda")
    data = torch.zeros(128, dtype=torch.float32, device="cuda")
    serialized_add_kernel[(2000,)](data, lock, SEM=sem, BARRIER=barrier)
    torch.testing.assert_close(data, torch.full_like(data, 2000.0), rtol=0, atol=0)
    assert lock.item() == 0


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("block", [64, 1024])
def test_half_atomic_add_tensor_and_scalar(dtype, block):
    """fp16 and bf16 adds (``atom.add.noftz``): per slot and all into one scalar, exact."""
    n, slots = 5000, 16
    x = (torch.arange(n, device="cuda") % 3 == 0).to(getattr(torch, dtype))   # 0/1: exact sums < 256
    z, old = torch.zeros(slots, dtype=x.dtype, device="cuda"), torch.zeros_like(x)
    contention_kernel[(naiad.cdiv(n, block),)](z, x, old, n, OP="add", SEM="acq_rel", SCOPE="gpu",
                                               SLOTS=slots, BLOCK=block)
    slot = torch.arange(n, device="cuda") % slots
    ref = torch.zeros(slots, dtype=torch.float32, device="cuda").index_add_(0, slot, x.float())
    torch.testing.assert_close(z.float(), ref, rtol=0, atol=0)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "float64", "bool"])
@pytest.mark.parametrize("load_cache, store_cache, evict", [
    (".ca", ".wb", ""), (".cg", ".cg", ""), (".cs", ".cs", ""), (".cv", ".wt", ""),
    ("", "", "evict_first"), ("", "", "evict_last"), (".cg", ".cs", "evict_last")])
def test_cache_modified_copy_is_a_copy(load_cache, store_cache, evict, dtype, masked):
    """Loads and stores with each cache modifier and eviction policy move the same values as
    plain ones, 128-bit accesses and single elements, masked (a ragged end) or not."""
    n = 3 * 1024 - (37 if masked else 0)
    g = torch.Generator().manual_seed(4)
    src = (torch.randn(3 * 1024, generator=g) * 100)
    src = (src > 0) if dtype == "bool" else src.to(getattr(torch, dtype))
    src = src.cuda()
    dst = torch.zeros_like(src)
    copy_kernel[(3,)](dst, src, n, LOAD_CACHE=load_cache, LOAD_EVICT=evict, STORE_CACHE=store_cache,
                      STORE_EVICT=evict, MASKED=masked, BLOCK=1024)
    assert torch.equal(dst[:n], src[:n])
    assert not dst[n:].any()


@pytest.mark.usefixtures("gpu")
def test_vectorization_hints_copy():
    src = torch.randn(2048, device="cuda")
    dst = torch.zeros_like(src)
    off = torch.full((1,), 1024, dtype=torch.int32, device="cuda")
    hinted_copy_kernel[(1,)](dst, src, off, 2048, BLOCK=1024, HINT=True)
    assert torch.equal(dst[1024:], src[1024:]) and not dst[:1024].any()


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("sem", ["relaxed", "acquire"])
@pytest.mark.parametrize("scope", ["cta", "gpu", "sys"])
@pytest.mark.parametrize("dtype", ["int16", "int32", "int64"])
def test_atomic_poll_sees_the_flag(dtype, sem, scope):
    flag = torch.ones(1, dtype=getattr(torch, dtype), device="cuda")
    out = torch.zeros_like(flag)
    poll_kernel[(1,)](flag, out, 1, SEM=sem, SCOPE=scope, num_warps=4)
    assert out.item() == 1


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("initial, seen", [(1, True), (0, False)])
def test_atomic_poll_timeout(initial, seen):
    flag = torch.full((1,), initial, dtype=torch.int32, device="cuda")
    out = torch.zeros(1, dtype=torch.bool, device="cuda")
    poll_timeout_kernel[(1,)](flag, out, 0)
    assert out.item() == seen
    poll_timeout_kernel[(1,)](flag, out, 200_000)        # 0.2 ms of polling
    assert out.item() == seen


@naiad.jit
def poll_remote_kernel(flag_ptr, payload_ptr, out_ptr):
    if tl.program_id(0) == 0:
        tl.atomic_poll(flag_ptr, 1, sem="acquire", scope="gpu")
        tl.store(out_ptr, tl.load(payload_ptr))
    else:
        tl.store(payload_ptr, 42)
        tl.atomic_xchg(flag_ptr, 1, sem="release", scope="gpu")


@pytest.mark.usefixtures("gpu")
def test_atomic_poll_waits_for_another_program():
    flag, payload, out = (torch.zeros(1, dtype=torch.int32, device="cuda") for _ in range(3))
    poll_remote_kernel[(2,)](flag, payload, out, num_warps=4)
    assert flag.item() == 1 and out.item() == 42


# == reductions: atomics whose old values nobody reads ================================================
@naiad.jit
def scatter_add_rows(src_ptr, index_ptr, out_ptr, rows, COLS: tl.constexpr, SEM: tl.constexpr,
                     ROWS: tl.constexpr):
    """Inductor's embedding backward: rows of ``src`` added to rows of ``out`` chosen by an index,
    the atomics' results unused."""
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, COLS)[None, :]
    valid = r < rows
    target = tl.load(index_ptr + r, mask=valid, other=0)
    values = tl.load(src_ptr + r * COLS + c, mask=valid, other=0.0)
    tl.atomic_add(out_ptr + target * COLS + c, values, mask=valid, sem=SEM)


def _scatter_add(dtype: str, sem: str, arch: int = 90):
    from naiad.backends.compiler import GPUTarget
    from naiad.compiler.compiler import ASTSource

    signature = {"src_ptr": dtype, "index_ptr": "*i32", "out_ptr": dtype, "rows": "i32"}
    source = ASTSource(scatter_add_rows, signature, {"COLS": 64, "SEM": sem, "ROWS": 16},
                       _aligned("src_ptr", "index_ptr", "out_ptr"))
    return naiad.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": 4})


@pytest.mark.parametrize("dtype, instruction", [("*fp32", "add.v4.f32"), ("*fp16", "add.noftz.v8.f16"),
                                                ("*bf16", "add.noftz.v8.bf16")])
@pytest.mark.parametrize("sem", ["relaxed", "release"])
def test_an_unread_float_add_is_a_vector_red_on_sm90(dtype, instruction, sem):
    """As Triton's: 16 bytes of consecutive elements a ``red`` (no old value to wait for), where
    the address is 16-byte aligned and the mask one for them (the row's)."""
    kernel = _scatter_add(dtype, sem)
    ptx = kernel.asm["ptx"]
    assert f"red.{sem}.gpu.global.{instruction} [" in ptx and "atom.global" not in ptx
    assert ".version 8.1" in ptx or ".version 8.2" in ptx or ".version 8.3" in ptx
    _check_binary(kernel)


def test_an_unread_add_is_a_scalar_red_before_sm90_and_an_atom_when_it_acquires():
    import re

    ptx80 = _scatter_add("*fp32", "relaxed", arch=80).asm["ptx"]
    assert "red.relaxed.gpu.global.add.f32 [" in ptx80 and "add.v4" not in ptx80 and "atom.global" not in ptx80
    for sem in ("acq_rel", "acquire"):        # red does not acquire: Triton's atom stays
        ptx = _scatter_add("*fp32", sem).asm["ptx"]
        assert f"atom.global.gpu.{sem}.add.f32 " in ptx and not re.search(r"\bred\.", ptx)


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_scatter_add_rows_against_torch(dtype):
    """Rows added many times over to the same targets (the vector reds race with each other),
    the last block of rows masked: torch's index_add_ of the same rows."""
    rows, cols = 1000, 64
    kind = getattr(torch, dtype)
    src = torch.randn(rows, cols, device="cuda").to(kind)
    index = torch.randint(0, 37, (rows,), device="cuda", dtype=torch.int32)
    out = torch.zeros(37, cols, device="cuda", dtype=torch.float32 if dtype == "float32" else kind)
    scatter_add_rows[(naiad.cdiv(rows, 16),)](src, index, out, rows, COLS=cols, SEM="relaxed", ROWS=16)
    want = torch.zeros(37, cols, device="cuda").index_add_(0, index.long(), src.float())
    tolerance = {"float32": 1e-4, "float16": 3e-2, "bfloat16": 2.5e-1}[dtype]
    torch.testing.assert_close(out.float(), want, rtol=tolerance, atol=tolerance)
