"""``naiad profile script.py [args]``: run a Python script as ``python script.py`` would, inside a
profile, then print the profile's table (and write its trace when asked)."""

from __future__ import annotations

import os
import runpy
import sys
import traceback

from naiad.errors import NaiadError
from naiad.profiler.session import profile
from naiad.profiler.summary import check_sort


def run_script(script: str, script_args: list[str], trace: str | None = None, sort: str = "total") -> int:
    """Run ``script`` as ``__main__`` with ``sys.argv == [script, *script_args]`` and its folder
    first on ``sys.path``; print the table of its launches (sorted by ``sort``) to stdout,
    write the Chrome trace to ``trace`` if given; return the script's exit status (0, its
    ``SystemExit`` code, or 1 when it raised: its traceback is printed, the profile too)."""
    check_sort(sort)
    if not os.path.isfile(script):
        raise NaiadError(f"cannot profile {script!r}: there is no such file (looked from "
                         f"{os.getcwd()}) -- fix: give the path of a Python script and then its "
                         f"arguments, e.g. naiad profile train.py --steps 10")
    with profile() as p:
        status = _run(script, list(script_args))
    print(p.table(sort), flush=True)
    if trace is not None:
        p.export_chrome_trace(trace)
        print(f"wrote the Chrome trace {trace} (open it in https://ui.perfetto.dev or chrome://tracing)")
    return status


def _run(script: str, script_args: list[str]) -> int:
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        return _exit_status(e.code)
    except Exception:           # the script's own error: shown as Python shows it, then profiled
        traceback.print_exc()
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0


def _exit_status(code: object) -> int:
    """The process status Python gives ``sys.exit(code)``: 0 for None, the int, else 1 (the
    value printed to stderr)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
