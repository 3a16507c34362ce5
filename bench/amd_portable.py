"""Every kernel of Naiad's portable conformance suite compiled for AMD GPUs, without one: the
suite runs on the cpu backend (checking its results against numpy as always), and each kernel
it compiles (the JIT's calls of `naiad.compiler.compiler.compile`) is compiled again, with the same signature, constexprs and options, for the hip
architectures named.  Prints how many distinct kernels compile for each and every failure's
reason; writes CSV (bench/results/amd-portable.csv by default).

    python bench/amd_portable.py [--archs gfx942,gfx1100] [--sample K] [--csv PATH]

``--sample K`` runs K cases of each test function (0: all).
"""

from __future__ import annotations

import argparse
import collections
import csv
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default="gfx942,gfx1100")
    parser.add_argument("--sample", type=int, default=0)
    parser.add_argument("--csv", default=os.path.join(HERE, "results", "amd-portable.csv"))
    args = parser.parse_args()

    import naiad
    from naiad.backends.compiler import GPUTarget
    from naiad.backends.hip.target import wave_size
    from naiad.compiler.compiler import ASTSource
    from naiad.testing import conformance

    archs = [a for a in args.archs.split(",") if a]
    seen: set = set()
    outcomes: dict[str, collections.Counter] = {arch: collections.Counter() for arch in archs}
    rows: list[dict[str, Any]] = []
    busy = []

    def listen(src: Any, options: dict) -> None:
        if busy or not isinstance(src, ASTSource):
            return
        key = (src.fn.cache_key, repr(src.signature), repr(src.constexprs), repr(src.attrs),
               options.get("num_warps"))
        if key in seen:
            return
        seen.add(key)
        busy.append(1)
        try:
            for arch in archs:
                try:
                    naiad.compile(ASTSource(src.fn, src.signature, src.constexprs, src.attrs),
                                  target=GPUTarget("hip", arch, wave_size(arch)),
                                  options={"num_warps": options.get("num_warps", 4)})
                    outcomes[arch]["ok"] += 1
                except Exception as e:      # noqa: BLE001  (the table shows every failure)
                    reason = str(e).splitlines()[0][:200]
                    outcomes[arch][reason] += 1
                    rows.append({"arch": arch, "kernel": src.fn.__name__, "reason": reason})
        finally:
            busy.pop()

    from naiad.compiler import compiler

    cpu_compile = compiler.compile

    def compile_and_listen(src: Any, target: Any = None, options: Any = None) -> Any:
        kernel = cpu_compile(src, target=target, options=options)
        listen(src, dict(options or {}))
        return kernel
    compiler.compile = compile_and_listen          # what the JIT's full path calls
    conformance.run("cpu", ["-q"], sample=args.sample)
    kernels = len(seen)
    print(f"\n{kernels} distinct kernels compiled by the portable suite on the cpu backend")
    for arch in archs:
        ok = outcomes[arch]["ok"]
        print(f"{arch}: {ok} of {kernels} compile")
        for reason, count in outcomes[arch].most_common():
            if reason != "ok":
                print(f"  {count} x {reason}")
    os.makedirs(os.path.dirname(args.csv), exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["arch", "kernel", "reason"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.csv}")
    sys.exit(0)


if __name__ == "__main__":
    main()
