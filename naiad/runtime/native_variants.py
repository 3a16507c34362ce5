"""From a JIT function's prepared warm launches to its native launch entry
(`naiad.runtime.native_entry`): what each prepared launch requires (a `Variant`), the guards on
everything the Python path reads besides the arguments, and when the builtin is (re)built.

A variant is made where the full launch path prepares a warm launch (`JITFunction._run_slow`),
from the very arguments, options and kernel it launched, and compiled on its own (a few
milliseconds of LLVM) when that launch is repeated: a kernel launched once pays nothing.  It
happens only in processes that have loaded LLVM already (every CPU launch has; a GPU process
that compiled has), and at most `MAX_BUILDS` times per function: a kernel launched in ever new
ways keeps the Python path, which handles every launch anyway.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from naiad.language.kernel_function import KernelFunction, resolve
from naiad.runtime import native_code
from naiad.runtime.native_entry import (Guard, Variant, VariantTable, dispatcher, expectation,
                                        variant_function)

MAX_VARIANTS = 12
MAX_BUILDS = 64


class NativeEntries:
    """One JIT function's variants and builtin (``entry``, None until made): a `dispatcher`
    over a `VariantTable`, so that a launch entry taken once (``fn[grid]``) sees the variants
    added later.  Each variant is compiled on its own (`variant_function`); every one compiled
    stays loaded, with the objects its code refers to by address (the kernel, whose machine
    code it calls; the launch), as a thread may still run in it: a variant dropped from the
    table while another thread's launch runs in it (the GIL released) would otherwise free
    the kernel under that launch.

    A prepared launch with a variant is marked ``unbuilt`` until the Python entry, at its next
    launch, has it compiled in (`adopt`).  The table holds the last `MAX_VARIANTS`; one dropped
    from it is marked ``unbuilt`` again."""

    def __init__(self) -> None:
        self.builds = 0
        self.entry: Callable[..., Any] | None = None
        #: Why the last build failed (a bug of the builder: the Python path goes on).
        self.error: str | None = None
        self._table = VariantTable(MAX_VARIANTS)
        self._kept: list[tuple[Variant, Any, int]] = []       # (variant, prepared, address)
        self._loaded: list[tuple[Any, Variant]] = []     # (module, variant): never let go
        self._fn: Any = None
        self._fallback: Callable[..., Any] | None = None
        self._missing: Any = None

    @property
    def variants(self) -> list[Variant]:
        """The variants in the table, oldest first."""
        return [v for v, _, _ in self._kept]

    def start(self, fn: Any, fallback: Callable[..., Any], missing: Any) -> None:
        """Remember the function and make the builtin now if building can happen (it calls
        ``fallback`` until a variant is in): the launch entries taken from then on are the
        builtin itself."""
        self._fn, self._fallback, self._missing = fn, fallback, missing
        self._dispatcher()

    def offer(self, prepared: Any, bound: dict[str, Any], options: dict[str, Any],
              state_guards: Callable[[], list[tuple] | None]) -> None:
        """Make the variant of the warm launch just prepared, when it can run natively (after
        `start`); it is compiled at the launch's first repetition (`adopt`): a kernel launched
        once, or a cold start, pays nothing for it.  ``state_guards()`` gives the guards on the
        launch key's state (None: none can be written), asked only when a variant is made."""
        if not self._open() or self._fn is None:
            return
        guards = state_guards()
        if guards is None:
            return
        prepared.variant = make_variant(self._fn, prepared, bound, options, guards)
        prepared.unbuilt = prepared.variant is not None     # built at its first warm launch

    def adopt(self, prepared: Any) -> None:
        """Compile ``prepared``'s variant and put it in the table (the oldest one out when
        full)."""
        prepared.unbuilt = False
        if not self._open() or not self._dispatcher():
            return
        variant = prepared.variant
        self.builds += 1
        try:
            module, address = variant_function(self._fn.arg_names, variant)
        except Exception as e:          # noqa: BLE001  (a builder bug must not fail launches)
            self.error = f"{type(e).__name__}: {e}"
            return
        self._loaded.append((module, variant))
        kept = [k for k in self._kept if k[0].params != variant.params or k[0].options != variant.options]
        for _, dropped, _ in kept[:-(MAX_VARIANTS - 1)]:
            dropped.unbuilt = True
        self._kept = kept[-(MAX_VARIANTS - 1):] + [(variant, prepared, address)]
        self._table.set([a for _, _, a in self._kept])

    def _dispatcher(self) -> bool:
        if self.entry is None and self._open():
            fn = self._fn
            defaults = {i: p.default for i, p in enumerate(fn.params) if p.has_default}
            try:
                self.entry = dispatcher(fn.__name__, fn.arg_names, defaults, self._missing,
                                        self._table, self._fallback)
            except Exception as e:      # noqa: BLE001  (a builder bug must not fail launches)
                self.error = f"{type(e).__name__}: {e}"
        return self.entry is not None

    def _open(self) -> bool:
        """Whether building goes on: no failure yet, builds left, the knob on
        (``NAIAD_NATIVE_LAUNCH``), LLVM loaded already."""
        from naiad import knobs

        return self.error is None and self.builds < MAX_BUILDS and knobs.runtime.native_launch and \
            "llvmlite.binding" in sys.modules and native_code.available()


def make_variant(fn: Any, prepared: Any, bound: dict[str, Any], options: dict[str, Any],
                 state_guards: list[tuple]) -> Variant | None:
    """What the builtin requires to repeat ``prepared``'s launch; None when some part of it
    is beyond the builtin (the Python path keeps launching it)."""
    native_launch = getattr(prepared.kernel.launcher, "native_launch", None)
    launch = native_launch(prepared.kernel.module, prepared.kernel.function) if native_launch else None
    if launch is None or prepared.direct is None:
        return None
    slot_types = dict(launch.slots)
    params = []
    for i, p in enumerate(fn.params):
        expect = expectation(p, bound[p.name], slot_types.get(i))
        if expect is None:
            return None
        params.append(expect)
    guards = function_guards(fn, prepared.snapshot)
    if guards is None:
        return None
    guards += [(fn, (("attr", "cache"), ("item", prepared.key)), "is", prepared.kernel),
               (fn, (("attr", "pre_run_hooks"),), "empty", None), *state_guards]
    before = []
    if any(e[0] == "tensor" for e in params):          # read a tensor only with the modes off
        from naiad.runtime.torch_modes import mode_switches

        before.append(Guard(mode_switches()[0], (("call",),), "is", False))
    return Variant(tuple(before), tuple(params), tuple(options.items()), tuple(Guard(*g) for g in guards),
                   tuple(prepared.max_grid), prepared.max_programs, launch, prepared.kernel)


def function_guards(fn: Any, snapshot: tuple, seen: frozenset = frozenset()) -> list[tuple] | None:
    """Guards that hold while `naiad.runtime.jit`'s dependency snapshot of ``fn`` does: its
    source, debug, noinline and version objects, each global name or module attribute chain
    its source reads, and the same of every ``@jit`` function among them (recursively)."""
    src, debug, noinline, version, values, nested = snapshot
    guards: list[tuple] = [(fn, (("attr", name),), "is", value) for name, value in
                           (("src", src), ("debug", debug), ("noinline", noinline), ("version", version))]
    for chain in fn.referenced_globals():
        chain_guards = _chain_guards(fn, chain)
        if chain_guards is None:
            return None
        guards += chain_guards
    jits = [v for v in values + tuple(p.default for p in fn.params if p.has_default)
            if isinstance(v, KernelFunction) and v is not fn]
    for inner, inner_snapshot in zip(jits, nested):
        if id(inner) in seen:
            continue
        more = function_guards(inner, inner_snapshot, seen | {id(fn)})
        if more is None:
            return None
        guards += more
    return guards


def _chain_guards(fn: Any, chain: tuple[str, ...]) -> list[tuple] | None:
    """Guards that hold while `resolve` ``(fn, chain)`` gives the same object: the global's
    value, then each module attribute the chain goes through."""
    value = fn.__globals__.get(chain[0])
    guards = [(fn.__globals__, (("item", chain[0]),), "is", value)]
    for name in chain[1:]:
        if value is None or type(value).__name__ != "module":
            break
        if not hasattr(value, name):
            return None
        following = getattr(value, name)
        guards.append((value, (("attr", name),), "is", following))
        value = following
    if resolve(fn, chain) is not value:            # pragma: no cover  (resolve's rule changed)
        return None
    return guards
