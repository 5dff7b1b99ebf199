"""A result JSON without what two honest runs of the same job may differ in (timing, wall
clock, provenance), for the slow tests that compare one way of running the smoke profile with
another (tests/workflow/test_gpu_slots_run.py, test_vision_jobs_run.py)."""

from __future__ import annotations

import re
from typing import Any

VOLATILE = re.compile(r"^(provenance|step_timing|img_s.*|.*_s|wall.*|.*time.*|.*seconds.*)$")


def stable(x: Any) -> Any:
    """``x`` with every key VOLATILE matches left out, at any depth."""
    if isinstance(x, dict):
        return {k: stable(v) for k, v in x.items() if not VOLATILE.match(str(k))}
    if isinstance(x, list):
        return [stable(v) for v in x]
    return x
