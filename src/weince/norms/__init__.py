"""Embedding-norm dynamics analysis (claims N1-N3; ``docs/norms.md``): one
``norms.json`` per encoder. The page that combines them is :mod:`weince.report.norms`.

    from weince.norms import analyse_vision, analyse_text
    analyse_vision("encoder.pt", "weince", features="features.pt", out_dir="out")
    analyse_text("minilm", out_dir="out_text")

Command line: ``weince norms --encoder encoder.pt --features features.pt --out DIR``,
``weince norms --text-model minilm --out DIR``, ``weince norms report RESULTS... --out MD``.

Attributes are imported on first use, so importing the package does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "weince.norms.analysis": ["GradientStats", "gradient_statistics", "equilibrium_norm_sq",
                              "decay_rate", "radial_loss", "straight_through_normalize",
                              "resample_plan"],
    "weince.norms.rescore": ["discount", "choose_alpha", "hub_items", "knn_rescore",
                             "sts_rescore"],
    "weince.norms.run": ["NormsConfig", "load_norms_config", "analyse_vision", "analyse_text", "training_settings",
                         "text_settings"],
    "weince.norms.stats": ["correlation", "paired_gain", "pearson_rows", "spearman_rows"],
    "weince.norms.verdicts": ["combine", "correlation_verdict", "gain_verdict"],
    "weince.norms.files": ["RESULT_FILE", "PROBES_FILE"],
}
_ATTR = {name: mod for mod, names in _WHERE.items() for name in names}

__all__ = sorted(_ATTR)


def __getattr__(name: str) -> Any:
    if name in _ATTR:
        return getattr(importlib.import_module(_ATTR[name]), name)
    raise AttributeError(f"module 'weince.norms' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
