"""What the hip backend makes of the project's kernels, without an AMD GPU: each kernel compiled
for an AMD architecture, with its VGPRs, SGPRs, LDS bytes, scratch bytes, instruction count and
compile time, and the cold compile of the softmax kernel in a new process against the cuda
backend's (both for a GPU this machine does not have).

    python bench/amd_compile.py [--arch gfx942] [--num-stages N] [--gallery] [--csv PATH]

Kernels: the gallery's (Triton's tutorials 01, 02, 03, 05, 06, 08 and the dropout of 04, in fp16
where the tutorial uses it; the dots also with the ``mfma`` option) and every specialization
tests/nvidia compiles (`COMPILE_CASES`).
A kernel that does not compile shows its reason.  Prints a table, writes CSV
(bench/results/amd-compile-<arch>.csv by default).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

os.environ.setdefault("NAIAD_ALWAYS_COMPILE", "1")

import naiad  # noqa: E402
from naiad.backends.compiler import GPUTarget  # noqa: E402
from naiad.compiler.compiler import ASTSource  # noqa: E402
from naiad.tools import gallery  # noqa: E402

ALIGNED = [["tt.divisibility", 16]]
#: The matmul's strides a launch of contiguous matrices passes as 1 (Triton specializes them).
UNIT_STRIDES = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}


def launch_attrs(signature: dict) -> dict:
    """Divisibility by 16 of every pointer and integer: the tutorials' sizes, strides and lengths
    are multiples of 16 in a typical launch, which specializes so (tests/nvidia's cases keep
    their pointers' alone)."""
    return {(i,): ALIGNED for i, ty in enumerate(signature.values()) if str(ty).startswith("*") or ty == "i32"}


def gallery_cases() -> list[tuple[str, Any, dict, dict, int]]:
    """(name, kernel, signature, constexprs, num_warps) of the tutorials' kernels."""
    p16 = "*fp16"
    # as a launch of contiguous matrices specializes them: the unit strides constant 1 (the
    # others, and the sizes, multiples of 16: `launch_attrs`)
    matmul = {n: "constexpr" if n in UNIT_STRIDES else "i32"
              for n in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")}
    return [
        ("01 vector add", gallery.add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                               "n": "i32"}, {"BLOCK": 1024}, 4),
        ("02 softmax", gallery.softmax_kernel, {"out_ptr": "*fp32", "in_ptr": "*fp32", "stride": "i32",
                                                "n_cols": "i32"}, {"BLOCK": 1024}, 4),
        ("03 matmul fp16", gallery.matmul_tutorial_kernel,
         {"a_ptr": p16, "b_ptr": p16, "c_ptr": p16, **matmul},
         {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, **UNIT_STRIDES}, 4),
        ("04 dropout", gallery.dropout_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                                "p": "fp32", "seed": "i32"}, {"BLOCK": 1024}, 4),
        ("05 layer norm", gallery.layernorm_kernel,
         {"x_ptr": "*fp32", "y_ptr": "*fp32", "w_ptr": "*fp32", "b_ptr": "*fp32", "stride": "i32",
          "n_cols": "i32", "eps": "fp32"}, {"BLOCK": 1024}, 4),
        ("06 attention fp16", gallery.attention_kernel,
         {"Q": p16, "K": p16, "V": p16, "Out": p16, "sm_scale": "fp32", "N_CTX": "i32"},
         {"HEAD_DIM": 64, "BLOCK_M": 64, "BLOCK_N": 64}, 4),
        ("08 grouped matmul fp16", gallery.grouped_matmul_kernel,
         {"a_addresses": "*i64", "b_addresses": "*i64", "c_addresses": "*i64", "shapes": "*i32",
          "group_count": "i32"}, {"NUM_PROGRAMS": 304, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, 4),
    ]


def mfma_cases() -> list[tuple[str, Any, dict, dict, int]]:
    """The tutorials' dots again with the ``mfma`` option (matrix cores)."""
    return [(f"{name} (MFMA)", fn, sig, constexprs, warps) for name, fn, sig, constexprs, warps
            in gallery_cases() if name.startswith(("03", "06", "08"))]


def test_cases() -> list[tuple[str, Any, dict, dict, int]]:
    from tests.nvidia import test_ops

    return [(f"tests/nvidia {c.id}", c.fn, c.signature, c.constexprs, c.num_warps)
            for c in test_ops.COMPILE_CASES]


def isa_figures(isa: str) -> dict[str, int]:
    """VGPRs, SGPRs, LDS and scratch bytes from the code object's directives; instructions
    counted in the kernel's text (tab-indented mnemonics, no directives)."""
    def directive(name: str) -> int:
        found = re.search(rf"\.{name}\s+(\d+)", isa)
        return int(found.group(1)) if found else -1
    text = isa.split(".end_amdhsa_kernel")[0]
    instructions = sum(1 for line in text.splitlines() if re.match(r"\t[a-z_][a-z0-9_]*(\s|$)", line))
    return {"vgprs": directive("amdhsa_next_free_vgpr"), "sgprs": directive("amdhsa_next_free_sgpr"),
            "lds": directive("amdhsa_group_segment_fixed_size"),
            "scratch": directive("amdhsa_private_segment_fixed_size"), "instructions": instructions}


COLD = """
import time, sys
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
import naiad
from naiad.backends.compiler import GPUTarget
from naiad.compiler.compiler import ASTSource
from naiad.tools import gallery
sig = {{"out_ptr": "*fp32", "in_ptr": "*fp32", "stride": "i32", "n_cols": "i32"}}
naiad.compile(ASTSource(gallery.softmax_kernel, sig, {{"BLOCK": 1024}}, {{}}),
              target=GPUTarget({backend!r}, {arch!r}, {warp}))
print(time.perf_counter() - t0)
"""


def cold_compile_s(backend: str, arch: Any, warp: int) -> float:
    env = dict(os.environ, NAIAD_ALWAYS_COMPILE="1")
    code = COLD.format(root=os.path.dirname(HERE), backend=backend, arch=arch, warp=warp)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="gfx942")
    parser.add_argument("--num-stages", type=int, default=None,
                        help="the num_stages option of every kernel (default: the backend's, 2)")
    parser.add_argument("--gallery", action="store_true", help="only the tutorials' kernels")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args()
    from naiad.backends.hip.target import wave_size

    target = GPUTarget("hip", args.arch, wave_size(args.arch))
    rows = []
    cdna = wave_size(args.arch) == 64                 # matrix cores (MFMA) only there
    cases = [(case, False) for case in gallery_cases()] + [(case, True) for case in mfma_cases() if cdna]
    stages = {} if args.num_stages is None else {"num_stages": args.num_stages}
    tests = [] if args.gallery else [(c, False) for c in test_cases()]
    for (name, fn, signature, constexprs, warps), mfma in cases + tests:
        attrs = launch_attrs(signature) if not name.startswith("tests/") else \
            {(i,): ALIGNED for i, ty in enumerate(signature.values()) if str(ty).startswith("*")}
        start = time.perf_counter()
        try:
            kernel = naiad.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                                   options={"num_warps": warps, "mfma": mfma, **stages})
            figures = isa_figures(kernel.asm["amdgcn"])
            rows.append({"kernel": name, "status": "ok", **figures,
                         "compile_ms": round((time.perf_counter() - start) * 1e3)})
        except Exception as e:          # noqa: BLE001  (the table shows every failure)
            rows.append({"kernel": name, "status": str(e).splitlines()[0][:120]})
    fields = ["kernel", "status", "vgprs", "sgprs", "lds", "scratch", "instructions", "compile_ms"]
    print(" | ".join(fields))
    for row in rows:
        print(" | ".join(str(row.get(f, "")) for f in fields))
    ok = sum(r["status"] == "ok" for r in rows)
    print(f"\n{ok} of {len(rows)} kernels compile for {args.arch}")
    if args.gallery:
        return print_csv(rows, fields, args)
    hip_s = [cold_compile_s("hip", args.arch, wave_size(args.arch)) for _ in range(3)]
    cuda_s = [cold_compile_s("cuda", 90, 32) for _ in range(3)]
    print(f"cold compile of the softmax kernel (new process, import included, median of 3): "
          f"hip:{args.arch} {sorted(hip_s)[1]:.2f} s, cuda:90 {sorted(cuda_s)[1]:.2f} s")
    print_csv(rows, fields, args)


def print_csv(rows: list[dict], fields: list[str], args: argparse.Namespace) -> None:
    path = args.csv or os.path.join(HERE, "results", f"amd-compile-{args.arch}.csv")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
