"""Snakemake adapter: link-selection fit on two-view batches (weince.evt)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.evt.fits import run_link

    run_link(snakemake.input[0], snakemake.output[0], **snakemake.params.kwargs)
