"""``python -m naiad.compat script.py [args...]``: run a script written for Triton on Naiad."""

import runpy
import sys

import naiad.compat

if len(sys.argv) < 2:
    sys.exit("usage: python -m naiad.compat script.py [args...]")
naiad.compat.enable()
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
