"""Snakemake adapter: unsupervised SimCSE training (weince.train.simcse, C7)."""

from pathlib import Path

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.train.simcse import train_simcse

    cfg = dict(snakemake.params.cfg)
    out = Path(snakemake.output.summary).parent
    gpus = int(getattr(snakemake.resources, "gpu", 0) or 0)
    if gpus > 1:  # one model on several processes; batch_size stays the global batch
        from weince.train.launch import run_torchrun

        run_torchrun("simcse", cfg, out, gpus, snakemake.threads)
    else:
        torch.set_num_threads(snakemake.threads)
        train_simcse(cfg, out)
