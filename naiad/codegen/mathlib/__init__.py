"""Naiad's own implementations, in LLVM IR, of the libdevice functions that have no C library
equivalent (``__naiad_<name>`` symbols, `naiad.language.extra.libdevice`), for targets without
a device math library of their own: the default `naiad.codegen.hooks.TargetHooks` uses them
(the CPU backend, SPIR-V), while the CUDA backend calls NVIDIA's libdevice instead.

Each module holds one family and its ``FUNCTIONS`` table (symbol -> lowering function taking
the rule's ``ctx`` and the argument values); `FUNCTIONS` here is their union.
"""

from __future__ import annotations

from naiad.codegen.mathlib import bessel, elementary, erf, integer, rounding

FUNCTIONS = {**rounding.FUNCTIONS, **elementary.FUNCTIONS, **integer.FUNCTIONS, **erf.FUNCTIONS,
             **bessel.FUNCTIONS}
