"""Per-backend language libraries: ``naiad.language.extra.<backend name>``.

In-tree backends put theirs here as sub-packages; a plugin directory's ``language/`` is mapped
to ``naiad.language.extra.<name>`` at import time (`naiad.backends.plugin_dirs.PluginFinder`).
"""
