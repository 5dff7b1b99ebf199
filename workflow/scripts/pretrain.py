"""Snakemake adapter: pretrain one SimCLR encoder (weince.train.simclr.pretrain)."""

from pathlib import Path

from weince.pipeline.logs import log_to
from weince.pipeline.stages import apply_selection

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    from weince.train.simclr import pretrain

    cfg = dict(snakemake.params.cfg, threads=snakemake.threads)
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
