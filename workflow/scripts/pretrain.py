"""Snakemake adapter: pretrain one SimCLR encoder (weince.train.simclr.pretrain) with the
run's config (weince.pipeline.profile.Vision.run_config)."""

from dataclasses import replace
from pathlib import Path

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.pipeline.digests import record_identity, run_identity
    from weince.pipeline.profile import Profile
    from weince.train.simclr import pretrain

    # the job's whole config (data set settings, arm, grid point, seed; a final grid arm's
    # chosen point from its selection.json), by the function the rule's params (its result
    # settings) use; the job's threads, and the finished run's checkpoint kept until its
    # first consumer (the features job) starts, i.e. until Snakemake has stored this job's
    # outputs: a segment killed while they are stored (outputs deleted) resumes only to
    # write them again
    wc = snakemake.wildcards
    selection = str(snakemake.input.selection) if snakemake.input.selection else None
    cfg = replace(Profile.of(snakemake.config).vision.run_config(
        wc.dataset, wc.backbone, wc.arm, wc.seed, selection),
        threads=snakemake.threads, keep_checkpoint=True)
    print(f"pretrain config: {cfg}")
    gpus = int(getattr(snakemake.resources, "gpu", 0) or 0)
    if gpus > 1:  # one encoder on several processes; batch_size stays the global batch
        from weince.train.launch import run_torchrun

        run_torchrun("pretrain", cfg, Path(snakemake.output.encoder).parent, gpus,
                     snakemake.threads)
    else:
        pretrain(cfg, Path(snakemake.output.encoder).parent)
    # the run's arm, grid point and seed beside its loss and encoder digest in train.json
    record_identity(Path(snakemake.output.summary).parent,
                    run_identity(snakemake.wildcards, selection))
