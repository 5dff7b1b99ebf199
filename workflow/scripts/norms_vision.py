"""Snakemake adapter: N1-N3 of one SimCLR encoder (weince.norms.run.analyse_vision)."""

from pathlib import Path

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.norms.run import analyse_vision
    from weince.pipeline.digests import check_derived, check_encoder
    from weince.pipeline.profile import Profile
    from weince.utils.results import reading
    from weince.pipeline.stages import job_settings, norms_config

    wc = snakemake.wildcards
    prof = Profile.of(snakemake.config)
    full = norms_config(prof)   # + the device, which params lack
    cfg = dict(job_settings(snakemake.params.cfg, full), threads=snakemake.threads)
    inputs = {**check_derived(snakemake.input.features, "features", prof),
              **check_encoder(snakemake.input.encoder, prof)}
    with reading(inputs):
        res = analyse_vision(snakemake.input.encoder, features=snakemake.input.features,
                             cfg=cfg, out_dir=Path(snakemake.output.result).parent,
                             meta={"arm": wc.arm, "seed": int(wc.seed)})
    print(f"{snakemake.output.result}: {res['verdicts']}")
