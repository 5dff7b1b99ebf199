"""Extreme-value diagnostics (SPEC sections 4-5): numpy/scipy only, importable without torch.

- :func:`fit_gpd_pot` — peaks-over-threshold generalised Pareto fit of pooled similarity
  scores (``xi``, ``sigma``, profile interval, endpoint, exponential comparison, goodness
  of fit), with :func:`threshold_stability` and :func:`mean_excess`.
- :func:`fit_link_selection` — maximum-likelihood fit of the nested softmax /
  Weibull-shortfall link family, likelihood-ratio test of ``lambda = 0``.
- :mod:`weince.evt.collect` — score collection from a frozen encoder (needs torch).
- :mod:`weince.evt.plots` — figures; :mod:`weince.evt.fits` — the fits of a score file
  written as ``pot.json`` / ``link.json``; ``weince evt`` (:mod:`weince.cli.evt`) runs both.
"""

from weince.evt.gpd import (GPDFit, fit_gpd, fit_gpd_pot, gpd_loglik, gpd_profile_loglik,
                            mean_excess, threshold_stability)
from weince.evt.link import LinkFit, fit_link_selection, link_loglik, prepare_link_data

__all__ = [
    "GPDFit",
    "fit_gpd",
    "fit_gpd_pot",
    "gpd_loglik",
    "gpd_profile_loglik",
    "mean_excess",
    "threshold_stability",
    "LinkFit",
    "fit_link_selection",
    "link_loglik",
    "prepare_link_data",
]
