"""Linking an AMDGPU object into a code object (hsaco, the ELF that ``hipModuleLoadData``
takes) with LLD: ``NAIAD_LLD_PATH``, ROCm's ``ld.lld``, or the one inside the ``ziglang``
wheel (``pip install naiad[hip]``), so that compiling for AMD GPUs needs no ROCm."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile

from naiad.backends.hip.knobs import KNOBS
from naiad.errors import NaiadError


def rocm_path() -> str:
    return KNOBS.rocm_path or "/opt/rocm"


def find_lld() -> list[str] | None:
    """The command that runs LLD's ``ld.lld``, or None when none is found."""
    if KNOBS.lld_path:
        if not (os.path.isfile(KNOBS.lld_path) and os.access(KNOBS.lld_path, os.X_OK)):
            raise NaiadError(f"NAIAD_LLD_PATH={KNOBS.lld_path} is not an executable file -- fix: "
                             f"point it at ld.lld, or unset it")
        return [KNOBS.lld_path]
    rocm = os.path.join(rocm_path(), "llvm", "bin", "ld.lld")
    if os.path.isfile(rocm) and os.access(rocm, os.X_OK):
        return [rocm]
    try:
        import ziglang  # noqa: F401
    except ImportError:
        on_path = shutil.which("ld.lld")
        return [on_path] if on_path else None
    return [sys.executable, "-m", "ziglang", "ld.lld"]


@functools.lru_cache(maxsize=None)
def linker_version() -> str:
    """The linker's command and version line, for the compile cache's key ("none" without one)."""
    command = find_lld()
    if command is None:
        return "none"
    try:
        out = subprocess.run(command + ["--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    return f"{' '.join(command)} {out.strip().splitlines()[0] if out.strip() else '?'}"


def link(obj: bytes, kernel: str) -> bytes:
    """The hsaco of one kernel's object code."""
    command = find_lld()
    if command is None:
        raise NaiadError(f"{kernel}: linking the AMD code object needs ld.lld, and none was found -- "
                         f"fix: pip install 'naiad[hip]' (the ziglang wheel carries one), install "
                         f"ROCm, or set NAIAD_LLD_PATH")
    with tempfile.TemporaryDirectory(prefix="naiad-hip-") as work:
        source, target = os.path.join(work, "kernel.o"), os.path.join(work, "kernel.hsaco")
        with open(source, "wb") as f:
            f.write(obj)
        done = subprocess.run(command + ["-shared", source, "-o", target], capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0:
            raise NaiadError(f"{kernel}: ld.lld failed to link the AMD code object:\n{done.stderr.strip()}")
        with open(target, "rb") as f:
            return f.read()
