"""Verdicts computed from result files: one rule per claim kind, one module per kind, and
the registry of kinds (:data:`KINDS`). The one place to import the verdict machinery from.

    from weince.report.verdicts import evaluate_claim, rule_text, KINDS, RULES

Vocabulary (``docs/verdicts.md``): ``reproduced``, ``not reproduced``, ``not run at this
profile``, and ``partially run: k of n rows reproduced`` when only some of a claim's paper
rows ran.

Every claim in ``config/claims.yaml`` lists the paper's own settings as ``rows`` (C9, a
property of the loss, uses ``rows: any``; C5 and C10 a ``grid``). Only those rows get a
verdict. A setting the profile ran that the paper did not (``digits`` for CIFAR-100, a
small CNN for ResNet-18, MiniLM on synthetic pairs for BERT on STS-B) is a *scale-model
row*: its numbers and a plain-words reading (``scale model: ...``), never a verdict, and a
claim with only such rows is ``not run at this profile``.

The decision rule of each kind is written once, in words, in its module (``RULE``;
collected in :data:`RULES`, rendered with the claim's own tolerance by :func:`rule_text`);
the tables print it beside the verdict and ``docs/verdicts.md`` repeats it (a test keeps the
two equal). ``tol`` is the claim's ``tolerance`` in the paper's unit; every interval is a
95% one (``alpha`` = 0.05). The kinds and their modules:

- ``gain`` (C3, C4, C6, C7; :mod:`~weince.report.verdicts.gain`): our gain ``g`` (arm -
  baseline, Welch t-interval across encoder seeds) must exclude zero on the side of the
  paper's gain ``G``, and ``G`` must lie inside our interval or within ``tol`` of our mean.
- ``noninferior`` (C5, C10; :mod:`~weince.report.verdicts.noninferior`): our mean gain is
  at least zero and the lower end of its interval at least ``-tol`` (the non-inferiority
  margin), on every row.
- ``sign`` (C1; :mod:`~weince.report.verdicts.sign`): ``xi < 0``, our interval of ``xi``
  below zero, and the paper's value inside our interval widened by ``tol`` on each side.
- ``reject`` (C2; :mod:`~weince.report.verdicts.reject`): every fit rejects the softmax
  link (``p < alpha``, the pair-robust test when the file has it) and our interval of
  ``lambda`` overlaps the paper's range.
- ``overhead`` (C8; :mod:`~weince.report.verdicts.overhead`): the 95% interval of the
  overhead across repeated timing runs at or below ``tol`` percent and zero trainable
  parameters (an interval straddling ``tol``: not testable on that machine).
- ``exact`` (C9; :mod:`~weince.report.verdicts.exact`): the largest recorded difference
  ``<= tol``.
- ``noise_floor`` (C11, the paper's synthetic figure; :mod:`~weince.report.verdicts.
  noise_floor`): the Weibit MSE's log-log slope (``n >= slope_min_n``) has a 95% interval
  containing -1, the softmax MSE at the largest ``n`` sits at its analytic floor (at most
  ``tol`` relative above it, not more than 3 Monte-Carlo standard errors below) and the
  Weibit MSE there is below the floor. One file, one row of verdict; the per-``n`` rows
  are readings.
- ``norms`` (N1-N3, the companion claims of ``docs/norms.md``; the norms room,
  :mod:`weince.norms.rules`): every testable unit (an encoder x loss arm x seed, or a
  text model) on the companion paper's models reproduces it; each unit's verdict is the one
  ``weince.norms`` computed from the numbers of its ``norms.json`` (the claim's
  ``verdict_key``), and the units combine by :func:`weince.norms.rules.combine`, as on
  the norms page.

A row-by-row kind's rule is one function ``(row, arm, judging) -> (verdict, why)``; the
shared machinery (:mod:`weince.report.verdicts.core`: :func:`~.core.judge_rows`) lays out
the rows, reads them, applies the rule and assembles. C11 and N1-N3 have a whole-claim
evaluator instead. :func:`evaluate_claim` picks the claim's kind from :data:`KINDS` and
adds the rule in words. The rows, cells and result are :mod:`weince.utils.claim_rows`'s.

Gain tables also carry the *attribution* contrasts of :data:`CONTRASTS` (what the
Weibull term adds once InfoNCE has the same top-50 term, and the core loss alone), each
with its interval; :func:`attribution` says in words which one carries a gain.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from weince.norms import rules as norms
from weince.report.verdicts import (exact, gain, noise_floor, noninferior, overhead, reject,
                                    sign)
from weince.report.verdicts.core import (COMMON_RULE, CONTRASTS, Judging, Kind, attribution,
                                         judge_rows, partial_verdict, render_rule)
from weince.report.verdicts.overhead import noise_note, overhead_interval
from weince.utils.claim_rows import Cell, ClaimResult, Row, Setting
from weince.utils.verdict_words import NOT_REPRODUCED, NOT_RUN, PARTIAL, REPRODUCED, SCALE_MODEL

__all__ = ["REPRODUCED", "NOT_REPRODUCED", "NOT_RUN", "PARTIAL", "SCALE_MODEL", "RULES",
           "COMMON_RULE", "CONTRASTS", "KINDS", "Kind", "Judging", "Cell", "Row", "ClaimResult",
           "evaluate_claim", "Setting", "rule_text", "attribution", "partial_verdict",
           "overhead_interval", "noise_note"]

# kind name (a claim's ``kind``) -> its rule and what its rows are made of
KINDS: dict[str, Kind] = {
    "gain": gain.KIND,
    "noninferior": noninferior.KIND,
    "sign": sign.KIND,
    "reject": reject.KIND,
    "overhead": overhead.KIND,
    "exact": exact.KIND,
    "norms": Kind(norms.RULE, evaluate=norms.evaluate_norms_claim, fields=norms.rule_fields),
    "noise_floor": noise_floor.KIND,
}

# kind name -> its rule in words, with the claim's figures as placeholders
RULES: dict[str, str] = {name: kind.text for name, kind in KINDS.items()}


def _kind(claim: dict[str, Any]) -> Kind:
    kind = KINDS.get(claim["kind"])
    if kind is None:
        raise ValueError(f"claim {claim.get('id', '?')}: unknown kind {claim['kind']!r}; the "
                         f"kinds are {', '.join(KINDS)} (config/claims.yaml, "
                         f"src/weince/pipeline/claims.schema.yaml)")
    return kind


def rule_text(claim: dict[str, Any], alpha: float = 0.05) -> str:
    """The decision rule of ``claim`` in words, with its own tolerance and paper figures."""
    return render_rule(_kind(claim), claim, alpha)


def evaluate_claim(claim: dict[str, Any], settings: list[Setting], arms: list[str],
                   files_for: Callable[[Setting, str, str], list[Path]], *, alpha: float,
                   scale: str) -> ClaimResult:
    """Build the rows of one claim from the profile's settings and compute the verdict by
    the rule of the claim's kind (:data:`KINDS`).

    Args:
        claim: one validated registry entry.
        settings: the settings of the claim's stage that the profile ran.
        arms: the loss arms the profile ran for that stage.
        files_for: ``(setting, arm, file name) -> [paths]``, one path per encoder seed the
            profile should have produced (missing ones are reported as missing).
        alpha: 1 - confidence level of the intervals.
        scale: a one-line description of the profile's scale (epochs, data, seeds).
    """
    kind = _kind(claim)
    if kind.evaluate is not None:
        res = kind.evaluate(claim, settings, arms, files_for, alpha, scale)
    else:
        res = judge_rows(claim, kind, settings, arms, files_for, alpha, scale)
    res.rule = render_rule(kind, claim, alpha)
    return res
