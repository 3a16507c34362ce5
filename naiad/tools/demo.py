"""``naiad demo``: the README's first command.

It shows which backends this machine has and, once Naiad can compile kernels, runs a small
gallery of them on the default backend.  Until the kernel frontend exists it says so plainly.
"""

from __future__ import annotations

from typing import Callable

import naiad
from naiad.tools import backends_cmd


def main(write: Callable[[str], None]) -> int:
    write(f"Naiad {naiad.__version__}\n\nBackends on this machine:\n")
    backends_cmd.list_backends(write)
    write("\nNo backend can run kernels yet: this version of Naiad has the backend contract, "
          "discovery and selection, but no kernel frontend.\n")
    return 0
