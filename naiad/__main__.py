"""``python -m naiad ...``: the same as the ``naiad`` console script."""

import sys

from naiad.tools.cli import main

sys.exit(main())
