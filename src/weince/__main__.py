"""``python -m weince <command>``: the ``weince`` console command (the same ``main``)."""

import sys

from weince.cli import main

sys.exit(main())
