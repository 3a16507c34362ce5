"""NAIAD_KERNEL_DUMP / NAIAD_DUMP_DIR and NAIAD_KERNEL_OVERRIDE / NAIAD_OVERRIDE_DIR, for a
fixture backend and for every IR stage of the CPU backend."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.backends.compiler import GPUTarget
from naiad.compiler import cache
from naiad.compiler.compiler import ASTSource
from naiad.compiler.dump import OverrideError
from naiad.ir.context import IRParseError

TOY = GPUTarget("toy", "v1", 1)


@naiad.jit
def affine(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * 2.0 + 3.0, mask=mask)


SIGNATURE = {"x": "*fp32", "out": "*fp32", "n": "i32", "BLOCK": "constexpr"}


def source() -> ASTSource:
    return ASTSource(affine, SIGNATURE, {"BLOCK": 128})


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """A fresh cache, dump and override directory; returns (cache, dump, override)."""
    paths = tmp_path / "cache", tmp_path / "dump", tmp_path / "override"
    monkeypatch.setenv("NAIAD_CACHE_DIR", str(paths[0]))
    monkeypatch.setenv("NAIAD_DUMP_DIR", str(paths[1]))
    monkeypatch.setenv("NAIAD_OVERRIDE_DIR", str(paths[2]))
    cache._managers.clear()
    return paths


def _override(override_dir, kernel, stage, text_or_bytes) -> str:
    folder = override_dir / kernel.hash
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"affine.{stage}"
    if isinstance(text_or_bytes, bytes):
        path.write_bytes(text_or_bytes)
    else:
        path.write_text(text_or_bytes)
    return str(path)


# -- dumps -----------------------------------------------------------------------------------

def test_dump_writes_every_stage_when_compiled_and_when_cached(plugins, dirs, monkeypatch,
                                                               stage_calls):
    _, dump_dir, _ = dirs
    plugins.add("toy")
    monkeypatch.setenv("NAIAD_KERNEL_DUMP", "1")
    kernel = naiad.compile(source(), target=TOY)
    folder = dump_dir / kernel.hash
    assert sorted(os.listdir(folder)) == ["affine.json", "affine.toyasm", "affine.toybin", "affine.ttir"]
    for stage, output in kernel.asm.items():
        written = (folder / f"affine.{stage}").read_bytes()
        assert written == (output if isinstance(output, bytes) else output.encode())
    shutil.rmtree(dump_dir)
    stage_calls.clear()
    naiad.compile(source(), target=TOY)                    # a cache hit dumps as well
    assert stage_calls == []
    assert sorted(os.listdir(folder)) == ["affine.json", "affine.toyasm", "affine.toybin", "affine.ttir"]


def test_dump_dir_defaults_under_the_cache_dir(plugins, dirs, monkeypatch):
    cache_dir, _, _ = dirs
    monkeypatch.delenv("NAIAD_DUMP_DIR")
    monkeypatch.delenv("NAIAD_OVERRIDE_DIR")
    assert naiad.knobs.cache.dump_dir == str(cache_dir / "dump")
    assert naiad.knobs.cache.override_dir == str(cache_dir / "override")
    plugins.add("toy")
    naiad.knobs.compilation.dump_ir = True
    kernel = naiad.compile(source(), target=TOY)
    assert (cache_dir / "dump" / kernel.hash / "affine.toybin").read_bytes() == kernel.binary


def test_no_dump_by_default(plugins, dirs):
    plugins.add("toy")
    naiad.compile(source(), target=TOY)
    assert not dirs[1].exists()


# -- overrides, fixture backend ----------------------------------------------------------------

def test_override_of_a_text_stage_feeds_the_next_stage(plugins, dirs, monkeypatch):
    cache_dir, _, override_dir = dirs
    plugins.add("toy")
    original = naiad.compile(source(), target=TOY)
    path = _override(override_dir, original, "toyasm", "hand-written asm")
    naiad.compile(source(), target=TOY)                     # the variable is off: ignored
    monkeypatch.setenv("NAIAD_KERNEL_OVERRIDE", "1")
    edited = naiad.compile(source(), target=TOY)
    assert edited.asm["toyasm"] == "hand-written asm"
    assert edited.binary == b"toybin(hand-written asm)"
    assert edited.metadata["overrides"] == {"toyasm": path}
    assert edited.hash == original.hash
    monkeypatch.delenv("NAIAD_KERNEL_OVERRIDE")
    again = naiad.compile(source(), target=TOY)            # the cache still holds the original
    assert again.binary == original.binary and "overrides" not in again.metadata


def test_override_of_the_binary_stage(plugins, dirs, monkeypatch):
    plugins.add("toy")
    original = naiad.compile(source(), target=TOY)
    _override(dirs[2], original, "toybin", b"\x00\xffraw")
    monkeypatch.setenv("NAIAD_KERNEL_OVERRIDE", "1")
    assert naiad.compile(source(), target=TOY).binary == b"\x00\xffraw"


def test_overridden_kernel_is_not_stored(plugins, dirs, monkeypatch, stage_calls):
    cache_dir, _, override_dir = dirs
    plugins.add("toy")
    key = naiad.compile(source(), target=TOY).hash
    shutil.rmtree(cache_dir / "kernels")
    (override_dir / key).mkdir(parents=True)
    (override_dir / key / "affine.toyasm").write_text("edited")
    monkeypatch.setenv("NAIAD_KERNEL_OVERRIDE", "1")
    stage_calls.clear()
    naiad.compile(source(), target=TOY)
    naiad.compile(source(), target=TOY)
    assert stage_calls == ["ttir", "toyasm", "toybin"] * 2   # never read from the cache either
    assert not (cache_dir / "kernels").exists()


def test_override_of_a_stage_whose_output_is_not_text(plugins, dirs, monkeypatch):
    plugins.add("toy", compiler_methods={"add_stages": """
        def add_stages(self, stages, options, language):
            class Opaque:
                def __str__(self):
                    return "opaque IR"
            def first(ir, metadata):
                metadata["name"], metadata["shared"] = "affine", 0
                return Opaque()
            stages["ttir"] = first
            stages["toybin"] = lambda ir, metadata: b"bin"
    """})
    kernel = naiad.compile(source(), target=TOY)
    path = _override(dirs[2], kernel, "ttir", "text")
    monkeypatch.setenv("NAIAD_KERNEL_OVERRIDE", "1")
    with pytest.raises(OverrideError, match=r"stage 'ttir' of the toy backend hands the next stage "
                                            r"a .*Opaque object, which Naiad cannot build from text"
                       ) as info:
        naiad.compile(source(), target=TOY)
    assert path in str(info.value)


# -- overrides, CPU backend ------------------------------------------------------------------

EDITS = {
    # stage: (text in the dump, replacement, expected output for x)
    "ttir": ("dense<3.000000e+00>", "dense<5.000000e+00>", lambda x: 2 * x + 5),
    "ttgir": ("dense<2.000000e+00>", "dense<4.000000e+00>", lambda x: 4 * x + 3),
    "llir": ("3.000000e+00", "1.000000e+00", lambda x: 2 * x + 1),
}


def _launch():
    x = np.arange(300, dtype=np.float32)
    out = np.zeros_like(x)
    affine.cache.clear()                  # the in-process JIT cache would skip compile()
    kernel = affine[(naiad.cdiv(300, 128),)](x, out, 300, BLOCK=128)
    return kernel, x, out


@pytest.mark.shipped_backends
@pytest.mark.parametrize("stage", list(EDITS))
def test_cpu_dump_edit_override_round_trip(dirs, monkeypatch, stage):
    _, dump_dir, override_dir = dirs
    naiad.set_backend("cpu")
    monkeypatch.setenv("NAIAD_KERNEL_DUMP", "1")
    kernel, x, out = _launch()
    np.testing.assert_array_equal(out, 2 * x + 3)
    dumped = (dump_dir / kernel.hash / f"affine.{stage}").read_text()
    old, new, expected = EDITS[stage]
    assert old in dumped
    path = _override(override_dir, kernel, stage, dumped.replace(old, new))
    monkeypatch.setenv("NAIAD_KERNEL_OVERRIDE", "1")
    edited, x, out = _launch()
    np.testing.assert_array_equal(out, expected(x))
    assert edited.metadata["overrides"] == {stage: path}
    assert new in edited.asm[stage]
    # The dump shows what ran: the edited stage and what was built from it.
    assert new in (dump_dir / kernel.hash / f"affine.{stage}").read_text()
    monkeypatch.delenv("NAIAD_KERNEL_OVERRIDE")
    _, x, out = _launch()                 # the cached kernel is the original one
    np.testing.assert_array_equal(out, 2 * x + 3)


@pytest.mark.shipped_backends
def test_cpu_override_that_does_not_parse_names_the_file(dirs, monkeypatch):
    naiad.set_backend("cpu")
    kernel, _, _ = _launch()
    path = _override(dirs[2], kernel, "ttgir", "builtin.module {\n  tt.func public @affine(\n")
    monkeypatch.setenv("NAIAD_KERNEL_OVERRIDE", "1")
    with pytest.raises(IRParseError, match="override file") as info:
        _launch()
    assert path in str(info.value)
