"""Reading torch tensors at launch without going through torch's function modes.

While a torch function mode is on (``torch.set_default_device`` installs one), every tensor method and property (``data_ptr()``,
``.dtype``, ``.device``) is routed through the mode's Python ``__torch_function__``, about 2 us
each on the project's machine.  A launch reads several of them per tensor argument: a
1,024-element add launched under ``set_default_device("cpu")`` took 30 us instead of 8.  What a
launch reads is nothing a mode should see or change, so launch paths read it with the modes
off -- only the reads: hooks, grid functions and compilation still run under the user's modes.
"""

from __future__ import annotations

import sys
from typing import Any, Callable


class _Never:
    """Stands for torch's mode switches before torch is imported: no mode can be on."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _off() -> bool:
    return False


def mode_switches() -> tuple[Callable[[], bool], Callable[[], Any]]:
    """(``modes_on()``, ``modes_off()``): whether a torch function mode is on now, and a context
    that turns the modes off inside it.  Before torch is imported, a check that says no."""
    torch = sys.modules.get("torch")
    if torch is None:
        return _off, _Never
    return torch._C._is_torch_function_mode_enabled, torch._C.DisableTorchFunction


def outside_modes(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` run with torch's function modes off whenever one is on: for launch-time
    packers that read tensor addresses and devices and call nothing of the user's.  The function
    itself where torch is not imported (then no tensor reaches it through a mode)."""
    modes_on, modes_off = mode_switches()
    if modes_on is _off:
        return function

    def run_outside_modes(*args: Any, **kwargs: Any) -> Any:
        if modes_on():
            with modes_off():
                return function(*args, **kwargs)
        return function(*args, **kwargs)
    return run_outside_modes
