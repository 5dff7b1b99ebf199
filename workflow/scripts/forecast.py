"""Snakemake adapter: the rehearsal's cost forecast of the paper run (weince.cost.forecast)."""

from pathlib import Path

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.cost.forecast import build_forecast, write_forecast
    from weince.pipeline.profile import Profile

    fc = build_forecast(Profile.of(snakemake.config))
    write_forecast(fc, Path(snakemake.output.md).parent)
