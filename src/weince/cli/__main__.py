"""``python -m weince.cli <command>`` (what ``torchrun -m weince.cli`` runs): the ``weince``
console command."""

import sys

from weince.cli import main

sys.exit(main())
