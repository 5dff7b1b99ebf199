"""Snakemake adapter: STS evaluation of a trained SimCSE encoder (weince.eval.sts)."""

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.eval.sts import run_sts

    torch.set_num_threads(snakemake.threads)
    kwargs = {"offline": snakemake.params.offline, **snakemake.params.kwargs}
    if snakemake.params.device != "auto":
        kwargs.setdefault("device", snakemake.params.device)
    run_sts(snakemake.input.model, out=snakemake.output[0], **kwargs)
