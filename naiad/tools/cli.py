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


def _compile(args: argparse.Namespace) -> int:
    from naiad.tools import aot

    options = {k: v for k, v in (("num_warps", args.num_warps), ("num_stages", args.num_stages)) if v is not None}
    aot.compile_to_dir(args.file, args.kernel_name, args.signature, args.target, args.out_dir, options,
                       sys.stdout.write if args.timings else None)
    return 0


def _conformance(args: argparse.Namespace) -> int:
    from naiad.testing import conformance

    extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    return conformance.run(args.backend, extra, args.sample)


def _new_backend(args: argparse.Namespace) -> int:
    from naiad.tools import new_backend

    new_backend.create(args.name, args.dir, sys.stdout.write)
    return 0


def _cache(args: argparse.Namespace) -> int:
    from naiad.tools import cache_cmd

    return cache_cmd.run(args, sys.stdout.write)


def _profile(args: argparse.Namespace) -> int:
    from naiad import profiler

    return profiler.run_script(args.script, args.script_args, trace=args.trace, sort=args.sort)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="naiad", description="Naiad: Triton-language kernels on every backend.")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("backends", help="list every discovered backend, its origin and state")
    b.add_argument("--check", metavar="DIR", help="validate a plugin directory and explain each problem")
    b.add_argument("--strict", action="store_true", help="with --check: exit 1 when problems are found")
    b.set_defaults(run=_backends)
    d = sub.add_parser("demo", help="compile and run the example kernels on the default backend")
    d.set_defaults(run=_demo)
    c = sub.add_parser("compile", help="compile one kernel ahead of time: every stage and the metadata")
    c.add_argument("file", help="Python file defining the @jit kernel")
    c.add_argument("--kernel-name", required=True, help="name of the @jit function in FILE")
    c.add_argument("--signature", required=True,
                   help='one entry per parameter: type[:16|:1] or a constexpr value, e.g. "*fp32:16,i32,1024"')
    c.add_argument("--target", default="cpu", help="cpu, cpu:<arch>, cuda:90, or <backend>:<arch>[:<warp size>]")
    c.add_argument("--out-dir", required=True, help="where to write <kernel>.<stage> and <kernel>.json")
    c.add_argument("--num-warps", type=int)
    c.add_argument("--num-stages", type=int)
    c.add_argument("--timings", action="store_true", help="print the compile time of each stage and the files written")
    c.set_defaults(run=_compile)
    f = sub.add_parser("conformance", help="run Naiad's portable language tests on one backend "
                                           "(strict about its expected failures)")
    f.add_argument("--backend", required=True, help="the backend under test, as `naiad backends` names it")
    f.add_argument("--sample", type=int, default=0, metavar="K",
                   help="run at most K cases of each test function, evenly spread over its "
                        "parameters (a quicker run, e.g. for CI); default: every case")
    f.add_argument("pytest_args", nargs=argparse.REMAINDER,
                   help="after --: passed to pytest, e.g. -- -q -x -k reductions")
    f.set_defaults(run=_conformance)
    n = sub.add_parser("new-backend", help="write the skeleton of a backend distributed as its own package")
    n.add_argument("name", help="the backend's name (lower case): the package is naiad_<name>")
    n.add_argument("--dir", default=".", help="where to create the folder <name> (default: here)")
    n.set_defaults(run=_new_backend)
    k = sub.add_parser("cache", help="list, check and trim the compiled-kernel cache (local, or "
                                     "the remote one with --remote)")
    k.add_argument("--remote", action="store_true", help="the remote cache (NAIAD_REMOTE_CACHE), not the local one")
    actions = k.add_subparsers(dest="action", required=True)
    actions.add_parser("ls", help="every entry: kernel, backend, target, size, age, hits")
    actions.add_parser("stats", help="entries, bytes, hits, and the oldest and newest entry")
    actions.add_parser("clear", help="remove every entry")
    prune = actions.add_parser("prune", help="remove old entries, then the least recently used "
                                             "until the cache fits a size")
    prune.add_argument("--older-than", metavar="AGE", help="e.g. 30d, 12h, 90m: remove entries not used for that long")
    prune.add_argument("--max-size", metavar="SIZE", help="e.g. 500M, 2G: then remove the least recently used beyond it")
    actions.add_parser("verify", help="check every entry's checksums; remove and report the damaged ones")
    k.set_defaults(run=_cache)
    r = sub.add_parser("profile", help="run a Python script and profile every kernel launch: a "
                                       "summary table, and a Chrome trace with --trace")
    r.add_argument("--trace", metavar="PATH", help="write a Chrome trace (JSON) of the launches there")
    r.add_argument("--sort", default="total", choices=("total", "calls", "mean", "name"),
                   help="the summary table's order (default: total device time)")
    r.add_argument("script", help="the Python script to run")
    r.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    r.set_defaults(run=_profile)
    return p


def main(argv: list[str] | None = None) -> int:
    from naiad.errors import NaiadError

    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except NaiadError as e:        # a user error: its message, not a traceback
        print(f"naiad {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
