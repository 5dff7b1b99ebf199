"""Snakemake adapter: choose a grid arm's point on validation (never test)."""

from weince.pipeline.grid import select_grid_point
from weince.pipeline.logs import log_to
from weince.utils import write_json

with log_to(snakemake.log[0]):
    files = {name: list(paths) for name, paths in snakemake.input.items()}
    sel = select_grid_point(files, metric=snakemake.params.metric)
    print(f"chosen {sel['chosen']} by {sel['metric']}: {sel['points']}")
    write_json(snakemake.output[0], {"arm": snakemake.wildcards.arm, **sel},
               cfg={"metric": snakemake.params.metric, "points": sorted(files)})
