"""naiad.compile: sources through a backend's stages, every stage kept in kernel.asm."""

from __future__ import annotations

import gc
import json
import sys

import pytest

import naiad
from naiad.backends.compiler import GPUTarget
from naiad.compiler.compiler import ASTSource, IRSource, make_backend
from naiad.compiler.frontend import make_ttir
from naiad.ir import print_module
from naiad.errors import BackendSelectionError, NaiadError

from jit_helpers import SCALE_SIGNATURE as SIGNATURE, scale

TOY = GPUTarget("toy", "v1", 1)


def test_ast_source_goes_through_every_stage(plugins):
    plugins.add("toy")
    kernel = naiad.compile(ASTSource(scale, SIGNATURE, {"BLOCK": 64}), target=TOY)
    assert list(kernel.asm) == ["ttir", "toyasm", "toybin"]
    assert "tt.func public @scale" in kernel.asm["ttir"]
    assert "tensor<64xf32>" in kernel.asm["ttir"]
    assert kernel.asm["toyasm"].startswith("toyasm(ttir(")
    assert isinstance(kernel.asm["toybin"], bytes) and kernel.binary.startswith(b"toybin(toyasm(")
    assert kernel.metadata["target"] == {"backend": "toy", "arch": "v1", "warp_size": 1}
    json.dumps(kernel.metadata)


def test_options_reach_the_backend_and_the_metadata(plugins):
    plugins.add("toy")
    kernel = naiad.compile(ASTSource(scale, SIGNATURE, {"BLOCK": 64}), target=TOY,
                           options={"num_warps": 8, "not_an_option": 1})
    assert kernel.metadata["num_warps"] == 8
    assert "not_an_option" not in kernel.metadata


def test_ttir_file_is_compiled_from_the_next_stage(plugins, tmp_path):
    plugins.add("toy")
    text = print_module(make_ttir(scale, SIGNATURE, {"BLOCK": 64}))
    path = tmp_path / "scaled.ttir"
    path.write_text(text)
    kernel = naiad.compile(str(path), target=TOY)
    assert kernel.asm["ttir"] == text
    assert kernel.asm["toyasm"].startswith("toyasm(")       # not "toyasm(ttir(": ttir was skipped
    assert "tt.func public @scale" in kernel.asm["toyasm"]
    assert kernel.name == "scale"
    assert IRSource(str(path)).hash() == IRSource(str(path)).hash()


def test_file_of_a_stage_the_backend_lacks(plugins, tmp_path):
    plugins.add("toy")
    path = tmp_path / "kernel.ptx"
    path.write_text("// nothing")
    with pytest.raises(NaiadError, match=r"has no stage 'ptx' \(its stages: ttir, toyasm, toybin\)"):
        naiad.compile(str(path), target=TOY)


def test_ir_file_needs_exactly_one_kernel(plugins, tmp_path):
    plugins.add("toy")
    path = tmp_path / "two.ttir"
    path.write_text("module {\n  tt.func public @a() {\n    tt.return\n  }\n"
                    "  tt.func public @b() {\n    tt.return\n  }\n}\n")
    with pytest.raises(NaiadError, match="expected exactly one public tt.func"):
        naiad.compile(str(path), target=TOY)


def test_no_backend_for_the_target(plugins):
    plugins.add("toy")
    with pytest.raises(BackendSelectionError, match=r"0 backends compile for .*other.* \(none\)"):
        make_backend(GPUTarget("other", 0, 1))


def test_source_hash_follows_the_specialization():
    a = ASTSource(scale, SIGNATURE, {"BLOCK": 64}).hash()
    assert a == ASTSource(scale, SIGNATURE, {"BLOCK": 64}).hash()
    assert a != ASTSource(scale, SIGNATURE, {"BLOCK": 128}).hash()
    assert a != ASTSource(scale, dict(SIGNATURE, n="i64"), {"BLOCK": 64}).hash()


def test_the_backend_a_target_names_is_used_without_loading_the_others(plugins, monkeypatch):
    """make_backend takes the backend named by ``target.backend`` when it supports the target,
    without importing every other backend first (a cold compile pays for each import)."""
    from naiad.backends.compiler import GPUTarget
    from naiad.backends.discovery import registry
    from naiad.compiler.compiler import make_backend

    plugins.add("toy")
    plugins.add("other")
    loaded = []
    original = registry.get_or_failure
    monkeypatch.setattr(registry, "get_or_failure", lambda name: loaded.append(name) or original(name))
    make_backend.cache_clear()
    try:
        backend = make_backend(GPUTarget("toy", "v1", 1))
    finally:
        make_backend.cache_clear()
    assert type(backend).__name__ == "ToyBackend" and loaded == ["toy"]


def test_a_constexpr_named_after_no_parameter_is_a_clear_error():
    with pytest.raises(NaiadError) as info:
        make_ttir(scale, SIGNATURE, {"BLOK": 64}, {})
    assert str(info.value).startswith("scale: 'BLOK' is not one of its parameters (")
    assert "fix: name the constexprs and attributes given to ASTSource" in str(info.value)


def _collector_during_a_compile(plugins, monkeypatch) -> dict:
    """What the collector looks like from inside a compile of the toy backend (its stages
    inspection hook runs there)."""
    from naiad import knobs

    plugins.add("toy")
    seen: dict = {}
    monkeypatch.setattr(knobs.runtime, "add_stages_inspection_hook",
                        lambda *args: seen.update(frozen=gc.get_freeze_count(),
                                                  threshold=gc.get_threshold()))
    monkeypatch.setattr(knobs.compilation, "always_compile", True)
    naiad.compile(ASTSource(scale, SIGNATURE, {"BLOCK": 64}), target=TOY)
    return seen


def test_a_compile_freezes_the_heap_that_was_there_and_thaws_it_after(plugins, monkeypatch):
    """Collections inside a compile skip the objects made before it (with torch imported, a
    full collection of those cost 100-150 ms of every cold compile); afterwards the collector
    is as it was, and garbage made during the compile was collectable."""
    old_threshold = gc.get_threshold()
    before = gc.get_freeze_count()
    assert before == 0
    seen = _collector_during_a_compile(plugins, monkeypatch)
    assert seen["frozen"] > 1000 and seen["threshold"][0] == 100_000
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == old_threshold


def test_a_compile_leaves_a_program_s_own_freeze_alone(plugins, monkeypatch):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        seen = _collector_during_a_compile(plugins, monkeypatch)
        # nothing more frozen by the compile (frozen objects that die leave the count) ...
        assert frozen - 100 < seen["frozen"] <= frozen
        assert gc.get_freeze_count() > frozen - 100    # ... and the program's freeze kept
    finally:
        gc.unfreeze()


def _freeze_counts_per_stage(plugins, monkeypatch, first_stage_imports: str | None) -> list[int]:
    """The collector's freeze count as each of the toy backend's stages starts, where the first
    stage may import a module."""
    from naiad import knobs
    import importlib

    plugins.add("toy")
    counts: list[int] = []

    def wrap(name, stage):
        def run(ir, metadata):
            counts.append(gc.get_freeze_count())
            if first_stage_imports and not counts[:-1]:
                importlib.import_module(first_stage_imports)
            return stage(ir, metadata)
        return run

    def inspect(backend=None, stages=None, *rest):
        if stages is None:                  # Triton's convention: asked for its cache key
            return ("freeze-counts", "1")
        for name in list(stages):
            stages[name] = wrap(name, stages[name])

    monkeypatch.setattr(knobs.runtime, "add_stages_inspection_hook", inspect)
    monkeypatch.setattr(knobs.compilation, "always_compile", True)
    naiad.compile(ASTSource(scale, SIGNATURE, {"BLOCK": 64}), target=TOY)
    return counts


def test_what_a_compile_s_imports_made_is_frozen_at_the_next_stage(plugins, monkeypatch, tmp_path):
    """The compile path's modules, imported by the first compile of a process, are not looked
    at by the collections of the rest of it (~40 ms of a cold tensor-core compile); a compile
    that imports nothing freezes no more than it found."""
    (tmp_path / "naiad_test_big_module.py").write_text("TABLE = [[i] for i in range(20000)]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "naiad_test_big_module", raising=False)
    counts = _freeze_counts_per_stage(plugins, monkeypatch, "naiad_test_big_module")
    assert counts[1] >= counts[0] + 20000
    assert gc.get_freeze_count() == 0
    counts = _freeze_counts_per_stage(plugins, monkeypatch, None)
    assert max(counts) <= counts[0]


def test_a_compile_leaves_a_disabled_collector_alone(plugins, monkeypatch):
    gc.disable()
    try:
        seen = _collector_during_a_compile(plugins, monkeypatch)
        assert seen["frozen"] == 0 and not gc.isenabled()
    finally:
        gc.enable()
    assert gc.get_freeze_count() == 0


def test_ast_source_constants_are_keyed_by_parameter_path():
    """Triton's ``ASTSource.constants``: what a client launching the binary itself leaves out."""
    src = ASTSource(scale, SIGNATURE, {"BLOCK": 64})
    assert src.constants == {(scale.arg_names.index("BLOCK"),): 64}
    assert ASTSource(scale, SIGNATURE, {(1, 0): 3}).constants == {(1, 0): 3}
