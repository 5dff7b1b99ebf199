"""Snakemake adapter: similarity scores of a frozen encoder (weince.evt.collect, SPEC 4)."""

from weince.report.workflow import log_to

with log_to(snakemake.log[0]):
    import torch

    from weince.evt.collect import collect_scores

    torch.set_num_threads(snakemake.threads)
    kwargs = {"device": snakemake.params.device, "data_root": snakemake.params.data_root,
              **snakemake.params.kwargs}
    collect_scores(snakemake.input.encoder, snakemake.output[0], **kwargs)
