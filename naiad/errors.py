"""Exception types that Naiad raises on purpose.

Every error a user can cause derives from `NaiadError`, so a caller can catch Naiad's
complaints without also catching bugs.  Each message names what went wrong and what to do;
the classes only sort them.
"""


class NaiadError(Exception):
    """Base class of every error Naiad raises deliberately."""


class KnobError(NaiadError, ValueError):
    """An environment variable or knob holds a value of the wrong kind."""


class BackendLoadError(NaiadError):
    """A backend could not be loaded; the message says why and how to fix it."""


class BackendSelectionError(NaiadError, RuntimeError):
    """No backend, or more than one, fits the request; the message lists every candidate.

    Derives from RuntimeError because Triton raises RuntimeError for driver selection and
    code written for Triton catches that.
    """


class LaunchError(NaiadError, TypeError):
    """A launch cannot run as asked: its arguments do not fit the kernel's parameters, an
    argument cannot be passed (a read-only output, data in the wrong byte order), or its grid
    is not 1 to 3 non-negative ints within the backend's limits."""


class KernelDefinitionError(NaiadError, TypeError):
    """``@naiad.jit`` was given something that cannot be a kernel: not a function, or a
    function with ``*args`` / ``**kwargs``."""


class BackendAPIVersionError(BackendLoadError):
    """A backend was written for a backend-API version this Naiad does not speak."""


class OutOfResources(NaiadError):
    """A kernel needs more of a device resource (registers, shared memory, threads) than the
    device has.  Backends raise it when compiling or loading a kernel, so that the autotuner can
    skip a config that does not fit instead of failing."""

    def __init__(self, required: int, limit: int, name: str):
        self.required, self.limit, self.name = required, limit, name
        super().__init__(f"out of resources: {name}: the kernel needs {required}, the device has "
                         f"{limit} -- fix: use smaller blocks or fewer stages")


class NaiadWarning(UserWarning):
    """Something is off but Naiad carries on (a shadowed backend, a broken plugin)."""
