"""Per-backend tools: ``naiad.tools.extra.<backend name>`` is a plugin directory's ``tools/``."""
