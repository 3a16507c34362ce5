"""The backend author's kit: ``naiad conformance --backend NAME`` (the portable suite in
naiad/testing/conformance, strict about each backend's expected failures) and
``naiad new-backend NAME`` (a package skeleton that installs and whose conformance run is
green at once)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from naiad.testing.conformance.expected import case_id, expectations
from naiad.testing.conformance.sample import evenly_spread, sample
from naiad.tools import cli

from plugin_fixtures import subprocess_env

pytestmark = pytest.mark.shipped_backends

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the expected-failure list -------------------------------------------------------------------
def test_case_ids_are_relative_to_the_suite():
    assert case_id("test_dot.py", "naiad/testing/conformance/test_dot.py::test_dot[int8-16]") == \
        "test_dot.py::test_dot[int8-16]"


def test_patterns_name_cases_and_the_first_reason_wins():
    ids = ["test_a.py::x[1]", "test_a.py::x[2]", "test_a.py::y", "test_b.py::z"]
    matched, stale = expectations({"test_a.py::x[[]1*": "first", "test_a.py::x*": "second",
                                   "*::z": "third"}, ids)
    assert matched == {"test_a.py::x[1]": "first", "test_a.py::x[2]": "second",
                       "test_b.py::z": "third"}
    assert stale == []


def test_a_pattern_naming_no_case_of_a_collected_module_is_stale():
    ids = ["test_a.py::x", "test_b.py::y"]
    _, stale = expectations({"test_a.py::gone": "r", "test_c.py::*": "module not collected",
                             "test_b.py::y": "r"}, ids)
    assert stale == ["test_a.py::gone"]


def _conformance_run(patterns: dict, *pytest_args: str) -> subprocess.CompletedProcess:
    """The suite on cpu in a new process whose cpu backend lists ``patterns``."""
    code = ("import sys\nfrom naiad.backends.cpu.compiler import CPUBackend\n"
            f"CPUBackend.conformance_expected_failures = {patterns!r}\n"
            "from naiad.testing import conformance\n"
            f"sys.exit(conformance.run('cpu', {list(pytest_args)!r}))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env=subprocess_env(), timeout=600)


CASE = "test_binary.py::test_python_scalar_operands_keep_the_tensor_type[[]*int8]"


def test_a_listed_case_that_passes_fails_the_run():
    done = _conformance_run({CASE: "thought broken"}, "-q", "-k", "test_python_scalar_operands_keep_the_tensor_type and int8")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "XPASS(strict)" in done.stdout and "thought broken" in done.stdout


def test_a_stale_pattern_stops_the_run_before_any_case():
    done = _conformance_run({"test_binary.py::test_that_was_renamed": "r"}, "-q", "-k", "nothing")
    assert done.returncode != 0
    assert ("backend 'cpu' lists expected failures that name no case: "
            "test_binary.py::test_that_was_renamed -- fix: remove them") in done.stdout + done.stderr


def test_an_unlisted_case_runs_and_passes():
    done = _conformance_run({}, "-q", "-k", "test_python_scalar_operands_keep_the_tensor_type and int8")
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout


def test_backends_without_host_memory_get_their_arrays_staged():
    from naiad.testing.conformance.staging import needs_staging

    class OnDevice:
        device_types = ("cuda",)

    class Guest:
        device_types = ("mydev",)
        guest_device_types = ("cpu",)

    class Host:
        device_types = ("cpu",)

    assert [needs_staging(d) for d in (OnDevice, Guest, Host)] == [True, False, False]


def test_staged_launches_give_the_cases_their_results():
    """Staging forced on the cpu backend: every array goes to a torch tensor (a copy) and its
    contents come back, as they would from a GPU; the cases read them from their arrays."""
    code = ("import sys\nfrom naiad.testing import conformance\n"
            "sys.exit(conformance.run('cpu', ['-q', '-p', 'no:randomly', '-k', 'memory or reductions']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env=subprocess_env(NAIAD_CONFORMANCE_STAGE="1"), timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_an_unknown_backend_is_a_clear_error(capsys):
    assert cli.main(["conformance", "--backend", "no_such_backend"]) == 1
    assert "naiad conformance: no backend named 'no_such_backend' -- fix: see `naiad backends`" in \
        capsys.readouterr().err


# -- a sampled run ----------------------------------------------------------------------------------
@pytest.mark.parametrize("count, k", [(1, 1), (2, 1), (5, 2), (7, 3), (10, 4), (100, 7), (3, 3), (3, 9)])
def test_a_sample_spreads_its_cases_from_the_first_to_the_last(count, k):
    picked = evenly_spread(count, k)
    assert picked == sorted(set(picked)) and all(0 <= i < count for i in picked)
    assert len(picked) == min(count, k)
    assert picked[0] == 0 and (k == 1 or picked[-1] == count - 1)
    if 1 < k < count:                   # evenly: each gap within one of the even step
        step = (count - 1) / (k - 1)
        assert all(abs((b - a) - step) <= 1 for a, b in zip(picked, picked[1:]))


def test_a_sample_keeps_every_function_and_its_order():
    items = [("f", 0), ("g", 0), ("f", 1), ("f", 2), ("g", 1), ("h", 0), ("f", 3)]
    kept, dropped = sample(items, 2, lambda item: item[0])
    assert kept == [("f", 0), ("g", 0), ("g", 1), ("h", 0), ("f", 3)]
    assert dropped == [("f", 1), ("f", 2)]
    assert sample(items, 10, lambda item: item[0]) == (items, [])


def test_a_sampled_run_runs_k_cases_of_each_function():
    code = ("import sys\nfrom naiad.testing import conformance\n"
            "sys.exit(conformance.run('cpu', ['-q', '-rA', '-k', 'test_reductions.py'], sample=2))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env=subprocess_env(), timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    ran = [line.split("::")[1].split("[")[0] for line in done.stdout.splitlines() if line.startswith("PASSED")]
    assert all(ran.count(name) <= 2 for name in ran) and "deselected" in done.stdout
    from naiad.testing.conformance import test_reductions

    assert set(ran) == {name for name in vars(test_reductions) if name.startswith("test_")}


def test_a_negative_sample_is_a_clear_error(capsys):
    assert cli.main(["conformance", "--backend", "cpu", "--sample", "-1"]) == 1
    assert "--sample -1 is not a number of cases -- fix: give the number of cases" in capsys.readouterr().err


# -- naiad new-backend ------------------------------------------------------------------------------
def test_the_skeleton_installs_and_its_conformance_run_is_green(tmp_path):
    assert cli.main(["new-backend", "toy", "--dir", str(tmp_path)]) == 0
    site = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                              "--no-build-isolation", "--target", str(site), str(tmp_path / "toy")],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    env = subprocess_env(PYTHONPATH=str(site))
    listed = subprocess.run([sys.executable, "-m", "naiad", "backends"], capture_output=True,
                            text=True, env=env, timeout=300)
    toy = [line.split() for line in listed.stdout.splitlines() if line.startswith("toy ")]
    assert toy and toy[0][1:3] == ["entry", "point"] and "yes" in toy[0], listed.stdout
    run = subprocess.run([sys.executable, "-m", "naiad", "conformance", "--backend", "toy", "--",
                          "-q"], capture_output=True, text=True, env=env, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " xfailed" in run.stdout and "passed" not in run.stdout and "failed," not in run.stdout


def test_a_skeleton_method_says_what_to_implement(tmp_path):
    cli.main(["new-backend", "toy2", "--dir", str(tmp_path)])
    sys.path.insert(0, str(tmp_path / "toy2"))
    try:
        from naiad_toy2.compiler import Toy2Backend

        from naiad.backends.compiler import GPUTarget

        backend = Toy2Backend(GPUTarget("toy2", "v1", 32))
        with pytest.raises(NotImplementedError) as info:
            backend.add_stages({}, backend.parse_options({}), None)
        assert str(info.value).startswith("the toy2 backend does not compile kernels (add_stages: "
                                          "\"ttir\" -> ... -> \"bin\"")
        assert "fix: implement it in naiad_toy2.compiler" in str(info.value)
    finally:
        sys.path.remove(str(tmp_path / "toy2"))
        for name in [m for m in sys.modules if m.startswith("naiad_toy2")]:
            del sys.modules[name]


@pytest.mark.parametrize("name, why", [("Toy", "cannot name a backend"), ("9lives", "cannot name a backend"),
                                       ("class", "cannot name a backend")])
def test_a_bad_backend_name_is_a_clear_error(tmp_path, capsys, name, why):
    assert cli.main(["new-backend", name, "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"naiad new-backend: {name!r} {why} -- fix: use lower-case letters" in err


def test_an_existing_folder_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "toy").mkdir()
    assert cli.main(["new-backend", "toy", "--dir", str(tmp_path)]) == 1
    assert f"{tmp_path / 'toy'} exists already -- fix: remove it or give another --dir" in capsys.readouterr().err
