"""The opencl backend's knobs, ``naiad.knobs.opencl`` (declared through the backend contract:
`naiad_opencl.compiler.OpenCLBackend.knob_group`)."""

from __future__ import annotations

from naiad.knobs import KnobGroup, env_str


class OpenCLKnobs(KnobGroup):
    """Which device, and how long a program build may take."""

    device = env_str(
        "NAIAD_OPENCL_DEVICE", None,
        "The OpenCL device kernels run on: an index in the list `naiad backends` shows, or a part "
        "of its name; unset: the first device.")
    build_timeout = env_str(
        "NAIAD_OPENCL_BUILD_TIMEOUT", "300",
        "Seconds one program build may take before it is stopped and reported (a positive number).")


KNOBS = OpenCLKnobs()
