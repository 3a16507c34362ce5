"""The sha256 of the PTX of every kernel the cuda tests compile (test_ops' COMPILE_CASES, the
tensor-core tiles, matmuls and attention), for checking that a change leaves the generated code
alone: run it in two checkouts and compare the files.

    python -m tests.nvidia.ptx_snapshot before.json        # in the old checkout
    python -m tests.nvidia.ptx_snapshot after.json         # in the new one
    python -m tests.nvidia.ptx_snapshot --compare before.json after.json

Needs no GPU (PTX only).  Run from the checkout's root, whose naiad it must import.
"""
import hashlib
import json
import os
import sys


def compare(before: str, after: str) -> int:
    old, new = (json.load(open(path)) for path in (before, after))
    changed = sorted(k for k in old.keys() & new.keys() if old[k] != new[k])
    print(f"{len(old.keys() & new.keys()) - len(changed)} kernels with the same PTX, {len(changed)} "
          f"changed{': ' + ', '.join(changed) if changed else ''}; only before: "
          f"{sorted(old.keys() - new.keys())}, only after: {sorted(new.keys() - old.keys())}")
    return 1 if changed or old.keys() != new.keys() else 0


def snapshot(path: str) -> None:
    os.environ["NAIAD_ALWAYS_COMPILE"] = "1"
    import naiad

    if not naiad.__file__.startswith(os.getcwd()):
        sys.exit(f"naiad comes from {naiad.__file__}, not from this checkout: run from its root")
    from tests.nvidia import test_ops, test_tensor_cores as tc
    from tests.nvidia.conftest import compile_cuda

    out = {}

    def add(name, kernel):
        out[name] = hashlib.sha256(kernel.asm["ptx"].encode()).hexdigest()

    for case in test_ops.COMPILE_CASES:
        try:
            add("ops:" + case.id, compile_cuda(case.fn, case.signature, case.constexprs, None,
                                               case.num_warps))
        except Exception as e:
            out["ops:" + case.id] = "ERROR " + type(e).__name__
    for params in tc.WGMMA_CASES:
        dtype, m, n, k, warps = params[:5]
        try:
            add(f"wgmma:{dtype}-{m}-{n}-{k}-{warps}", tc._compile_tile(dtype, m, n, k, warps))
        except Exception as e:
            out[f"wgmma:{params}"] = "ERROR " + type(e).__name__
    for params in tc.MMA_SYNC_CASES:
        dtype, m, n, k, warps, arch = params[:6]
        add(f"mma:{dtype}-{m}-{n}-{k}-{warps}-{arch}",
            tc._compile_tile(dtype, m, n, k, warps, arch=arch))
    for cfg in ((128, 128, 32, 4), (128, 256, 64, 8), (64, 128, 128, 4), (128, 128, 64, 4),
                (16, 128, 128, 4)):
        for dt in ("*fp16", "*bf16", "*fp32"):
            add(f"matmul:{cfg}-{dt}", tc._compile_matmul(*cfg, dtype=dt))
    sig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "Out": "*fp16", "sm_scale": "fp32", "N_CTX": "i32"}
    attrs = {n: [["tt.divisibility", 16]] for n in ("Q", "K", "V", "Out", "N_CTX")}
    for hd in (64, 128):
        for causal in (False, True):
            constexprs = {"HEAD_DIM": hd, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": causal}
            add(f"attention:{hd}-{causal}", compile_cuda(tc.attention, sig, constexprs, attrs))
    with open(path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(len(out), "kernels;", sum(v.startswith("ERROR") for v in out.values()), "errors")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"]:
        sys.exit(compare(*sys.argv[2:4]))
    snapshot(sys.argv[1])
