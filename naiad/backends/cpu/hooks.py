"""CPU specifics for the shared lowering rules: the C math library of the process."""

from __future__ import annotations

from naiad.codegen.hooks import TargetHooks


class CPUHooks(TargetHooks):
    name = "cpu"

    def __init__(self, debug: bool = False):
        self.debug = debug
