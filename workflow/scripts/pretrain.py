"""Snakemake adapter: pretrain one SimCLR encoder (weince.train.simclr.pretrain)."""

from pathlib import Path

from weince.pipeline.joblog import log_to
from weince.pipeline.stages import apply_selection

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.pipeline.profile import Profile
    from weince.pipeline.stages import job_settings, pretrain_config
    from weince.train.simclr import pretrain

    # the rule's params (what can change the result), with the run-time settings (device,
    # data folder, progress...) of the profile as it is now: changing those retrains nothing
    wc = snakemake.wildcards
    full = pretrain_config(Profile.of(snakemake.config), wc.dataset, wc.backbone, wc.arm,
                           wc.seed)
    cfg = {**job_settings(snakemake.params.cfg, full), "threads": snakemake.threads,
           # the finished run's checkpoint stays until its first consumer (the features
           # job) starts, i.e. until Snakemake has stored this job's outputs: a segment killed
           # while they are stored (outputs deleted) resumes only to write them again
           "keep_checkpoint": True}
    if snakemake.input.selection:
        cfg = apply_selection(cfg, str(snakemake.input.selection))
    print(f"pretrain config: {cfg}")
    gpus = int(getattr(snakemake.resources, "gpu", 0) or 0)
    if gpus > 1:  # one encoder on several processes; batch_size stays the global batch
        from weince.train.launch import run_torchrun

        run_torchrun("pretrain", cfg, Path(snakemake.output.encoder).parent, gpus,
                     snakemake.threads)
    else:
        pretrain(cfg, Path(snakemake.output.encoder).parent)
