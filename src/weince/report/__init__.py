"""Every page made from result files, for one workflow profile.

- every claim of the registry (C1-C10, C11, N1-N3): tables with computed verdicts
  (Markdown, LaTeX booktabs), the summary and its figures (:mod:`weince.report.build`; the
  rules in :mod:`weince.report.verdicts`, one module per claim kind, N1-N3's in the norms
  room :mod:`weince.norms.rules`; layout in :mod:`weince.report.tables`);
- the ablations page (:mod:`weince.report.ablations`); the N1-N3 per-unit norms page is the
  norms room's (:mod:`weince.norms.page`), linked from the summary;
- the figures of the claims (:mod:`~weince.report.figures`, :mod:`~weince.report.forest`).
  Read from below: result files (:mod:`weince.utils.results`), the claims registry
  (:mod:`weince.pipeline.claims`), the seed aggregation (:mod:`weince.utils.summary`), a
  judged claim's rows (:mod:`weince.utils.claim_rows`), verdict words
  (:mod:`weince.utils.verdict_words`).

``weince report`` is the command; the Snakemake ``report`` rule calls :func:`build_report`.

    from weince.report import build_report, load_claims
"""

from weince.pipeline.claims import load_claims
from weince.report.build import build_report
from weince.utils.results import ResultSchemaError
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED

__all__ = ["build_report", "load_claims", "ResultSchemaError",
           "REPRODUCED", "NOT_REPRODUCED", "NOT_RUN", "NOT_TESTABLE"]
