"""LLVM's NVPTX target through llvmlite: libdevice linking, O3, PTX emission."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from typing import Any, Iterator

from naiad.backends.cuda.hooks import TRIPLE
from naiad.codegen.llvm_binding import all_targets as _llvm
from naiad.errors import NaiadError

#: Makes libdevice's ``__nvvm_reflect("__CUDA_FTZ")`` answer 0: subnormals kept (Triton 3.6
#: flushes them by default, its ``enable_reflect_ftz`` option).
_REFLECT_FLAG = '!llvm.module.flags = !{!90000}\n!90000 = !{i32 4, !"nvvm-reflect-ftz", i32 0}\n'




@functools.lru_cache(maxsize=None)
def target_machine(arch: int, ptx_version: int | None = None) -> Any:
    from naiad.backends.cuda.toolchain import ptx_features, ptxas_arch

    llvm = _llvm()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=ptxas_arch(arch), features=ptx_features(arch, ptx_version), opt=3)


def link_libdevice(llir: str, kernel: str) -> Any:
    """The parsed module, with libdevice linked in when it calls ``__nv_`` functions; every
    function but ``kernel`` becomes internal so that O3 drops what is not called."""
    llvm = _llvm()
    needs = re.search(r"declare [^\n]*@\"?__nv_", llir) is not None
    module = llvm.parse_assembly(llir + ("\n" + _REFLECT_FLAG if needs and "nvvm-reflect-ftz" not in llir else ""))
    if needs:
        from naiad.backends.cuda.toolchain import find_libdevice

        path = find_libdevice()
        if path is None:
            raise NaiadError("the kernel calls math functions from libdevice, and no libdevice was "
                             "found -- fix: pip install nvidia-cuda-nvcc (or nvidia-nvvm), install "
                             "CUDA, or set NAIAD_LIBDEVICE_PATH to libdevice.10.bc")
        with open(path, "rb") as f:
            library = llvm.parse_bitcode(f.read())
        library.triple = TRIPLE
        module.link_in(library)
        for fn in module.functions:
            if not fn.is_declaration and fn.name != kernel:
                fn.linkage = llvm.Linkage.internal
    module.verify()
    return module


#: The last module `optimize` made, with its text: `emit_ptx` takes it instead of parsing that
#: same text again (~10 ms for a matmul).  One slot, emptied by its use.
_optimized: dict[str, tuple[str, Any]] = {}


def optimize(module: Any, arch: int, ptx_version: int | None = None) -> str:
    """``module`` at O3, as text."""
    llvm = _llvm()
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(target_machine(arch, ptx_version), tuning)
    builder.getModulePassManager().run(module, builder)
    text = str(module)
    _optimized["last"] = (text, module)
    return text


def emit_ptx(llir: str, arch: int, ptx_version: int | None = None, strength_reduction: bool = False) -> str:
    """PTX of at least ``ptx_version`` (the minimum of ``arch`` by default); ``llir`` is parsed
    unless it is the very text (the same object, not an override's copy) `optimize` returned
    last.  LLVM's loop strength reduction runs only when ``strength_reduction`` says
    (`pipeline.strength_reduction`)."""
    llvm = _llvm()
    text, module = _optimized.pop("last", (None, None))
    if text is not llir:
        module = llvm.parse_assembly(llir)
    with contextlib.nullcontext() if strength_reduction else _without_loop_strength_reduction(llvm):
        return target_machine(arch, ptx_version).emit_assembly(module)


#: LLVM's command-line options are the process's: one emission at a time changes them.
_OPTIONS = threading.Lock()


@contextlib.contextmanager
def _llvm_option(llvm: Any, option: str, default: str) -> Iterator[None]:
    """LLVM run with ``option``, and ``default`` set again after, for the process's other
    users of LLVM (Naiad's CPU backend among them)."""
    with _OPTIONS:
        llvm.set_option("naiad", option)
        try:
            yield
        finally:
            llvm.set_option("naiad", default)


def _without_loop_strength_reduction(llvm: Any) -> contextlib.AbstractContextManager:
    """Emit with LLVM's loop strength reduction off (``-disable-lsr``).  On the pipelined
    matmul LSR rewrote each tile's chunk addresses as one loop-carried base plus a 32-bit
    offset per chunk, rebuilt by an IMAD.WIDE every iteration, and ptxas then copied the
    64-bit pointers into temporaries for the copies; without it each chunk's pointer advances
    in place.  Under ncu the 8192^3 fp16 matmul took 2.41 M cycles instead of 2.59 M (Triton
    2.23 M), the 4096^3 one 368 k instead of 390 k (Triton 357 k)."""
    return _llvm_option(llvm, "-disable-lsr", "-disable-lsr=false")
