"""Snakemake adapter: frozen features of one encoder (weince.eval.features)."""

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.eval.features import extract_features

    torch.set_num_threads(snakemake.threads)
    kwargs = {"device": snakemake.params.device, "data_root": snakemake.params.data_root,
              **snakemake.params.kwargs}
    extract_features(snakemake.input.encoder, snakemake.output[0], **kwargs)
