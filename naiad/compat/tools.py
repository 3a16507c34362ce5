"""``triton.tools`` under compat: a package whose one module Naiad provides is ``tensor_descriptor``."""

#: Looks like a package, so that `import triton.tools.<missing>` reaches the compat layer's
#: "not provided" error instead of Python's "not a package".
__path__: list[str] = []
