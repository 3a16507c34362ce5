"""Assembly formats are parsed when an operation is first printed or parsed, not on import
(naiad/ir/lazy_formats.py), and every one of them parses."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from plugin_fixtures import subprocess_env

FRESH_PROCESS = textwrap.dedent("""
    import naiad.compiler.frontend, naiad.passes
    import naiad.backends.cpu.compiler, naiad.backends.cuda.compiler
    from naiad.ir.lazy_formats import LazyFormat
    from xdsl.dialects import arith, scf
    from xdsl.irdl.declarative_assembly_format import FormatProgram
    deferred, parsed_on_import = len(LazyFormat.made), LazyFormat.parsed
    programs = [f.program() for f in LazyFormat.made]
    assert all(isinstance(p, FormatProgram) for p in programs)
    print(deferred, parsed_on_import, LazyFormat.parsed)
""")


def test_compiler_import_defers_every_format_and_each_parses():
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS], env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    deferred, parsed_on_import, parsed = map(int, done.stdout.split())
    assert deferred > 100            # builtin's few aside: arith, math, scf, tt, ...
    assert parsed_on_import == 0
    assert parsed == deferred


def test_an_operation_prints_through_its_deferred_format():
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import IntegerAttr, i32

    from naiad.ir.lazy_formats import LazyFormat

    op = arith.ConstantOp(IntegerAttr(7, i32))
    before = LazyFormat.parsed
    assert str(op) == "%0 = arith.constant 7 : i32"
    assert LazyFormat.parsed - before <= 1          # parsed here unless a constant was printed before
    assert str(op) == "%0 = arith.constant 7 : i32"
