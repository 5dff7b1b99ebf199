"""Snakemake adapter: similarity scores of a frozen encoder (weince.evt)."""

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.eval.scores import collect_score_file

    torch.set_num_threads(snakemake.threads)
    kwargs = {"device": snakemake.params.device, "data_root": snakemake.params.data_root,
              **snakemake.params.kwargs}
    collect_score_file(snakemake.input.encoder, snakemake.output[0], **kwargs)
