"""Embedding-norm dynamics analysis (claims N1-N3 of issue 10; ``docs/norms.md``).

    from weince.norms import analyse_vision, analyse_text, write_norms_report
    analyse_vision("encoder.pt", "weince", features="features.pt", out_dir="out")
    analyse_text("minilm", out_dir="out_text")
    write_norms_report(["out/norms.json", "out_text/norms.json"], "reports/default/norms.md")

Command line: ``weince norms --encoder encoder.pt --features features.pt --out DIR``,
``weince norms --text-model minilm --out DIR``, ``weince norms report RESULTS... --out MD``.
"""

from weince.norms.analysis import (GradientStats, decay_rate, equilibrium_norm_sq,
                                   gradient_statistics, radial_loss, straight_through_normalize,
                                   resample_plan)
from weince.norms.rescore import choose_alpha, discount, hub_items, knn_rescore, sts_rescore
from weince.norms.run import NormsConfig, analyse_text, analyse_vision, training_settings
from weince.norms.stats import correlation, paired_gain, pearson_rows, spearman_rows
from weince.norms.verdicts import (NOT_REPRODUCED, NOT_RUN, NOT_TESTABLE, REPRODUCED,
                                   combine, correlation_verdict, gain_verdict)

__all__ = [
    "GradientStats", "gradient_statistics", "equilibrium_norm_sq", "decay_rate",
    "radial_loss", "straight_through_normalize", "resample_plan",
    "discount", "choose_alpha", "hub_items", "knn_rescore", "sts_rescore",
    "NormsConfig", "analyse_vision", "analyse_text", "training_settings",
    "correlation", "paired_gain", "pearson_rows", "spearman_rows",
    "REPRODUCED", "NOT_REPRODUCED", "NOT_TESTABLE", "NOT_RUN", "combine",
    "correlation_verdict", "gain_verdict",
]
