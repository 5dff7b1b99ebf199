"""Snakemake adapter: unsupervised SimCSE training (weince.train.simcse, C7)."""

from dataclasses import replace
from pathlib import Path

from weince.pipeline.joblog import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.pipeline.digests import record_identity, run_identity
    from weince.pipeline.profile import Profile
    from weince.pipeline.stages import job_config
    from weince.train.simcse import train_simcse

    # the job's whole config, by the function the rule's params use; the finished run's
    # checkpoint stays until its STS job starts (Snakemake has stored this job's outputs by
    # then): a segment killed while they are stored resumes to write them
    cfg = replace(job_config(Profile.of(snakemake.config), snakemake.wildcards),
                  keep_checkpoint=True)
    out = Path(snakemake.output.summary).parent
    gpus = int(getattr(snakemake.resources, "gpu", 0) or 0)
    if gpus > 1:  # one model on several processes; batch_size stays the global batch
        from weince.train.launch import run_torchrun

        run_torchrun("simcse", cfg, out, gpus, snakemake.threads)
    else:
        torch.set_num_threads(snakemake.threads)
        train_simcse(cfg, out)
    record_identity(out, run_identity(snakemake.wildcards))   # its arm and seed in train.json
