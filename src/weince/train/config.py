"""Moved to :mod:`weince.utils.config` (the dataclass loader every layer uses). This name
stays only until ``weince.train.simclr`` and ``weince.train.simcse`` import the new one
(they are being edited on other branches); then delete this file."""

from weince.utils.config import *  # noqa: F401,F403
from weince.utils.config import __all__  # noqa: F401
