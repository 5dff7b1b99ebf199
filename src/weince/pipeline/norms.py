"""The norms plan (claims N1-N3, ``docs/norms.md``): which units a profile analyses.

The profile's ``norms`` block: ``vision: {enabled, arms, seeds}`` (``null`` arms/seeds:
the profile's vision arms/seeds), ``text: {enabled, models, simcse_runs}`` and ``analysis``
(:class:`weince.norms.run.NormsConfig` keys, see :func:`weince.pipeline.stages.norms_config`).

    from weince.pipeline.norms import norms_results
    norms_results(prof)         # every norms.json the report page reads
"""

from __future__ import annotations

from pathlib import Path
from weince.norms.files import RESULT_FILE
from weince.pipeline.layout import norms_text_runs, norms_vision_runs, run_dir
from weince.pipeline.profile import Profile

__all__ = ["vision_units", "text_units", "norms_results", "norms_outputs"]


def vision_units(prof: Profile) -> list[Path]:
    """``{run}/norms.json`` for every dataset x backbone x arm x seed analysed."""
    return [run_dir(prof, r) / RESULT_FILE for r in norms_vision_runs(prof)]


def text_units(prof: Profile) -> list[Path]:
    """``{run}/norms.json`` for the pretrained models (arm ``pretrained``, seed 0) and,
    with ``simcse_runs``, the first seed of every trained SimCSE arm."""
    return [run_dir(prof, r) / RESULT_FILE for r in norms_text_runs(prof)]


def norms_results(prof: Profile) -> list[Path]:
    """Every ``norms.json`` of the profile (vision units, then text units)."""
    return vision_units(prof) + text_units(prof)


def norms_outputs(prof: Profile) -> dict[str, Path]:
    """The files of the norms page: ``md``, ``summary`` (json) and ``figures`` (folder)."""
    d = prof.report_dir
    return {"md": d / "norms.md", "summary": d / "norms_summary.json",
            "figures": d / "norms_figures"}
