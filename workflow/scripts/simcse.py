"""Snakemake adapter: unsupervised SimCSE training (weince.train.simcse, C7)."""

from pathlib import Path

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0]):
    import torch

    from weince.train.simcse import train_simcse

    if int(getattr(snakemake.resources, "gpu", 0) or 0) > 1:
        # weince.train.simcse has no multi-process path (no all-gather of the embeddings):
        # torchrun would train the same model N times, so refuse instead
        raise SystemExit("simcse: gpu > 1 is not supported (the SimCSE loop runs on one "
                         "process); set resources.simcse.gpu to 1 in the workflow config")
    torch.set_num_threads(snakemake.threads)
    train_simcse(dict(snakemake.params.cfg), Path(snakemake.output.summary).parent)
