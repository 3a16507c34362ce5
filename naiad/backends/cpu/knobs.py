"""The cpu backend's knobs (``naiad.knobs.cpu``), declared through the backend contract
(`naiad.backends.compiler.BaseBackend.knob_group`)."""

from __future__ import annotations

from naiad.knobs import KnobGroup, env_bool, env_int


class CPUKnobs(KnobGroup):
    """The in-tree CPU backend."""

    threads = env_int(
        "NAIAD_CPU_THREADS", None,
        "Threads that run a launch's programs in parallel (default: all cores).")
    openmp = env_bool(
        "NAIAD_CPU_OPENMP", True,
        "Run launches split across threads on the process's OpenMP runtime when one is loaded "
        "(torch's libgomp); off: always on Naiad's own thread pool.")
    amx = env_bool(
        "NAIAD_CPU_AMX", True,
        "Multiply bf16 and int8 dots on AMX tiles where the processor has them (Intel Xeon from "
        "Sapphire Rapids) and Linux grants them; off: AVX-512 BF16 / VNNI or FMA, as on other "
        "processors.")


KNOBS = CPUKnobs()
