"""The kernel language (``import naiad.language as tl``).

Backend-specific libraries live under `naiad.language.extra`: ``naiad.language.extra.<name>``
is the ``language/`` directory of the backend called <name>.
"""
