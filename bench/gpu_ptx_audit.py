"""The code ptxas makes of Naiad's and Triton's PTX for the same kernels, without a GPU.

    python bench/gpu_ptx_audit.py [--triton-python PATH] [--only NAME,...] [--csv PATH]

Kernels users write beside the ones the GPU benchmarks time (fused add + RMS norm, layer norm
backward, an int8 row quantizer, cross entropy, 2-D softmax, a tile transpose, an embedding
gather, rotary embedding, dropout, SwiGLU, argmax, cumsum, a column sum, a looped row sum; fp32
and bf16), written once as Triton-language source (`KERNELS`) and compiled for sm_90 with the
same specialization (16-byte aligned pointers, sizes and strides multiples of 16) and the same
``num_warps``: by Naiad in this interpreter and by Triton in ``--triton-python`` (default: this
one; an interpreter where ``import triton`` works, as Triton 3.6 in a venv of its own).  Each
PTX goes through ``ptxas -v`` for sm_90a (Naiad's ptxas, `naiad.backends.cuda.toolchain`):
registers and spill bytes a thread, and, where cuobjdump is found, the SASS instruction count.

Registers decide how many threads an SM holds, spills cost memory traffic and instructions
cost issue slots: proxies, not times, for finding where Naiad's code differs from Triton's
(docs/PERFORMANCE.md, session 26's audit); a GPU run decides what is faster.  Prints a table
and writes CSV (bench/results/gpu-ptx-audit.csv by default).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile

KERNELS = '''
@triton.jit
def add_rmsnorm(X, R, Y, W, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    h = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32) + \\
        tl.load(R + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(R + row * stride + cols, h.to(R.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(h * h, axis=0) / N + eps)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    tl.store(Y + row * stride + cols, (h * rstd * w).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def quantize_rows(X, Q, S, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    scale = tl.max(tl.abs(x), axis=0) / 127.0
    tl.store(Q + row * stride + cols, (x / scale + 0.5).to(tl.int32).to(tl.int8), mask=mask)
    tl.store(S + row, scale)


@triton.jit
def cross_entropy(Logits, Labels, Loss, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(Logits + row * stride + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    label = tl.load(Labels + row)
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    tl.store(Loss + row, lse - tl.sum(tl.where(cols == label, x, 0.0), axis=0))


@triton.jit
def softmax_2d(Out, In, M, N, stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(In + rows[:, None] * stride + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    tl.store(Out + rows[:, None] * stride + cols[None, :], e / tl.sum(e, axis=1)[:, None], mask=mask)


@triton.jit
def transpose(Out, In, M, N, stride_in, stride_out, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(In + rm[:, None] * stride_in + rn[None, :], mask=mask)
    tl.store(Out + rn[:, None] * stride_out + rm[None, :], tl.trans(x), mask=tl.trans(mask))


@triton.jit
def dropout(X, Out, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    tl.store(Out + offs, tl.where(tl.rand(seed, offs) > p, x / (1 - p), 0.0), mask=mask)


@triton.jit
def cumsum_rows(X, Out, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(Out + row * stride + cols, tl.cumsum(x, axis=0).to(Out.dtype.element_ty), mask=cols < N)


@triton.jit
def looped_row_sum(X, Out, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(X + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(Out + row, tl.sum(acc, axis=0))
'''


def _cases() -> list[tuple]:
    """(kernel, dtype, size label, signature, constexprs, num_warps, aligned parameters)."""
    cases = []
    for dt in ("fp32", "bf16"):
        p = "*" + dt
        for n, warps in ((1024, 4), (8192, 16)):
            cases += [("add_rmsnorm", dt, n, {"X": p, "R": p, "Y": p, "W": p, "stride": "i32", "N": "i32",
                                              "eps": "fp32"}, {"BLOCK": n}, warps, "X R Y W stride N"),
                      ("quantize_rows", dt, n, {"X": p, "Q": "*i8", "S": "*fp32", "stride": "i32", "N": "i32"},
                       {"BLOCK": n}, warps, "X Q S stride N"),
                      ("cumsum_rows", dt, n, {"X": p, "Out": p, "stride": "i32", "N": "i32"}, {"BLOCK": n},
                       warps, "X Out stride N")]
        cases += [("cross_entropy", dt, 32768, {"Logits": p, "Labels": "*i64", "Loss": "*fp32", "stride": "i32",
                                                "N": "i32"}, {"BLOCK": 32768}, 16, "Logits Labels Loss stride"),
                  ("softmax_2d", dt, "8x1024", {"Out": p, "In": p, "M": "i32", "N": "i32", "stride": "i32"},
                   {"BLOCK_M": 8, "BLOCK_N": 1024}, 8, "Out In M N stride"),
                  ("transpose", dt, "64x64", {"Out": p, "In": p, "M": "i32", "N": "i32", "stride_in": "i32",
                                              "stride_out": "i32"}, {"BM": 64, "BN": 64}, 4,
                   "Out In M N stride_in stride_out"),
                  ("dropout", dt, 1024, {"X": p, "Out": p, "n": "i32", "p": "fp32", "seed": "i32"}, {"BLOCK": 1024},
                   4, "X Out n"),
                  ("looped_row_sum", dt, 1024, {"X": p, "Out": "*fp32", "stride": "i32", "N": "i32"},
                   {"BLOCK": 1024}, 4, "X Out stride N")]
    return cases


def emit(framework: str, out_dir: str, only: list[str] | None) -> None:
    """In this interpreter: each case's PTX under ``framework`` into ``out_dir`` (a JSON line a
    case on stdout: its file, or the error's first line)."""
    header = ("import triton\nimport triton.language as tl\n" if framework == "triton" else
              "import naiad as triton\nimport naiad.language as tl\n")
    source_dir = tempfile.mkdtemp()
    with open(os.path.join(source_dir, f"audit_{framework}.py"), "w") as f:
        f.write(header + KERNELS)
    sys.path.insert(0, source_dir)
    module = __import__(f"audit_{framework}")
    for name, dtype, size, signature, constexprs, warps, aligned in _cases():
        if only and name not in only:
            continue
        label = f"{name} {dtype} {size} w{warps}"
        names = list(signature)
        attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in aligned.split()}
        try:
            ptx = _compile(framework, getattr(module, name), signature, constexprs, attrs, warps)
            path = os.path.join(out_dir, re.sub(r"\W+", "_", f"{framework}_{label}") + ".ptx")
            with open(path, "w") as f:
                f.write(ptx)
            print(json.dumps({"case": label, "ptx": path}), flush=True)
        except Exception as e:  # noqa: BLE001 -- a case reports its failure, the audit goes on
            print(json.dumps({"case": label, "error": str(e).strip().splitlines()[0][:160]}), flush=True)


def _compile(framework: str, fn, signature: dict, constexprs: dict, attrs: dict, warps: int) -> str:
    if framework == "triton":
        import triton
        from triton.backends.compiler import GPUTarget
        full = {**signature, **{k: "constexpr" for k in constexprs}}
        values = {(len(signature) + i,): v for i, v in enumerate(constexprs.values())}
        source = triton.compiler.ASTSource(fn, full, values, attrs)
        return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}).asm["ptx"]
    import naiad
    from naiad.backends.compiler import GPUTarget
    from naiad.compiler.compiler import ASTSource
    return naiad.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32),
                         options={"num_warps": warps}).asm["ptx"]


def measure(ptx_path: str, ptxas: str) -> dict:
    """Registers and spill bytes a thread (``ptxas -v``), SASS instructions where cuobjdump is found."""
    cubin = ptx_path[:-4] + ".cubin"
    report = subprocess.run([ptxas, "-arch=sm_90a", "-v", ptx_path, "-o", cubin], capture_output=True, text=True)
    found = re.search(r"Used (\d+) registers", report.stderr)
    if found is None:
        return {"error": (report.stderr.strip().splitlines() or ["ptxas failed"])[-1]}
    spills = re.search(r"(\d+) bytes spill stores", report.stderr)
    result = {"registers": int(found.group(1)), "spill bytes": int(spills.group(1)) if spills else 0}
    try:
        from naiad.backends.cuda.toolchain import disassemble
        with open(cubin, "rb") as f:
            sass = disassemble(f.read())
        result["sass"] = len(re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+\S", sass, re.M))
    except Exception:  # noqa: BLE001 -- no cuobjdump: the SASS column stays empty
        pass
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triton-python", default=sys.executable,
                        help="an interpreter where `import triton` works (default: this one)")
    parser.add_argument("--only", type=lambda v: [n.strip() for n in v.split(",") if n.strip()],
                        metavar="NAME,...", help="only these kernels")
    parser.add_argument("--csv", default=os.path.join(os.path.dirname(__file__), "results", "gpu-ptx-audit.csv"))
    parser.add_argument("--emit", choices=("naiad", "triton"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.emit:
        emit(args.emit, args.out, args.only)
        return 0
    from naiad.backends.cuda.toolchain import find_ptxas
    ptxas = find_ptxas()
    if ptxas is None:
        sys.exit("bench/gpu_ptx_audit.py needs ptxas: pip install nvidia-cuda-nvcc, or set NAIAD_PTXAS_PATH")
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as out:
        for framework, python in (("naiad", sys.executable), ("triton", args.triton_python)):
            command = [python, os.path.abspath(__file__), "--emit", framework, "--out", out]
            command += ["--only", ",".join(args.only)] if args.only else []
            done = subprocess.run(command, capture_output=True, text=True)
            lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            if not lines:
                print(f"{framework}: no kernels compiled ({(done.stderr.strip().splitlines() or ['?'])[-1]})")
            for line in lines:
                entry = measure(line["ptx"], ptxas) if "ptx" in line else {"error": line["error"]}
                rows.setdefault(line["case"], {})[framework] = entry
    header = ["kernel", "naiad registers", "naiad spill bytes", "naiad sass", "triton registers",
              "triton spill bytes", "triton sass", "notes"]
    table = []
    for case, by in rows.items():
        cells = [by.get(fw, {}).get(key, "") for fw in ("naiad", "triton") for key in ("registers", "spill bytes", "sass")]
        notes = "; ".join(f"{fw}: {by[fw]['error']}" for fw in by if "error" in by[fw])
        table.append([case, *cells, notes])
    print(f"{'kernel':34s} {'Naiad regs/spill/sass':>22s} {'Triton regs/spill/sass':>23s}")
    for case, *cells, notes in table:
        print(f"{case:34s} {'/'.join(map(str, cells[:3])):>22s} {'/'.join(map(str, cells[3:6])):>23s}  {notes}")
    os.makedirs(os.path.dirname(os.path.abspath(args.csv)), exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(table)
    print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
