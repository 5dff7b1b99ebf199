"""The rehearsal (``config/rehearsal.yaml`` over ``config/paper.yaml``): its forecast's files.

What changes on a machine without a GPU (``rehearsal.cpu`` merged over the config, no GPU
requested, ``rehearsal.cpu_pairs``) is applied once, when the profile is resolved
(:func:`weince.pipeline.profile.resolve_config`); ``{data_root}`` in any string value of any
profile is replaced there too, so ``--config data_root=DIR`` moves the text files (wiki1m,
STS-B) with the images.

    from weince.pipeline.rehearsal import forecast_outputs
    forecast_outputs(prof)     # {"md": reports/rehearsal/forecast.md, "resources": ...}
"""

from __future__ import annotations

from pathlib import Path

from weince.pipeline import layout
from weince.pipeline.profile import Profile

__all__ = ["forecast_outputs", "forecast_inputs"]


def forecast_outputs(prof: Profile) -> dict[str, Path]:
    """``{"md": reports/<profile>/forecast.md, "resources": .../resources.yaml}`` of a
    rehearsal, else ``{}``."""
    if not prof.rehearsal.enabled:
        return {}
    d = prof.report_dir
    return {"md": d / "forecast.md", "resources": d / "resources.yaml"}


def forecast_inputs(prof: Profile) -> list[Path]:
    """The ``train.json`` of every pretraining (final and grid) and SimCSE run: their
    ``step_timing`` is what the forecast reads."""
    runs: list[layout.VisionRun | layout.TextRun] = [
        *layout.vision_runs(prof), *layout.vision_runs(prof, grid=True), *layout.text_runs(prof)]
    return list(dict.fromkeys(layout.run_dir(prof, r) / "train.json" for r in runs))
