"""OpenCL platforms and devices through pyopencl: which device runs kernels, its context and
queue, and what the compiler needs to know of it (its name as an arch, its sub-group size).

Intel's CPU runtime from PyPI (``pip install naiad-opencl[intel-cpu]``) installs
``libintelocl.so`` under the environment's ``lib`` with an ICD file that names a path of the
machine it was built on.  When no ICD is configured (``OCL_ICD_VENDORS`` unset), one naming
the installed library is written to a folder of Naiad's cache and ``OCL_ICD_VENDORS`` points
at it, before pyopencl first asks the ICD loader for platforms.

``NAIAD_OPENCL_DEVICE`` picks the device: an index in the list ``naiad backends`` shows, or a
part of its name (``NAIAD_OPENCL_DEVICE=EPYC``); the first device otherwise.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

from naiad_opencl.knobs import KNOBS

#: CL_DEVICE_SUB_GROUP_SIZES_INTEL (cl_intel_required_subgroup_size).
_SUB_GROUP_SIZES_INTEL = 0x4108
#: The sub-group size a device that cannot say gets (every Intel device has it).
DEFAULT_SUB_GROUP_SIZE = 16

_lock = threading.Lock()


def _configure_icd() -> None:
    """Point the ICD loader at Intel's CPU runtime when it is installed in this environment
    and the user configured nothing: a folder with an ICD naming it, beside copies of the
    system's ICDs (``/etc/OpenCL/vendors``, which the variable replaces)."""
    if os.environ.get("OCL_ICD_VENDORS") or os.environ.get("OCL_ICD_FILENAMES"):
        return
    library = Path(sys.prefix) / "lib" / "libintelocl.so"
    if not library.exists():
        return
    folder = Path(os.environ.get("NAIAD_CACHE_DIR") or Path.home() / ".naiad") / "opencl-icd"
    folder.mkdir(parents=True, exist_ok=True)
    entries = {"naiad-intel-cpu.icd": f"{library}\n"}
    system = Path("/etc/OpenCL/vendors")
    if system.is_dir():
        entries.update({f.name: f.read_text() for f in system.glob("*.icd")
                        if "libintelocl" not in f.read_text()})
    for name, text in entries.items():
        path = folder / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    os.environ["OCL_ICD_VENDORS"] = str(folder)


@functools.lru_cache(maxsize=None)
def _devices() -> tuple[tuple, str]:
    """(the devices, why there are none)."""
    with _lock:
        _configure_icd()
        try:
            import pyopencl as cl
        except ImportError as e:
            return (), f"pyopencl cannot be imported ({e}) -- fix: pip install pyopencl"
        try:
            platforms = cl.get_platforms()
        except cl.Error as e:
            return (), (f"no OpenCL platform ({e}) -- fix: pip install naiad-opencl[intel-cpu] for "
                        f"Intel's CPU runtime, or install your device's OpenCL driver")
        devices = tuple(d for p in platforms for d in p.get_devices())
        if not devices:
            return (), "the OpenCL platforms list no device"
        return devices, ""


def devices() -> tuple:
    return _devices()[0]


def why_none() -> str:
    return _devices()[1]


def chosen_index() -> int:
    """The device ``NAIAD_OPENCL_DEVICE`` names (an index or a part of a name), else 0."""
    choice = (KNOBS.device or "").strip()
    found = devices()
    if not choice:
        return 0
    if choice.isdigit():
        index = int(choice)
        if index < len(found):
            return index
    else:
        for i, device in enumerate(found):
            if choice.lower() in device.name.lower():
                return i
    from naiad.errors import NaiadError

    names = ", ".join(f"{i}: {d.name}" for i, d in enumerate(found))
    raise NaiadError(f"NAIAD_OPENCL_DEVICE={choice!r} names no OpenCL device -- fix: use an index "
                     f"or a part of a name among {names}")


def arch(device: Any) -> str:
    """The device as a target arch: vendor and kind, lower case (``intel-cpu``)."""
    import pyopencl as cl

    vendor = re.sub(r"\(.*?\)", "", device.vendor).split()
    vendor = re.sub(r"[^a-z0-9]+", "", vendor[0].lower()) if vendor else "unknown"
    kind = {cl.device_type.CPU: "cpu", cl.device_type.GPU: "gpu", cl.device_type.ACCELERATOR: "accel"}
    return f"{vendor}-{kind.get(device.type & ~cl.device_type.DEFAULT, 'device')}"


def sub_group_size(device: Any) -> int:
    """The sub-group size kernels are compiled for: 16 where the device offers it (or cannot
    say), else its largest."""
    try:
        sizes = list(device.get_info(_SUB_GROUP_SIZES_INTEL))
    except Exception:         # noqa: BLE001 -- not an Intel device: no way to ask
        return DEFAULT_SUB_GROUP_SIZE
    if not sizes or DEFAULT_SUB_GROUP_SIZE in sizes:
        return DEFAULT_SUB_GROUP_SIZE
    return max(sizes)


def has_system_svm(device: Any) -> bool:
    """Whether any host pointer (a numpy array's) may be a kernel argument."""
    import pyopencl as cl

    try:
        return bool(device.svm_capabilities & cl.device_svm_capabilities.FINE_GRAIN_SYSTEM)
    except (AttributeError, cl.Error):
        return False


class DeviceState:
    """A device's context and in-order queue, made once."""

    def __init__(self, device: Any):
        import pyopencl as cl

        self.device = device
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, device)
        self.system_svm = has_system_svm(device)
