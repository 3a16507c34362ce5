"""Finding and running NVIDIA's tools: ptxas (PTX -> cubin), libdevice (the math library) and
cuobjdump (cubin -> SASS, for ``kernel.asm["sass"]``).

LLVM (through llvmlite) writes PTX; only NVIDIA's ptxas turns it into a cubin.  A cubin loads in
0.1 ms where handing the driver PTX to JIT-compile takes ~100 ms per kernel, so the backend
caches cubins whenever a ptxas can be found -- and no CUDA install is needed for one: the
``nvidia-cuda-nvcc`` wheel ships it, as Triton bundles its own.  Each tool is looked up, in
order: its ``NAIAD_*`` variable (an error if it names nothing usable), the pip wheels on
``sys.path``, ``$CUDA_HOME``, ``$CUDA_PATH``, ``/usr/local/cuda`` (and ``PATH`` for ptxas).

Which ptxas and libdevice were used changes the generated code, so `toolchain_hash` names them
for the compile-cache key.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Callable

from naiad.backends.cuda.knobs import KNOBS
from naiad.errors import NaiadError

_EXE = ".exe" if os.name == "nt" else ""
#: Where a CUDA toolkit lives when neither $CUDA_HOME nor $CUDA_PATH says (Linux's default).
_STANDARD_ROOT = "/usr/local/cuda"
_WHEEL_PTXAS = ("nvidia/cu13/bin", "nvidia/cuda_nvcc/bin")
_WHEEL_LIBDEVICE = ("nvidia/cu13/nvvm/libdevice", "nvidia/cuda_nvcc/nvvm/libdevice",
                    "nvidia/nvvm/libdevice")
_INSTALL_HINT = "pip install nvidia-cuda-nvcc, or install the CUDA toolkit"

#: Compute capability -> the PTX ISA version asked of LLVM: the first version that knows the
#: architecture (sm_90 needs 8.0 for its "a" features), so that older drivers and ptxas still
#: accept the PTX.  Newer architectures than listed get the newest version LLVM 22 writes.
_PTX_VERSIONS = {70: 60, 72: 61, 75: 63, 80: 70, 86: 71, 87: 74, 89: 78, 90: 80,
                 100: 86, 101: 86, 103: 88, 110: 90, 120: 87, 121: 88}
_NEWEST_PTX = 90


class PTXASError(NaiadError):
    """ptxas failed or cannot be run; the message holds its command line and its output."""


_found: dict[tuple, str | None] = {}
_versions: dict[tuple, str] = {}


def _search_key(tool: str, setting: str | None) -> tuple:
    """What a search depends on: the knob, the variables that name CUDA, and sys.path."""
    return (tool, setting, os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
            os.environ.get("PATH"), tuple(sys.path))


def _cuda_roots() -> list[str]:
    return [root for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                              _STANDARD_ROOT) if root]


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _configured_or_searched(tool: str, setting: str | None, usable: Callable[[str], bool],
                            search: Callable[[], str | None], complaint: str) -> str | None:
    """The file a knob names (an error when it is not ``usable``), else the search's find;
    remembered per `_search_key`."""
    key = _search_key(tool, setting)
    if key not in _found:
        if setting is not None and not usable(setting):
            raise NaiadError(complaint)
        _found[key] = setting if setting is not None else search()
    return _found[key]


def find_ptxas() -> str | None:
    """The ptxas to compile PTX with, or None when there is none (the driver then JIT-compiles
    PTX).  Remembered for as long as NAIAD_PTXAS_PATH, CUDA_HOME, CUDA_PATH, PATH and sys.path
    stay the same."""
    setting = KNOBS.ptxas_path
    return _configured_or_searched(
        "ptxas", setting, _is_executable, _search_ptxas,
        f"NAIAD_PTXAS_PATH={setting!r} is not an executable file: set it to the path of "
        f"ptxas{_EXE} (e.g. /usr/local/cuda/bin/ptxas{_EXE}), or unset it to search the "
        f"nvidia-cuda-nvcc wheel and CUDA_HOME")


def _search_ptxas() -> str | None:
    return _search_tool("ptxas")


def _search_tool(tool: str) -> str | None:
    """An NVIDIA command-line tool from the pip wheels, the CUDA install or PATH."""
    name = tool + _EXE
    for entry in sys.path:
        wheel = [os.path.join(entry, d, name) for d in _WHEEL_PTXAS]
        wheel += sorted(glob.glob(os.path.join(glob.escape(entry), "nvidia", "*", "bin", name)))
        for path in wheel:
            if _is_executable(path):
                return path
    for root in _cuda_roots():
        path = os.path.join(root, "bin", name)
        if _is_executable(path):
            return path
    return shutil.which(name)


def disassemble(cubin: bytes) -> str:
    """The SASS of a cubin, as ``cuobjdump -sass`` prints it (the CUDA toolkit's, or the
    ``nvidia-cuda-cuobjdump`` wheel's)."""
    tool = _configured_or_searched("cuobjdump", None, _is_executable,
                                   lambda: _search_tool("cuobjdump"), complaint="")
    if tool is None:
        raise NaiadError("kernel.asm['sass'] needs NVIDIA's cuobjdump, which was not found -- "
                         "fix: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, or install "
                         "the CUDA toolkit (CUDA_HOME)")
    with tempfile.TemporaryDirectory(prefix="naiad-sass-") as folder:
        path = os.path.join(folder, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        done = subprocess.run([tool, "-sass", path], capture_output=True, text=True)
    if done.returncode != 0:
        # (the cuobjdump wheels of CUDA 13 no longer carry the disassembler it runs)
        fix = (" -- fix: pip install nvidia-cuda-nvdisasm (cuobjdump finds it beside itself)"
               if "nvdisasm" in done.stderr else "")
        raise NaiadError(f"{tool} -sass failed (exit status {done.returncode}): "
                         f"{(done.stderr + done.stdout).strip()[:1000]}{fix}")
    return done.stdout


def find_libdevice() -> str | None:
    """libdevice's bitcode (``libdevice.10.bc``), or None; remembered as `find_ptxas` is."""
    setting = KNOBS.libdevice_path
    return _configured_or_searched(
        "libdevice", setting, os.path.isfile, _search_libdevice,
        f"NAIAD_LIBDEVICE_PATH={setting!r} is not a file: set it to the path of libdevice.10.bc "
        f"(e.g. /usr/local/cuda/nvvm/libdevice/libdevice.10.bc), or unset it to search the "
        f"nvidia wheels and CUDA_HOME")


def _search_libdevice() -> str | None:
    for entry in sys.path:
        wheel = [os.path.join(entry, d, "libdevice.10.bc") for d in _WHEEL_LIBDEVICE]
        wheel += sorted(glob.glob(os.path.join(glob.escape(entry), "nvidia", "*", "nvvm",
                                               "libdevice", "libdevice*.bc")))
        for path in wheel:
            if os.path.isfile(path):
                return path
    for root in _cuda_roots():
        path = os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
        if os.path.isfile(path):
            return path
    return None


def ptxas_version(path: str) -> str:
    """The CUDA release of a ptxas ("13.0"), from ``ptxas --version``; remembered per file
    (path, size and modification time)."""
    stat = os.stat(path)
    key = (path, stat.st_size, stat.st_mtime_ns)
    if key not in _versions:
        command = [path, "--version"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
            output = done.stdout + done.stderr
        except (OSError, subprocess.SubprocessError) as error:
            output = str(error)
        match = re.search(r"release (\d+\.\d+)", output)
        if match is None:
            raise PTXASError(f"{' '.join(command)} did not print a CUDA release "
                             f"(\"release X.Y\"); it printed: {output.strip()[:500]!r} -- set "
                             f"NAIAD_PTXAS_PATH to a working ptxas ({_INSTALL_HINT})")
        _versions[key] = match.group(1)
    return _versions[key]


def toolchain_hash() -> str:
    """A digest of the ptxas (path and release) and libdevice (path and size) in use, for the
    backend's part of the compile-cache key."""
    ptxas, libdevice = find_ptxas(), find_libdevice()
    parts = [f"ptxas={ptxas}", f"release={ptxas_version(ptxas) if ptxas else None}",
             f"libdevice={libdevice}",
             f"size={os.path.getsize(libdevice) if libdevice else None}"]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def ptx_version_for(arch: int) -> int:
    """The PTX ISA version (80 for 8.0) to write for compute capability ``arch`` (90)."""
    if arch < 70:
        raise NaiadError(f"sm_{arch} is not supported: the cuda backend needs compute "
                         f"capability 7.0 (Volta) or newer")
    if arch in _PTX_VERSIONS:
        return _PTX_VERSIONS[arch]
    if arch > max(_PTX_VERSIONS):
        return _NEWEST_PTX
    return _PTX_VERSIONS[max(a for a in _PTX_VERSIONS if a < arch)]


def ptx_features(arch: int, ptx_version: int | None = None) -> str:
    """The LLVM NVPTX feature string for ``arch``: "+ptx80" for sm_90; ``ptx_version``, when
    given, raises the PTX ISA version to it (a kernel using an instruction of a later one)."""
    return f"+ptx{max(ptx_version_for(arch), ptx_version or 0)}"


#: CUDA release -> the newest PTX ISA version its ptxas assembles (a release not listed takes
#: the one of the release before it).
_RELEASE_PTX = {(11, 8): 78, (12, 0): 80, (12, 1): 81, (12, 2): 82, (12, 3): 83, (12, 4): 84, (12, 5): 85,
                (12, 8): 87, (12, 9): 88, (13, 0): 90}


def newest_ptx(ptxas: str | None) -> int | None:
    """The newest PTX ISA version (87 for 8.7) that ``ptxas`` assembles; None without a
    ptxas (the PTX is then loaded by the driver, whose version is not known at compile time)."""
    if ptxas is None:
        return None
    release = tuple(int(part) for part in ptxas_version(ptxas).split("."))
    older = [r for r in _RELEASE_PTX if r <= release]
    return _RELEASE_PTX[max(older)] if older else ptx_version_for(70)   # older: assume the least


def ptxas_arch(arch: int) -> str:
    """The target name of ``arch`` for LLVM and ptxas (the PTX's ``.target``): sm_90a for
    Hopper (its wgmma/TMA/setmaxnreg need the "a" variant), sm_<arch> otherwise."""
    return "sm_90a" if arch == 90 else f"sm_{arch}"


@dataclasses.dataclass(frozen=True)
class Assembled:
    """A cubin and what ptxas reported of its kernel: registers a thread and bytes spilled."""

    cubin: bytes
    registers: int
    spill_bytes: int


def ptx_to_cubin(ptx: str, arch: int, *, ptxas: str, opt_level: int = 3,
                 maxnreg: int | None = None) -> Assembled:
    """Assemble ``ptx`` for compute capability ``arch`` with ``ptxas``."""
    with tempfile.TemporaryDirectory(prefix="naiad-ptxas-") as folder:
        source, target = os.path.join(folder, "kernel.ptx"), os.path.join(folder, "out.cubin")
        with open(source, "w", encoding="utf-8") as f:
            f.write(ptx)
        command = [ptxas, f"-arch={ptxas_arch(arch)}", f"-O{opt_level}", "-v"]
        if maxnreg is not None:
            command.append(f"--maxrregcount={maxnreg}")
        command += [source, "-o", target]
        try:
            done = subprocess.run(command, capture_output=True, text=True)
        except OSError as error:
            raise PTXASError(f"cannot run {' '.join(command)}: {error} -- set NAIAD_PTXAS_PATH "
                             f"to a working ptxas ({_INSTALL_HINT})") from None
        if done.returncode != 0 or not os.path.isfile(target):
            output = (done.stderr + done.stdout).strip()
            raise PTXASError(
                f"ptxas failed (exit status {done.returncode}) on the PTX for sm_{arch}:\n"
                f"{output}\ncommand: {' '.join(command)}\n"
                f"What to do: an error about the PTX version or target means this ptxas "
                f"(release {_release_or_unknown(ptxas)}) is older than the PTX needs -- point "
                f"NAIAD_PTXAS_PATH at a newer one ({_INSTALL_HINT}); any other error is a bug "
                f"in Naiad's code generation: please report it with the PTX "
                f"(NAIAD_KERNEL_DUMP=1 writes it)")
        with open(target, "rb") as f:
            return Assembled(f.read(), *_resources(done.stdout + done.stderr))


def _resources(report: str) -> tuple[int, int]:
    """(registers, spill bytes) from ``ptxas -v``'s report: the largest of each over its
    functions (the kernel's); (0, 0) where a ptxas reports neither."""
    registers = [int(n) for n in re.findall(r"Used (\d+) registers", report)]
    spills = [int(a) + int(b) for a, b in
              re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)]
    return max(registers, default=0), max(spills, default=0)


def _release_or_unknown(ptxas: str) -> str:
    try:
        return ptxas_version(ptxas)
    except (NaiadError, OSError):
        return "unknown"
