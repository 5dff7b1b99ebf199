"""Snakemake adapter: linear probe on projection-head features (the `features` ablation)."""

from weince.pipeline.logs import log_to

with log_to(snakemake.log[0], resources=snakemake.resources,
            device=snakemake.config.get("device")):
    import torch

    from weince.eval.linear import linear_probe
    from weince.utils import write_json

    torch.set_num_threads(snakemake.threads)
    kwargs = {"device": snakemake.params.device, **snakemake.params.kwargs, "feature": "head"}
    write_json(snakemake.output[0], linear_probe(snakemake.input[0], **kwargs), cfg=kwargs)
