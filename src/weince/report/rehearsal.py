"""What a rehearsal report says instead of a verdict, and which rows are scale models
because of the data or weights that ran.

- A rehearsal (``rehearsal.enabled``, config/rehearsal.yaml) runs the paper's data sets and
  backbones for a few steps. :func:`withhold_verdicts` replaces every verdict (claim, arm
  and row) by :data:`weince.utils.verdict_words.REHEARSAL` except for the ``exact`` kind (C9,
  a property of the loss that holds at any size) and the ``noise_floor`` kind (C11, the
  paper's synthetic experiment at its own setting, which involves no training).
- :func:`weince.data.marker.data_note` says when the data root is a tree of
  ``weince synthetic-data``.
- :func:`text_identity` reads the ``model_identity`` of each text run's ``train.json``: a
  setting whose weights are not the named model (a ``text.model_paths`` stand-in, the
  synthetic BERT) is relabelled ``<model> (stand-in: ...)``, so it no longer matches the
  paper's row and becomes a scale-model row (numbers, no verdict).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from weince.data.marker import data_note
from weince.utils.claim_rows import Setting
from weince.utils.verdict_words import REHEARSAL

__all__ = ["withhold_verdicts", "rehearsal_note", "text_identity", "REHEARSAL"]

# C9: lambda = 0 is InfoNCE exactly, at any size; C11: the paper's synthetic experiment at
# its own setting (numpy, no training), the same run in a rehearsal as anywhere
KEEPS_VERDICT = ("exact", "noise_floor")


def rehearsal_note(data_root: str | None = None) -> str:
    """The sentence every rehearsal scale line and table carries (``data_root``: the
    profile's, named when it holds synthetic files)."""
    return ("REHEARSAL (config/rehearsal.yaml over the paper profile): a few optimiser steps "
            "per run on a few hundred images; the numbers check that every rule runs and "
            "mean nothing about the paper; no verdict but C9's and C11's" + data_note(data_root))


def withhold_verdicts(result: Any) -> Any:
    """``result`` (a ClaimResult) with no verdict but the rehearsal's, unless its kind is
    one of :data:`KEEPS_VERDICT`; the reason says why."""
    if result.claim.get("kind") in KEEPS_VERDICT:
        return result
    why = "a rehearsal gives no verdict: a few steps, numbers that mean nothing (see Scale)"
    for row in result.rows:
        for arm in list(row.verdicts):
            row.verdicts[arm] = REHEARSAL
            row.reasons[arm] = "a rehearsal gives no verdict"
    return dataclasses.replace(
        result, verdict=REHEARSAL, reason=why,
        arm_verdicts={a: REHEARSAL for a in result.arm_verdicts}, attribution="")


def _identities(files: list[Path]) -> list[dict[str, Any]]:
    out = []
    for f in files:
        try:
            data = json.loads(Path(f).read_text())
        except (OSError, ValueError):
            continue
        ident = data.get("model_identity")
        out.append(ident if isinstance(ident, dict) else {"named_model": None})
    return out


def text_identity(settings: list[Setting], arms: list[str],
                  fetch: Callable[[Setting, str, str], list[Path]],
                  model_paths: dict[str, str] | None = None
                  ) -> tuple[list[Setting], Callable[[Setting, str, str], list[Path]]]:
    """Relabel the text settings whose weights are not the named model (see the module
    docstring); returns the settings and a ``fetch`` that still finds their files."""
    model_paths = model_paths or {}
    original: dict[Setting, Setting] = {}
    out = []
    for s in settings:
        if s.stage != "text" or not s.model:
            out.append(s)
            continue
        ids = _identities([f for a in arms for f in fetch(s, a, "train.json")])
        reason = None
        if s.model in model_paths:
            reason = f"text.model_paths -> {model_paths[s.model]}"
        elif any(i.get("synthetic") for i in ids):
            reason = "a random BERT of `weince synthetic-data`"
        elif any(i.get("named_model") is False for i in ids):
            reason = next(i.get("location", "?") for i in ids if i.get("named_model") is False)
        elif any(i.get("named_model") is None for i in ids):
            reason = "train.json records no model identity: re-run the simcse rule"
        if reason is None:
            out.append(s)
            continue
        new = dataclasses.replace(s, model=f"{s.model} (stand-in: {reason})")
        original[new] = s
        out.append(new)

    def wrapped(setting: Setting, arm: str, name: str) -> list[Path]:
        return fetch(original.get(setting, setting), arm, name)

    return out, wrapped
