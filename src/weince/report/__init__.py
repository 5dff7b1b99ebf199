"""Claims registry -> tables with computed verdicts (Markdown, LaTeX booktabs), summary and
figures, for one workflow profile. ``weince report`` is the command; the Snakemake
``report`` rule calls :func:`build_report`.

    from weince.report import build_report, load_claims
"""

from weince.report.build import build_report, report_outputs
from weince.report.registry import load_claims
from weince.report.results import ResultSchemaError
from weince.report.verdicts import NOT_REPRODUCED, NOT_RUN, REPRODUCED

__all__ = ["build_report", "report_outputs", "load_claims", "ResultSchemaError",
           "REPRODUCED", "NOT_REPRODUCED", "NOT_RUN"]
