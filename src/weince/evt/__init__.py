"""Extreme-value diagnostics (``docs/method.md``, "Tail diagnostics" / "Link selection"):
numpy/scipy only, importable without torch.

- :func:`fit_gpd_pot` — peaks-over-threshold generalised Pareto fit of pooled similarity
  scores (``xi``, ``sigma``, profile interval, endpoint, exponential comparison, goodness
  of fit), with :func:`threshold_stability` and :func:`mean_excess`.
- :func:`fit_link_selection` — maximum-likelihood fit of the nested softmax /
  Weibull-shortfall link family, likelihood-ratio test of ``lambda = 0``.
- :func:`simulate_noise_floor` — the paper's synthetic noise-floor experiment (claim C11):
  Monte-Carlo MSE of the Weibit and restricted-softmax estimators of a top-vs-reference
  log-odds, with the analytic ``c / n`` line and the softmax's squared-bias floor
  (:func:`noise_floor_theory`).
- :mod:`weince.evt.collect` — score collection from a frozen encoder (needs torch);
  :mod:`weince.evt.scorefile` — the score file it writes and the fits read (numpy).
- :mod:`weince.evt.plots` — figures; :mod:`weince.evt.fits` — the fits of a score file
  written as ``pot.json`` / ``link.json``; ``weince evt`` (:mod:`weince.cli.evt`) runs both.
"""

import importlib
from typing import TYPE_CHECKING

# name -> submodule; loaded on first use, so that ``weince.evt.collect`` (the score
# collection of a frozen encoder, a job of its own) does not import scipy.stats and
# scipy.optimize (~1.3 s) for fits it never makes
_LAZY = {
    "GPDFit": "gpd",
    "fit_gpd": "gpd",
    "fit_gpd_pot": "gpd",
    "gpd_loglik": "gpd",
    "gpd_profile_loglik": "gpd",
    "mean_excess": "gpd",
    "threshold_stability": "gpd",
    "LinkFit": "link",
    "fit_link_selection": "link",
    "link_loglik": "link",
    "prepare_link_data": "link",
    "NoiseFloorResult": "noise_floor",
    "simulate_noise_floor": "noise_floor",
    "noise_floor_theory": "noise_floor",
    "loglog_slope": "noise_floor",
    "write_noise_floor": "noise_floor",
}

__all__ = list(_LAZY)

if TYPE_CHECKING:   # for type checkers and IDEs: the names as if imported eagerly
    from weince.evt.gpd import (GPDFit, fit_gpd, fit_gpd_pot, gpd_loglik,  # noqa: F401
                                gpd_profile_loglik, mean_excess, threshold_stability)
    from weince.evt.link import (LinkFit, fit_link_selection, link_loglik,  # noqa: F401
                                 prepare_link_data)
    from weince.evt.noise_floor import (NoiseFloorResult, loglog_slope,  # noqa: F401
                                        noise_floor_theory, simulate_noise_floor,
                                        write_noise_floor)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"weince.evt.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'weince.evt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
