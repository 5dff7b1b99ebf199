"""Snakemake adapter: POT/GPD tail fit of the pooled scores (weince.evt)."""

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.evt.fits import run_pot
    from weince.pipeline.digests import check_derived
    from weince.pipeline.profile import Profile
    from weince.utils.results import reading

    # the scores as their job wrote them, and the encoder they came from, in the result
    inputs = check_derived(snakemake.input[0], "scores", Profile.of(snakemake.config))
    with reading(inputs):
        run_pot(snakemake.input[0], snakemake.output[0], **snakemake.params.kwargs)
