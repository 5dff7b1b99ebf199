"""The verdict words of every report page (``docs/verdicts.md``), defined once.

Every registry claim (:mod:`weince.report.verdicts`: the paper's C's, and the companion
claims N1-N3, judged per unit by :mod:`weince.norms.rules`) uses these strings,
so a verdict reads the same in ``summary.md``, ``claims.json``, ``norms.md`` and
``norms_summary.json``.
"""

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
NOT_RUN = "not run at this profile"
SCALE_ONLY = "no verdict: scale model only"   # none of the paper's settings ran; other ones did
NOT_TESTABLE = "not testable at this scale"
PARTIAL = "partially run"        # "partially run: k of n rows reproduced"
SCALE_MODEL = "scale model"      # a setting the paper did not run: numbers, no verdict
READING = "reading"              # a metric the paper gave no figure for: numbers, no verdict
MISSING = "missing"              # a claim page the profile should have made does not exist
VERDICT_FREE = "verdict-free"    # a page of numbers with no verdict (the ablations)
REHEARSAL = "rehearsal: no verdict"  # a rehearsal's claim (config/rehearsal.yaml), C9 aside

VERDICTS = (REPRODUCED, NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE)

__all__ = ["REPRODUCED", "NOT_REPRODUCED", "NOT_RUN", "SCALE_ONLY", "NOT_TESTABLE", "PARTIAL",
           "SCALE_MODEL", "READING", "MISSING", "VERDICT_FREE", "VERDICTS", "REHEARSAL"]
