"""The compiler half of the backend contract.

A backend is a package with two modules: ``compiler`` (exactly one concrete subclass of
`BaseBackend`) and ``driver`` (exactly one concrete subclass of `naiad.backends.driver.DriverBase`).
In-tree backends and third-party ones obey the same contract and are found the same way
(`naiad.backends.discovery`).

The method names and meanings are Triton's (``triton/backends/compiler.py``), so a Triton
backend ports with little change.  What Triton's core expects but never declares is declared
here: `BaseBackend.binary_ext`, `BaseBackend.get_codegen_implementation`,
`BaseBackend.pack_metadata`, `BaseBackend.get_target_name`, the codec of each stage's output
(`BaseBackend.stage_codec`) and the environment variables that must invalidate the compile cache
(`BaseBackend.cache_env_vars`).  Everything abstract must be implemented; discovery names what is
missing.

Versioning: a backend sets ``api_version`` to the `BACKEND_API_VERSION` it was written for.
Discovery accepts versions from `OLDEST_BACKEND_API_VERSION` to `BACKEND_API_VERSION` and rejects
others with a message saying which side to upgrade.  ``docs/WRITING_A_BACKEND.md`` lists what changed in
each version.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from abc import ABCMeta, abstractmethod
from typing import Any, Callable, ClassVar

#: The version of this contract.  Raised whenever a method is added, removed or changes meaning.
BACKEND_API_VERSION = 3
#: The oldest contract version this Naiad still loads.
OLDEST_BACKEND_API_VERSION = 1


@dataclasses.dataclass(frozen=True)
class GPUTarget:
    """What a kernel is compiled for: the backend's name, its architecture, its warp size.

    The CPU uses it too, e.g. ``GPUTarget("cpu", "x86_64-avx2", 1)``.  It is hashable and is
    stored in kernel metadata as JSON through `to_json` / `from_json`.
    """

    backend: str
    arch: int | str
    warp_size: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "GPUTarget":
        return cls(data["backend"], data["arch"], data["warp_size"])


class Language(enum.Enum):
    """The language of a kernel's source, passed to `BaseBackend.add_stages`.

    TRITON sources enter at the ``ttir`` stage.  GLUON (Triton's layout-explicit dialect, entry
    stage ``ttgir``) is listed so that backend code written for Triton keeps its shape; Naiad's
    frontend produces TRITON only.
    """

    TRITON = 0
    GLUON = 1


@dataclasses.dataclass(frozen=True)
class StageCodec:
    """How a stage's output is stored on disk, dumped and read back from an override file.

    ``binary`` outputs (object code, cubin) are bytes; the others are text (IR, assembly).
    The compile pipeline never guesses from a file extension: it asks `BaseBackend.stage_codec`.
    """

    binary: bool

    def encode(self, output: Any) -> bytes:
        if self.binary:
            return bytes(output)
        return str(output).encode("utf-8")

    def decode(self, data: bytes) -> bytes | str:
        return bytes(data) if self.binary else data.decode("utf-8")


TEXT = StageCodec(binary=False)
BYTES = StageCodec(binary=True)


class BackendOptions:
    """Mixin for a backend's frozen options dataclass.

    The core needs `hash` (part of the cache key) and JSON-safe fields (they are written into
    kernel metadata).  Subclass this together with ``@dataclasses.dataclass(frozen=True)``.
    """

    @classmethod
    def given(cls, options: dict[str, Any]) -> dict[str, Any]:
        """The values ``options`` gives this dataclass's fields (None: not given), those that
        JSON turned into lists (``allowed_dot_input_precisions``, from a kernel's metadata) made
        tuples again: what a backend's ``parse_options`` starts from."""
        known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        values = {k: v for k, v in options.items() if k in known and v is not None}
        if isinstance(values.get("allowed_dot_input_precisions"), list):
            values["allowed_dot_input_precisions"] = tuple(values["allowed_dot_input_precisions"])
        return values

    def hash(self) -> str:
        fields = dataclasses.asdict(self)  # type: ignore[call-overload]
        text = json.dumps(fields, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


class BaseBackend(metaclass=ABCMeta):
    """The compiler of one backend.

    The core builds one instance per target (``Backend(target)``) and calls, for each
    compilation that misses the cache: `parse_options`, `add_stages`, `load_dialects`,
    `get_codegen_implementation`, `get_module_map`, then runs the stages in order.  `hash` and
    the values of `cache_env_vars` go into every cache key.  `pack_metadata` is called once when
    a compiled kernel is loaded.
    """

    #: The `BACKEND_API_VERSION` this backend was written for.  Required.
    api_version: ClassVar[int]
    #: Name of the final stage, whose output (bytes) the driver loads: "obj", "cubin", "hsaco".
    binary_ext: ClassVar[str]
    #: Environment variables whose values change what this backend generates.  The core puts
    #: their effective values (`naiad.knobs.env_value`) into the cache key, so a changed value
    #: never returns a stale kernel.
    cache_env_vars: ClassVar[tuple[str, ...]] = ()
    #: Threads per warp of this backend's targets when a target string leaves it out
    #: (``naiad compile --target <backend>:<arch>``).
    default_warp_size: ClassVar[int] = 32
    #: The cases of Naiad's portable conformance suite (`naiad.testing.conformance`, run by
    #: ``naiad conformance --backend NAME``) this backend fails, and why: ``fnmatch`` patterns
    #: over case ids (``"test_dot.py::test_dot[int8*"``) -> reason.  Strict: a listed case
    #: that passes fails the run, as does a pattern that names no case.
    conformance_expected_failures: ClassVar[dict[str, str]] = {}
    #: The backend's own environment knobs: an instance of a `naiad.knobs.KnobGroup` subclass
    #: (``env_int("MYDEV_THREADS", ...)`` attributes), readable and overridable from code as
    #: ``naiad.knobs.<backend name>`` once the backend loads (first use of that name loads it).
    knob_group: ClassVar[Any] = None

    def __init__(self, target: GPUTarget) -> None:
        if not self.supports_target(target):
            raise ValueError(f"{type(self).__name__} does not compile for {target}")
        self.target = target

    @staticmethod
    @abstractmethod
    def supports_target(target: GPUTarget) -> bool:
        """True if this backend compiles for ``target``.  Exactly one backend may claim a target."""

    @abstractmethod
    def hash(self) -> str:
        """A stable identifier of the toolchain and architecture (part of every cache key)."""

    @abstractmethod
    def parse_options(self, options: dict[str, Any]) -> Any:
        """Turn launch/compile keyword options into this backend's options object.

        Called once per new specialization and again by ``compile()``.  The result must have
        ``hash()`` and JSON-safe fields (`BackendOptions` provides ``hash``).  Options meant for
        another backend arrive namespaced and are dropped by the core before this call.
        """

    @abstractmethod
    def add_stages(self, stages: dict[str, Callable[[Any, dict], Any]], options: Any,
                   language: Language) -> None:
        """Fill ``stages`` in order: stage name -> ``fn(ir, metadata) -> next_ir``.

        The first stage is named after the source's extension ("ttir" for kernels written in
        Python); the last is `binary_ext` and returns bytes.  A stage may add keys to
        ``metadata``; by the end it must hold ``name`` and ``shared``.
        """

    def load_dialects(self, context: Any) -> None:
        """Register this backend's own IR dialects in ``context``.  Default (API 3): none."""

    def get_module_map(self) -> dict[str, Any]:
        """Generic module name -> this backend's implementation module.

        E.g. ``{"naiad.language.extra.libdevice": <module naiad.language.extra.cpu.libdevice>}``:
        the code generator swaps the stub for the backend's module at compile time.
        Default (API 3): none.
        """
        return {}

    def get_codegen_implementation(self, options: Any) -> dict[str, Any]:
        """Backend-specific hooks for the code generator, e.g. ``{"min_dot_size": fn}``.

        ``min_dot_size(lhs_type, rhs_type) -> (m, n, k)``: the smallest dot the backend takes
        (Triton's GPU backends refuse dots under 16).  Default (API 3): any size, (1, 1, 1).
        """
        return {"min_dot_size": lambda lhs, rhs: (1, 1, 1)}

    @abstractmethod
    def pack_metadata(self, metadata: Any) -> tuple:
        """The tuple handed verbatim to this backend's launcher with every launch."""

    @abstractmethod
    def get_target_name(self, options: Any) -> str:
        """A printable target name, e.g. "cuda:90" or "cpu:x86_64-avx2"."""

    def option_names(self) -> frozenset[str]:
        """The keyword options a launch may pass to this backend; any other keyword of a launch
        must be a parameter of the kernel (Naiad refuses the rest, naming the closest name).
        Default: the fields of ``parse_options({})``.  Override when the options object is not
        a dataclass."""
        options = self.parse_options({})
        if dataclasses.is_dataclass(options):
            return frozenset(f.name for f in dataclasses.fields(options))
        return frozenset(vars(options))

    def derived_asm(self, name: str, asm: dict[str, Any]) -> str | None:
        """A view of a compiled kernel that no stage writes, made when ``kernel.asm[name]`` is
        first read (the cuda backend disassembles its cubin for ``"sass"``); None: there is no
        such view.  Optional."""
        return None

    def stage_codec(self, stage: str) -> StageCodec:
        """How the output of ``stage`` is stored: bytes for `binary_ext`, text otherwise.

        Override when another stage produces bytes.
        """
        return BYTES if stage == self.binary_ext else TEXT
