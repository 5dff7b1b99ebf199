"""Snakemake adapter: choose a grid arm's point on validation (never test), per arm and
(dataset, backbone): mean over encoder seeds, complete points first; in the four-seed grid
also one point per k-NN metric (weince.pipeline.grid)."""

from weince.pipeline.joblog import log_to
from weince.utils import write_json

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.pipeline.grid import select_grid

    linear = {k: list(v) for k, v in snakemake.input.items() if not k.startswith("knn@")}
    knn = {k[len("knn@"):]: list(v) for k, v in snakemake.input.items() if k.startswith("knn@")}
    sel = select_grid(linear, knn or None, metric=snakemake.params.metric,
                      expected_seeds=snakemake.params.expected_seeds)
    print(f"linear: chosen {sel['chosen']} by mean {sel['metric']}")
    for m, c in (sel["knn"] or {}).items():
        print(f"k-NN {m}: chosen {c['chosen']} by mean {c['metric']}")
    write_json(snakemake.output[0], {"arm": snakemake.wildcards.arm, **sel},
               cfg={"metric": snakemake.params.metric, "points": sorted(linear),
                    "expected_seeds": snakemake.params.expected_seeds,
                    "per_metric_knn": bool(knn)})
