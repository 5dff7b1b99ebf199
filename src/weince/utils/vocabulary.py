"""The verdict words of every report page (SPEC 6), defined once.

Claims C1-C9 (:mod:`weince.report.verdicts`) and the companion claims N1-N3 (per unit in
:mod:`weince.norms.verdicts`, per claim in :mod:`weince.report.norms`) use these strings,
so a verdict reads the same in ``summary.md``, ``claims.json``, ``norms.md`` and
``norms_summary.json``.
"""

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_RUN = "not run at this profile"
NOT_TESTABLE = "not testable at this scale"
MISSING = "missing"              # a claim page the profile should have made does not exist
VERDICT_FREE = "verdict-free"    # a page of numbers with no verdict (the ablations)

VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE)

__all__ = ["REPRODUCED", "NOT_REPRODUCED", "NOT_RUN", "NOT_TESTABLE", "MISSING",
           "VERDICT_FREE", "VERDICTS"]
