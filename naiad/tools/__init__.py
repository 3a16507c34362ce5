"""Naiad's command line (``naiad ...`` / ``python -m naiad ...``) and per-backend tools."""
