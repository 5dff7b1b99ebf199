"""The tail and link fits' options, importable without numpy: the one source of the types,
defaults and ranges of :func:`weince.evt.fits.run_pot` and :func:`~weince.evt.fits.run_link`
(their keyword defaults are these; the workflow config schema's ``vision.evt.pot`` and
``vision.evt.link`` blocks are generated from them, :mod:`weince.utils.settings`).

    from weince.evt.config import LinkConfig, PotConfig
    PotConfig().q, LinkConfig().beta      # 0.99, 1.0
"""

from __future__ import annotations

from dataclasses import dataclass

from weince.utils.settings import setting

__all__ = ["PotConfig", "LinkConfig", "STABILITY_QS"]

#: the thresholds (quantiles) of the threshold-stability plot
STABILITY_QS = (0.95, 0.975, 0.99, 0.995)


@dataclass
class PotConfig:
    """:func:`weince.evt.fits.run_pot` options: the POT/GPD fit of the pooled scores."""

    q: float = setting(0.99, gt=0, lt=1)     # the threshold quantile
    qs: tuple[float, ...] = setting(STABILITY_QS, gt=0, lt=1)
    n_boot: int = setting(200, ge=0)
    gof_boot: int = setting(100, ge=0)
    seed: int = setting(0, ge=0)
    figures: bool = True


@dataclass
class LinkConfig:
    """:func:`weince.evt.fits.run_link` options: the link-selection fit of the two-view
    batches."""

    tau: float | None = setting(None, gt=0, le=10)   # None: the score file's (else 0.5)
    beta: float = 1.0
    eps: float = setting(1e-6, gt=0)
    seed: int = setting(0, ge=0)
    figures: bool = True
