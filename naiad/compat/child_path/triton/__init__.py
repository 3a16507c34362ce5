"""``import triton`` in a child process of one that enabled Naiad's compatibility layer.

`naiad.compat.enable` puts this folder's parent first on ``PYTHONPATH`` for the processes the
program starts (torch's Inductor compiles in worker processes that import ``triton`` and never
``naiad``), so their ``import triton`` lands here: this enables the layer in that process too,
and ``triton`` becomes Naiad's compat module (this one is replaced in ``sys.modules``).
"""

__naiad_compat__ = True

import naiad.compat  # noqa: E402

naiad.compat.enable()
