"""Snakemake adapter: unsupervised SimCSE training (weince.train.simcse, C7)."""

from pathlib import Path

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0]):
    import torch

    from weince.train.simcse import train_simcse

    torch.set_num_threads(snakemake.threads)
    train_simcse(dict(snakemake.params.cfg), Path(snakemake.output.summary).parent)
