"""The CPU backend's language library (``naiad.language.extra.cpu``)."""
