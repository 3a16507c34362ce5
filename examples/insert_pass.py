"""Insert a pass into a backend's pipeline without touching Naiad or the backend.

    NAIAD_PASS_PLUGINS=double_to_add python examples/insert_pass.py

The pass plugin (``double_to_add.py``) registers a pass by name; a stages inspection hook wraps
the backend's ``ttir`` stage so the pass runs after it.  The hook's key goes into the cache
key, so kernels compiled with and without it never mix.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))    # so the plugin module imports

import naiad  # noqa: E402
import naiad.language as tl  # noqa: E402
from naiad import knobs  # noqa: E402
from naiad.passes import run_passes  # noqa: E402


def insert_double_to_add(*args):
    """Triton's stages-inspection convention: no arguments -> (key, hash) for the cache key;
    otherwise (backend, stages, options, language, capability) -> edit ``stages``."""
    if not args:
        return ("insert-double-to-add", "1")
    backend, stages, options, language, capability = args
    make_ttir = stages["ttir"]

    def ttir(module, metadata):
        return run_passes(make_ttir(module, metadata), ["double-to-add"])

    stages["ttir"] = ttir


@naiad.jit
def twice(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0)


if __name__ == "__main__":
    knobs.runtime.add_stages_inspection_hook = insert_double_to_add
    x = np.arange(8, dtype=np.float32)
    out = np.empty_like(x)
    kernel = twice[(1,)](x, out, BLOCK=8)
    print("result matches:", bool(np.array_equal(out, x * 2)))
    print("ttir has addf:", "arith.addf" in kernel.asm["ttir"], "mulf:", "arith.mulf" in kernel.asm["ttir"])
