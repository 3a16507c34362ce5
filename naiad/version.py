"""Naiad's version, in a module of its own: the compile cache's keys and the autotuner's files
read it without importing the package's top (which imports them)."""

__version__ = "0.1.0"
