"""JITFunction: source extraction, annotations, cache keys that follow dependencies."""

from __future__ import annotations

import numpy as np
import pytest

import naiad
import naiad.language as tl
from naiad.compiler.frontend import specialize

import jit_helpers


@naiad.jit(repr=lambda *_: "def fake(")
def def_in_decorator(x_ptr):
    tl.store(x_ptr, 1.0)


def test_source_starts_at_the_def_line():
    assert def_in_decorator.src.startswith("def def_in_decorator(")
    import inspect

    lines, first = inspect.getsourcelines(def_in_decorator.fn)
    assert def_in_decorator.starting_line_number == first
    assert def_in_decorator.def_line == first + 1


def test_python_and_string_annotations():
    kinds = {p.name: p.annotation for p in jit_helpers.annotated.params}
    assert kinds == {"x_ptr": "", "n": "", "m": "i64", "flag": "", "block": "constexpr"}
    signature, constexprs, _, _ = specialize(jit_helpers.annotated, np.zeros(4, np.float32), 3, 5,
                                             True, 4)
    assert signature["m"] == "i64" and signature["n"] == "i32" and signature["flag"] == "u1"
    assert constexprs == {"block": 4}


def test_int_annotation_still_specializes_ones():
    signature, constexprs, _, _ = specialize(jit_helpers.annotated, np.zeros(4, np.float32), 1, 1,
                                             False, 4)
    assert signature["n"] == "constexpr" and constexprs["n"] == 1      # plain int: Triton's rule
    assert signature["m"] == "i64"                                      # typed: never a constexpr


def test_cache_key_follows_a_called_function(monkeypatch):
    before = jit_helpers.uses_helper.cache_key
    original = jit_helpers.helper.src
    jit_helpers.helper._unsafe_update_src(original.replace("x + 1", "x + 2"))
    try:
        assert jit_helpers.uses_helper.cache_key != before
    finally:
        jit_helpers.helper._unsafe_update_src(original)
    assert jit_helpers.uses_helper.cache_key == before


def test_cache_key_follows_a_constexpr_global(monkeypatch):
    before = jit_helpers.uses_helper.cache_key
    monkeypatch.setattr(jit_helpers, "SCALE", tl.constexpr(3))
    assert jit_helpers.uses_helper.cache_key != before


def test_cache_key_follows_module_attribute_calls():
    names = [name for name, _ in naiad.language.kernel_function.dependencies(jit_helpers.uses_helper)]
    assert names == ["SCALE", "helper"]


@pytest.mark.shipped_backends
def test_relaunch_recompiles_after_a_dependency_changes(monkeypatch):
    x, out = np.array([1.0], np.float32), np.zeros(1, np.float32)
    jit_helpers.uses_helper[(1,)](x, out)
    assert out[0] == 4.0
    monkeypatch.setattr(jit_helpers, "SCALE", tl.constexpr(10))
    jit_helpers.uses_helper[(1,)](x, out)
    assert out[0] == 20.0


def _decorate(fn):
    return fn


@_decorate
@naiad.jit(
    do_not_specialize=["n"])
def _stacked(x, n,
             BLOCK: tl.constexpr):  # a comment
    # a comment line inside
    tl.store(x + tl.arange(0, BLOCK), n)


def _outer():
    @naiad.jit
    def inner(x):
        tl.store(x, 1)
    return inner


@pytest.mark.parametrize("fn", [_stacked.fn, _outer().fn, jit_helpers.scale.fn, _decorate],
                         ids=["stacked-decorators", "nested", "other-module", "plain"])
def test_kernel_source_is_read_as_inspect_reads_it(fn):
    """One parse of a file serves every function in it (inspect tokenizes the file again for
    each); the lines and first line must be inspect's."""
    import inspect

    from naiad.language.kernel_function import _source_lines

    assert _source_lines(fn) == inspect.getsourcelines(fn)


def test_kernel_source_follows_an_edited_file(tmp_path, monkeypatch):
    """A file read again (new lines in linecache) is parsed again."""
    import importlib
    import linecache
    import sys

    path = tmp_path / "edited_kernels.py"
    path.write_text("import naiad\n\n@naiad.jit\ndef k(x):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    first = importlib.import_module("edited_kernels")
    assert first.k.src.startswith("def k(x):")
    path.write_text("import naiad\n\n@naiad.jit\ndef k(x, y):\n    y = 1\n    pass\n")
    linecache.checkcache(str(path))
    del sys.modules["edited_kernels"]
    second = importlib.import_module("edited_kernels")       # same first line, longer body
    assert second.k.src == "def k(x, y):\n    y = 1\n    pass\n"


def test_repr_and_used_global_vals_as_triton_s_clients_read_them():
    """``fn.repr(specialization)`` is the ``repr=`` callable's answer, else the name; Inductor
    replaces it and ``used_global_vals`` on the instance around pickling and puts them back."""
    assert def_in_decorator.repr(None) == "def fake("
    assert jit_helpers.scale.repr(None) == "scale"
    kernel = naiad.jit(jit_helpers.scale.fn)
    saved = kernel.repr, kernel.used_global_vals
    assert saved[1] == {}
    kernel.repr, kernel.used_global_vals = (lambda _: "constant"), None
    assert kernel.repr(kernel) == "constant"
    kernel.repr, kernel.used_global_vals = saved
    assert kernel.repr(None) == "scale"
