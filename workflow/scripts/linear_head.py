"""Snakemake adapter: linear probe on projection-head features (weince.ablations.head_probe)."""

from weince.report.workflow import log_to

with log_to(snakemake.log[0]):
    import torch

    from weince.ablations import head_probe

    torch.set_num_threads(snakemake.threads)
    kwargs = {"device": snakemake.params.device, **snakemake.params.kwargs}
    head_probe(snakemake.input[0], snakemake.output[0], kwargs)
