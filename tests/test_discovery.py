"""Discovery: the three sources, their precedence, lazy loading, and every failure's message."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import naiad
import naiad.backends
from naiad import knobs
from naiad.backends import discovery, selection
from naiad.backends.compiler import BACKEND_API_VERSION, OLDEST_BACKEND_API_VERSION
from naiad.errors import NaiadWarning

from plugin_fixtures import (compiler_class_name, driver_class_name, subprocess_env,
                             write_plugin)


def _failure(registry, name):
    """Load ``name``, expect it to fail, and return its recorded failure."""
    with pytest.warns(NaiadWarning, match=f"backend skipped: {name} "):
        with pytest.raises(KeyError) as info:
            registry[name]
    failures = [f for f in registry.failures() if f.name == name]
    assert len(failures) == 1, registry.failures()
    assert failures[0].reason in info.value.args[0]
    return failures[0]


def _layout_failure(registry, root):
    """The listing failure recorded for plugin directory ``root``."""
    root = os.path.abspath(root)
    failures = [f for f in registry.skipped() if f.location == root]
    assert len(failures) == 1, registry.skipped()
    assert failures[0].origin == "plugin dir"
    return failures[0]


def _file_of(cls) -> Path:
    return Path(inspect.getfile(cls)).resolve()


# --------------------------------------------------------------------------------------------
# A good plugin directory
# --------------------------------------------------------------------------------------------

def test_plugin_dir_backend_is_listed_with_its_origin(registry, plugin):
    sources = registry.sources()
    assert list(sources) == ["toy"]
    source = sources["toy"]
    assert source.origin == "plugin dir"
    assert source.location == os.path.abspath(plugin)
    assert source.package == "naiad.backends.toy"
    assert source.describe() == f"plugin dir {os.path.abspath(plugin)}"


def test_plugin_dir_backend_loads_with_its_classes(registry, plugin):
    backend = registry["toy"]
    assert backend.name == "toy"
    assert backend.compiler.__name__ == compiler_class_name("toy")
    assert backend.driver.__name__ == driver_class_name("toy")
    assert _file_of(backend.compiler) == (plugin / "backend" / "compiler.py").resolve()
    assert _file_of(backend.driver) == (plugin / "backend" / "driver.py").resolve()
    assert backend.api_version == BACKEND_API_VERSION
    assert backend.driver.device_types == ("toydev",)
    # The public mapping is the same registry.
    assert naiad.backends.backends["toy"] is backend
    assert "toy" in naiad.backends.backends
    assert list(naiad.backends.backends) == ["toy"]
    assert len(naiad.backends.backends) == 1
    assert registry.failures() == []


def test_loaded_backend_is_cached(registry, plugin):
    assert registry["toy"] is registry["toy"]


def test_unknown_name_lists_discovered_backends(registry, plugin):
    with pytest.raises(KeyError, match=r"no backend named 'nosuch'; discovered: toy"):
        registry["nosuch"]
    assert "nosuch" not in registry


def test_plugin_language_is_importable_with_an_import_statement(plugins):
    root = plugins.add("toy")
    # Nothing has asked discovery for anything yet: the import hook finds the directory itself.
    import naiad.language.extra.toy as lang
    import naiad.language.extra.toy.libdevice as libdevice

    assert lang.answer() == 42
    assert libdevice.fast_answer() == 43
    assert Path(lang.__file__).resolve() == (root / "language" / "__init__.py").resolve()
    assert Path(libdevice.__file__).resolve() == (root / "language" / "libdevice.py").resolve()


def test_plugin_tools_are_importable_as_tools_extra(plugins):
    root = plugins.add("toy")
    import naiad.tools.extra.toy as tools

    assert tools.main() == "toy tool"
    assert Path(tools.__file__).resolve() == (root / "tools" / "__init__.py").resolve()


def test_language_dir_without_init_is_a_package(plugins):
    root = plugins.add("toy", language=False,
                       files={"language/ops.py": "def double(x):\n    return 2 * x\n"})
    import naiad.language.extra.toy.ops as ops

    assert ops.double(21) == 42
    assert Path(ops.__file__).resolve() == (root / "language" / "ops.py").resolve()


def test_plugin_without_language_dir_provides_no_language_module(plugins):
    plugins.add("bare", language=False, tools=False)
    with pytest.raises(ModuleNotFoundError):
        import naiad.language.extra.bare  # noqa: F401
    with pytest.raises(ModuleNotFoundError):
        import naiad.tools.extra.bare  # noqa: F401


def test_relative_import_inside_plugin_compiler_works(registry, plugins):
    root = plugins.add("rel", files={"backend/helper.py": "PREFIX = 'from-helper'\n"},
                       compiler_extra="from . import helper\n",
                       compiler_methods={"get_target_name": """
                           def get_target_name(self, options):
                               return helper.PREFIX + ":" + str(self.target.arch)
                       """})
    backend = registry["rel"]
    helper = sys.modules["naiad.backends.rel.helper"]
    assert Path(helper.__file__).resolve() == (root / "backend" / "helper.py").resolve()
    compiler = backend.compiler(naiad.backends.GPUTarget("rel", "v1", 1))
    assert compiler.get_target_name(None) == "from-helper:v1"


# --------------------------------------------------------------------------------------------
# Layout problems (found while listing, before any import)
# --------------------------------------------------------------------------------------------

def test_missing_name_conf(registry, plugins):
    root = plugins.add("toy", conf=False)
    assert registry.sources() == {}
    failure = _layout_failure(registry, root)
    conf = os.path.join(os.path.abspath(root), "backend", "name.conf")
    assert f"{conf} is missing" in failure.reason
    assert "fix: create it containing the backend's name" in failure.reason
    # No name could be read: the failure is named after the directory.
    assert failure.name == os.path.abspath(root)


def test_empty_name_conf(registry, plugins):
    root = plugins.add("toy", conf="  \n\n")
    assert registry.sources() == {}
    failure = _layout_failure(registry, root)
    assert "name.conf is empty" in failure.reason
    assert "fix: write the backend's name into it" in failure.reason


def test_name_conf_that_is_not_utf8(registry, plugins):
    root = plugins.make("toy")
    (root / "backend" / "name.conf").write_bytes(b"\xff\xfetoy\n")
    plugins.use(root)
    assert registry.sources() == {}
    failure = _layout_failure(registry, root)
    assert "name.conf cannot be read" in failure.reason
    assert "fix: make it a readable UTF-8 text file" in failure.reason


@pytest.mark.parametrize("bad_name", ["my-backend", "2fast", "has space", "_private", "Toy",
                                      "naïve", "toyÄ"])
def test_name_conf_with_invalid_name(registry, plugins, bad_name):
    root = plugins.add("toy", conf=bad_name + "\n")
    assert registry.sources() == {}
    failure = _layout_failure(registry, root)
    assert f"names {bad_name!r}, which is not a valid backend name" in failure.reason
    assert "fix: use lowercase ASCII letters, digits and underscores, starting with a letter" in failure.reason


@pytest.mark.parametrize("keyword", ["class", "import", "None", "lambda"])
def test_name_conf_naming_a_python_keyword(registry, plugins, keyword):
    root = plugins.add("toy", conf=keyword + "\n")
    assert registry.sources() == {}
    failure = _layout_failure(registry, root)
    problem = "which is a Python keyword" if keyword.islower() else "which is not a valid"
    assert f"names {keyword!r}, {problem}" in failure.reason


def test_entry_point_with_an_invalid_name_is_skipped(registry, site):
    site.package("bad_pkg", name="bad")
    site.package("good_pkg", name="good")
    site.dist("badnames", "1.0", {"Bad-Name": "bad_pkg", "class": "bad_pkg", "good": "good_pkg"})
    assert sorted(registry.sources()) == ["good"]
    reasons = {f.name: f.reason for f in registry.skipped()}
    assert "which is not a valid backend name -- fix: use lowercase ASCII letters" in reasons["Bad-Name"]
    assert "'class' (entry point badnames 1.0), which is a Python keyword" in reasons["class"]


@pytest.mark.parametrize("reserved", ["compiler", "driver", "discovery", "selection", "plugin_dirs",
                                      "libdevice"])
def test_name_conf_with_reserved_name(registry, plugins, reserved):
    root = plugins.add("toy", conf=reserved)
    assert registry.sources() == {}
    failure = _layout_failure(registry, root)
    assert f"names {reserved!r}, which is the name of one of Naiad's own modules" in failure.reason
    assert "fix: choose another name" in failure.reason


def test_plugin_cannot_replace_attributes_of_naiad_backends(registry, plugins):
    # "backends" is not a module of naiad.backends, but it is the attribute holding the
    # registry: importing naiad.backends.backends would rebind it to the plugin's package.
    plugins.add("backends")
    if "backends" in registry.sources():
        registry.get_or_failure("backends")
    assert naiad.backends.backends is discovery.registry, (
        "loading a plugin named 'backends' replaced naiad.backends.backends (the registry) "
        "with the plugin's package; such names must be rejected as reserved")


def test_missing_driver_py(registry, plugins):
    root = plugins.add("toy", driver=False)
    assert registry.sources() == {}
    failure = _layout_failure(registry, root)
    assert failure.name == "toy"
    driver = os.path.join(os.path.abspath(root), "backend", "driver.py")
    assert f"{driver} is missing" in failure.reason
    assert "fix: create it with one concrete subclass of naiad.backends.driver.DriverBase" in failure.reason


def test_missing_compiler_py(registry, plugins):
    root = plugins.add("toy", compiler=False)
    assert registry.sources() == {}
    failure = _layout_failure(registry, root)
    compiler = os.path.join(os.path.abspath(root), "backend", "compiler.py")
    assert f"{compiler} is missing" in failure.reason
    assert "fix: create it with one concrete subclass of naiad.backends.compiler.BaseBackend" in failure.reason


def test_every_layout_problem_is_listed_at_once(registry, plugins):
    root = plugins.add("toy", conf=False, compiler=False, driver=False)
    reason = _layout_failure(registry, root).reason
    for missing in ("name.conf", "compiler.py", "driver.py"):
        assert f"{missing} is missing" in reason


def test_plugin_dir_that_does_not_exist(registry, plugins, tmp_path):
    missing = tmp_path / "no" / "such" / "dir"
    plugins.use(missing)
    assert registry.sources() == {}
    failure = _layout_failure(registry, missing)
    assert f"{os.path.abspath(missing)} is not a directory" in failure.reason
    assert "fix: fix the path in NAIAD_PLUGIN_DIRS" in failure.reason


def test_language_that_is_a_file(registry, plugins):
    root = plugins.make("toy", language=False)
    (root / "language").write_text("not a directory\n")
    plugins.use(root)
    assert registry.sources() == {}
    failure = _layout_failure(registry, root)
    assert "language is not a directory" in failure.reason
    assert "make language/ a directory of Python modules or remove it" in failure.reason


# --------------------------------------------------------------------------------------------
# Load problems (found when the backend is first asked for)
# --------------------------------------------------------------------------------------------

def test_compiler_with_an_unimplemented_method(registry, plugins):
    plugins.add("toy", compiler_methods={"get_target_name": None})
    assert "toy" in registry.sources()
    reason = _failure(registry, "toy").reason
    assert "naiad.backends.toy.compiler defines no concrete subclass of " \
           "naiad.backends.compiler.BaseBackend" in reason
    assert f"{compiler_class_name('toy')} leaves abstract: get_target_name" in reason
    assert "fix: define exactly one class deriving from BaseBackend that implements every " \
           "abstract method" in reason


def test_a_compiler_may_leave_out_what_has_defaults(registry, plugins):
    """API 3: no dialects, no module map and dots of any size need no methods."""
    from naiad.backends.compiler import GPUTarget

    plugins.add("toy", compiler_methods={"load_dialects": None, "get_module_map": None,
                                         "get_codegen_implementation": None})
    backend = registry["toy"]
    compiler = backend.compiler(GPUTarget("toy", "v1", 32))
    assert compiler.load_dialects(None) is None and compiler.get_module_map() == {}
    assert compiler.get_codegen_implementation(None)["min_dot_size"](None, None) == (1, 1, 1)


def test_a_driver_may_leave_out_the_c_types(registry, plugins):
    """API 3: map_python_to_cpp_type defaults to the shared table (pointer_c_type for pointers)."""
    plugins.add("toy", driver_methods={"map_python_to_cpp_type": None,
                                       "pointer_c_type": "pointer_c_type = 'toy_ptr_t'"})
    driver = registry["toy"].driver()
    assert [driver.map_python_to_cpp_type(t) for t in ("*fp32", "i8", "fp16", "bf16")] == \
        ["toy_ptr_t", "int8_t", "_Float16", "uint16_t"]


_TOY_KNOBS = """
from naiad.knobs import KnobGroup, env_int


class ToyKnobs(KnobGroup):
    lanes = env_int("NAIAD_TOY_LANES", 8, "Lanes of the toy device.")


KNOBS = ToyKnobs()
"""


def test_a_backend_declares_its_knob_group(registry, plugins, monkeypatch):
    from naiad import knobs

    plugins.add("toy", files={"backend/knobs.py": _TOY_KNOBS},
                compiler_methods={"knob_group": "from .knobs import KNOBS as knob_group"})
    assert knobs.toy.lanes == 8                     # the first use loads the backend
    assert knobs.groups["toy"] is registry["toy"].compiler.knob_group
    monkeypatch.setenv("NAIAD_TOY_LANES", "16")
    assert knobs.toy.lanes == 16
    knobs.toy.lanes = 4
    assert knobs.env_value("NAIAD_TOY_LANES") == "4"


def test_a_knob_group_that_is_not_one_is_a_clear_error(registry, plugins):
    plugins.add("toy", compiler_methods={"knob_group": "knob_group = {'lanes': 8}"})
    reason = _failure(registry, "toy").reason
    assert f"{compiler_class_name('toy')}.knob_group is dict, not a naiad.knobs.KnobGroup -- fix: " \
           "set it to an instance of a KnobGroup subclass" in reason


def test_a_backend_cannot_take_a_core_knob_group(registry, plugins):
    plugins.add("cache", files={"backend/knobs.py": _TOY_KNOBS},
                compiler_methods={"knob_group": "from .knobs import KNOBS as knob_group"})
    reason = _failure(registry, "cache").reason
    assert "backend 'cache' cannot declare knobs: naiad.knobs.cache is the core's -- fix: rename " \
           "the backend" in reason


def test_driver_with_unimplemented_methods_lists_each(registry, plugins):
    plugins.add("toy", driver_methods={"load_binary": None, "unload_module": None})
    reason = _failure(registry, "toy").reason
    assert "defines no concrete subclass of naiad.backends.driver.DriverBase" in reason
    assert f"{driver_class_name('toy')} leaves abstract: load_binary, unload_module" in reason
    assert "fix: define exactly one class deriving from DriverBase" in reason


def test_two_concrete_compiler_classes(registry, plugins):
    plugins.add("toy", compiler_extra=f"""
        class SecondBackend({compiler_class_name('toy')}):
            pass
    """)
    reason = _failure(registry, "toy").reason
    assert "defines 2 concrete subclasses of BaseBackend" in reason
    assert compiler_class_name("toy") in reason and "SecondBackend" in reason
    assert "fix: keep exactly one; make helpers abstract or move them out of the package" in reason


def test_abstract_helper_class_does_not_count(registry, plugins):
    plugins.add("toy", compiler_extra="""
        import abc

        class AbstractHelper(BaseBackend):
            @abc.abstractmethod
            def extra(self):
                ...
    """)
    assert registry["toy"].compiler.__name__ == compiler_class_name("toy")


def test_one_class_bound_to_two_names_counts_once(registry, plugins):
    plugins.add("toy", compiler_extra=f"Backend = {compiler_class_name('toy')}\n")
    assert registry["toy"].compiler.__name__ == compiler_class_name("toy")


def test_concrete_class_imported_from_another_package_does_not_count(registry, plugins, site):
    site.package("otherbackend")
    plugins.add("toy", compiler_extra="from otherbackend.compiler import OtherbackendBackend\n",
                driver_extra="from otherbackend.driver import OtherbackendDriver\n")
    backend = registry["toy"]
    assert backend.compiler.__name__ == compiler_class_name("toy")
    assert backend.driver.__name__ == driver_class_name("toy")
    assert "otherbackend.compiler" in sys.modules  # it really was imported


def test_import_error_names_the_missing_module(registry, plugins):
    root = plugins.add("toy", compiler_extra="import naiad_missing_dependency_xyz\n")
    reason = _failure(registry, "toy").reason
    assert "importing naiad.backends.toy.compiler failed" in reason
    assert "No module named 'naiad_missing_dependency_xyz'" in reason
    # ... and where it was imported.
    assert os.path.abspath(root / "backend" / "compiler.py") in reason


def test_syntax_error_in_plugin(registry, plugins):
    plugins.add("toy", driver_extra="def broken(:\n    pass\n")
    reason = _failure(registry, "toy").reason
    assert "importing naiad.backends.toy.driver failed: SyntaxError" in reason
    assert "driver.py" in reason


def test_exception_raised_at_import_time(registry, plugins):
    root = plugins.add("toy", compiler_extra="raise RuntimeError('no license for the toy compiler')\n")
    reason = _failure(registry, "toy").reason
    assert "importing naiad.backends.toy.compiler failed: RuntimeError: " \
           "no license for the toy compiler" in reason
    # The failure points at the plugin's own file.
    assert os.path.abspath(root / "backend" / "compiler.py") in reason


def test_sys_exit_at_import_time_is_a_failure_not_an_exit(registry, plugins):
    plugins.add("toy", compiler_extra="import sys\nsys.exit('toy cannot start')\n")
    reason = _failure(registry, "toy").reason
    assert "SystemExit: toy cannot start" in reason


# A backend whose import never returns keeps its module's import lock for the rest of the
# process: each such test uses a backend name of its own.
HANG = "import threading\nthreading.Event().wait()   # never returns\n"


def test_a_backend_whose_import_hangs_is_reported_not_waited_for(registry, plugins):
    knobs.backends.import_timeout = 0.3
    plugins.add("hangs_at_import", compiler_extra=HANG)
    plugins.add("good", device="gooddev")
    reason = _failure(registry, "hangs_at_import").reason
    assert "importing backend 'hangs_at_import' (naiad.backends.hangs_at_import) did not finish " \
           "within 0.3 s" in reason
    assert "fix: find what it does there" in reason and "NAIAD_BACKEND_IMPORT_TIMEOUT" in reason
    assert registry["good"].driver.device_types == ("gooddev",)       # the others still load


def test_selection_does_not_import_a_backend_that_runs_elsewhere(registry, plugins):
    plugins.add("hangs_elsewhere", device="elsewhere", compiler_extra=HANG)   # read, not imported
    plugins.add("good", device="gooddev")
    assert registry.device_types("hangs_elsewhere") == ("elsewhere",)
    assert selection._active_for("gooddev") == [registry["good"]]
    assert "naiad.backends.hangs_elsewhere.compiler" not in sys.modules


def test_selection_imports_a_backend_whose_device_types_are_not_literal(registry, plugins):
    knobs.backends.import_timeout = 0.3
    plugins.add("hangs_undeclared", device=None, compiler_extra=HANG,
                driver_extra="HangsUndeclaredDriver.device_types = ('gooddev',)\n")
    plugins.add("good", device="gooddev")
    assert registry.device_types("hangs_undeclared") is None
    with pytest.warns(NaiadWarning, match="backend skipped: hangs_undeclared .* did not finish "
                                          "within 0.3 s"):
        assert selection._active_for("gooddev") == [registry["good"]]   # toy timed out


@pytest.mark.parametrize("line, declared", [
    ("device_types = ('a', 'b')  # two", ("a", "b")),
    ("device_types: tuple = ('a',)", ("a",)),
    ("device_types = tuple(DEVICES)", None),
    ("device_types = ('a',)\n    other = 1\n\nclass Helper:\n    device_types = ('b',)", None),
])
def test_declared_device_types_are_read_from_the_driver_file(registry, plugins, line, declared):
    plugins.add("toy", device=None, driver_methods={"devices": line})
    assert registry.device_types("toy") == declared


def test_declared_device_types_of_an_entry_point_package(registry, site):
    site.package("hangs_pkg", name="hangs", device="hangdev",
                 init="import threading\nthreading.Event().wait()\n")
    site.dist("hangs", "1.0", {"hangs": "hangs_pkg"})
    assert registry.device_types("hangs") == ("hangdev",)        # its __init__ never ran
    assert "hangs_pkg" not in sys.modules


def test_api_version_newer_than_naiad(registry, plugins):
    plugins.add("toy", api_version=BACKEND_API_VERSION + 1)
    failure = _failure(registry, "toy")
    assert f"written for backend API {BACKEND_API_VERSION + 1}" in failure.reason
    assert f"{OLDEST_BACKEND_API_VERSION}..{BACKEND_API_VERSION}" in failure.reason
    assert "fix: upgrade naiad" in failure.reason


def test_api_version_older_than_oldest_supported(registry, plugins):
    plugins.add("toy", api_version=0)
    reason = _failure(registry, "toy").reason
    assert "written for backend API 0" in reason
    assert "fix: upgrade the backend" in reason


@pytest.mark.parametrize("api_version", [None, "True", "'1'", "1.0"])
def test_missing_or_non_integer_api_version(registry, plugins, api_version):
    plugins.add("toy", api_version=api_version)
    reason = _failure(registry, "toy").reason
    assert f"{compiler_class_name('toy')} does not declare api_version" in reason
    assert f"fix: add the class attribute 'api_version = {BACKEND_API_VERSION}'" in reason


@pytest.mark.parametrize("binary_ext", [None, ""])
def test_missing_binary_ext(registry, plugins, binary_ext):
    plugins.add("toy", binary_ext=binary_ext)
    reason = _failure(registry, "toy").reason
    assert f"{compiler_class_name('toy')} does not declare binary_ext" in reason
    assert "fix: add the class attribute 'binary_ext" in reason


def test_missing_device_types(registry, plugins):
    plugins.add("toy", device=None)
    reason = _failure(registry, "toy").reason
    assert f"{driver_class_name('toy')} does not declare device_types" in reason
    assert "fix: add the class attribute 'device_types = (\"cpu\",)'" in reason


def test_device_types_must_be_a_tuple_of_strings(registry, plugins):
    plugins.add("toy", driver_methods={"device_types": "device_types = 'cpu'"})
    reason = _failure(registry, "toy").reason
    assert "does not declare device_types" in reason


def test_failure_is_remembered(registry, plugins):
    plugins.add("toy", compiler_extra="raise RuntimeError('boom')\n")
    first = _failure(registry, "toy")
    with pytest.raises(KeyError, match="boom"):
        registry["toy"]
    assert registry.get_or_failure("toy") == first
    assert len(registry.failures()) == 1


def test_broken_backend_does_not_stop_the_good_ones(registry, plugins):
    plugins.add("good")
    plugins.add("broken", compiler_extra="import naiad_missing_dependency_xyz\n")
    plugins.add("alsogood", dirname="z_alsogood")
    with pytest.warns(NaiadWarning, match="backend skipped: broken"):
        names = list(naiad.backends.backends)
    assert sorted(names) == ["alsogood", "good"]
    assert len(naiad.backends.backends) == 2
    assert "broken" not in naiad.backends.backends
    assert "good" in naiad.backends.backends
    failures = registry.failures()
    assert [f.name for f in failures] == ["broken"]
    assert "naiad_missing_dependency_xyz" in failures[0].reason
    assert registry["good"].compiler.__name__ == compiler_class_name("good")


def test_layout_failure_does_not_stop_the_good_ones(registry, plugins):
    plugins.add("toy", conf=False, dirname="broken")
    plugins.add("good")
    assert list(registry.sources()) == ["good"]
    assert list(registry) == ["good"]
    assert len(registry.skipped()) == 1


# --------------------------------------------------------------------------------------------
# Precedence
# --------------------------------------------------------------------------------------------

def test_two_plugin_dirs_with_the_same_name_first_wins(registry, plugins):
    first = plugins.add("toy", dirname="first", device="first_dev")
    second = plugins.add("toy", dirname="second", device="second_dev")
    with pytest.warns(NaiadWarning, match="shadowed") as record:
        sources = registry.sources()
    assert sources["toy"].location == os.path.abspath(first)
    assert any(os.path.abspath(second) in str(w.message) for w in record)
    [skipped] = registry.skipped()
    assert skipped.name == "toy"
    assert skipped.location == os.path.abspath(second)
    assert "shadowed" in skipped.reason
    assert f"shadowed by the one from plugin dir {os.path.abspath(first)}" in skipped.reason
    assert "fix: rename one of them, or remove the one you do not want" in skipped.reason
    backend = registry["toy"]
    assert backend.driver.device_types == ("first_dev",)
    assert _file_of(backend.compiler) == (first / "backend" / "compiler.py").resolve()


def test_shadowed_plugin_language_is_not_mounted(plugins):
    first = plugins.add("toy", dirname="first")
    plugins.add("toy", dirname="second")
    import naiad.language.extra.toy as lang

    assert Path(lang.__file__).resolve() == (first / "language" / "__init__.py").resolve()


def test_plugin_dir_wins_over_in_tree(registry, plugins, in_tree):
    tree = in_tree.add("toy", device="in_tree_dev")
    root = plugins.add("toy", device="plugin_dev")
    with pytest.warns(NaiadWarning, match="shadowed"):
        source = registry.sources()["toy"]
    assert source.origin == "plugin dir"
    [skipped] = registry.skipped()
    assert (skipped.origin, skipped.location) == ("in-tree", str(tree))
    backend = registry["toy"]
    assert backend.driver.device_types == ("plugin_dev",)
    assert _file_of(backend.compiler) == (root / "backend" / "compiler.py").resolve()


def test_in_tree_backend_loads(registry, in_tree):
    tree = in_tree.add("treeish", device="tree_dev")
    source = registry.sources()["treeish"]
    assert (source.origin, source.package, source.location) == \
        ("in-tree", "naiad.backends.treeish", str(tree))
    backend = registry["treeish"]
    assert backend.compiler.__module__ == "naiad.backends.treeish.compiler"
    assert _file_of(backend.compiler) == (tree / "compiler.py").resolve()
    assert backend.driver.device_types == ("tree_dev",)


def test_in_tree_backend_without_compiler_py(registry, in_tree):
    in_tree.add("halfdone", compiler=False)
    reason = _failure(registry, "halfdone").reason
    assert "module naiad.backends.halfdone.compiler not found" in reason
    assert "fix: the package must contain compiler.py and driver.py" in reason


def test_in_tree_wins_over_entry_point_of_another_distribution(registry, in_tree, site):
    in_tree.add("toy", device="in_tree_dev")
    site.package("thirdparty_toy", name="toy", device="third_party_dev")
    site.dist("thirdparty-toy", "2.0", {"toy": "thirdparty_toy"})
    with pytest.warns(NaiadWarning, match="shadowed"):
        source = registry.sources()["toy"]
    assert source.origin == "in-tree"
    [skipped] = registry.skipped()
    assert (skipped.origin, skipped.location) == ("entry point", "thirdparty-toy 2.0")
    assert "shadowed by the one from in-tree" in skipped.reason
    assert registry["toy"].driver.device_types == ("in_tree_dev",)


def test_in_tree_backend_registered_as_entry_point_is_not_a_clash(registry, in_tree, site, recwarn):
    in_tree.add("toy")
    site.dist("naiad-fake-self", "0.1.0", {"toy": "naiad.backends.toy"})
    assert registry.sources()["toy"].origin == "in-tree"
    assert registry.skipped() == []
    assert not [w for w in recwarn if issubclass(w.category, NaiadWarning)]


def test_plugin_dir_wins_over_entry_point(registry, plugins, site):
    plugins.add("toy", device="plugin_dev")
    site.package("thirdparty_toy", name="toy")
    site.dist("thirdparty-toy", "2.0", {"toy": "thirdparty_toy"})
    with pytest.warns(NaiadWarning, match="shadowed"):
        assert registry.sources()["toy"].origin == "plugin dir"
    assert registry["toy"].driver.device_types == ("plugin_dev",)


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------

def test_entry_point_backend_loads(registry, site):
    site.package("fancy_backend", name="fancy", device="fancydev")
    site.dist("fancy-backend", "1.2.3", {"fancy": "fancy_backend"})
    source = registry.sources()["fancy"]
    assert source.origin == "entry point"
    assert source.location == "fancy-backend 1.2.3"
    assert source.package == "fancy_backend"
    backend = registry["fancy"]
    assert backend.compiler.__module__ == "fancy_backend.compiler"
    assert backend.compiler.__name__ == compiler_class_name("fancy")
    assert backend.driver.device_types == ("fancydev",)


def test_entry_point_to_a_package_that_does_not_exist(registry, site):
    site.dist("ghost-backend", "0.1", {"ghost": "naiad_ghost_package_xyz"})
    failure = _failure(registry, "ghost")
    assert (failure.origin, failure.location) == ("entry point", "ghost-backend 0.1")
    assert "module naiad_ghost_package_xyz.compiler not found" in failure.reason
    assert "is the distribution installed and the entry point right?" in failure.reason


def test_entry_point_whose_dependency_is_missing_names_the_dependency(registry, site):
    # The package exists; the module it needs ("naiadcu", a string prefix of the package's
    # name "naiadcuplug") does not.  The message must name the missing dependency, not claim
    # that the backend's own package is missing.  (Not "cuda": GPU machines have that module.)
    site.package("naiadcuplug", compiler_extra="import naiadcu\n")
    site.dist("naiadcuplug", "1.0", {"naiadcuplug": "naiadcuplug"})
    reason = _failure(registry, "naiadcuplug").reason
    assert "No module named 'naiadcu'" in reason
    assert "naiadcuplug.compiler not found" not in reason


def test_entry_points_of_two_distributions_with_one_name(registry, site):
    site.package("alpha_pkg", name="dup", device="alpha_dev")
    site.package("beta_pkg", name="dup", device="beta_dev")
    site.dist("alpha", "1.0", {"dup": "alpha_pkg"})
    site.dist("beta", "1.0", {"dup": "beta_pkg"})
    with pytest.warns(NaiadWarning, match="shadowed"):
        assert registry.sources()["dup"].location == "alpha 1.0"
    assert [f.location for f in registry.skipped()] == ["beta 1.0"]
    assert registry["dup"].driver.device_types == ("alpha_dev",)


@pytest.mark.parametrize("how", ["env", "knob"])
def test_in_tree_only_skips_entry_points(registry, plugins, in_tree, site, monkeypatch, how):
    plugins.add("plugged")
    in_tree.add("treeish")
    site.package("epkg", name="fromep")
    site.dist("epkg", "1.0", {"fromep": "epkg"})
    assert set(registry.sources()) == {"plugged", "treeish", "fromep"}
    if how == "env":
        monkeypatch.setenv("NAIAD_BACKENDS_IN_TREE", "1")
    else:
        knobs.backends.in_tree = True
    assert set(registry.sources()) == {"plugged", "treeish"}
    assert set(registry) == {"plugged", "treeish"}


# --------------------------------------------------------------------------------------------
# Laziness and reconfiguration
# --------------------------------------------------------------------------------------------

def test_listing_sources_imports_no_backend_code(registry, plugins, in_tree, site):
    plugins.add("plugged")
    in_tree.add("treeish")
    site.package("epkg", name="fromep")
    site.dist("epkg", "1.0", {"fromep": "epkg"})
    before = set(sys.modules)
    assert set(registry.sources()) == {"plugged", "treeish", "fromep"}
    new = set(sys.modules) - before
    assert not [m for m in new if m.startswith(("naiad.backends.", "naiad.language.extra.",
                                                 "naiad.tools.extra.", "epkg"))], new
    # ... and asking for one backend imports only that one.
    registry["plugged"]
    assert "naiad.backends.plugged.compiler" in sys.modules
    assert "naiad.backends.treeish" not in sys.modules
    assert "epkg" not in sys.modules


def test_changing_plugin_dirs_between_calls_is_picked_up(registry, plugins, monkeypatch):
    a = plugins.make("alpha")
    b = plugins.make("beta")
    plugins.use(a)
    assert list(registry.sources()) == ["alpha"]
    assert registry["alpha"].name == "alpha"
    plugins.use(b)
    assert list(registry.sources()) == ["beta"]
    assert registry["beta"].name == "beta"
    assert "alpha" not in registry
    plugins.use(a, b)
    assert list(registry) == ["alpha", "beta"]
    monkeypatch.delenv("NAIAD_PLUGIN_DIRS")
    assert registry.sources() == {}


def test_switching_to_another_dir_with_the_same_backend_name_loads_the_new_code(registry, plugins):
    a = plugins.make("toy", dirname="a", device="a_dev")
    b = plugins.make("toy", dirname="b", device="b_dev")
    plugins.use(a)
    assert registry["toy"].driver.device_types == ("a_dev",)
    plugins.use(b)
    backend = registry["toy"]
    assert backend.source.location == os.path.abspath(b)
    assert _file_of(backend.driver) == (b / "backend" / "driver.py").resolve(), (
        "NAIAD_PLUGIN_DIRS now names only directory b, but the backend's code still comes from "
        "the module imported from directory a")
    assert backend.driver.device_types == ("b_dev",)


def test_plugin_dirs_knob_works_like_the_env_var(registry, plugins, monkeypatch):
    a = plugins.make("alpha")
    b = plugins.make("beta")
    knobs.backends.plugin_dirs = [str(a)]
    assert list(registry.sources()) == ["alpha"]
    assert registry["alpha"].source.location == os.path.abspath(a)
    # The knob overrides the variable.
    monkeypatch.setenv("NAIAD_PLUGIN_DIRS", str(b))
    assert list(registry.sources()) == ["alpha"]
    del knobs.backends.plugin_dirs
    assert list(registry.sources()) == ["beta"]


def test_plugin_dirs_accepts_home_relative_paths(registry, plugins, monkeypatch):
    plugins.make("toy", dirname="homeplug")
    monkeypatch.setenv("HOME", str(plugins.base))
    plugins.use("~/homeplug")
    assert registry.sources()["toy"].location == os.path.abspath(plugins.base / "homeplug")


def test_refresh_forgets_loaded_backends(registry, plugin):
    first = registry["toy"]
    registry.refresh()
    assert list(registry.sources()) == ["toy"]
    assert registry["toy"].source == first.source


# --------------------------------------------------------------------------------------------
# Activity
# --------------------------------------------------------------------------------------------

def test_driver_whose_is_active_raises_is_reported_inactive(registry, plugins):
    plugins.add("toy", driver_methods={"is_active": """
        @classmethod
        def is_active(cls):
            raise OSError("cannot open /dev/toy0")
    """})
    active, why = selection.is_active(registry["toy"])
    assert active is False
    assert "is_active() raised OSError: cannot open /dev/toy0" == why


def test_inactive_driver_reports_why(registry, plugins):
    plugins.add("toy", active=False, driver_methods={"why_inactive": """
        @classmethod
        def why_inactive(cls):
            return "libtoy.so.1 not found"
    """})
    assert selection.is_active(registry["toy"]) == (False, "libtoy.so.1 not found")


def test_inactive_driver_without_why_has_a_default_reason(registry, plugins):
    plugins.add("toy", active=False)
    active, why = selection.is_active(registry["toy"])
    assert active is False and "is_active() returned False" in why


# --------------------------------------------------------------------------------------------
# import naiad, in a fresh process
# --------------------------------------------------------------------------------------------

def _broken_and_good(tmp_path) -> str:
    good = write_plugin(tmp_path / "good", "goodfix")
    broken = write_plugin(tmp_path / "broken", "brokenfix",
                          compiler_extra="import naiad_missing_dependency_xyz\n")
    nameless = write_plugin(tmp_path / "nameless", "namelessfix", conf=False)
    return ";".join(map(str, (good, broken, nameless, tmp_path / "missing")))


def test_import_naiad_with_a_broken_plugin_dir_succeeds(tmp_path):
    env = subprocess_env(NAIAD_PLUGIN_DIRS=_broken_and_good(tmp_path))
    result = subprocess.run([sys.executable, "-c", "import naiad"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_import_naiad_loads_no_backend_and_no_heavy_dependency(tmp_path):
    env = subprocess_env(NAIAD_PLUGIN_DIRS=_broken_and_good(tmp_path))
    script = textwrap.dedent("""
        import json, sys
        import naiad
        print(json.dumps({name: getattr(m, "__file__", None) for name, m in sys.modules.items()}))
    """)
    result = subprocess.run([sys.executable, "-c", script], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    modules = json.loads(result.stdout)
    assert "naiad" in modules
    for heavy in ("llvmlite", "xdsl", "numpy", "torch"):
        assert not {m for m in modules if m == heavy or m.startswith(heavy + ".")}, heavy
    naiad_dir = os.path.dirname(os.path.realpath(naiad.__file__)) + os.sep
    fixtures = {name for name, file in modules.items()
                if name.startswith(("naiad.backends.", "naiad.language.extra.", "naiad.tools.extra."))
                and not (file and os.path.realpath(file).startswith(naiad_dir))}
    assert fixtures == set()


def test_import_naiad_is_fast(tmp_path):
    env = subprocess_env(NAIAD_PLUGIN_DIRS=_broken_and_good(tmp_path))
    script = textwrap.dedent("""
        import time
        t0 = time.perf_counter()
        import naiad
        print(time.perf_counter() - t0)
    """)
    times = []
    for _ in range(3):
        result = subprocess.run([sys.executable, "-c", script], env=env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        times.append(float(result.stdout.strip()))
    assert min(times) < 0.3, times


def test_installed_entry_points_are_read_once_for_every_group(site, monkeypatch):
    from importlib import metadata

    from naiad import entry_points

    site.dist("twogroups", "1.0", {"tg_backend": "tg_pkg"})
    reads = []
    real = metadata.entry_points
    monkeypatch.setattr(metadata, "entry_points", lambda: reads.append(1) or real())
    entry_points.forget()
    assert [ep.name for ep in entry_points.entry_points("naiad.backends")].count("tg_backend") == 1
    assert all(ep.group == "naiad.passes" for ep in entry_points.entry_points("naiad.passes"))
    assert len(reads) == 1
    monkeypatch.syspath_prepend(str(site.dir / "elsewhere"))       # sys.path changed: read again
    entry_points.entry_points("naiad.backends")
    assert len(reads) == 2
