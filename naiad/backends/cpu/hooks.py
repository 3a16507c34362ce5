"""CPU specifics for the shared lowering rules: the C math library of the process."""

from __future__ import annotations

from typing import Any

from naiad.codegen.hooks import TargetHooks


class CPUHooks(TargetHooks):
    name = "cpu"

    def __init__(self, debug: bool = False):
        self.debug = debug

    def check_access(self, kernel: Any, op: Any, addresses: Any, mask: Any, lanes: int,
                     element: Any) -> Any:
        if not self.debug:
            return mask
        from naiad.backends.cpu.lowering.debug import check_access

        return check_access(kernel, op, addresses, mask, lanes, element)
