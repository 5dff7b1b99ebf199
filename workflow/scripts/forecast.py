"""Snakemake adapter: the rehearsal's cost forecast of the paper run (weince.cost.forecast)."""

from pathlib import Path

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.cost.forecast import build_forecast, write_forecast

    fc = build_forecast(dict(snakemake.config))
    write_forecast(fc, Path(snakemake.output.md).parent)
