"""Host arrays staged through device memory, for backends whose kernels cannot take them.

The suite's cases pass numpy arrays (and `reference.BF16Array`, bf16 bits).  A backend whose
driver runs on host memory (``"cpu"`` among its ``device_types`` or ``guest_device_types``)
takes them as they are; for any other (cuda), every launch of the suite goes through `Staged`:
each array is copied to a torch tensor on the driver's ``get_active_torch_device()``, the
kernel runs on the tensors, and each array gets the tensor's contents back -- so a case reads
its results from its arrays, as on the CPU.  ``NAIAD_CONFORMANCE_STAGE=1`` stages on any
backend (Naiad's own tests check the staging itself on the cpu backend, with CPU tensors).
"""

from __future__ import annotations

import os
from typing import Any, Callable

#: 1: stage every launch, whatever the backend takes.
FORCE_VARIABLE = "NAIAD_CONFORMANCE_STAGE"


def needs_staging(driver_class: type) -> bool:
    """Whether the suite's host arrays must be staged for kernels of this driver."""
    if os.environ.get(FORCE_VARIABLE) == "1":
        return True
    memory = tuple(driver_class.device_types) + tuple(getattr(driver_class, "guest_device_types", ()))
    return "cpu" not in memory


class Staged:
    """A launch (``kernel[grid]``) whose array arguments travel through ``device`` (a
    ``torch.device``), copied back after it."""

    def __init__(self, launch: Callable[..., Any], device: Any):
        self.launch, self.device = launch, device

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        copies: list[tuple[Any, Any]] = []
        staged_args = [self._staged(a, copies) for a in args]
        staged_kwargs = {k: self._staged(v, copies) for k, v in kwargs.items()}
        result = self.launch(*staged_args, **staged_kwargs)
        for host, tensor in copies:
            host[...] = tensor.cpu().numpy()
        return result

    def _staged(self, value: Any, copies: list) -> Any:
        import numpy as np
        import torch

        from naiad.testing.conformance.reference import BF16Array

        if isinstance(value, BF16Array):
            tensor = torch.from_numpy(value.bits.view(np.int16)).to(self.device, copy=True)
            copies.append((value.bits.view(np.int16), tensor))
            return tensor.view(torch.bfloat16)
        if isinstance(value, np.ndarray) and value.dtype == np.bool_:     # its bytes, exactly
            tensor = torch.from_numpy(value.view(np.uint8)).to(self.device, copy=True)
            if value.flags.writeable:
                copies.append((value.view(np.uint8), tensor))
            return tensor.view(torch.bool)
        if isinstance(value, np.ndarray):          # a strided view keeps its strides (torch's)
            tensor = torch.from_numpy(value).to(self.device, copy=True)
            if value.flags.writeable:
                copies.append((value, tensor))
            return tensor
        if isinstance(value, tuple):
            return type(value)(*(self._staged(v, copies) for v in value)) if hasattr(value, "_fields") \
                else tuple(self._staged(v, copies) for v in value)
        return value
