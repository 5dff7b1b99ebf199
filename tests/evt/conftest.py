"""Synthetic draws with known truth for the tail and link-selection tests, as fixtures
(``endpoint_scores``, ``link_data``)."""

from __future__ import annotations

import numpy as np
import pytest


def _endpoint_scores(n: int, alpha: float, scale: float = 1.5, seed: int = 0) -> np.ndarray:
    """``s = 1 - scale * V**(1/alpha)``, ``V ~ U(0, 1)``: endpoint 1 with exponent ``alpha``.

    ``P(1 - s <= d) = (d / scale)**alpha``, so exceedances over any ``u`` are exactly
    GPD with ``xi = -1/alpha`` and ``sigma = (1 - u) / alpha``.
    """
    rng = np.random.default_rng(seed)
    return 1.0 - scale * rng.uniform(size=n) ** (1.0 / alpha)


def _link_data(n_anchors: int, n_cand: int, *, c: float, lam: float, tau: float = 0.5,
               beta: float = 1.0, eps: float = 1e-6, alpha: float = 2.5, seed: int = 0):
    """Candidates from :func:`_endpoint_scores`; each row's winner drawn from the link-selection
    family at ``(c, lam)`` (Gumbel-max). Returns ``sim (B, C) float32, targets (B,)``."""
    rng = np.random.default_rng(seed)
    sim = (1.0 - 1.5 * rng.uniform(size=(n_anchors, n_cand)) ** (1.0 / alpha)).astype(np.float32)
    s = sim.astype(np.float64)
    logits = c * ((1 - lam) * s / tau + lam * (-beta * np.log1p(-np.minimum(s, 1 - eps))))
    targets = np.argmax(logits + rng.gumbel(size=logits.shape), axis=1)
    return sim, targets


@pytest.fixture(scope="session")
def endpoint_scores():
    """``endpoint_scores(n, alpha, scale=1.5, seed=0)``: scores with a known endpoint tail."""
    return _endpoint_scores


@pytest.fixture(scope="session")
def link_data():
    """``link_data(n_anchors, n_cand, *, c, lam, tau=0.5, ...) -> (sim, targets)``: winners
    drawn from the nested link family with known ``c`` and ``lambda``."""
    return _link_data
