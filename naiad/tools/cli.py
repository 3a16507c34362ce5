"""``naiad <command>``: the console script's entry point.

Each command lives in its own module; this file only parses arguments and dispatches.
"""

from __future__ import annotations

import argparse
import sys


def _backends(args: argparse.Namespace) -> int:
    from naiad.tools import backends_cmd

    if args.check:
        problems = backends_cmd.check(args.check, sys.stdout.write)
        return 1 if (problems and args.strict) else 0
    return backends_cmd.list_backends(sys.stdout.write)


def _demo(args: argparse.Namespace) -> int:
    from naiad.tools import demo

    return demo.main(sys.stdout.write)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="naiad", description="Naiad: Triton-language kernels on every backend.")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("backends", help="list every discovered backend, its origin and state")
    b.add_argument("--check", metavar="DIR", help="validate a plugin directory and explain each problem")
    b.add_argument("--strict", action="store_true", help="with --check: exit 1 when problems are found")
    b.set_defaults(run=_backends)
    d = sub.add_parser("demo", help="compile and run the example kernels on the default backend")
    d.set_defaults(run=_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
