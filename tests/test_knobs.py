"""Knobs: every NAIAD_* variable, typed, overridable from code, and documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import naiad
from naiad import knobs
from naiad.errors import KnobError, NaiadError

ENVIRONMENT_MD = Path(__file__).resolve().parent.parent / "docs" / "ENVIRONMENT.md"


def test_defaults():
    assert knobs.backends.in_tree is False
    assert knobs.backends.plugin_dirs == []
    assert knobs.backends.default is None
    assert knobs.backends.import_timeout == 30.0
    assert knobs.backends.values() == {"in_tree": False, "plugin_dirs": [], "default": None,
                                       "import_timeout": 30.0}


def test_list_default_is_a_fresh_list_each_time():
    knobs.backends.plugin_dirs.append("/polluted")
    assert knobs.backends.plugin_dirs == []


def test_naiad_exposes_knobs():
    assert naiad.knobs is knobs


@pytest.mark.parametrize("raw", ["1", "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON",
                                 " 1 ", "tRuE\n"])
def test_true_values(monkeypatch, raw):
    monkeypatch.setenv("NAIAD_BACKENDS_IN_TREE", raw)
    assert knobs.backends.in_tree is True


@pytest.mark.parametrize("raw", ["0", "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF",
                                 " 0 ", "fAlSe\t"])
def test_false_values(monkeypatch, raw):
    monkeypatch.setenv("NAIAD_BACKENDS_IN_TREE", raw)
    assert knobs.backends.in_tree is False


def test_empty_variable_counts_as_unset(monkeypatch):
    monkeypatch.setenv("NAIAD_BACKENDS_IN_TREE", "")
    monkeypatch.setenv("NAIAD_PLUGIN_DIRS", "")
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "")
    assert knobs.backends.in_tree is False
    assert knobs.backends.plugin_dirs == []
    assert knobs.backends.default is None


@pytest.mark.parametrize("raw", ["maybe", "2", "y", "enabled", "-1", "truee"])
def test_bad_boolean_names_the_variable_and_the_accepted_values(monkeypatch, raw):
    monkeypatch.setenv("NAIAD_BACKENDS_IN_TREE", raw)
    with pytest.raises(KnobError) as info:
        knobs.backends.in_tree
    message = str(info.value)
    assert f"NAIAD_BACKENDS_IN_TREE={raw!r} is not a boolean" in message
    assert "set it to 1/0, true/false, yes/no or on/off, or unset it" in message
    assert isinstance(info.value, ValueError) and isinstance(info.value, NaiadError)


@pytest.mark.parametrize("raw, expected", [
    ("/a", ["/a"]),
    ("/a;/b", ["/a", "/b"]),
    (" /a ; ;/b;;  ", ["/a", "/b"]),
    ("C:\\plugins\\x;D:\\y", ["C:\\plugins\\x", "D:\\y"]),   # colons are not separators
    ("/with:colon", ["/with:colon"]),
    (";;", []),
])
def test_list_is_split_on_semicolons_with_blanks_dropped(monkeypatch, raw, expected):
    monkeypatch.setenv("NAIAD_PLUGIN_DIRS", raw)
    assert knobs.backends.plugin_dirs == expected


def test_string_is_taken_verbatim(monkeypatch):
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "mycpu")
    assert knobs.backends.default == "mycpu"


def test_environment_is_read_at_each_access(monkeypatch):
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "one")
    assert knobs.backends.default == "one"
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "two")
    assert knobs.backends.default == "two"
    monkeypatch.delenv("NAIAD_DEFAULT_BACKEND")
    assert knobs.backends.default is None


def test_assignment_overrides_the_environment_and_del_restores_it(monkeypatch):
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "from_env")
    monkeypatch.setenv("NAIAD_BACKENDS_IN_TREE", "yes")
    knobs.backends.default = "from_code"
    knobs.backends.in_tree = False
    assert knobs.backends.default == "from_code"
    assert knobs.backends.in_tree is False
    del knobs.backends.default
    del knobs.backends.in_tree
    assert knobs.backends.default == "from_env"
    assert knobs.backends.in_tree is True
    # Deleting again (no override left) is harmless.
    del knobs.backends.default
    assert knobs.backends.default == "from_env"


def test_override_hides_a_bad_environment_value(monkeypatch):
    monkeypatch.setenv("NAIAD_BACKENDS_IN_TREE", "bogus")
    knobs.backends.in_tree = True
    assert knobs.backends.in_tree is True


def test_reset_drops_every_override(monkeypatch):
    monkeypatch.setenv("NAIAD_PLUGIN_DIRS", "/env")
    knobs.backends.plugin_dirs = ["/code"]
    knobs.backends.default = "x"
    knobs.backends.reset()
    assert knobs.backends.plugin_dirs == ["/env"]
    assert knobs.backends.default is None


def test_group_scope_restores_overrides():
    knobs.backends.default = "outer"
    with knobs.backends.scope() as group:
        assert group is knobs.backends
        knobs.backends.default = "inner"
        knobs.backends.in_tree = True
        del knobs.backends.plugin_dirs
        assert knobs.backends.default == "inner"
    assert knobs.backends.default == "outer"
    assert knobs.backends.in_tree is False


def test_group_scope_restores_on_error():
    with pytest.raises(RuntimeError):
        with knobs.backends.scope():
            knobs.backends.default = "inner"
            raise RuntimeError
    assert knobs.backends.default is None


def test_module_scope_restores_every_group(monkeypatch):
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "env")
    knobs.backends.plugin_dirs = ["/kept"]
    with knobs.scope():
        knobs.backends.default = "inner"
        knobs.backends.plugin_dirs = ["/inner"]
        knobs.backends.reset()
        knobs.backends.in_tree = True
    assert knobs.backends.default == "env"
    assert knobs.backends.plugin_dirs == ["/kept"]
    assert knobs.backends.in_tree is False


def test_env_value_reflects_overrides(monkeypatch):
    monkeypatch.setenv("NAIAD_BACKENDS_IN_TREE", "yes")
    assert knobs.env_value("NAIAD_BACKENDS_IN_TREE") == "yes"
    knobs.backends.in_tree = True
    assert knobs.env_value("NAIAD_BACKENDS_IN_TREE") == "1"
    knobs.backends.in_tree = False
    assert knobs.env_value("NAIAD_BACKENDS_IN_TREE") == "0"
    del knobs.backends.in_tree
    assert knobs.env_value("NAIAD_BACKENDS_IN_TREE") == "yes"


def test_env_value_of_list_string_and_none_overrides(monkeypatch):
    monkeypatch.setenv("NAIAD_DEFAULT_BACKEND", "env")
    knobs.backends.plugin_dirs = ["/a", "/b"]
    assert knobs.env_value("NAIAD_PLUGIN_DIRS") == "/a;/b"
    # The text round-trips through the knob's own parser.
    knobs.backends.reset()
    monkeypatch.setenv("NAIAD_PLUGIN_DIRS", "/a;/b")
    assert knobs.backends.plugin_dirs == ["/a", "/b"]
    knobs.backends.default = "code"
    assert knobs.env_value("NAIAD_DEFAULT_BACKEND") == "code"
    knobs.backends.default = None
    assert knobs.env_value("NAIAD_DEFAULT_BACKEND") is None


def test_env_value_of_unrelated_variable(monkeypatch):
    monkeypatch.setenv("SOME_BACKEND_FLAG", "42")
    monkeypatch.delenv("SOME_OTHER_FLAG", raising=False)
    assert knobs.env_value("SOME_BACKEND_FLAG") == "42"
    assert knobs.env_value("SOME_OTHER_FLAG") is None


class _IntKnobs(knobs.KnobGroup):
    """A group used only here: no knob of Naiad is an integer yet, but the parser exists."""

    workers = knobs.env_int("NAIAD_TEST_ONLY_WORKERS", 4, "test knob")


def test_integer_knob(monkeypatch):
    group = _IntKnobs()
    assert group.workers == 4
    monkeypatch.setenv("NAIAD_TEST_ONLY_WORKERS", " 16 ")
    assert group.workers == 16
    monkeypatch.setenv("NAIAD_TEST_ONLY_WORKERS", "sixteen")
    with pytest.raises(KnobError, match=r"NAIAD_TEST_ONLY_WORKERS='sixteen' is not an integer: "
                                        r"set it to a whole number, or unset it"):
        group.workers
    group.workers = 2
    assert group.workers == 2


def _naiad_knobs() -> dict:
    """The core's knobs and the in-tree backends' (their groups registered by loading them);
    backends installed as plugins document their own."""
    for backend in IN_TREE_BACKENDS:
        getattr(knobs, backend)
    return {k: v for k, v in knobs.all_knobs().items()
            if k.split(".")[0] in knobs.CORE_GROUPS | set(IN_TREE_BACKENDS)}


IN_TREE_BACKENDS = ("cpu", "cuda", "hip")


@pytest.mark.shipped_backends
def test_in_tree_backends_declare_their_knob_groups():
    from naiad.backends.cpu.knobs import KNOBS as CPU
    from naiad.backends.cuda.knobs import KNOBS as CUDA
    from naiad.backends.hip.knobs import KNOBS as HIP

    assert knobs.cpu is CPU and knobs.cuda is CUDA and knobs.hip is HIP
    assert knobs.groups["cpu"] is CPU


def test_an_unknown_group_is_a_clear_error():
    with pytest.raises(AttributeError) as info:
        knobs.nvidia_old
    assert str(info.value).startswith("naiad.knobs has no group 'nvidia_old': the core's are autotuning, backends")


@pytest.mark.shipped_backends
def test_all_knobs_names_every_group_attribute():
    _naiad_knobs()
    every = knobs.all_knobs()
    assert set(every) == {f"{g}.{n}" for g, group in knobs.groups.items()
                          for n in group.knob_descriptors()}
    for key, knob in every.items():
        group, name = key.split(".")
        assert knob.name == name
        assert knob.env.startswith("NAIAD_")
        assert knob.doc.strip()
        assert getattr(type(knobs.groups[group]), name) is knob
    envs = [k.env for k in every.values()]
    assert len(envs) == len(set(envs)), "two knobs read the same variable"


def _documented_rows() -> dict[str, str | None]:
    """env name -> knob named in the same row (None if the row names none), from the table."""
    text = ENVIRONMENT_MD.read_text(encoding="utf-8")   # missing file: the test fails
    rows = {}
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            continue
        names = re.findall(r"`(NAIAD_[A-Z0-9_]+)`", line)
        if not names:
            continue
        knob = re.search(r"`([a-z_]+\.[a-z_]+)`", line)
        rows[names[0]] = knob.group(1) if knob else None
    return rows


@pytest.mark.shipped_backends
def test_environment_md_lists_exactly_the_knobs():
    assert ENVIRONMENT_MD.is_file(), f"{ENVIRONMENT_MD} is missing: it must document every knob"
    documented = _documented_rows()
    defined = {knob.env for knob in _naiad_knobs().values()}
    assert set(documented) == defined, (
        f"undocumented: {sorted(defined - set(documented))}; "
        f"documented but not defined: {sorted(set(documented) - defined)}")


@pytest.mark.shipped_backends
def test_environment_md_names_the_right_knob_for_each_variable():
    documented = _documented_rows()
    for key, knob in _naiad_knobs().items():
        if documented.get(knob.env) is not None:
            assert documented[knob.env] == key, knob.env
