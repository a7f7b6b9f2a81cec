"""``python -m privsyn_fed``: the command line (``cli.main``), whose return value is the exit status."""

import sys

from .cli import main

sys.exit(main())
